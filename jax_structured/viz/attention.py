"""Pictures of LSTMN intra-attention (Cheng, Dong & Lapata 2016, Figures 4 and 5).

Each word t of a sentence attends with weights s^t (eq. 5) over the words i < t before it. As in the
paper's figures, the words are written on a line and every weight s_i^t is an arc between word t and
word i drawn above the line, thicker and darker for higher weights; an arrow points at the attended
word i ("which word is being focused when attention is computed", Figure 4), and the strongest arc of
each word is drawn in red (the "bold lines" of Figure 5).

* `attention_svg(words, attention)`: one sentence, one or more attention matrices (e.g. one per
  layer) stacked, as a standalone SVG document.
* `model_attention(model, variables, batch)`: runs a model and returns every sown `intra_attention`
  [B, T, T] by module path.
* `render_attention(workdir, split=..., num_sentences=N)`: restores a trained LSTMN model
  (`training.load_trained`), draws the first N sentences of a split to `<output_dir>/sentence_*.svg`
  and writes an `index.html` showing them all (`launch/show_attention.py` is its command line).
"""
from __future__ import annotations

import json
import os
from typing import Any, Mapping, Optional, Sequence

from flax import traverse_util
import jax
import numpy as np

from jax_structured.viz import svg as svg_lib

__all__ = ['attention_svg', 'model_attention', 'sentences_of_split', 'render_attention']

# Layout (pixels).
_CHAR_WIDTH = 7.5
_GAP = 14.0
_MARGIN = 16.0
_FONT = 13
_TITLE_HEIGHT = 22.0
_LINE_HEIGHT = 26.0
_MAX_STROKE = 4.5


def _esc(text) -> str:
  return (str(text).replace('&', '&amp;').replace('<', '&lt;').replace('>', '&gt;')
          .replace('"', '&quot;').replace("'", '&#39;'))


def _check(words: Sequence[str], attention, name: str) -> np.ndarray:
  """attention as float64 [n, n] after validation (n = len(words))."""
  a = np.asarray(attention, dtype=np.float64)
  n = len(words)
  if n == 0:
    raise ValueError('attention_svg: no words')
  if a.ndim != 2 or a.shape[1] < n or a.shape[0] < n:
    raise ValueError(f'attention_svg: {name} has shape {a.shape}, expected [n, n] with n >= {n} '
                     '(one row and one column per word)')
  a = a[:n, :n]
  if not np.all(np.isfinite(a)):
    raise ValueError(f'attention_svg: {name} has non-finite weights')
  if np.any(a < -1e-6) or np.any(a > 1 + 1e-6):
    raise ValueError(f'attention_svg: {name} has weights outside [0, 1] (min {a.min():.3g}, '
                     f'max {a.max():.3g}); pass attention probabilities, not scores')
  return np.clip(a, 0.0, 1.0)


def _layout(words: Sequence[str]) -> tuple[list[float], float]:
  widths = [max(len(str(w)), 1) * _CHAR_WIDTH for w in words]
  centres, x = [], _MARGIN
  for w in widths:
    centres.append(x + w / 2)
    x += w + _GAP
  return centres, x - _GAP + _MARGIN


def _arc_height(i: int, t: int, n: int, max_height: float) -> float:
  return min(max_height, 12.0 + 14.0 * abs(t - i)) if n > 1 else 12.0


