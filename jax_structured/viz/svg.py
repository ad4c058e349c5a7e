"""Pictures of dependency trees as SVG (pure string writing), in the style of Liu & Lapata (2018),
Figures 5-6: the words (or sentence numbers) along a line, one arc per word drawn over the line from
its head to it (arrow at the modifier), a ROOT marker left of the first word, and optionally the arc
weights (attention marginals) as opacity and thickness.

`tree_svg` draws one tree; `comparison_svg` stacks an induced tree over a reference (planted / parser)
tree with the differing arcs highlighted; `document_tree_svg` draws a document-level tree over
numbered sentences and lists the sentences below; `html_page` puts several pictures and a statistics
table in one standalone HTML file. Every arc is one `<path class="arc ...">` with `data-head` /
`data-dep` attributes (0-based word indices, -1 = ROOT), so pictures can be checked by machine.
"""
from __future__ import annotations

import html
from typing import Mapping, Optional, Sequence

import numpy as np

CHAR_WIDTH = 7.5    # px per character of the 13px sans-serif labels (an estimate; no font metrics)
WORD_GAP = 18       # px between words
MARGIN = 12
LEVEL_HEIGHT = 18   # px of arc height per word of distance (capped by MAX_ARC_HEIGHT)
MAX_ARC_HEIGHT = 150
TEXT_HEIGHT = 40
COLORS = {'arc': '#1f4e9c', 'missing': '#2e8b57', 'wrong': '#d62728', 'root': '#555555'}


def _esc(text) -> str:
  """Escapes text for XML character data and attribute values (<, >, &, quotes)."""
  return html.escape(str(text), quote=True)


def _check_tree_input(words: Sequence[str], heads, name: str = 'heads') -> np.ndarray:
  heads = np.asarray(heads, dtype=np.int64).reshape(-1)
  if len(heads) != len(words):
    raise ValueError(f'{name} has {len(heads)} entries but there are {len(words)} words')
  for m, h in enumerate(heads):
    if not -1 <= h < len(words) or h == m:
      raise ValueError(f'{name}[{m}] = {int(h)} is not -1 (ROOT) or another word index in '
                       f'0..{len(words) - 1}')
  return heads


def _layout(words: Sequence[str]) -> tuple[list[float], list[float], float]:
  """x centres of ROOT (index 0) and the words, label widths, total width."""
  labels = ['ROOT'] + [str(w) for w in words]
  widths = [max(len(t), 1) * CHAR_WIDTH for t in labels]
  centres, x = [], MARGIN
  for w in widths:
    centres.append(x + w / 2)
    x += w + WORD_GAP
  return centres, widths, x - WORD_GAP + MARGIN


def _arc_height(h: int, m: int, n: int) -> float:
  distance = (m + 1) if h < 0 else abs(h - m)
  return min(MAX_ARC_HEIGHT, LEVEL_HEIGHT * (0.6 + distance))


