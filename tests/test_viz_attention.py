"""LSTMN intra-attention pictures (Cheng et al. 2016, Figures 4-5): SVG structure, model plumbing, CLI."""
import importlib.util
import os
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jax_structured import data
from jax_structured import models
from jax_structured import training
from jax_structured.analysis import attention as analysis
from jax_structured.viz import attention as viz

SVG = '{http://www.w3.org/2000/svg}'


def _arcs(svg_text):
  root = ET.fromstring(svg_text)  # raises on malformed XML
  assert root.tag == SVG + 'svg'
  return root, root.findall(f'.//{SVG}path[@class]')


def _random_attention(n, seed=0):
  """Strictly lower-triangular rows that are distributions (row 0 empty), like LSTMN eq. 5."""
  rng = np.random.default_rng(seed)
  a = np.zeros((n, n))
  for t in range(1, n):
    a[t, :t] = rng.dirichlet(np.ones(t) * 0.5)
  return a


def test_svg_draws_one_arc_per_visible_weight():
  words = ['the', '<unk>', 'sits', '&', 'plays', '"x"']
  att = _random_attention(len(words))
  min_weight = 0.1
  root, arcs = _arcs(viz.attention_svg(words, att, min_weight=min_weight, title='a <b> & c'))
  expected = {(t, i) for t in range(6) for i in range(6) if att[t, i] >= min_weight}
  drawn = {(int(p.get('data-from')), int(p.get('data-to'))) for p in arcs}
  assert drawn == expected and len(arcs) == len(expected)
  # Stroke width and opacity grow with the weight; each word's strongest arc is marked 'max'.
  weights = np.array([float(p.get('data-weight')) for p in arcs])
  np.testing.assert_allclose(weights, [att[int(p.get('data-from')), int(p.get('data-to'))] for p in arcs],
                             atol=1e-6)
  widths = np.array([float(p.get('stroke-width')) for p in arcs])
  order = np.argsort(weights)
  assert np.all(np.diff(widths[order]) >= 0)
  for p in arcs:
    t, i = int(p.get('data-from')), int(p.get('data-to'))
    assert ('max' in p.get('class').split()) == (i == int(np.argmax(att[t])))
  texts = [e.text for e in root.iter(SVG + 'text') if e.get('class') == 'word']
  assert texts == words  # escaped and restored by the XML parser
  assert any(e.text == 'a <b> & c' for e in root.iter(SVG + 'text'))


def test_svg_panels_padding_and_errors():
  words = ['a', 'b', 'c']
  padded = np.zeros((5, 5))
  padded[:3, :3] = _random_attention(3)
  padded[4, 0] = 1.0  # beyond the words: ignored
  root, arcs = _arcs(viz.attention_svg(words, [padded, _random_attention(3, 1)], titles=['l0', 'l1'],
                                       min_weight=0.0))
  assert len(root.findall(f'{SVG}g')) == 2
  assert all(int(p.get('data-from')) < 3 and int(p.get('data-to')) < 3 for p in arcs)
  with pytest.raises(ValueError, match='shape'):
    viz.attention_svg(words, np.zeros((2, 2)))
  with pytest.raises(ValueError, match='non-finite'):
    viz.attention_svg(words, np.full((3, 3), np.nan))
  with pytest.raises(ValueError, match=r'outside \[0, 1\]'):
    viz.attention_svg(words, np.full((3, 3), 3.0))
  with pytest.raises(ValueError, match='titles'):
    viz.attention_svg(words, [np.zeros((3, 3))], titles=['a', 'b'])


