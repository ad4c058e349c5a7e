"""LSTMN end to end (Cheng et al. 2016): configs/cheng, LM context windows, training through the platform.

Training runs use small heads of the real datasets in ../shared/data (copied into tmp_path in their
upstream formats) so that each run takes seconds on 2 CPU cores.
"""
import gzip
import importlib.util
import itertools
import math
import pathlib

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from configs import common
from jax_structured import data
from jax_structured import models
from jax_structured import training
from jax_structured.data import batching
from jax_structured.data import loaders
from jax_structured import config as training_config

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / 'configs' / 'cheng'


def _config_module(name):
  spec = importlib.util.spec_from_file_location(f'cheng_{name}', CONFIGS / f'{name}.py')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


# --- configs -----------------------------------------------------------------------------------------

OPTIONS = {
    'ptb_lm': ['', 'lstm1', 'lstmn1', 'slstm3', 'lstmn3', 'tiny', 'tiny,lstmn3'],
    'sst': ['', 'binary', 'lstmn2', 'lstm1,binary', 'glove=/x/glove.txt', 'tiny', 'tiny,binary,lstmn2'],
    'snli': ['', 'deep', 'shallow,h300', 'none,h450', 'tiny', 'tiny,deep'],
}


@pytest.mark.parametrize('name,options', [(n, o) for n, opts in OPTIONS.items() for o in opts])
def test_config_keys_are_valid(name, options, monkeypatch, tmp_path):
  """Every section is accepted by its consumer: loader schema, model fields, optimizer/train keys."""
  monkeypatch.setenv('JAX_STRUCTURED_CACHE', str(tmp_path))
  config = _config_module(name).get_config(options)
  loaders.validate_config(config.data, config.data.name)
  training_config.resolve(config)
  variants = config.variants.to_dict() or {'': {}}
  for overrides in variants.values():
    child = training_config.with_overrides(config, training_config.flatten(overrides))
    model = models.build(child.model, vocab_size=11, num_classes=3)
    assert model.encoder.hidden_size == config.model.hidden_size
  if name == 'ptb_lm' and options == '':
    assert sorted(variants) == ['lstm1', 'lstmn1', 'lstmn3', 'slstm3']
  if ',' not in options and options in ('lstmn3', 'slstm3'):
    assert config.model.num_layers == 3 and not config.variants


def test_config_paper_hyperparameters(monkeypatch, tmp_path):
  monkeypatch.setenv('JAX_STRUCTURED_CACHE', str(tmp_path))
  ptb = _config_module('ptb_lm').get_config('')
  assert (ptb.optimizer.name, ptb.optimizer.learning_rate, ptb.optimizer.plateau_factor,
          ptb.optimizer.clip_norm, ptb.data.batch_size, ptb.model.embedding_dim,
          ptb.model.hidden_size) == ('sgd', 0.65, 0.85, 5.0, 40, 150, 300)
  sst = _config_module('sst').get_config('glove=/x/g.txt')
  assert (sst.optimizer.name, sst.optimizer.learning_rate, sst.optimizer.weight_decay,
          sst.optimizer.embedding_grad_scale, sst.data.batch_size, sst.model.hidden_size,
          sst.model.dropout_rate, sst.data.embeddings) == ('adam', 2e-3, 1e-4, 0.35, 5, 168, 0.5, '/x/g.txt')
  assert _config_module('sst').get_config('').optimizer.embedding_grad_scale == 1.0
  assert _config_module('sst').get_config('binary').data.config == 'binary'
  snli = _config_module('snli').get_config('h450')
  assert snli.model.hidden_size == 450 and sorted(snli.variants.to_dict()) == ['deep', 'none', 'shallow']


@pytest.mark.parametrize('name,options', [('ptb_lm', 'lstmn1,lstm1'), ('ptb_lm', 'huge'),
                                          ('sst', 'five'), ('sst', 'glove='), ('snli', 'h200')])
def test_config_rejects_bad_options(name, options, monkeypatch, tmp_path):
  monkeypatch.setenv('JAX_STRUCTURED_CACHE', str(tmp_path))
  with pytest.raises(ValueError, match=f'configs/cheng/{name}.py'):
    _config_module(name).get_config(options)


def _snli_links(shared, cache):
  return common.dev_as_train_dir(shared, cache, common.SNLI_DEV_AS_TRAIN, 'snli_dev_as_train')


def test_snli_dev_as_train_links(tmp_path):
  shared = tmp_path / 'shared'
  shared.mkdir()
  assert _snli_links(shared, tmp_path / 'cache') is None  # nothing there
  for split in ('dev', 'test'):
    (shared / f'snli_1.0_{split}.jsonl.gz').write_bytes(split.encode())
  folder = pathlib.Path(_snli_links(shared, tmp_path / 'cache'))
  again = _snli_links(shared, tmp_path / 'cache')  # idempotent
  assert str(folder) == again
  assert sorted(p.name for p in folder.iterdir()) == ['snli_1.0_test.jsonl.gz', 'snli_1.0_train.jsonl.gz']
  assert (folder / 'snli_1.0_train.jsonl.gz').read_bytes() == b'dev'
  assert (folder / 'snli_1.0_test.jsonl.gz').read_bytes() == b'test'