def _panel(words: Sequence[str], heads: np.ndarray, *, y_offset: float, weights=None,
           other_heads: Optional[np.ndarray] = None, title: Optional[str] = None,
           panel: str = 'tree') -> tuple[list[str], float]:
  """SVG elements of one tree drawn with its baseline at `y_offset + arc area height`."""
  n = len(words)
  centres, widths, _ = _layout(words)
  arc_area = max([_arc_height(int(h), m, n) for m, h in enumerate(heads)] + [LEVEL_HEIGHT]) + 10
  title_height = 18 if title else 0
  base = y_offset + title_height + arc_area
  out = [f'<g class="panel" data-panel="{_esc(panel)}">']
  if title:
    out.append(f'<text class="title" x="{MARGIN}" y="{y_offset + 14:.1f}" font-weight="bold">'
               f'{_esc(title)}</text>')
  # ROOT marker and the words.
  out.append(f'<text class="root" x="{centres[0]:.1f}" y="{base + 16:.1f}" text-anchor="middle" '
             f'fill="{COLORS["root"]}" font-style="italic">ROOT</text>')
  for i, word in enumerate(words):
    out.append(f'<text class="word" data-index="{i}" x="{centres[i + 1]:.1f}" y="{base + 16:.1f}" '
               f'text-anchor="middle">{_esc(word)}</text>')
  for m, h in enumerate(heads):
    h = int(h)
    x0, x1 = centres[h + 1], centres[m + 1]
    # Arcs leave the head and enter the modifier slightly off centre so opposite arcs do not overlap.
    x0 += 3 if x1 > x0 else -3
    top = base - _arc_height(h, m, n)
    kind = 'arc'
    if other_heads is not None and int(other_heads[m]) != h:
      kind = 'wrong' if panel == 'induced' else 'missing'
    weight = None if weights is None else float(np.clip(weights[m], 0.0, 1.0))
    opacity = 0.9 if weight is None else 0.15 + 0.85 * weight
    stroke = 1.6 if weight is None else 0.6 + 2.4 * weight
    dash = ' stroke-dasharray="5,3"' if kind == 'missing' else ''
    cls = 'arc root-arc' if h < 0 else 'arc'
    if kind != 'arc':
      cls += f' diff {kind}'
    weight_attr = '' if weight is None else f' data-weight="{weight:.4f}"'
    out.append(
        f'<path class="{cls}" data-head="{h}" data-dep="{m}"{weight_attr} '
        f'd="M{x0:.1f},{base:.1f} C{x0:.1f},{top:.1f} {x1:.1f},{top:.1f} {x1:.1f},{base - 2:.1f}" '
        f'fill="none" stroke="{COLORS[kind]}" stroke-width="{stroke:.2f}" '
        f'stroke-opacity="{opacity:.3f}"{dash} marker-end="url(#arrow-{kind})">'
        f'<title>{_esc("ROOT" if h < 0 else words[h])} -&gt; {_esc(words[m])}'
        f'{"" if weight is None else f" ({weight:.2f})"}</title></path>')
  out.append('</g>')
  return out, title_height + arc_area + TEXT_HEIGHT


def _svg(elements: list[str], width: float, height: float, label: str) -> str:
  markers = ''.join(
      f'<marker id="arrow-{k}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
      f'markerHeight="6" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{c}"/>'
      f'</marker>' for k, c in COLORS.items())
  return (f'<svg xmlns="http://www.w3.org/2000/svg" class="dependency-tree" width="{width:.0f}" '
          f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" '
          f'font-size="13" role="img" aria-label="{_esc(label)}"><defs>{markers}</defs>'
          + ''.join(elements) + '</svg>')


def tree_svg(words: Sequence[str], heads, *, weights=None, title: Optional[str] = None) -> str:
  """One dependency tree as an SVG document.

  Args:
    words: the n words (any text; escaped).
    heads: int [n], `heads[m]` the head of word m, -1 for ROOT (library convention).
    weights: optional float [n] in [0, 1], the weight of the arc into each word (e.g. its attention
      marginal `arc_marginals[heads[m], m]` or `root_marginals[m]`), shown as opacity and thickness.
    title: optional caption drawn above the tree.

  Returns:
    The SVG text (an `<svg>` element with one `<path class="arc">` per word).

  Raises:
    ValueError: when `heads` does not match `words` or holds an index out of range.
  """
  heads = _check_tree_input(words, heads)
  if weights is not None:
    weights = np.asarray(weights, np.float64).reshape(-1)
    if len(weights) != len(words):
      raise ValueError(f'weights has {len(weights)} entries but there are {len(words)} words')
  elements, height = _panel(words, heads, y_offset=0, weights=weights, title=title)
  return _svg(elements, _layout(words)[2], height, title or ' '.join(map(str, words)))


def comparison_svg(words: Sequence[str], heads, reference_heads, *, weights=None,
                   titles: tuple[str, str] = ('induced', 'reference')) -> str:
  """An induced tree stacked over a reference tree, differing arcs highlighted.

  In the top (induced) panel arcs absent from the reference are red (`class="arc diff wrong"`); in the
  bottom (reference) panel the arcs the induced tree missed are dashed green (`diff missing`).

  Args:
    words: the n words.
    heads: int [n], the induced tree.
    reference_heads: int [n], the reference (planted / parser) tree.
    weights: optional float [n], weights of the induced arcs (see `tree_svg`).
    titles: captions of the two panels; the induced caption gets the number of agreeing arcs.

  Returns:
    The SVG text.
  """
  heads = _check_tree_input(words, heads)
  reference_heads = _check_tree_input(words, reference_heads, 'reference_heads')
  if weights is not None:
    weights = np.asarray(weights, np.float64).reshape(-1)
  same = int(np.sum(heads == reference_heads))
  top, h1 = _panel(words, heads, y_offset=0, weights=weights, other_heads=reference_heads,
                   title=f'{titles[0]} ({same}/{len(words)} arcs as in the {titles[1]})',
                   panel='induced')
  bottom, h2 = _panel(words, reference_heads, y_offset=h1, other_heads=heads, title=titles[1],
                      panel='reference')
  return _svg(top + bottom, _layout(words)[2], h1 + h2, f'{titles[0]} vs {titles[1]}')