def attention_svg(words: Sequence[str], attention, *, titles: Optional[Sequence[str]] = None,
                  min_weight: float = 0.05, title: Optional[str] = None) -> str:
  """Arcs between words weighted by attention, as in Figures 4-5 of Cheng et al. (2016).

  Args:
    words: the n words of the sentence.
    attention: [n', n'] (n' >= n; padding beyond n is ignored) weights, row t = the distribution
      s^t of word t over the words it attends to (eq. 5; LSTMN rows put weight on i < t only), or a
      sequence of such matrices (e.g. one per layer), drawn as stacked panels.
    titles: one caption per matrix (default 'layer k').
    min_weight: arcs with a weight below this (or of weight 0) are not drawn (weights are in [0, 1]).
    title: optional heading above all panels.

  Returns:
    A standalone SVG document (str). Each arc is a `<path class="arc">` (class `arc max` for the
    strongest arc of its word) with a `<title>` tooltip "word_t -> word_i: weight" and attributes
    `data-from` (t), `data-to` (i) and `data-weight`.

  Raises:
    ValueError: shape mismatch with the words, non-finite weights or weights outside [0, 1].
  """
  mats = attention if isinstance(attention, (list, tuple)) else [attention]
  if titles is None:
    titles = [f'layer {k}' for k in range(len(mats))] if len(mats) > 1 else ['']
  if len(titles) != len(mats):
    raise ValueError(f'attention_svg: {len(titles)} titles for {len(mats)} attention matrices')
  mats = [_check(words, m, f'attention[{k}]') for k, m in enumerate(mats)]
  n = len(words)
  centres, width = _layout(words)
  max_height = min(160.0, 12.0 + 14.0 * (n - 1))
  panel_height = _TITLE_HEIGHT + max_height + _LINE_HEIGHT + 8.0
  top = _TITLE_HEIGHT if title else 0.0
  height = top + panel_height * len(mats) + 4.0
  out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.1f}" height="{height:.1f}" '
         f'viewBox="0 0 {width:.1f} {height:.1f}" font-family="sans-serif" font-size="{_FONT}">',
         '<defs><marker id="head" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="5" '
         'markerHeight="5" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#555"/>'
         '</marker><marker id="headmax" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="5" '
         'markerHeight="5" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#c0392b"/>'
         '</marker></defs>']
  if title:
    out.append(f'<text class="title" x="{_MARGIN}" y="{_TITLE_HEIGHT - 6:.1f}" font-weight="bold">'
               f'{_esc(title)}</text>')
  for k, (mat, caption) in enumerate(zip(mats, titles)):
    y0 = top + k * panel_height
    baseline = y0 + _TITLE_HEIGHT + max_height
    out.append(f'<g class="panel" data-panel="{k}">')
    if caption:
      out.append(f'<text class="caption" x="{_MARGIN}" y="{y0 + _TITLE_HEIGHT - 6:.1f}" fill="#333">'
                 f'{_esc(caption)}</text>')
    strongest = {t: int(np.argmax(mat[t])) for t in range(n) if mat[t].max() >= min_weight}
    # Weak arcs first so strong ones are drawn on top.
    arcs = sorted(((mat[t, i], t, i) for t in range(n) for i in range(n)
                   if i != t and mat[t, i] > 0 and mat[t, i] >= min_weight), key=lambda x: x[0])
    for w, t, i in arcs:
      xt, xi = centres[t], centres[i]
      h = _arc_height(i, t, n, max_height)
      is_max = strongest.get(t) == i
      colour = '#c0392b' if is_max else '#2c3e50'
      d = (f'M{xt:.1f},{baseline - 2:.1f} C{xt:.1f},{baseline - 2 - h:.1f} '
           f'{xi:.1f},{baseline - 2 - h:.1f} {xi:.1f},{baseline - 2:.1f}')
      out.append(f'<path class="arc{" max" if is_max else ""}" d="{d}" fill="none" stroke="{colour}" '
                 f'stroke-width="{0.4 + _MAX_STROKE * w:.3f}" stroke-opacity="{0.25 + 0.75 * w:.3f}" '
                 f'marker-end="url(#{"headmax" if is_max else "head"})" data-from="{t}" data-to="{i}" '
                 f'data-weight="{w:.6f}"><title>{_esc(words[t])} -&gt; {_esc(words[i])}: {w:.3f}'
                 '</title></path>')
    for t, word in enumerate(words):
      out.append(f'<text class="word" x="{centres[t]:.1f}" y="{baseline + 16:.1f}" '
                 f'text-anchor="middle">{_esc(word)}</text>')
    out.append('</g>')
  out.append('</svg>')
  return '\n'.join(out)


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
  from jax_structured import training  # pylint: disable=g-import-not-at-top
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
      picture = attention_svg(words, [att[0]], titles=[path], min_weight=min_weight,
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
