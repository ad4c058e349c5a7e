"""Luo & Zhu family: encoders ('mhs_rnn', 'han', 'hm_rnn') on flat documents, the flattening of
document batches, bad documents, and the configs' tiny options training in-process."""
import importlib
import pathlib
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jax_structured import models
from jax_structured import training
from jax_structured.data import loaders
from jax_structured.models import encoders
from jax_structured.models import luo_zhu
from jax_structured.training import config as training_config

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENCODERS = [('mhs_rnn', {'attention': True}), ('mhs_rnn', {'attention': False}),
            ('han', {'attention': True}), ('han', {'attention': False}), ('hm_rnn', {})]


def _encoder(name, kw):
  return encoders.build({'name': name, 'hidden_size': 4, **kw})


def _apply(enc, x, lengths, bounds):
  """(variables, jitted fn(variables, x, lengths, bounds) -> EncoderOutput with .inter: intermediates)."""
  variables = enc.init(jax.random.PRNGKey(0), x, lengths, structure={'boundaries': bounds})

  @jax.jit
  def fn(v, x, l, b):
    out, inter = enc.apply(v, x, l, structure={'boundaries': b}, mutable=['intermediates'])
    return out, inter['intermediates']

  return variables, fn


@pytest.mark.parametrize('name,kw', ENCODERS)
def test_encoder_padding_is_exact(name, kw):
  rng = np.random.default_rng(0)
  x = jnp.asarray(rng.normal(size=(3, 6, 5)), jnp.float32)
  lengths = jnp.array([6, 3, 0])
  bounds = jnp.asarray([[0, 1, 0, 0, 1, 0], [1, 0, 0, 0, 0, 0], [0] * 6], jnp.float32)
  enc = _encoder(name, kw)
  variables, fn = _apply(enc, x, lengths, bounds)
  out, _ = fn(variables, x, lengths, bounds)
  padded, _ = fn(variables, jnp.pad(x, ((0, 0), (0, 4), (0, 0)), constant_values=7.0), lengths,
                 jnp.pad(bounds, ((0, 0), (0, 4)), constant_values=1.0))
  np.testing.assert_allclose(padded.states[:, :6], out.states, atol=1e-5)
  assert not np.asarray(padded.states[:, 6:]).any() and not np.asarray(out.states[1, 3:]).any()
  np.testing.assert_allclose(padded.sentence, out.sentence, atol=1e-5)
  assert np.all(np.isfinite(out.sentence)) and not np.asarray(out.sentence[2]).any()  # empty document
  if name == 'mhs_rnn' and kw['attention']:  # leading batch shapes [2, B, ...]
    stacked, _ = fn(variables, jnp.stack([x, x]), jnp.stack([lengths, lengths]), jnp.stack([bounds, bounds]))
    np.testing.assert_allclose(stacked.sentence[1], out.sentence, atol=1e-5)


def test_mhs_attention_is_eq9_to_11_over_the_cell():
  """The attention variant's document vector from the cell's states by a direct numpy transcription."""
  rng = np.random.default_rng(1)
  x = jnp.asarray(rng.normal(size=(1, 7, 5)), jnp.float32)
  lengths, bounds = jnp.array([7]), jnp.asarray([[0, 0, 1, 0, 0, 0, 0]], jnp.float32)
  enc = _encoder('mhs_rnn', {'attention': True})
  variables, fn = _apply(enc, x, lengths, bounds)
  out, inter = fn(variables, x, lengths, bounds)
  inter = {'intermediates': inter}
  hc = np.asarray(out.states[0], np.float64)
  p = variables['params']['word_phrase_attention']
  u = np.tanh(hc @ np.asarray(p['projection']['kernel']) + np.asarray(p['projection']['bias']))
  e = u @ np.asarray(p['context'])
  sentences = []
  for a, b in ((0, 3), (3, 7)):  # the flag at 2 and the document end close the two sentences
    w = np.exp(e[a:b] - e[a:b].max())
    w /= w.sum()
    np.testing.assert_allclose(np.asarray(inter['intermediates']['word_attention'][0][0, a:b]), w, rtol=1e-4)
    sentences.append(w @ hc[a:b])
  assert np.asarray(inter['intermediates']['static_boundaries'][0]).tolist() == [[0, 0, 1, 0, 0, 0, 1]]
  z = np.asarray(inter['intermediates']['boundaries'][0])
  assert set(np.unique(z)) <= {0.0, 1.0}


def test_flatten_documents_matches_python():
  tokens = np.zeros((2, 3, 4), np.int32)
  docs = [[[5, 6, 7], [8], [9, 10, 11, 12]], [[13, 14]]]
  for b, doc in enumerate(docs):
    for s, sent in enumerate(doc):
      tokens[b, s, :len(sent)] = sent
  lens = np.array([[3, 1, 4], [2, 9, 0]])  # slot past num_sentences: its length is ignored
  flat, total, bounds, sent = luo_zhu.flatten_documents(jnp.asarray(tokens), jnp.asarray(lens),
                                                        jnp.array([3, 1]))
  assert total.tolist() == [8, 2]
  assert flat.tolist() == [[5, 6, 7, 8, 9, 10, 11, 12] + [0] * 4, [13, 14] + [0] * 10]
  assert bounds.tolist() == [[0, 0, 1, 1, 0, 0, 0, 1] + [0] * 4, [0, 1] + [0] * 10]
  assert sent.tolist()[0][:9] == [0, 0, 0, 1, 2, 2, 2, 2, 3]


