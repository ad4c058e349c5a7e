"""Pictures of learned phrase boundaries (Luo & Zhu, Figure 5) as HTML, from plain arrays.

Figure 5 writes a document's words on lines and marks with a double vertical line '‖' every word
after which the dynamic boundary detector fired (z_t = 1). Here:

  * '‖' (red) after a word with a dynamic boundary z_t = 1 that is not also a static boundary;
  * '|' (grey) after a static boundary p_t = 1 (punctuation / sentence end, eq. 2), and '‖' drawn
    grey-red where both fire;
  * each word's background shows its word(-phrase) attention weight when one is given (Figures 6-7),
    and its tooltip gives z~_t (the detector's hard-sigmoid value), z_t, p_t and the weight.

`document_html(words, dynamic, ...)` draws one document as an HTML fragment, `histogram_html` a bar
table, `boundary_page(title, documents, tables)` a standalone page. Restoring a trained model and
running it lives in `jax_structured.analysis.boundaries`; this module imports no other layer.
"""
from __future__ import annotations

import html
from typing import Any, Mapping, Optional, Sequence

import numpy as np

__all__ = ['document_html', 'histogram_html', 'table_html', 'boundary_page']

DYNAMIC_MARK = '\u2016'  # ‖, as Figure 5
STATIC_MARK = '|'

_STYLE = """
body { font-family: sans-serif; margin: 2em; max-width: 70em; }
.doc { line-height: 2.1em; margin: 1em 0 2em 0; }
.doc .w { padding: 0.1em 0.15em; border-radius: 0.2em; }
.doc .dyn { color: #c0121b; font-weight: bold; margin: 0 0.35em; }
.doc .sta { color: #888; margin: 0 0.35em; }
.doc .both { color: #8a3b3f; font-weight: bold; margin: 0 0.35em; }
.caption { color: #333; font-size: 0.9em; margin-top: 1.5em; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em 0; }
td, th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.bar { background: #c0121b; height: 0.8em; display: inline-block; }
.legend { font-size: 0.9em; color: #333; }
"""


def _flags(values, n: int, name: str) -> np.ndarray:
  a = np.asarray(values, dtype=np.float64).reshape(-1)
  if a.shape[0] < n:
    raise ValueError(f'document_html: {name} has {a.shape[0]} entries for {n} words')
  a = a[:n]
  if not np.all(np.isfinite(a)):
    raise ValueError(f'document_html: {name} has non-finite values')
  return a


def document_html(words: Sequence[str], dynamic: Sequence[float], static: Optional[Sequence[float]] = None,
                  *, probabilities: Optional[Sequence[float]] = None,
                  attention: Optional[Sequence[float]] = None, caption: Optional[str] = None) -> str:
  """One document with its boundaries marked like Luo & Zhu's Figure 5.

  Args:
    words: the n words (strings).
    dynamic: [>= n] z_t, 1 where the dynamic detector fired after word t (values > 0.5 count).
    static: optional [>= n] p_t (punctuation / sentence ends).
    probabilities: optional [>= n] z~_t in [0, 1] (tooltips).
    attention: optional [>= n] word attention weights in [0, 1] (background shade, scaled to the
      document's largest weight).
    caption: a line above the document.

  Returns:
    An HTML fragment (`<div>`); raises ValueError for no words, too short or non-finite arrays.
  """
  n = len(words)
  if n == 0:
    raise ValueError('document_html: no words')
  z = _flags(dynamic, n, 'dynamic') > 0.5
  p = _flags(static, n, 'static') > 0.5 if static is not None else np.zeros(n, bool)
  prob = _flags(probabilities, n, 'probabilities') if probabilities is not None else None
  att = _flags(attention, n, 'attention') if attention is not None else None
  top = float(att.max()) if att is not None and att.max() > 0 else 1.0
  parts = []
  for t, word in enumerate(words):
    tip = [f'z={int(z[t])}', f'p={int(p[t])}']
    if prob is not None:
      tip.insert(0, f'z~={prob[t]:.3f}')
    style = ''
    if att is not None:
      tip.append(f'attention={att[t]:.3f}')
      style = f' style="background: rgba(30, 100, 200, {0.6 * att[t] / top:.3f})"'
    parts.append(f'<span class="w" title="{html.escape(" ".join(tip))}"{style}>{html.escape(str(word))}'
                 '</span>')
    if z[t] and p[t]:
      parts.append(f'<span class="both">{DYNAMIC_MARK}</span>')
    elif z[t]:
      parts.append(f'<span class="dyn">{DYNAMIC_MARK}</span>')
    elif p[t]:
      parts.append(f'<span class="sta">{STATIC_MARK}</span>')
    else:
      parts.append(' ')
  head = f'<div class="caption">{html.escape(caption)}</div>' if caption else ''
  return f'{head}<div class="doc">{"".join(parts)}</div>'


def histogram_html(counts: Mapping[Any, int], *, label: str = 'length', width: int = 300) -> str:
  """A bar table of {bin: count} (bins in the given order; bars scaled to the largest count)."""
  if not counts:
    return '<p>(none)</p>'
  total = sum(counts.values())
  top = max(counts.values()) or 1
  rows = [f'<tr><th>{html.escape(str(label))}</th><th>count</th><th>%</th><th></th></tr>']
  for key, count in counts.items():
    bar = f'<span class="bar" style="width: {width * count / top:.1f}px"></span>'
    rows.append(f'<tr><td>{html.escape(str(key))}</td><td>{count}</td>'
                f'<td>{100.0 * count / max(total, 1):.1f}</td><td style="text-align: left">{bar}</td></tr>')
  return '<table>' + ''.join(rows) + '</table>'


def table_html(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
  """A plain table; floats written with one decimal."""
  head = '<tr>' + ''.join(f'<th>{html.escape(str(c))}</th>' for c in columns) + '</tr>'
  body = []
  for row in rows:
    cells = [f'{v:.1f}' if isinstance(v, float) else str(v) for v in row]
    body.append('<tr>' + ''.join(f'<td>{html.escape(c)}</td>' for c in cells) + '</tr>')
  return '<table>' + head + ''.join(body) + '</table>'


def boundary_page(title: str, documents: Sequence[str], sections: Sequence[tuple[str, str]] = (),
                  *, stats: Optional[Mapping[str, Any]] = None) -> str:
  """A standalone HTML page: title, key facts, (heading, HTML) sections, then the documents."""
  out = ['<!DOCTYPE html>', '<html><head><meta charset="utf-8">',
         f'<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>',
         f'<h1>{html.escape(title)}</h1>']
  if stats:
    out.append('<ul>' + ''.join(f'<li>{html.escape(str(k))}: {html.escape(str(v))}</li>'
                                for k, v in stats.items()) + '</ul>')
  out.append(f'<p class="legend"><span class="dyn">{DYNAMIC_MARK}</span> dynamic boundary z<sub>t</sub> = 1 '
             f'(Luo &amp; Zhu, Figure 5); <span class="sta">{STATIC_MARK}</span> static boundary '
             f'p<sub>t</sub> = 1 (punctuation, sentence end); <span class="both">{DYNAMIC_MARK}</span> both. '
             'Shade: word attention; hover a word for z~, z, p.</p>')
  for heading, body in sections:
    out.append(f'<h2>{html.escape(heading)}</h2>{body}')
  if documents:
    out.append('<h2>Documents</h2>')
    out.extend(documents)
  out.append('</body></html>')
  return '\n'.join(out)
