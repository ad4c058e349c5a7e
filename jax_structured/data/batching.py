"""Length-bucketed, statically padded numpy batches (the batch formats of docs/internals.md).

Two layouts:

* `make_batches(examples, kind, batch_size, ...)`: one row per encoded example (see `core` for the
  example formats). Examples are grouped into *buckets* by their (rounded-up) lengths, so every batch of
  a bucket has the same padded shape and each shape compiles once. Batches are formed inside buckets;
  the last batch of a bucket is filled up with *padding examples* (`example_mask = 0`), so nothing is
  dropped. Padding examples are copies of a real example of the same batch (not all-zero rows), so a
  model never sees a zero-length sequence (which would make e.g. mean pooling or the matrix-tree
  Laplacian divide by zero and turn a masked loss into NaN); metrics must be weighted by
  `example_mask`. `example_index [B] int32` gives each row's position in `examples` (-1 for padding
  rows), e.g. to write predictions back in input order.
* `lm_stream_batches(token_ids, batch_size, num_steps)`: the contiguous stream layout of Zaremba et al.
  (2014) for language modelling with state carried across steps.

Padding inside sequences is 0 (`core.PAD_ID`), except `heads` (and the pairs' `premise_heads` /
`hypothesis_heads`), padded with -1 (the `trees` convention).
Sentences with binarised trees also get `tree_children` [B, T - 1, 2], `tree_heights` [B, T - 1] and
`tree_labels` [B, 2T - 1] (`tree_batching.collate_trees`).
Lengths are int32, masks float32.
"""
from __future__ import annotations

import math
from typing import Any, Iterator, Sequence

import numpy as np

from jax_structured.data import tree_batching

KINDS = ('sentence', 'document', 'pair', 'lm', 'parse', 'translation')

# A small geometric set: at most 5 padded lengths (more only for longer inputs, see `bucket_length`).
DEFAULT_BOUNDARIES = (8, 16, 32, 64, 128)
# Documents: boundaries for the number of sentences and for the sentence length.
DEFAULT_DOCUMENT_BOUNDARIES = ((4, 8, 16, 32, 64), (8, 16, 32, 64, 128))

Example = dict[str, Any]
Batch = dict[str, np.ndarray]


def bucket_length(length: int, boundaries: Sequence[int]) -> int:
  """The padded size for a sequence of `length`: the smallest boundary >= length.

  Lengths past the last boundary `b` go to `b * 2**k` for the smallest such `k`, so long outliers
  still give only a few extra shapes (geometric growth) instead of one shape per length.

  Args:
    length: the true length (>= 1).
    boundaries: increasing positive ints.

  Returns:
    The padded length, an int >= `length`.
  """
  for b in boundaries:
    if length <= b:
      return int(b)
  last = int(boundaries[-1])
  return last * 2 ** math.ceil(math.log2(length / last))


def _check_boundaries(boundaries: Sequence[int], what: str) -> tuple[int, ...]:
  boundaries = tuple(int(b) for b in boundaries)
  if not boundaries or any(b <= 0 for b in boundaries) or list(boundaries) != sorted(set(boundaries)):
    raise ValueError(f'{what} must be strictly increasing positive ints, got {boundaries}')
  return boundaries


def _resolve_boundaries(kind: str, bucket_boundaries) -> tuple[tuple[int, ...], tuple[int, ...]]:
  """Returns (outer, inner) boundaries; for non-document kinds both are the same set."""
  if kind == 'document':
    if bucket_boundaries is None:
      outer, inner = DEFAULT_DOCUMENT_BOUNDARIES
    elif len(bucket_boundaries) == 2 and all(isinstance(b, (list, tuple)) for b in bucket_boundaries):
      outer, inner = bucket_boundaries
    else:  # one set used for both the sentence count and the sentence length
      outer = inner = bucket_boundaries
    return (_check_boundaries(outer, 'document sentence-count bucket_boundaries'),
            _check_boundaries(inner, 'document sentence-length bucket_boundaries'))
  b = _check_boundaries(DEFAULT_BOUNDARIES if bucket_boundaries is None else bucket_boundaries,
                        'bucket_boundaries')
  return b, b


