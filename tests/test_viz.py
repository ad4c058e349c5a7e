"""Tests of the SVG/HTML tree pictures (`jax_structured.viz.svg`)."""
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from jax_structured import viz

SVG = '{http://www.w3.org/2000/svg}'


def _arcs(root, panel=None):
  paths = root.iter(f'{SVG}path')
  if panel is not None:
    group = [g for g in root.iter(f'{SVG}g') if g.get('data-panel') == panel][0]
    paths = group.iter(f'{SVG}path')
  return [p for p in paths if 'arc' in p.get('class', '').split()]


def _texts(root, cls):
  return [t.text for t in root.iter(f'{SVG}text') if t.get('class') == cls]


def test_tree_svg_is_well_formed_with_one_path_per_arc():
  words = ['the', 'cat', 'sat', 'on', 'the', 'mat']
  heads = [1, 2, -1, 2, 5, 3]
  root = ET.fromstring(viz.tree_svg(words, heads, title='a tree'))
  arcs = _arcs(root)
  assert len(arcs) == len(words)
  assert sorted((int(a.get('data-head')), int(a.get('data-dep'))) for a in arcs) == sorted(
      (h, m) for m, h in enumerate(heads))
  assert _texts(root, 'word') == words
  assert _texts(root, 'root') == ['ROOT'] and _texts(root, 'title') == ['a tree']
  assert [a for a in arcs if 'root-arc' in a.get('class')][0].get('data-dep') == '2'
  # Arrow heads are defined for every arc style used.
  markers = {m.get('id') for m in root.iter(f'{SVG}marker')}
  assert all(a.get('marker-end')[5:-1] in markers for a in arcs)


def test_special_characters_are_escaped():
  words = ['<b>', 'x&y', '"q"', "it's"]
  svg_text = viz.tree_svg(words, [-1, 0, 0, 2], title='<&>')
  assert '&lt;b&gt;' in svg_text and 'x&amp;y' in svg_text and '<b>' not in svg_text
  root = ET.fromstring(svg_text)
  assert _texts(root, 'word') == words
  assert _texts(root, 'title') == ['<&>']
  page = viz.html_page('t<&>', [('cap & <x>', svg_text)], stats={'a<': 1.5, 'nested': {'b&': [1, 2]}})
  page_root = ET.fromstring(page.split('\n', 1)[1])  # XHTML after the doctype line
  assert page_root.find('.//title').text == 't<&>'
  assert page_root.find('.//figcaption').text == 'cap & <x>'
  cells = [(th.text, td.text) for th, td in zip(page_root.iter('th'), page_root.iter('td'))]
  assert cells == [('a<', '1.5000'), ('nested.b&', '1, 2')]
  assert len(_arcs(page_root)) == 4


def test_weights_set_opacity_and_thickness():
  weights = np.array([1.0, 0.2, 0.6])
  root = ET.fromstring(viz.tree_svg(['a', 'b', 'c'], [-1, 0, 0], weights=weights))
  arcs = sorted(_arcs(root), key=lambda a: int(a.get('data-dep')))
  opacity = [float(a.get('stroke-opacity')) for a in arcs]
  width = [float(a.get('stroke-width')) for a in arcs]
  assert [float(a.get('data-weight')) for a in arcs] == pytest.approx(weights)
  assert opacity[1] < opacity[2] < opacity[0] and width[1] < width[2] < width[0]


def test_comparison_highlights_differing_arcs():
  words = ['w0', 'w1', 'w2', 'w3', 'w4']
  induced = [1, -1, 1, 2, 1]
  reference = [1, -1, 1, 1, 3]
  root = ET.fromstring(viz.comparison_svg(words, induced, reference))
  top, bottom = _arcs(root, 'induced'), _arcs(root, 'reference')
  assert len(top) == len(bottom) == 5
  wrong = sorted(int(a.get('data-dep')) for a in top if 'wrong' in a.get('class'))
  missing = sorted(int(a.get('data-dep')) for a in bottom if 'missing' in a.get('class'))
  assert wrong == missing == [3, 4]
  assert {int(a.get('data-head')) for a in top if a.get('data-dep') == '4'} == {1}
  assert {int(a.get('data-head')) for a in bottom if a.get('data-dep') == '4'} == {3}
  assert '3/5 arcs' in _texts(root, 'title')[0]
  assert _texts(root, 'word') == words * 2


def test_document_tree_numbers_sentences_and_lists_them():
  sentences = ['great food .', 'the staff was <rude> & slow .', 'would go again .']
  root = ET.fromstring(viz.document_tree_svg(sentences, [-1, 0, 0], title='doc'))
  assert _texts(root, 'word') == ['1', '2', '3']
  assert [t.text for t in root.iter(f'{SVG}text') if t.get('class') == 'sentence'] == [
      f'{i + 1}  {s}' for i, s in enumerate(sentences)]
  assert len(_arcs(root)) == 3
  height = float(root.get('height'))
  assert all(float(t.get('y')) <= height for t in root.iter(f'{SVG}text'))
  both = ET.fromstring(viz.document_tree_svg(sentences, [-1, 0, 1], reference_heads=[-1, 0, 0]))
  assert len(_arcs(both)) == 6


def test_bad_trees_are_errors():
  with pytest.raises(ValueError, match='heads has 2 entries'):
    viz.tree_svg(['a', 'b', 'c'], [-1, 0])
  with pytest.raises(ValueError, match=r'heads\[1\] = 1'):
    viz.tree_svg(['a', 'b'], [-1, 1])
  with pytest.raises(ValueError, match='reference_heads'):
    viz.comparison_svg(['a', 'b'], [-1, 0], [-1, 5])