# --- context windows of the stateless LM ------------------------------------------------------------

@pytest.mark.parametrize('length,batch_size,steps,context', [(50, 4, 5, 3), (23, 2, 4, 7), (40, 8, 35, 35)])
def test_lm_stream_context_is_the_preceding_stream(length, batch_size, steps, context):
  """context [B, C] of every window == the C stream tokens before the window (0 before the start)."""
  stream = np.arange(1, length + 1, dtype=np.int32)  # token id == 1 + stream position
  plain = list(batching.lm_stream_batches(stream, batch_size, steps))
  with_context = list(batching.lm_stream_batches(stream, batch_size, steps, context=context))
  assert len(plain) == len(with_context)
  for a, b in zip(plain, with_context):
    for key in a:
      np.testing.assert_array_equal(a[key], b[key])
    assert b['context'].shape == (batch_size, context) and b['context'].dtype == np.int32
    for r in range(batch_size):
      if b['mask'][r, 0] == 0:
        continue
      first = int(b['inputs'][r, 0]) - 1  # stream position of the window's first input
      expected = [stream[p] if p >= 0 else 0 for p in range(first - context, first)]
      np.testing.assert_array_equal(b['context'][r], expected)
  # Through make_batches (the route of Split.batches for kind 'lm').
  routed = list(batching.make_batches([{'tokens': stream}], 'lm', batch_size, shuffle=False,
                                      num_steps=steps, context=context))
  np.testing.assert_array_equal(routed[-1]['context'], with_context[-1]['context'])


def test_lm_stream_context_errors():
  with pytest.raises(ValueError, match='context must be >= 0'):
    next(batching.lm_stream_batches(np.arange(20), 2, 3, context=-1))
  with pytest.raises(ValueError, match='num_steps'):
    next(batching.make_batches([{'tokens': [1, 2, 3]}], 'lm', 1, shuffle=False, context=2))


# --- training through train_and_evaluate on heads of the real data ------------------------------------

def _head(src, dst, lines):
  opener = gzip.open if src.suffix == '.gz' else open
  with opener(src, 'rt', encoding='utf-8') as f:
    text = ''.join(itertools.islice(f, lines))
  with opener(dst, 'wt', encoding='utf-8') as f:
    f.write(text)


def _tiny_run(config, tmp_path, *, steps):
  config.data.data_dir = str(tmp_path / 'tfds')
  if config.data.name != 'ptb_lm':
    config.data.bucket_boundaries = ()  # one padded shape per split: few compilations
  config.parallel = 'none'  # data parallelism is tested in test_training.py; here the model path
  config.variants = ml_collections.ConfigDict()
  config.train.num_steps = steps
  config.train.eval_every_steps = steps
  config.train.log_every_steps = steps
  config.train.eval_batch_size = 64
  return training.train_and_evaluate(config, str(tmp_path / 'workdir'))


def test_ptb_lstmn_language_model_trains(shared_data, tmp_path):
  manual = tmp_path / 'ptb'
  manual.mkdir()
  for split, lines in (('train', 1500), ('valid', 60), ('test', 60)):
    _head(shared_data / 'ptb_lm' / f'ptb.{split}.txt', manual / f'ptb.{split}.txt', lines)
  config = _config_module('ptb_lm').get_config('tiny,lstmn1')
  config.data.manual_dir = str(manual)
  results = _tiny_run(config, tmp_path, steps=30)
  vocab_size = len(data.Vocabulary.load(str(tmp_path / 'workdir' / 'vocab.json')))
  assert vocab_size > 1000
  for split in ('validation', 'test'):
    ppl = results[split]['perplexity']
    assert math.isfinite(ppl) and ppl == pytest.approx(math.exp(results[split]['nll']))
    assert ppl < 0.5 * vocab_size, (split, ppl, vocab_size)  # far below the uniform distribution
  assert results['steps'] == 30


def test_sst_lstmn_classifier_trains(shared_data, tmp_path):
  manual = tmp_path / 'sst'
  manual.mkdir()
  _head(shared_data / 'sst' / 'train.txt', manual / 'train.txt', 120)
  _head(shared_data / 'sst' / 'train.txt', manual / 'dev.txt', 120)  # dev = train: fitting must show
  _head(shared_data / 'sst' / 'test.txt', manual / 'test.txt', 40)
  config = _config_module('sst').get_config('tiny,lstmn2')
  config.data.manual_dir = str(manual)
  config.optimizer.learning_rate = 1e-2
  config.model.dropout_rate = 0.0
  results = _tiny_run(config, tmp_path, steps=60)
  dev, test = results['validation'], results['test']
  assert all(math.isfinite(v) for v in (*dev.values(), *test.values()))
  assert 0.0 <= test['accuracy'] <= 1.0
  assert dev['loss'] < math.log(5) - 0.1, dev  # fitted the training sentences beyond the label prior


