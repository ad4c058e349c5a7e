"""LSTMN intra-attention of a trained model, drawn (Cheng, Dong & Lapata 2016, Figures 4 and 5).

* `model_attention(model, variables, batch)`: runs a model and returns every sown `intra_attention`
  [B, T, T] by module path.
* `sentences_of_split(kind, examples, vocab, n)`: the first n inputs of a split as one-sentence batches.
* `render_attention(workdir, split=..., num_sentences=N)`: restores a trained LSTMN model
  (`training.load_trained`), draws the first N sentences of a split with `viz.attention.attention_svg`
  to `<output_dir>/sentence_*.svg` and writes an `index.html` showing them all
  (`launch/show_attention.py` is its command line).
"""
from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional, Sequence

from flax import traverse_util
import jax
import numpy as np

from jax_structured import training
from jax_structured.viz import attention as viz_attention
from jax_structured.viz import svg as svg_lib

__all__ = ['model_attention', 'sentences_of_split', 'render_attention']


def model_attention(model, variables, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
  """Every `intra_attention` [B, T, T] the model sows, keyed by module path ('encoder/layer_0').

  Args:
    model: a Linen module called as `model.apply(variables, batch, train=False)`.
    variables: its variables.
    batch: a model batch (numpy or jax arrays).

  Returns:
    {module path: float32 numpy [B, T, T]} in module order (empty when nothing is sown).
  """
  _, state = model.apply(variables, dict(batch), train=False, mutable=['intermediates'])
  flat = traverse_util.flatten_dict(dict(state.get('intermediates', {})),
                                    is_leaf=lambda _, v: isinstance(v, tuple))
  out = {}
  for path, value in flat.items():
    if path[-1] != 'intra_attention':
      continue
    value = value[0] if isinstance(value, tuple) else value
    out['/'.join(path[:-1])] = np.asarray(jax.device_get(value), np.float32)
  return out


def sentences_of_split(kind: str, examples: Sequence[Mapping[str, Any]], vocab, num_sentences: int,
                       *, eos: str = '<eos>') -> list[dict[str, Any]]:
  """The first `num_sentences` inputs of a split as model batches of one sentence each.

  Args:
    kind: the data kind: 'lm' (a stream split at `eos`, or one sentence per example), 'sentence' or
      'pair'.
    examples: the split's encoded examples (`data.Split.examples`).
    vocab: the training vocabulary (`data.Vocabulary`).
    num_sentences: how many.
    eos: the end-of-sentence token of language-model streams.

  Returns:
    [{'batch': model batch with B = 1, 'words': {input name: list of words}}].
  """
  out = []
  if kind == 'lm':
    eos_id = vocab.id(eos) if eos in vocab else None
    for example in examples:
      ids = np.asarray(example['tokens'], np.int32)
      cuts = [0] + [i + 1 for i in np.flatnonzero(ids == eos_id)] if eos_id is not None else [0]
      cuts = sorted(set(cuts + [len(ids)]))
      for a, b in zip(cuts[:-1], cuts[1:]):
        sentence = ids[a:b]
        if len(sentence) < 2:
          continue
        out.append({'batch': {'inputs': sentence[None, :]}, 'words': {'inputs': vocab.decode(sentence)}})
        if len(out) == num_sentences:
          return out
    return out
  for example in examples[:num_sentences]:
    if kind == 'sentence':
      tokens = np.asarray(example['tokens'], np.int32)
      out.append({'batch': {'tokens': tokens[None], 'lengths': np.asarray([len(tokens)], np.int32)},
                  'words': {'tokens': vocab.decode(tokens)}})
    elif kind == 'pair':
      p = np.asarray(example['premise'], np.int32)
      h = np.asarray(example['hypothesis'], np.int32)
      out.append({'batch': {'premise': p[None], 'premise_lengths': np.asarray([len(p)], np.int32),
                            'hypothesis': h[None], 'hypothesis_lengths': np.asarray([len(h)], np.int32)},
                  'words': {'premise': vocab.decode(p), 'hypothesis': vocab.decode(h)}})
    else:
      raise ValueError(f'attention pictures support kinds lm, sentence and pair, not {kind!r}')
  return out


def _words_for(path: str, words: Mapping[str, list]) -> list:
  """Which input a sown attention belongs to: the pair models' premise/hypothesis modules by name."""
  if len(words) == 1:
    return next(iter(words.values()))
  for name, w in words.items():
    if path.startswith(name):
      return w
  raise ValueError(f'cannot tell which input the attention of module {path!r} reads ({sorted(words)})')


def render_attention(workdir: str, split: str = 'validation', *, num_sentences: int = 4,
                     output_dir: Optional[str] = None, checkpoint: str | int = 'best',
                     min_weight: float = 0.05) -> dict[str, Any]:
  """Draws the intra-attention of a trained LSTMN model on the first sentences of a split.

  Args:
    workdir: a training workdir of an `lstmn.*` model.
    split: 'train', 'validation' (alias 'dev') or 'test'.
    num_sentences: how many sentences (the first of the split).
    output_dir: where to write (default `<workdir>/attention_<split>`).
    checkpoint: 'best', 'latest' or a step.
    min_weight: arcs below this weight are not drawn.

  Returns:
    {'split', 'step', 'output_dir', 'files': [svg paths..., index.html]} (also `pictures.json`).

  Raises:
    ValueError: the model sows no `intra_attention` (not an LSTMN), or the data's vocabulary differs
      from the one saved in the workdir; KeyError: unknown split.
  """
  if num_sentences < 1:
    raise ValueError(f'num_sentences must be >= 1, got {num_sentences}')
  trained = training.load_trained(workdir, checkpoint=checkpoint)
  config = trained.config
  data_split = training.load_split(config, trained.vocab, split)
  sentences = sentences_of_split(data_split.kind, data_split.examples, trained.vocab, num_sentences)
  output_dir = output_dir or os.path.join(workdir, f'attention_{split}')
  os.makedirs(output_dir, exist_ok=True)
  variables = jax.device_put(trained.variables)
  files, figures = [], []
  for k, item in enumerate(sentences):
    attention = model_attention(trained.model, variables, item['batch'])
    if not attention:
      raise ValueError(f'the model of {workdir} (config.model.name={config.model.name!r}) sows no '
                       'intra_attention: attention pictures are for LSTMN models (cell="lstmn")')
    for path, att in attention.items():
      words = _words_for(path, item['words'])
      picture = viz_attention.attention_svg(words, [att[0]], titles=[path], min_weight=min_weight,
                              title=f'{split} sentence {k}')
      file = os.path.join(output_dir, f'sentence_{k:03d}_{path.replace("/", "_")}.svg')
      with open(file, 'w', encoding='utf-8') as f:
        f.write(picture)
      files.append(file)
      figures.append((f'{split} sentence {k}, {path}: {" ".join(words)}', picture))
  index = os.path.join(output_dir, 'index.html')
  with open(index, 'w', encoding='utf-8') as f:
    f.write(svg_lib.html_page(f'LSTMN intra-attention: {workdir} ({split}, step {trained.step})', figures,
                              stats={'model': config.model.name, 'checkpoint step': trained.step,
                                     'sentences': len(sentences)}))
  files.append(index)
  result = {'split': split, 'step': trained.step, 'output_dir': output_dir, 'files': files}
  with open(os.path.join(output_dir, 'pictures.json'), 'w', encoding='utf-8') as f:
    json.dump(result, f, indent=1)
  return result
