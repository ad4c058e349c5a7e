"""Containers shared by every dataset: the vocabulary, a split of encoded examples, a task's data.

Encoded examples (what `Split.examples` holds), by `kind`:
- 'sentence': {'tokens': int32[n], 'label': int, optional 'heads': int32[n] (-1 = ROOT)}
- 'document': {'sentences': list of int32[n_s], 'label': int, optional 'heads': list of int32[n_s],
  optional 'punctuation': list of int32[n_s] 0/1 (`config.data.punctuation`)}
- 'pair':     {'premise': int32[n], 'hypothesis': int32[m], 'label': int, optional 'premise_heads':
              int32[n] and 'hypothesis_heads': int32[m] (-1 = ROOT; `config.data.trees`)}
- 'lm':       {'tokens': int32[n]} (a sentence, or the whole stream when `Split.num_steps` is set;
              targets are the next tokens)
- 'translation': {'source': int32[n], 'target': int32[m]}
- 'parse':    {'tokens': int32[n], 'tags': int32[n], 'heads': int32[n], 'relations': int32[n]}, and
              'chars': int32[n, L] (byte ids, `text.char_ids`) when the loader's `max_chars > 0`
`Split.batches` turns them into padded batch dicts (see docs/internals.md) with `batching.make_batches`.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
from typing import Any, Iterable, Iterator, Sequence

import numpy as np

PAD, UNK = '<pad>', '<unk>'
PAD_ID, UNK_ID = 0, 1


class Vocabulary:
  """Token <-> id map with `<pad>` = 0 and `<unk>` = 1, built on training data only."""

  def __init__(self, tokens: Sequence[str]):
    tokens = list(tokens)
    if tokens[:2] != [PAD, UNK]:
      tokens = [PAD, UNK] + [t for t in tokens if t not in (PAD, UNK)]
    if len(set(tokens)) != len(tokens):
      raise ValueError('vocabulary tokens must be unique')
    self.tokens = tokens
    self._index = {t: i for i, t in enumerate(tokens)}

  @classmethod
  def from_corpus(cls, sentences: Iterable[Sequence[str]], min_count: int = 1,
                  max_size: int | None = None) -> 'Vocabulary':
    """Keeps tokens seen at least `min_count` times (ties broken alphabetically, most frequent first)."""
    counts = collections.Counter(t for s in sentences for t in s)
    kept = sorted((t for t, c in counts.items() if c >= min_count), key=lambda t: (-counts[t], t))
    if max_size is not None:
      kept = kept[:max(0, max_size - 2)]
    return cls(kept)

  def __len__(self) -> int:
    return len(self.tokens)

  def __contains__(self, token: str) -> bool:
    return token in self._index

  def id(self, token: str) -> int:
    """The id of `token`, or `UNK_ID` (1) when it is not in the vocabulary."""
    return self._index.get(token, UNK_ID)

  def encode(self, tokens: Sequence[str]) -> np.ndarray:
    """Maps tokens to ids (`UNK_ID` for unknown tokens).

    Args:
      tokens: a sequence of T token strings.

    Returns:
      int32 array [T] of ids.
    """
    return np.asarray([self._index.get(t, UNK_ID) for t in tokens], dtype=np.int32)

  def decode(self, ids: Iterable[int]) -> list[str]:
    """Maps ids back to their token strings (`<pad>` for 0, `<unk>` for 1)."""
    return [self.tokens[int(i)] for i in ids]

  def save(self, path: str) -> None:
    """Writes the token list (index order) as JSON to `path`; `Vocabulary.load` reads it back."""
    with open(path, 'w', encoding='utf-8') as f:
      json.dump(self.tokens, f, ensure_ascii=False)

  @classmethod
  def load(cls, path: str) -> 'Vocabulary':
    """Reads a vocabulary written by `save`.

    Raises:
      FileNotFoundError: when `path` does not exist.
    """
    if not os.path.exists(path):
      raise FileNotFoundError(f'vocabulary file not found: {path}')
    with open(path, encoding='utf-8') as f:
      return cls(json.load(f))


@dataclasses.dataclass
class Split:
  """One split (train/validation/test) of encoded examples of one `kind`."""
  name: str
  kind: str
  examples: list[dict[str, Any]]
  bucket_boundaries: Sequence[int] | None = None
  # kind 'lm' only: if set, `batches` gives contiguous stream batches of `num_steps` tokens
  # (`batching.lm_stream_batches`, Zaremba et al. 2014) instead of one row per example.
  num_steps: int | None = None
  # kind 'lm' stream batches only: also give each row the `context` stream tokens before its window
  # (`context [B, C]`), read by the model but not scored, so a stateless model sees across windows.
  context: int = 0
  # Each example's words as the loader tokenised them, before the vocabulary (rare words intact; pairs:
  # (premise words, hypothesis words)), in the order of `examples`; None when the loader keeps none.
  # Read by models that work on strings, e.g. `training.linear_baseline`.
  words: list | None = None

  def __len__(self) -> int:
    return len(self.examples)

  def batches(self, batch_size: int, *, shuffle: bool, seed: int = 0, epoch: int = 0,
              num_shards: int = 1) -> Iterator[dict[str, np.ndarray]]:
    """Padded, length-bucketed batches of this split (`batching.make_batches`).

    Args:
      batch_size: rows per batch B, divisible by `num_shards`.
      shuffle: shuffle inside buckets and the batch order (training) or keep a fixed order.
      seed: shuffling seed.
      epoch: epoch number, folded into the shuffling seed.
      num_shards: number of data-parallel shards the batch will be split over.

    Returns:
      An iterator of batch dicts of numpy arrays with `example_mask [B]` and `example_index [B]`.
    """
    from jax_structured.data import batching  # pylint: disable=g-import-not-at-top
    return batching.make_batches(self.examples, self.kind, batch_size, shuffle=shuffle, seed=seed,
                                 epoch=epoch, num_shards=num_shards,
                                 bucket_boundaries=self.bucket_boundaries, num_steps=self.num_steps,
                                 context=self.context)


@dataclasses.dataclass
class TaskData:
  """Everything a launch needs from data: encoded splits, vocabulary, label names, embeddings."""
  kind: str
  vocab: Vocabulary
  label_names: list[str]
  splits: dict[str, Split]
  embeddings: np.ndarray | None = None  # [len(vocab), dim] float32 initial embeddings, if any
  skipped: dict[str, int] = dataclasses.field(default_factory=dict)  # reason -> count, reported
  extras: dict[str, Any] = dataclasses.field(default_factory=dict)  # e.g. 'tag_vocab', 'relation_names'

  @property
  def num_classes(self) -> int:
    """Number of labels, `len(label_names)`."""
    return len(self.label_names)