def _seq_len(example: Example, key: str, index: int, kind: str) -> int:
  if key not in example:
    raise KeyError(f'{kind} example #{index} has no {key!r} (keys: {sorted(example)})')
  n = len(example[key])
  if n == 0:
    raise ValueError(f'{kind} example #{index} has an empty {key!r}; loaders must filter empty '
                     'sequences (zero-length rows break masked reductions)')
  return n


def _sizes(example: Example, index: int, kind: str) -> tuple[int, ...]:
  """The exact sizes that determine an example's padded shape (validated)."""
  if kind in ('sentence', 'parse'):
    return (_seq_len(example, 'tokens', index, kind),)
  if kind == 'lm':
    # One prediction per token after the first: inputs tokens[:-1], targets tokens[1:].
    n = _seq_len(example, 'tokens', index, kind)
    if n < 2:
      raise ValueError(f'lm example #{index} has {n} token(s); at least 2 are needed for one target')
    return (n - 1,)
  if kind == 'pair':
    return (_seq_len(example, 'premise', index, kind), _seq_len(example, 'hypothesis', index, kind))
  if kind == 'translation':
    return (_seq_len(example, 'source', index, kind), _seq_len(example, 'target', index, kind))
  if kind == 'document':
    num_sentences = _seq_len(example, 'sentences', index, kind)
    longest = 0
    for s, sentence in enumerate(example['sentences']):
      if len(sentence) == 0:
        raise ValueError(f'document example #{index} has an empty sentence #{s}; loaders must drop '
                         'empty sentences')
      longest = max(longest, len(sentence))
    return (num_sentences, longest)
  raise ValueError(f'unknown kind {kind!r}; expected one of {KINDS}')


def _bucket_key(example: Example, index: int, kind: str, outer, inner) -> tuple[int, ...]:
  """The static padded shape of an example's bucket."""
  sizes = _sizes(example, index, kind)
  if kind == 'document':
    return (bucket_length(sizes[0], outer), bucket_length(sizes[1], inner))
  return tuple(bucket_length(n, inner) for n in sizes)


def _pad_1d(rows: Sequence[np.ndarray], width: int, pad: int) -> np.ndarray:
  out = np.full((len(rows), width), pad, dtype=np.int32)
  for i, r in enumerate(rows):
    out[i, :len(r)] = r
  return out


def _labels(examples: Sequence[Example]) -> np.ndarray:
  return np.asarray([int(e['label']) for e in examples], dtype=np.int32)


