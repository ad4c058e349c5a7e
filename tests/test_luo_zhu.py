"""Luo & Zhu family: encoders ('mhs_rnn', 'han', 'hm_rnn') on flat documents, the flattening of
document batches with punctuation flags, bad documents, slope annealing inside a training step, and
the configs. Every encoder is compiled ONCE (module cache) on one batch that holds every case as a row:
the leading batch shape [2, R] carries the same documents twice, row block 1 with garbage in the
padding, so padding exactness, the leading-shape reshape and the bad documents come from one call."""
import functools
import importlib
import pathlib
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from configs import luo_zhu as luo_zhu_configs
from jax_structured import data
from jax_structured import errors
from jax_structured import models
from jax_structured.data import loaders
from jax_structured.models import encoders
from jax_structured.models import heads
from jax_structured.models import luo_zhu
from jax_structured import config as training_config
from jax_structured.training import steps
from jax_structured.training import tasks

ROOT = pathlib.Path(__file__).resolve().parents[1]
ENCODERS = {'mhs_att': ('mhs_rnn', {'attention': True}), 'mhs': ('mhs_rnn', {'attention': False}),
            'hn_att': ('han', {'attention': True}), 'hn_ave': ('han', {'attention': False}),
            'hm_rnn': ('hm_rnn', {})}
T, E = 8, 5
# Rows of the shared batch: (length, static boundary flags).
ROWS = {
    'doc': (6, [0, 1, 0, 0, 1, 0]),
    'short': (3, [1, 0, 0]),
    'empty': (0, []),
    'no_punctuation': (5, [0, 0, 0, 0, 0]),
    'closed_last': (5, [0, 0, 0, 0, 1]),  # the same words as no_punctuation, the last one flagged
    'only_punctuation': (5, [1, 1, 1, 1, 1]),
    'two_sentences': (7, [0, 0, 1, 0, 0, 0, 0]),
}
R = {name: i for i, name in enumerate(ROWS)}


def _inputs():
  """x [2, R, T, E], lengths [2, R], boundaries [2, R, T]; block 1 = block 0 with garbage padding."""
  rng = np.random.default_rng(0)
  x = np.zeros((2, len(ROWS), T, E), np.float32)
  bounds = np.zeros((2, len(ROWS), T), np.float32)
  lengths = np.array([n for n, _ in ROWS.values()])
  words = rng.normal(size=(len(ROWS), T, E))
  words[R['closed_last']] = words[R['no_punctuation']]
  for i, (n, flags) in enumerate(ROWS.values()):
    x[:, i, :n] = words[i, :n]
    bounds[:, i, :n] = flags
    x[1, i, n:], bounds[1, i, n:] = 7.0, 1.0
  return jnp.asarray(x), jnp.asarray(np.stack([lengths, lengths])), jnp.asarray(bounds)


@functools.lru_cache(maxsize=None)
def _run(key):
  """(variables, EncoderOutput, intermediates) of encoder `key` on `_inputs()`, compiled once."""
  name, kw = ENCODERS[key]
  enc = encoders.build({'name': name, 'hidden_size': 3, 'slope_anneal_steps': 10, **kw}
                       if name != 'han' else {'name': name, 'hidden_size': 3, **kw})
  x, lengths, bounds = _inputs()
  structure = {'boundaries': bounds, 'step': jnp.int32(5)}
  variables = jax.jit(lambda k: enc.init(k, x, lengths, structure=structure))(jax.random.PRNGKey(0))
  out, inter = jax.jit(lambda v: enc.apply(v, x, lengths, structure=structure, mutable=['intermediates']))(
      variables)
  return variables, out, jax.tree.map(lambda a: a[0] if isinstance(a, tuple) else a,
                                      inter['intermediates'], is_leaf=lambda a: isinstance(a, tuple))


