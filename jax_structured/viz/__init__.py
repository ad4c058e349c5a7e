"""Pictures of trees (SVG / HTML) and trees induced by trained models (Liu & Lapata 2018, sec. 4.3).

`svg.tree_svg`, `svg.comparison_svg`, `svg.document_tree_svg`, `svg.html_page` draw dependency trees
like Figures 5-6; `induce.induce_trees(workdir, split)` decodes, writes (CoNLL-U), measures (Tables 5-6)
and draws the trees of a trained structured-attention model.
"""
from jax_structured.viz import induce
from jax_structured.viz import svg
from jax_structured.viz.induce import induce_trees
from jax_structured.viz.induce import tree_statistics
from jax_structured.viz.svg import comparison_svg
from jax_structured.viz.svg import document_tree_svg
from jax_structured.viz.svg import html_page
from jax_structured.viz.svg import tree_svg

__all__ = ['induce', 'svg', 'induce_trees', 'tree_statistics', 'comparison_svg',
           'document_tree_svg', 'html_page', 'tree_svg']
