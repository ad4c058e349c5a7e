"""Pictures of induced dependency trees (Liu & Lapata 2018, Figures 5-6) from plain arrays.

`render_pictures(output_dir, items, title=...)` writes one SVG per tree and an HTML index.
Decoding trees from a trained model and their statistics live above training, in
`jax_structured.analysis.induce`; this module imports no other layer.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Optional, Sequence

from jax_structured.viz import svg


# --- pictures ---------------------------------------------------------------------------------------

def render_pictures(output_dir: str, items: Sequence[Mapping[str, Any]], *, title: str,
                    stats: Optional[Mapping[str, Any]] = None) -> list[str]:
  """Writes one SVG per item and `index.html` showing them all with the statistics.

  Args:
    output_dir: directory for `tree_XXX.svg` and `index.html`.
    items: dicts with 'words', 'heads', optional 'weights', 'reference_heads', 'caption', and
      'document' (True: words are sentence texts and the tree is a document-level tree).
    title: page title.
    stats: statistics shown on the page.

  Returns:
    The written file paths (the SVGs, then index.html).
  """
  os.makedirs(output_dir, exist_ok=True)
  paths, figures = [], []
  for i, item in enumerate(items):
    if item.get('document'):
      picture = svg.document_tree_svg(item['words'], item['heads'], weights=item.get('weights'),
                                      reference_heads=item.get('reference_heads'))
    elif item.get('reference_heads') is not None:
      picture = svg.comparison_svg(item['words'], item['heads'], item['reference_heads'],
                                   weights=item.get('weights'), titles=('induced', 'reference'))
    else:
      picture = svg.tree_svg(item['words'], item['heads'], weights=item.get('weights'))
    path = os.path.join(output_dir, f'tree_{i:03d}.svg')
    with open(path, 'w', encoding='utf-8') as f:
      f.write(picture)
    paths.append(path)
    figures.append((item.get('caption', f'tree {i}'), picture))
  index = os.path.join(output_dir, 'index.html')
  with open(index, 'w', encoding='utf-8') as f:
    f.write(svg.html_page(title, figures, stats=stats))
  return paths + [index]