@pytest.mark.parametrize('key', sorted(ENCODERS))
def test_encoder_padding_is_exact(key):
  _, out, _ = _run(key)
  lengths = _inputs()[1][0]
  states, sentence = np.asarray(out.states), np.asarray(out.sentence)
  np.testing.assert_allclose(states[1], states[0], atol=1e-6)  # garbage in the padding changes nothing
  np.testing.assert_allclose(sentence[1], sentence[0], atol=1e-6)
  real = np.arange(T)[None, None, :] < np.asarray(lengths)[None, :, None]
  assert not states[~np.broadcast_to(real, states.shape[:3])].any()  # zero at padding
  assert np.all(np.isfinite(states)) and np.all(np.isfinite(sentence))
  assert not sentence[:, R['empty']].any()  # an empty document: zeros


def test_mhs_attention_is_eq9_to_11_over_the_cell():
  """The attention variant's word weights from the cell's states by a direct numpy transcription."""
  variables, out, inter = _run('mhs_att')
  row = R['two_sentences']
  hc = np.asarray(out.states[0, row], np.float64)
  p = variables['params']['word_phrase_attention']
  u = np.tanh(hc @ np.asarray(p['projection']['kernel']) + np.asarray(p['projection']['bias']))
  e = u @ np.asarray(p['context'])
  for a, b in ((0, 3), (3, 7)):  # the flag at 2 and the document end close the two sentences
    w = np.exp(e[a:b] - e[a:b].max())
    np.testing.assert_allclose(np.asarray(inter['word_attention'][0, row, a:b]), w / w.sum(), rtol=1e-4)
  assert np.asarray(inter['static_boundaries'][0, row]).tolist() == [0, 0, 1, 0, 0, 0, 1, 0]
  assert set(np.unique(np.asarray(inter['boundaries']))) <= {0.0, 1.0}


@pytest.mark.parametrize('key', ['mhs_att', 'mhs', 'hn_att', 'hm_rnn'])
def test_bad_documents(key):
  """No punctuation at all: one sentence, the same as a flag on the last token; punctuation only: one
  sentence per token; an empty document: zeros (checked in the padding test). Nothing is NaN."""
  _, out, inter = _run(key)
  sentence = np.asarray(out.sentence[0])
  if key != 'hm_rnn':  # HM-RNN reads no static boundary
    np.testing.assert_allclose(sentence[R['no_punctuation']], sentence[R['closed_last']], atol=1e-6)
    closed = np.asarray(inter['static_boundaries'][0])
    assert closed[R['no_punctuation']].tolist() == [0, 0, 0, 0, 1, 0, 0, 0]
    assert closed[R['only_punctuation']].tolist() == [1] * 5 + [0] * 3
    assert not closed[R['empty']].any()
  else:
    np.testing.assert_allclose(sentence[R['no_punctuation']], sentence[R['closed_last']], atol=1e-6)
  if key == 'hn_att':  # one-word sentences: every word's weight within its sentence is 1
    np.testing.assert_allclose(np.asarray(inter['word_attention'][0, R['only_punctuation'], :5]), 1.0,
                               rtol=1e-6)


def test_the_slope_schedule_is_read_from_the_step():
  assert float(luo_zhu.annealed_slope(None, 1.0, 5.0, 100)) == 1.0
  assert float(luo_zhu.annealed_slope(jnp.array(50), 1.0, 5.0, 100)) == 3.0
  assert float(luo_zhu.annealed_slope(jnp.array(500), 1.0, 5.0, 100)) == 5.0
  assert float(luo_zhu.annealed_slope(jnp.array(50), 1.0, 5.0, 0)) == 1.0  # no annealing
  for key in ('mhs', 'hm_rnn'):  # the shared batch passes step 5 of 10: a = 1 + 4 * 5 / 10
    assert float(_run(key)[2]['slope']) == 3.0


class _SlopeTask(tasks.Classification):
  """Classification that also reports the slope the model sowed (outputs = (logits, slope))."""

  def loss_and_metrics(self, outputs, batch):
    logits, slope = outputs
    loss, metrics = super().loss_and_metrics(logits, batch)
    return loss, {**metrics, 'slope': (slope, jnp.ones((), jnp.float32))}


