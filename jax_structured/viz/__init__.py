"""Pictures of trees and attention (SVG / HTML) from plain arrays; imports no other layer.

`svg.tree_svg`, `svg.comparison_svg`, `svg.document_tree_svg`, `svg.html_page` draw dependency trees
like Figures 5-6 of Liu & Lapata (2018); `induce.render_pictures` writes a folder of them with an HTML
index; `attention.attention_svg` draws LSTMN intra-attention (Cheng et al. 2016, Figures 4-5);
`boundaries.document_html` / `boundaries.boundary_page` mark learned phrase boundaries (Luo & Zhu, Fig. 5).
Restoring a trained model and running it lives in `jax_structured.analysis`.
"""
from jax_structured.viz import attention
from jax_structured.viz import boundaries
from jax_structured.viz import induce
from jax_structured.viz import svg
from jax_structured.viz.attention import attention_svg
from jax_structured.viz.induce import render_pictures
from jax_structured.viz.svg import comparison_svg
from jax_structured.viz.svg import document_tree_svg
from jax_structured.viz.svg import html_page
from jax_structured.viz.svg import tree_svg

__all__ = ['attention', 'attention_svg', 'boundaries', 'comparison_svg', 'document_tree_svg', 'html_page',
           'induce', 'render_pictures', 'svg', 'tree_svg']