def collate(examples: Sequence[Example], kind: str, shape: tuple[int, ...]) -> Batch:
  """Pads a list of encoded examples of one bucket into a batch dict (no example_mask/index).

  Args:
    examples: encoded examples of `kind` (formats in `core`), all fitting `shape`.
    kind: 'sentence' | 'document' | 'pair' | 'lm' | 'parse' | 'translation'.
    shape: the bucket's padded sizes: (T,), (S, T) for documents, (T1, T2) for pairs/translation.

  Returns:
    The batch dict of docs/internals.md for `kind` (int32 ids/lengths, float32 masks).
  """
  if kind == 'sentence':
    (t,) = shape
    batch = {'tokens': _pad_1d([e['tokens'] for e in examples], t, 0),
             'lengths': np.asarray([len(e['tokens']) for e in examples], np.int32)}
    if 'label' in examples[0]:
      batch['label'] = _labels(examples)
    if 'heads' in examples[0]:
      batch['heads'] = _pad_1d([e['heads'] for e in examples], t, -1)
    if 'tree_children' in examples[0]:
      batch.update(tree_batching.collate_trees(examples, t))
    return batch
  if kind == 'parse':
    (t,) = shape
    batch = {'tokens': _pad_1d([e['tokens'] for e in examples], t, 0),
             'tags': _pad_1d([e['tags'] for e in examples], t, 0),
             'heads': _pad_1d([e['heads'] for e in examples], t, -1),
             'relations': _pad_1d([e['relations'] for e in examples], t, 0),
             'lengths': np.asarray([len(e['tokens']) for e in examples], np.int32)}
    if 'chars' in examples[0]:  # [n, L] byte ids per example -> [B, t, L], 0-padded
      chars = np.zeros((len(examples), t, examples[0]['chars'].shape[1]), np.int32)
      for i, e in enumerate(examples):
        chars[i, :len(e['chars'])] = e['chars']
      batch['chars'] = chars
    return batch
  if kind == 'lm':
    (t,) = shape
    lengths = np.asarray([len(e['tokens']) - 1 for e in examples], np.int32)
    return {'inputs': _pad_1d([np.asarray(e['tokens'])[:-1] for e in examples], t, 0),
            'targets': _pad_1d([np.asarray(e['tokens'])[1:] for e in examples], t, 0),
            'mask': (np.arange(t)[None, :] < lengths[:, None]).astype(np.float32),
            'lengths': lengths}
  if kind in ('pair', 'translation'):
    a, b = ('premise', 'hypothesis') if kind == 'pair' else ('source', 'target')
    t1, t2 = shape
    batch = {a: _pad_1d([e[a] for e in examples], t1, 0),
             f'{a}_lengths': np.asarray([len(e[a]) for e in examples], np.int32),
             b: _pad_1d([e[b] for e in examples], t2, 0),
             f'{b}_lengths': np.asarray([len(e[b]) for e in examples], np.int32)}
    for side, width in ((a, t1), (b, t2)):
      if f'{side}_heads' in examples[0]:  # parsed trees (`parsed_trees`), -1-padded like 'heads'
        batch[f'{side}_heads'] = _pad_1d([e[f'{side}_heads'] for e in examples], width, -1)
    if 'label' in examples[0]:
      batch['label'] = _labels(examples)
    return batch
  if kind == 'document':
    s, t = shape
    tokens = np.zeros((len(examples), s, t), np.int32)
    sentence_lengths = np.zeros((len(examples), s), np.int32)
    has_heads = 'heads' in examples[0]
    heads = np.full((len(examples), s, t), -1, np.int32) if has_heads else None
    punctuation = np.zeros((len(examples), s, t), np.int32) if 'punctuation' in examples[0] else None
    for i, e in enumerate(examples):
      for j, sentence in enumerate(e['sentences']):
        tokens[i, j, :len(sentence)] = sentence
        sentence_lengths[i, j] = len(sentence)
        if has_heads:
          heads[i, j, :len(sentence)] = e['heads'][j]
        if punctuation is not None:
          punctuation[i, j, :len(sentence)] = e['punctuation'][j]
    batch = {'tokens': tokens, 'sentence_lengths': sentence_lengths,
             'num_sentences': np.asarray([len(e['sentences']) for e in examples], np.int32)}
    if 'label' in examples[0]:
      batch['label'] = _labels(examples)
    if has_heads:
      batch['heads'] = heads
    if punctuation is not None:
      batch['punctuation'] = punctuation
    return batch
  raise ValueError(f'unknown kind {kind!r}; expected one of {KINDS}')


def bucketize(examples: Sequence[Example], kind: str,
              bucket_boundaries=None) -> dict[tuple[int, ...], list[int]]:
  """Groups example indices by padded shape.

  Args:
    examples: encoded examples of `kind`.
    kind: see `KINDS`.
    bucket_boundaries: increasing ints (None: `DEFAULT_BOUNDARIES`); for documents either one set
      (used for both sizes) or a pair (sentence-count boundaries, sentence-length boundaries).
      Empty (`()`): one bucket padded to the longest example (sizes are exact, not rounded).

  Returns:
    {padded shape: [example indices in input order]}, shapes in increasing order.
  """
  if bucket_boundaries is not None and len(bucket_boundaries) == 0:
    # A single bucket padded to the longest example (one compiled shape per split).
    keys = [_sizes(e, i, kind) for i, e in enumerate(examples)]
    if not keys:
      return {}
    shape = tuple(int(x) for x in np.max(np.asarray(keys), axis=0))
    return {shape: list(range(len(examples)))}
  outer, inner = _resolve_boundaries(kind, bucket_boundaries)
  buckets: dict[tuple[int, ...], list[int]] = {}
  for i, e in enumerate(examples):
    buckets.setdefault(_bucket_key(e, i, kind, outer, inner), []).append(i)
  return dict(sorted(buckets.items()))