@pytest.mark.slow  # deep fusion's pair model trains in test_lstmn_models; this is its dev-set run
def test_snli_deep_fusion_trains_on_dev(shared_data, tmp_path, monkeypatch):
  shared = tmp_path / 'snli_shared'
  shared.mkdir()
  for split in ('dev', 'test'):
    _head(shared_data / 'snli_1.0' / f'snli_1.0_{split}.jsonl.gz', shared / f'snli_1.0_{split}.jsonl.gz', 200)
  snli = _config_module('snli')
  config = snli.get_config('tiny,deep')
  config.data.manual_dir = _snli_links(shared, tmp_path / 'cache')
  results = _tiny_run(config, tmp_path, steps=10)
  task = data.load(config.data)
  assert len(task.splits['train']) + len(task.splits['validation']) <= 200  # SNLI dev only, 10% held out
  assert all(math.isfinite(v) for v in (*results['validation'].values(), *results['test'].values()))


# --- the lstmn benchmark -------------------------------------------------------------------------------

def test_benchmark_sizes_and_one_cell():
  from launch.benchmarks import lstmn as bench  # pylint: disable=g-import-not-at-top
  assert bench.parse_sizes('40x35, 8x35x64') == [(40, 35, 300), (8, 35, 64)]
  with pytest.raises(ValueError, match="'8x'"):
    bench.parse_sizes('40x35,8x')
  seconds, rate = bench.measure('lstmn', 1, 2, 3, 4, repeats=1)
  assert seconds > 0 and rate == pytest.approx(6 / seconds)
  row = {'size': '2x3 h4', **{n: 10.0 for n, _, _ in bench.MODELS},
         **{n + ' ms': 1.0 for n, _, _ in bench.MODELS}, 'slowdown 1': 1.0, 'slowdown 3': 2.0}
  table = bench.format_table([row])
  assert table.count('\n') == 2 and '2.00x' in table


# --- the lean reverse pass of lstmn_scan (what makes LSTMN training affordable) -----------------------

@pytest.mark.parametrize('span,deep', [(None, False), (2, False), (None, True)])
def test_lstmn_scan_lean_gradient_equals_plain_autodiff(span, deep):
  """The custom VJP over the final tapes == autodiff of the scan, for every input and parameter,
  with cotangents on hidden, memory and both attentions (float64, jit, padded batch)."""
  from jax_structured.nn import lstmn as lstmn_lib  # pylint: disable=g-import-not-at-top
  d, h, a, t, m = 3, 4, 5, 6, 4
  keys = iter(jax.random.split(jax.random.PRNGKey(0), 24))
  normal = lambda *shape: jax.random.normal(next(keys), shape, jnp.float64) * 0.5  # noqa: E731
  params = lstmn_lib.LSTMNParams(normal(h, a), normal(d, a), normal(h, a), normal(a), normal(h, 4 * h),
                                 normal(d, 4 * h), normal(4 * h))
  fusion = lstmn_lib.FusionParams(normal(h, a), normal(d, a), normal(h, a), normal(a), normal(h, h),
                                  normal(d, h), normal(h)) if deep else None
  x, src_h, src_c = normal(2, t, d), normal(2, m, h), normal(2, m, h)
  lengths, src_len = jnp.array([6, 4]), jnp.array([4, 2])
  weights = [normal(2, t, h), normal(2, t, h), normal(2, t, t), normal(2, t, m)]

  def loss(params, fusion, x, src_h, src_c, lean):
    out = lstmn_lib.lstmn_scan(params, x, lengths, memory_span=span, fusion=fusion, lean_gradient=lean,
                               source=(src_h, src_c, src_len) if deep else None)
    return sum(jnp.sum(w * o) for w, o in zip(weights, out) if o is not None)

  args = (params, fusion, x, src_h, src_c)
  lean = jax.jit(jax.value_and_grad(lambda *a: loss(*a, True), argnums=(0, 1, 2, 3, 4)))(*args)
  plain = jax.jit(jax.value_and_grad(lambda *a: loss(*a, False), argnums=(0, 1, 2, 3, 4)))(*args)
  np.testing.assert_allclose(lean[0], plain[0], rtol=1e-12)
  for g_lean, g_plain in zip(jax.tree_util.tree_leaves(lean[1]), jax.tree_util.tree_leaves(plain[1])):
    np.testing.assert_allclose(g_lean, g_plain, rtol=1e-9, atol=1e-11)
  grads = jax.tree_util.tree_leaves(lean[1])
  assert len(grads) == (7 + 7 + 3 if deep else 7 + 3) and all(np.all(np.isfinite(g)) for g in grads)
  if not deep:
    # vmap over a batch of parameter sets agrees with the loop.
    stacked = jax.tree.map(lambda p: jnp.stack([p, 2 * p]), params)
    g = jax.vmap(jax.grad(lambda p: loss(p, None, x, src_h, src_c, True)))(stacked)
    np.testing.assert_allclose(g.w_h[0], lean[1][0].w_h, rtol=1e-9)