def test_training_steps_anneal_the_slope():
  """`steps.train_step` hands the train step to the model: the slope a used in the step's forward and
  backward pass is 1 + 4 * step / 4 (1 -> 5 over 4 steps), and the detector's update changes with it."""
  model = models.build(ml_collections.ConfigDict({
      'name': 'luo_zhu.document_classifier', 'embedding_dim': 4, 'static_boundaries': 'punctuation',
      'encoder': {'name': 'mhs_rnn', 'hidden_size': 3, 'attention': False, 'slope': 1.0,
                  'slope_end': 5.0, 'slope_anneal_steps': 4}}), vocab_size=9, num_classes=2)
  rng = np.random.default_rng(0)
  batch = {'tokens': jnp.asarray(rng.integers(2, 9, size=(2, 2, 4)), jnp.int32),
           'sentence_lengths': jnp.array([[4, 3], [2, 0]]), 'num_sentences': jnp.array([2, 1]),
           'punctuation': jnp.asarray([[[0, 1, 0, 0], [0, 0, 0, 0]], [[0, 0, 0, 0], [0, 0, 0, 0]]]),
           'label': jnp.array([0, 1])}
  shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), batch))  # no compile
  variables = jax.tree.map(lambda a: jnp.asarray(rng.normal(0, 0.5, a.shape), a.dtype), shapes)

  def apply_fn(v, b, train, rngs, mutable=()):
    logits, state = model.apply(v, b, train=train, rngs=rngs, mutable=['intermediates', *mutable])
    outputs = (logits, state['intermediates']['encoder']['document_slope'][0])
    return outputs, {k: state.get(k, {}) for k in mutable}

  tx = optax.sgd(0.1)
  step = jax.jit(jax.vmap(functools.partial(
      steps.train_step, apply_fn=apply_fn, task=_SlopeTask(), tx=tx,
      embed_mask=jax.tree.map(lambda _: False, variables['params'])), in_axes=(None, 0, None),
      axis_name='data'))
  state = steps.create_state(variables, tx)
  one = jax.tree.map(lambda a: a[None], batch)
  updates = {}
  for at in (0, 2, 4, 9):
    new, metrics, _ = step(state.replace(step=jnp.int32(at)), one, jax.random.PRNGKey(1))
    assert float(metrics['slope'][0][0]) == pytest.approx(min(1 + at, 5.0)), at
    updates[at] = np.asarray(new.params['encoder']['mhs_rnn']['detector_u'][0]) - np.asarray(
        state.params['encoder']['mhs_rnn']['detector_u'])
  assert np.abs(updates[0]).sum() > 0
  assert not np.allclose(updates[0], updates[4])  # the straight-through gradient scales with a
  np.testing.assert_array_equal(updates[4], updates[9])  # past the schedule a stays 5


def test_example_weights_skip_the_scalar_step():
  batch = {'step': jnp.int32(3), 'tokens': jnp.zeros((4, 2), jnp.int32)}
  assert tasks.example_weights(batch).shape == (4,)
  with pytest.raises(ValueError, match='batch axis'):
    tasks.example_weights({'step': jnp.int32(3)})


@jax.jit
def _flatten(tokens, lens, num, punct):
  return heads.flatten_documents(tokens, lens, num, punct)