@pytest.mark.parametrize('case', ['no_punctuation', 'only_punctuation', 'empty'])
def test_bad_documents(case):
  """No boundary at all: one sentence; a boundary at every token: one-word sentences; an empty
  document: zeros. Each equals its reference computed another way, and nothing is NaN."""
  rng = np.random.default_rng(2)
  x = jnp.asarray(rng.normal(size=(1, 5, 5)), jnp.float32)
  n = {'empty': 0}.get(case, 5)
  flags = {'no_punctuation': [0] * 5, 'only_punctuation': [1] * 5, 'empty': [0] * 5}[case]
  lengths, bounds = jnp.array([n]), jnp.asarray([flags], jnp.float32)
  for name, kw in ENCODERS[::2]:  # mhs_rnn with attention, han with attention, hm_rnn
    enc = _encoder(name, kw)
    variables, fn = _apply(enc, x, lengths, bounds)
    out, inter = fn(variables, x, lengths, bounds)
    assert np.all(np.isfinite(out.states)) and np.all(np.isfinite(out.sentence))
    if case == 'empty':
      assert not np.asarray(out.states).any() and not np.asarray(out.sentence).any()
    elif case == 'no_punctuation' and name != 'hm_rnn':
      # the document end closes the only sentence: the same as a flag on the last token
      closed, _ = fn(variables, x, lengths, jnp.asarray([[0, 0, 0, 0, 1]], jnp.float32))
      np.testing.assert_allclose(out.sentence, closed.sentence, atol=1e-6)
    if name != 'hm_rnn':
      closed = np.asarray(inter['static_boundaries'][0])
      expect = {'no_punctuation': [0, 0, 0, 0, 1], 'only_punctuation': [1] * 5, 'empty': [0] * 5}[case]
      assert closed.tolist() == [expect]
  if case == 'only_punctuation':  # HN-AVE: every sentence is one word, its mean is the word state
    enc = _encoder('han', {'attention': False})
    variables, fn = _apply(enc, x, lengths, bounds)
    np.testing.assert_allclose(fn(variables, x, lengths, bounds)[1]['word_attention'][0], np.ones((1, 5)))


def test_missing_boundaries_is_a_clear_error():
  enc = _encoder('mhs_rnn', {})
  with pytest.raises(KeyError, match='boundaries'):
    enc.init(jax.random.PRNGKey(0), jnp.zeros((1, 3, 5)), jnp.array([3]))
  with pytest.raises(ValueError, match='shape'):
    enc.init(jax.random.PRNGKey(0), jnp.zeros((1, 3, 5)), jnp.array([3]),
             structure={'boundaries': jnp.zeros((1, 4))})


def test_slope_schedule():
  assert float(luo_zhu.annealed_slope(None, 1.0, 5.0, 100)) == 1.0
  assert float(luo_zhu.annealed_slope(jnp.array(50), 1.0, 5.0, 100)) == 3.0
  assert float(luo_zhu.annealed_slope(jnp.array(500), 1.0, 5.0, 100)) == 5.0


# --- configs ------------------------------------------------------------------------------------------

DATASETS = ('yelp13', 'yelp14', 'yelp15', 'yahoo', 'amazon', 'debian')


def _config_module(name):
  sys.path.insert(0, str(ROOT))
  return importlib.import_module(f'configs.luo_zhu.{name}')


@pytest.mark.parametrize('name', DATASETS)
def test_config_keys_are_valid(name):
  for options in ('', 'tiny', 'mhs_rnn', 'tiny,hn_att'):
    config = _config_module(name).get_config(options)
    loaders.validate_config(config.data, config.data.name)
    training_config.optimizer_config(config)
    training_config.train_config(config)
    for overrides in (config.variants.to_dict() or {'': {}}).values():
      child = training_config.with_overrides(config, training_config.flatten(overrides))
      models.build(child.model, vocab_size=11, num_classes=3)
  assert sorted(_config_module(name).get_config('').variants) == sorted(luo_zhu.VARIANTS)
  with pytest.raises(ValueError, match='unknown'):
    _config_module(name).get_config('nope')


def test_debian_tiny_trains(tmp_path):
  """The tiny option of configs/luo_zhu/debian.py on the first 150 / 40 / 40 Debian documents."""
  shared = ROOT.parent / 'shared' / 'data' / 'debian_descriptions'
  if not shared.is_dir():
    shared = pathlib.Path('/work/shared/data/debian_descriptions')
  manual = tmp_path / 'debian'
  manual.mkdir()
  for split, n in (('train', 150), ('dev', 40), ('test', 40)):
    lines = (shared / f'{split}.tsv').read_text().splitlines()[:n]
    (manual / f'{split}.tsv').write_text('\n'.join(lines) + '\n')
  config = _config_module('debian').get_config('tiny,mhs_rnn_attention')
  config.data.manual_dir = str(manual)
  config.data.data_dir = str(tmp_path / 'tfds')
  config.data.min_count = 2
  config.data.bucket_boundaries = ()
  config.parallel = 'none'
  config.train.num_steps = 6
  config.train.eval_every_steps = 6
  config.train.log_every_steps = 6
  config.train.eval_batch_size = 64
  results = training.train_and_evaluate(config, str(tmp_path / 'workdir'))
  assert results['steps'] == 6
  assert 0.0 <= results['test']['accuracy'] <= 1.0 and np.isfinite(results['test']['loss'])