def test_model_attention_of_a_stacked_language_model():
  model = models.build(ml_collections.ConfigDict(dict(name='lstmn.language_model', embedding_dim=5,
                                                      hidden_size=6, num_layers=2)),
                       vocab_size=10, num_classes=0)
  batch = {'inputs': jnp.array([[1, 2, 3, 4, 5]])}
  variables = model.init(jax.random.PRNGKey(0), batch)
  att = analysis.model_attention(model, variables, batch)
  # One entry per LSTMN layer, keyed by the module path (its prefix is the model family's layout).
  assert len(att) == 2 and [p.split('/')[0] for p in sorted(att)] == ['encoder', 'encoder']
  assert [p.rsplit('/', 1)[-1] for p in sorted(att)] == ['layer_0', 'layer_1']
  for a in att.values():
    assert a.shape == (1, 5, 5)
    np.testing.assert_allclose(a[0, 0], 0.0)  # nothing before the first word
    np.testing.assert_allclose(a[0, 1:].sum(-1), 1.0, rtol=1e-5)  # eq. 5 distributions
    np.testing.assert_allclose(np.triu(a[0]), 0.0)  # only previous words
  # LSTM cells sow nothing.
  lstm = models.build(ml_collections.ConfigDict(dict(name='lstmn.language_model', embedding_dim=5,
                                                     hidden_size=6, cell='lstm')), vocab_size=10,
                      num_classes=0)
  assert analysis.model_attention(lstm, lstm.init(jax.random.PRNGKey(0), batch), batch) == {}


def test_sentences_of_an_lm_stream_split_at_eos():
  vocab = data.Vocabulary(['<pad>', '<unk>', '<eos>', 'a', 'b', 'c'])
  stream = vocab.encode(['a', 'b', '<eos>', 'c', '<eos>', 'a', 'c', 'b', '<eos>'])
  items = analysis.sentences_of_split('lm', [{'tokens': stream}], vocab, 2)
  assert [i['words']['inputs'] for i in items] == [['a', 'b', '<eos>'], ['c', '<eos>']]
  assert items[0]['batch']['inputs'].shape == (1, 3)


def test_render_attention_from_a_trained_workdir(fixtures_dir, tmp_path):
  spec = importlib.util.spec_from_file_location(
      'cheng_sst', pathlib.Path(__file__).resolve().parents[1] / 'configs' / 'cheng' / 'sst.py')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config('tiny,lstmn2')
  config.data.manual_dir = str(fixtures_dir / 'sst')
  config.data.data_dir = str(tmp_path / 'tfds')
  config.data.bucket_boundaries = ()
  config.data.batch_size = 2
  config.parallel = 'none'
  config.train.num_steps = 2
  config.train.eval_batch_size = 2
  workdir = str(tmp_path / 'workdir')
  training.train_and_evaluate(config, workdir)

  result = analysis.render_attention(workdir, 'test', num_sentences=2, min_weight=0.0)
  svgs = [f for f in result['files'] if f.endswith('.svg')]
  assert len(svgs) == 2 * 2  # two sentences x two LSTMN layers
  test_examples = data.load(config.data).splits['test'].examples
  for f in svgs:
    root, arcs = _arcs(pathlib.Path(f).read_text(encoding='utf-8'))
    k = int(pathlib.Path(f).name.split('_')[1])
    n = len(test_examples[k]['tokens'])
    words = [e.text for e in root.iter(SVG + 'text') if e.get('class') == 'word']
    assert len(words) == n
    assert len(arcs) == n * (n - 1) // 2  # every previous word, min_weight 0
  index = pathlib.Path(result['files'][-1]).read_text(encoding='utf-8')
  assert index.count('<svg') == 4 and 'LSTMN intra-attention' in index

  # The command line writes the same pictures.
  # (A subprocess: the launchers define absl flags at import, and another test imports
  # launch.induce_trees, whose flags share these names, into the same pytest worker.)
  out = tmp_path / 'cli'
  repo = pathlib.Path(__file__).resolve().parents[1]
  proc = subprocess.run([sys.executable, '-m', 'launch.show_attention', f'--workdir={workdir}',
                         '--split=test', '--num_sentences=1', f'--output_dir={out}'],
                        cwd=repo, capture_output=True, text=True, timeout=300, check=False,
                        env={**os.environ, 'JAX_ENABLE_X64': str(jax.config.jax_enable_x64).lower()})
  assert proc.returncode == 0, proc.stderr[-3000:]
  names = sorted(p.name for p in out.glob('*.svg'))  # sentence_000_<module path with _>.svg
  assert len(names) == 2 and all(n.startswith('sentence_000_encoder_') for n in names), names
  assert [n.rsplit('_', 2)[-2:] for n in names] == [['layer', '0.svg'], ['layer', '1.svg']]
  assert (out / 'index.html').exists()