def document_tree_svg(sentences: Sequence[str], heads, *, weights=None,
                      title: Optional[str] = None, reference_heads=None) -> str:
  """A document-level tree over sentences (Figure 6): nodes are sentence numbers 1..S, arcs between
  them, the sentences listed below.

  Args:
    sentences: the S sentence texts.
    heads: int [S], head sentence of each sentence (-1 = ROOT).
    weights: optional float [S] arc weights.
    title: optional caption.
    reference_heads: optional int [S]: draw the comparison with a reference tree instead.

  Returns:
    The SVG text.
  """
  numbers = [str(i + 1) for i in range(len(sentences))]
  if reference_heads is None:
    svg = tree_svg(numbers, heads, weights=weights, title=title)
  else:
    svg = comparison_svg(numbers, heads, reference_heads, weights=weights)
  height = float(svg.split('height="', 1)[1].split('"', 1)[0])
  width = float(svg.split('width="', 1)[1].split('"', 1)[0])
  lines = [f'<text class="sentence" data-index="{i}" x="{MARGIN}" y="{height + 16 * (i + 1):.1f}">'
           f'{i + 1}  {_esc(s)}</text>' for i, s in enumerate(sentences)]
  new_height = height + 16 * len(sentences) + 10
  new_width = max(width, MARGIN * 2 + CHAR_WIDTH * max((len(s) + 4 for s in sentences), default=0))
  svg = svg.replace(f'width="{width:.0f}" height="{height:.0f}" viewBox="0 0 {width:.0f} '
                    f'{height:.0f}"', f'width="{new_width:.0f}" height="{new_height:.0f}" '
                    f'viewBox="0 0 {new_width:.0f} {new_height:.0f}"', 1)
  return svg[:-len('</svg>')] + ''.join(lines) + '</svg>'


def html_page(title: str, figures: Sequence[tuple[str, str]], *,
              stats: Optional[Mapping[str, object]] = None) -> str:
  """A standalone HTML page with inline SVG figures and an optional statistics table.

  Args:
    title: page title.
    figures: (caption, svg text) pairs.
    stats: optional {name: value} shown as a table above the figures (nested dicts are flattened).

  Returns:
    The HTML text.
  """
  parts = ['<!DOCTYPE html>', '<html lang="en"><head><meta charset="utf-8"/>',
           f'<title>{_esc(title)}</title>',
           '<style>body{font-family:sans-serif;margin:2em}figure{margin:1.5em 0;overflow-x:auto}'
           'table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 8px;'
           'text-align:left}</style></head><body>', f'<h1>{_esc(title)}</h1>']
  if stats:
    rows = ''.join(f'<tr><th>{_esc(k)}</th><td>{_esc(_fmt(v))}</td></tr>'
                   for k, v in _flatten(stats).items())
    parts.append(f'<table class="stats">{rows}</table>')
  for caption, svg in figures:
    parts.append(f'<figure>{svg}<figcaption>{_esc(caption)}</figcaption></figure>')
  parts.append('</body></html>')
  return '\n'.join(parts)


def _flatten(d: Mapping[str, object], prefix: str = '') -> dict[str, object]:
  out = {}
  for k, v in d.items():
    if isinstance(v, Mapping):
      out.update(_flatten(v, f'{prefix}{k}.'))
    else:
      out[f'{prefix}{k}'] = v
  return out


def _fmt(v) -> str:
  if isinstance(v, float):
    return f'{v:.4f}'
  if isinstance(v, (list, tuple)):
    return ', '.join(_fmt(x) for x in v)
  return str(v)