def test_flatten_documents_matches_python():
  tokens = np.zeros((2, 3, 4), np.int32)
  punct = np.zeros((2, 3, 4), np.int32)
  docs = [[[5, 6, 7], [8], [9, 10, 11, 12]], [[13, 14]]]
  flags = [[[0, 1, 0], [1], [0, 0, 1, 0]], [[0, 1]]]
  for b, doc in enumerate(docs):
    for s, sent in enumerate(doc):
      tokens[b, s, :len(sent)] = sent
      punct[b, s, :len(sent)] = flags[b][s]
  punct[1, 1, :] = 1  # a slot past num_sentences: ignored
  lens = np.array([[3, 1, 4], [2, 9, 0]])  # slot past num_sentences: its length is ignored
  flat, total, bounds, sent, p = _flatten(jnp.asarray(tokens), jnp.asarray(lens), jnp.array([3, 1]),
                                          jnp.asarray(punct))
  assert total.tolist() == [8, 2]
  assert flat.tolist() == [[5, 6, 7, 8, 9, 10, 11, 12] + [0] * 4, [13, 14] + [0] * 10]
  assert bounds.tolist() == [[0, 0, 1, 1, 0, 0, 0, 1] + [0] * 4, [0, 1] + [0] * 10]
  assert sent.tolist()[0][:9] == [0, 0, 0, 1, 2, 2, 2, 2, 3]
  assert p.tolist() == [[0, 1, 0, 1, 0, 0, 1, 0] + [0] * 4, [0, 1] + [0] * 10]
  assert heads.flatten_documents(jnp.asarray(tokens), jnp.asarray(lens), jnp.array([3, 1])).punctuation \
      is None


def test_static_boundaries_on_punctuation_and_missing_inputs_are_clear_errors():
  enc = encoders.build({'name': 'mhs_rnn', 'hidden_size': 3})
  with pytest.raises(KeyError, match='boundaries'):
    jax.eval_shape(lambda: enc.init(jax.random.PRNGKey(0), jnp.zeros((1, 3, 5)), jnp.array([3])))
  with pytest.raises(ValueError, match='shape'):
    jax.eval_shape(lambda: enc.init(jax.random.PRNGKey(0), jnp.zeros((1, 3, 5)), jnp.array([3]),
                                    structure={'boundaries': jnp.zeros((1, 4))}))
  model = models.build(ml_collections.ConfigDict({
      'name': 'luo_zhu.document_classifier', 'embedding_dim': 4, 'static_boundaries': 'punctuation',
      'encoder': {'name': 'mhs_rnn', 'hidden_size': 3, 'attention': False}}), vocab_size=9, num_classes=2)
  batch = {'tokens': jnp.ones((1, 2, 3), jnp.int32), 'sentence_lengths': jnp.array([[3, 2]]),
           'num_sentences': jnp.array([2])}
  with pytest.raises(KeyError, match="config.data.punctuation='p'"):
    jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), batch))
  with pytest.raises(ValueError, match=r"batch\['punctuation'\] has shape"):
    jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), {**batch, 'punctuation': jnp.ones((1, 6))}))
  bad = model.clone(static_boundaries='commas')
  with pytest.raises(ValueError, match='static_boundaries'):
    jax.eval_shape(lambda: bad.init(jax.random.PRNGKey(0), batch))
  # p_t = sentence end OR punctuation ('punctuation'); sentence ends only ('sentences')
  batch['punctuation'] = jnp.asarray([[[1, 0, 1], [0, 1, 1]]])
  shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), batch))
  variables = jax.tree.map(lambda s: jnp.full(s.shape, 0.1, s.dtype), shapes)
  for kind, expect in (('punctuation', [1, 0, 1, 0, 1, 0]), ('sentences', [0, 0, 1, 0, 1, 0])):
    m = model.clone(static_boundaries=kind)
    inter = jax.jit(lambda v, m=m: m.apply(v, batch, mutable=['intermediates'])[1])(variables)
    inter = inter['intermediates']
    assert np.asarray(inter['encoder']['document_static_boundaries'][0]).tolist() == [expect]
    assert np.asarray(inter['document_sentence_ends'][0]).tolist() == [[0, 0, 1, 0, 1, 0]]


# --- data: punctuation flags and the 'p' mapping ------------------------------------------------------