def make_batches(examples: Sequence[Example], kind: str, batch_size: int, *, shuffle: bool,
                 seed: int = 0, epoch: int = 0, num_shards: int = 1, bucket_boundaries=None,
                 num_steps: int | None = None, context: int = 0) -> Iterator[Batch]:
  """Yields padded batches covering every example exactly once.

  Shuffling (if `shuffle`) permutes the examples inside each bucket and then the order of all batches,
  with `np.random.default_rng([seed, epoch])`: the same (seed, epoch) gives the same batches, another
  epoch a different order. Without shuffling, buckets come in increasing shape order and examples in
  input order.

  Args:
    examples: encoded examples (formats in `core`).
    kind: 'sentence' | 'document' | 'pair' | 'lm' | 'parse' | 'translation'.
    batch_size: rows per batch B, divisible by `num_shards`.
    shuffle: whether to shuffle (training) or keep a fixed order (evaluation).
    seed: shuffling seed.
    epoch: epoch number, folded into the shuffling seed.
    num_shards: number of data-parallel shards the batch will be split over.
    bucket_boundaries: see `bucketize`.
    num_steps: kind 'lm' only: if given, the examples are concatenated into one token stream and
      batched with `lm_stream_batches` (contiguous, never shuffled: the recurrent state carries over).
    context: kind 'lm' with `num_steps` only: add `context [B, context]`, the stream tokens preceding
      each row's window (see `lm_stream_batches`).

  Yields:
    Batch dicts (docs/internals.md) with `example_mask [B] float32` and `example_index [B] int32`.
  """
  if kind not in KINDS:
    raise ValueError(f'unknown kind {kind!r}; expected one of {KINDS}')
  _check_batch_size(batch_size, num_shards)
  if context and num_steps is None:
    raise ValueError(f'context={context} needs kind "lm" stream batching (num_steps), got kind {kind!r} '
                     'without num_steps')
  if num_steps is not None:
    if kind != 'lm':
      raise ValueError(f'num_steps is only for kind "lm" stream batching, got kind {kind!r}')
    stream = (np.concatenate([np.asarray(e['tokens'], np.int32) for e in examples])
              if examples else np.zeros((0,), np.int32))
    yield from lm_stream_batches(stream, batch_size, num_steps, num_shards=num_shards, context=context)
    return
  buckets = bucketize(examples, kind, bucket_boundaries)
  rng = np.random.default_rng([int(seed), int(epoch)]) if shuffle else None
  plan: list[tuple[tuple[int, ...], list[int]]] = []
  for shape, indices in buckets.items():
    if rng is not None:
      indices = [indices[k] for k in rng.permutation(len(indices))]
    for start in range(0, len(indices), batch_size):
      plan.append((shape, indices[start:start + batch_size]))
  if rng is not None:
    plan = [plan[k] for k in rng.permutation(len(plan))]
  for shape, indices in plan:
    yield _make_batch(examples, kind, shape, indices, batch_size)


def _check_batch_size(batch_size: int, num_shards: int) -> None:
  if batch_size <= 0 or num_shards <= 0:
    raise ValueError(f'batch_size ({batch_size}) and num_shards ({num_shards}) must be positive')
  if batch_size % num_shards:
    raise ValueError(f'batch_size={batch_size} is not divisible by num_shards={num_shards} (the '
                     'number of data-parallel devices); choose a multiple')


def _make_batch(examples, kind, shape, indices, batch_size) -> Batch:
  num_real = len(indices)
  # Padding rows repeat the first real example (see the module docstring) and are masked out.
  rows = [examples[i] for i in indices] + [examples[indices[0]]] * (batch_size - num_real)
  batch = collate(rows, kind, shape)
  example_mask = np.zeros((batch_size,), np.float32)
  example_mask[:num_real] = 1.0
  example_index = np.full((batch_size,), -1, np.int32)
  example_index[:num_real] = indices
  batch['example_mask'] = example_mask
  batch['example_index'] = example_index
  return batch


