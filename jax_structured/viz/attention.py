"""Pictures of LSTMN intra-attention (Cheng, Dong & Lapata 2016, Figures 4 and 5).

Each word t of a sentence attends with weights s^t (eq. 5) over the words i < t before it. As in the
paper's figures, the words are written on a line and every weight s_i^t is an arc between word t and
word i drawn above the line, thicker and darker for higher weights; an arrow points at the attended
word i ("which word is being focused when attention is computed", Figure 4), and the strongest arc of
each word is drawn in red (the "bold lines" of Figure 5).

`attention_svg(words, attention)` draws one sentence, one or more attention matrices (e.g. one per
layer) stacked, as a standalone SVG document, from plain arrays. Running a trained model and drawing
its attention (`render_attention`) lives above training, in `jax_structured.analysis.attention`;
this module imports no other layer.
"""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np


__all__ = ['attention_svg']

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