def test_loader_marks_punctuation_and_maps_it_to_p(tmp_path):
  manual = tmp_path / 'reviews'
  manual.mkdir()
  (manual / 'train.tsv').write_text('pos\tGood food, nice staff (mostly). Great!\n'
                                    'neg\tBad food; slow staff, p words\n')
  (manual / 'test.tsv').write_text('pos\tGood, good staff.\n')
  config = loaders.default_config('text_classification')
  config.update({'manual_dir': str(manual), 'data_dir': str(tmp_path / 'tfds'), 'split_sentences': True,
                 'min_count': 1, 'validation_fraction': 0.0})
  for option in ('keep', 'p'):
    config.punctuation = option
    task = data.load(config)
    example = task.splits['train'].examples[0]
    words = [task.vocab.decode(s) for s in example['sentences']]
    flags = [list(f) for f in example['punctuation']]
    if option == 'keep':
      assert words == [['good', 'food', ',', 'nice', 'staff', '(', 'mostly', ')', '.'], ['great', '!']]
    else:
      assert words == [['good', 'food', 'p', 'nice', 'staff', 'p', 'mostly', 'p', 'p'], ['great', 'p']]
      assert ',' not in task.vocab and task.vocab.decode([task.vocab.id('p')]) == ['p']
    assert flags == [[0, 0, 1, 0, 0, 1, 0, 1, 1], [0, 1]]
    second = task.splits['train'].examples[1]  # the real word 'p' keeps flag 0
    assert [list(f) for f in second['punctuation']] == [[0, 0, 1, 0, 0, 1, 0, 0]]
    for batch in task.splits['train'].batches(2, shuffle=False):
      assert batch['punctuation'].shape == batch['tokens'].shape
      assert not batch['punctuation'][batch['tokens'] == 0].any()  # zero at padding
      for row, index in enumerate(batch['example_index']):
        if index == 0:
          assert batch['punctuation'][row, :2, :9].tolist() == [[0, 0, 1, 0, 0, 1, 0, 1, 1],
                                                                [0, 1] + [0] * 7]
  config.punctuation = 'commas'
  with pytest.raises(ValueError, match='config.data.punctuation'):
    loaders.load_text_classification(config)
  config.punctuation, config.split_sentences = 'p', False
  with pytest.raises(ValueError, match='split_sentences'):
    loaders.load_text_classification(config)


def test_bad_documents_through_the_loader(tmp_path):
  """The issue's bad inputs at the data level with the paper's 'p' mapping: a document without any
  punctuation (no static boundary but its end), one of punctuation only (a boundary at every token, all
  'p'), and an empty one (an error naming file:line, never a zero-length row)."""
  manual = tmp_path / 'reviews'
  manual.mkdir()
  (manual / 'test.tsv').write_text('pos\tok.\n')
  config = loaders.default_config('text_classification')
  config.update({'manual_dir': str(manual), 'data_dir': str(tmp_path / 'tfds'), 'split_sentences': True,
                 'min_count': 1, 'validation_fraction': 0.0, 'punctuation': 'p'})
  (manual / 'train.tsv').write_text('pos\tgood food nice staff\nneg\t?! ... ;\nneg\t\u3000\n')
  with pytest.raises(errors.UserError, match=r'train\.tsv:3: empty text'):
    data.load(config)
  (manual / 'train.tsv').write_text('pos\tgood food nice staff\nneg\t?! ... ;\n')
  config.data_dir = str(tmp_path / 'tfds2')
  task = data.load(config)
  examples = task.splits['train'].examples
  words = [[w for s in e['sentences'] for w in task.vocab.decode(s)] for e in examples]
  flags = [[int(f) for s in e['punctuation'] for f in s] for e in examples]
  assert words == [['good', 'food', 'nice', 'staff'], ['p', 'p', 'p', 'p']]
  assert flags == [[0, 0, 0, 0], [1, 1, 1, 1]]


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
    assert config.data.punctuation == 'p'
    training_config.resolve(config)
    for overrides in (config.variants.to_dict() or {'': {}}).values():
      child = training_config.with_overrides(config, training_config.flatten(overrides))
      model = models.build(child.model, vocab_size=11, num_classes=3)
      expect = 'punctuation' if child.model.encoder.name == 'mhs_rnn' else 'sentences'
      assert model.static_boundaries == expect
  assert sorted(_config_module(name).get_config('').variants) == sorted(luo_zhu_configs.VARIANTS)
  with pytest.raises(ValueError, match='unknown'):
    _config_module(name).get_config('nope')