def num_batches(examples: Sequence[Example], kind: str, batch_size: int, *,
                bucket_boundaries=None) -> int:
  """How many batches `make_batches` yields for these examples (e.g. for a progress bar)."""
  return sum(math.ceil(len(v) / batch_size)
             for v in bucketize(examples, kind, bucket_boundaries).values())


def lm_stream_batches(token_ids: np.ndarray, batch_size: int, num_steps: int, *,
                      num_shards: int = 1, context: int = 0) -> Iterator[Batch]:
  """Contiguous language-model batches (Zaremba et al. 2014, "ptb_iterator").

  The stream is cut into `batch_size` contiguous rows (lengths differ by at most one; no token is
  dropped), and row `r` of step `k` holds tokens `k*T .. k*T+T-1` of row `r`, with targets shifted by
  one. Hence row `r` of step `k+1` continues row `r` of step `k`, so the recurrent state can be carried
  across steps. The last step may be partial; its missing positions have `mask = 0` (and inputs /
  targets 0). Every token except the first of each row is a target exactly once.

  With `context = C > 0` each batch also holds `context [B, C]`: the C tokens of the whole stream
  that precede the first input of each row's window (0-padded before the stream start), so a
  *stateless* model (the generic train loop does not carry recurrent state between steps) can still
  read across window boundaries, e.g. the LSTMN memory tape (Cheng et al. 2016) over C + T tokens
  while only the T window positions are scored. Context tokens are never targets.

  Args:
    token_ids: int[L] the whole token stream (e.g. sentences joined with `<eos>`).
    batch_size: number of rows B (divisible by `num_shards`).
    num_steps: unrolled length T.
    num_shards: data-parallel shards.
    context: number C of preceding stream tokens to add as `context` (0 = none).

  Yields:
    {'inputs': int32[B, T], 'targets': int32[B, T], 'mask': float32[B, T], 'lengths': int32[B]
    (number of valid targets in the row), 'example_mask': float32[B] (all 1)}, plus
    'context': int32[B, C] when `context > 0`.
  """
  _check_batch_size(batch_size, num_shards)
  if num_steps <= 0:
    raise ValueError(f'num_steps must be positive, got {num_steps}')
  if context < 0:
    raise ValueError(f'context must be >= 0, got {context}')
  token_ids = np.asarray(token_ids)
  if token_ids.ndim != 1:
    raise ValueError(f'token_ids must be 1-D, got shape {token_ids.shape}')
  if len(token_ids) < 2 * batch_size:
    raise ValueError(f'a stream of {len(token_ids)} tokens is too short for batch_size={batch_size}: '
                     'each row needs at least 2 tokens')
  rows = np.array_split(token_ids.astype(np.int32), batch_size)
  row_len = max(len(r) for r in rows)
  data = _pad_1d(rows, row_len, 0)
  valid = np.zeros((batch_size, row_len), bool)
  for r, row in enumerate(rows):
    valid[r, :len(row)] = True
  num_predictions = row_len - 1
  # Stream offset of each row's first token; the stream left-padded with C zeros for `context`.
  row_starts = np.cumsum([0] + [len(r) for r in rows[:-1]])
  padded_stream = np.concatenate([np.zeros((context,), np.int32), token_ids.astype(np.int32)])
  for start in range(0, num_predictions, num_steps):
    stop = min(start + num_steps, num_predictions)
    width = stop - start
    inputs = np.zeros((batch_size, num_steps), np.int32)
    targets = np.zeros((batch_size, num_steps), np.int32)
    mask = np.zeros((batch_size, num_steps), np.float32)
    inputs[:, :width] = data[:, start:stop]
    targets[:, :width] = data[:, start + 1:stop + 1]
    mask[:, :width] = valid[:, start + 1:stop + 1]
    inputs[:, :width] *= mask[:, :width].astype(np.int32)
    batch = {'inputs': inputs, 'targets': targets, 'mask': mask,
             'lengths': mask.sum(axis=1).astype(np.int32),
             'example_mask': np.ones((batch_size,), np.float32)}
    if context:
      # padded_stream[p : p + C] are the C tokens before stream position p (shifted by the padding).
      positions = row_starts[:, None] + start + np.arange(context)[None, :]
      batch['context'] = padded_stream[positions]
    yield batch
