"""`python -m launch.benchmark liu_lapata`: parsing, random batches, the timed train step against an
independent Adagrad reference, the arithmetic of the table and goals, and a tiny end-to-end run."""
import numpy as np
import pytest

import jax
import jax.numpy as jnp

from jax_structured.models import liu_lapata as liu_lapata_models
from launch import benchmark
from launch.benchmarks import _liu_lapata_inputs as liu_lapata_inputs
from launch.benchmarks import liu_lapata

TINY = {'embedding_dim': 6, 'hidden_size': 6, 'semantic_size': 4, 'mlp_hidden': 5, 'dropout_rate': 0.0}


def test_registered_with_the_dispatcher():
  assert 'liu_lapata' in benchmark.known_benchmarks()
  assert benchmark.load_benchmark('liu_lapata') is liu_lapata


def test_parse_sizes_and_doc_shape():
  assert liu_lapata_inputs.parse_sizes('32x16x8, 2x3x4') == [(32, 16, 8), (2, 3, 4)]
  assert liu_lapata_inputs.parse_doc_shape('9x17') == (9, 17)
  for bad in ('32x16', '32x0x8', 'ax2x3'):
    with pytest.raises(ValueError, match=bad):
      liu_lapata_inputs.parse_sizes(f'2x3x4,{bad}')
  with pytest.raises(ValueError, match='--doc_shape'):
    liu_lapata_inputs.parse_doc_shape('9x17x3')


def test_parse_overrides():
  assert liu_lapata_inputs.parse_overrides('hidden_size=16, dropout_rate=0.5,attention=simple,'
                                    'freeze_embeddings=true') == {
                                        'hidden_size': 16, 'dropout_rate': 0.5, 'attention': 'simple',
                                        'freeze_embeddings': True}
  assert liu_lapata_inputs.parse_overrides('') == {}
  with pytest.raises(ValueError, match='hidden_size16'):
    liu_lapata_inputs.parse_overrides('hidden_size16')


def test_select_variants():
  keys = [v[0] for v in liu_lapata_inputs.select_variants(liu_lapata.DOCUMENT_VARIANTS, 'simple, structured')]
  assert keys == ['simple', 'structured']
  assert len(liu_lapata_inputs.select_variants(liu_lapata.SNLI_VARIANTS, None)) == 4


def test_random_batches_follow_the_batch_contract():
  rng = np.random.default_rng(0)
  pair = liu_lapata_inputs.snli_batch(rng, 5, 16, 8, vocab_size=30)
  liu_lapata_models.validate_batch(pair, 'pair')
  for key, padded in (('premise', 16), ('hypothesis', 8)):
    tokens, lengths = pair[key], pair[f'{key}_lengths']
    assert tokens.shape == (5, padded) and tokens.dtype == np.int32 and lengths.dtype == np.int32
    assert np.all((lengths > padded // 2) & (lengths <= padded))
    real = np.arange(padded) < lengths[:, None]
    assert np.all(tokens[real] >= 1) and np.all(tokens[real] < 30) and np.all(tokens[~real] == 0)
  assert np.all((pair['label'] >= 0) & (pair['label'] < 3))
  doc = liu_lapata_inputs.document_batch(rng, 3, 9, 17, vocab_size=30)
  liu_lapata_models.validate_batch(doc, 'document')
  assert doc['tokens'].shape == (3, 9, 17) and doc['example_mask'].dtype == np.float32
  assert np.all(doc['sentence_lengths'] == 17) and np.all(doc['num_sentences'] == 9)


def test_config_loading_and_variants():
  config, source = liu_lapata_inputs.load_config(('no_such_config',), liu_lapata_inputs.paper_snli_config)
  assert 'paper' in source and config.model.hidden_size == 150 and config.optimizer.name == 'adagrad'
  config, source = liu_lapata_inputs.load_config(('default',), liu_lapata_inputs.paper_snli_config, package='configs')
  assert source == 'configs/default.py' and config.model.name == 'classifier.sentence'
  base = liu_lapata_inputs.paper_document_config()
  variant = liu_lapata_inputs.variant_config(base, {'sentence_attention': 'none'}, {'hidden_size': 8})
  assert variant.model.sentence_attention == 'none' and variant.model.hidden_size == 8
  assert base.model.sentence_attention == 'structured' and base.model.hidden_size == 100
  # The config's own variant keys apply first, then the attention keys, then the overrides.
  none = liu_lapata_inputs.variant_config(base, {'sentence_attention': 'none', 'document_attention': 'none'},
                                   {}, 'none')
  assert none.model.hidden_size == 75 and none.model.document_attention == 'none'
  assert liu_lapata_inputs.variant_config(base, {}, {'hidden_size': 8}, 'none').model.hidden_size == 8
  assert liu_lapata_inputs.variant_config(base, {}, {}, 'not_a_variant').model.hidden_size == 100


def _log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_timed_train_step_is_forward_backward_and_adagrad():
  """One timed train step == forward + backward + Adagrad update (float64 numpy reference)."""
  config = liu_lapata_inputs.variant_config(liu_lapata_inputs.paper_snli_config(), {'attention': 'structured'}, TINY)
  batch = liu_lapata_inputs.snli_batch(np.random.default_rng(1), 4, 5, 3, vocab_size=11)
  bench = liu_lapata.build_bench(config, 'pair', batch, vocab_size=11, num_classes=3)
  params0 = jax.device_get(bench.state.params)

  def mean_nll(p):
    logits = bench.model.apply({'params': p}, batch, train=False)
    logp = jax.nn.log_softmax(logits.astype(jnp.float32))
    return -jnp.mean(jnp.take_along_axis(logp, jnp.asarray(batch['label'])[:, None], -1))

  loss, grads = jax.device_get(jax.jit(jax.value_and_grad(mean_nll))(params0))
  metrics = jax.device_get(bench.train())
  params1 = jax.device_get(bench.state.params)
  np.testing.assert_allclose(metrics['loss'][0] / metrics['loss'][1], loss, rtol=1e-5)
  assert metrics['loss'][1] == 4
  opt = config.optimizer

  def adagrad(p, g):  # Duchi et al. (2011) with TF's initial accumulator, as optax.adagrad
    p, g = np.asarray(p, np.float64), np.asarray(g, np.float64)
    return p - opt.learning_rate * g / np.sqrt(opt.initial_accumulator + g**2 + opt.eps)

  expected = jax.tree.map(adagrad, params0, grads)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-6), params1, expected)
  assert int(bench.state.step) == 1
  assert not np.allclose(params1['embed']['embedding'], params0['embed']['embedding'])


def test_add_ratios():
  rows = [{'key': 'none', 'train s/inst': 0.5, 'infer s/inst': 0.25, 'paper avg s/inst': 0.0033},
          {'key': 'simple', 'train s/inst': 2.0, 'infer s/inst': 1.0, 'paper avg s/inst': 0.0042},
          {'key': 'structured', 'train s/inst': 3.0, 'infer s/inst': 4.0, 'paper avg s/inst': 0.0045}]
  liu_lapata.add_snli_ratios(rows)
  assert [r['train x simple'] for r in rows] == [0.25, 1.0, 1.5]
  assert [r['infer x simple'] for r in rows] == [0.25, 1.0, 4.0]
  assert rows[2]['paper x simple'] == pytest.approx(0.0045 / 0.0042)
  no_simple = [dict(rows[0])]
  liu_lapata.add_snli_ratios(no_simple)
  assert no_simple[0]['train x simple'] == '-'


def test_epoch_minutes_and_goal_lines():
  assert liu_lapata.epoch_minutes(335_000 / 60.0) == pytest.approx(1.0)
  assert liu_lapata.epoch_minutes(100.0, documents=6000) == pytest.approx(1.0)
  snli = [{'size': '32x16x8', 'key': 'simple', 'train s/inst': 1.0, 'infer s/inst': 1.0,
           'train x simple': 1.0, 'infer x simple': 1.0},
          {'size': '32x16x8', 'key': 'structured', 'train s/inst': 1.2, 'infer s/inst': 2.0,
           'train x simple': 1.2, 'infer x simple': 2.0},
          {'size': '32x16x8', 'key': 'inside_outside', 'train s/inst': 0.6, 'infer s/inst': 4.0,
           'train x simple': 0.6, 'infer x simple': 4.0}]
  docs = [{'size': '32x9x17', 'key': 'structured', 'Yelp epoch min': 0.5}]
  lines = liu_lapata.goal_lines(snli, docs, 'NVIDIA H100 80GB HBM3')
  assert len(lines) == 5
  assert '1.20x, met on NVIDIA H100' in lines[0] and '2.00x, missed' in lines[1]
  paper = 0.038 / 0.0045
  assert f'{paper / 10:.2f}x' in lines[2] and '0.50x, met' in lines[2]  # 0.6 / 1.2
  assert '2.00x, missed' in lines[3]  # 4.0 / 2.0
  assert '0.50 min, met' in lines[4]
  cpu = liu_lapata.goal_lines(snli, docs, 'cpu')
  assert all('(the goal is for one H100)' in line for line in cpu)


@pytest.mark.slow  # end to end from the command line: runs after the suite (.ci/run)
def test_tiny_end_to_end_run():
  """run(): the SNLI table (train and eval steps) and the document table at tiny sizes."""
  printed = []
  out = liu_lapata.run(['snli', 'document'], sizes=[(2, 4, 3)], batch_size=2, doc_shape=(2, 3),
                       repeats=1, vocab_size=13, keep='none', overrides=TINY, print_fn=printed.append)
  (snli,), (doc,) = out['snli'], out['document']
  assert snli['key'] == doc['key'] == 'none'
  assert snli['train inst/s'] == pytest.approx(1 / snli['train s/inst'])
  assert snli['infer inst/s'] == pytest.approx(1 / snli['infer s/inst'])
  assert snli['train x simple'] == '-' and snli['paper avg s/inst'] == 0.0033
  assert doc['docs/s'] == pytest.approx(2 / doc['s/step'])
  assert doc['Yelp epoch min'] == pytest.approx(335_000 / doc['docs/s'] / 60)
  text = '\n'.join(printed)
  assert 'no attention' in text and '0.0033' in text and 'device:' in text
  assert out['goals'] == []  # no structured / simple variants measured
  with pytest.raises(ValueError, match='chart'):
    liu_lapata.run(['chart'], sizes=[(2, 4, 3)], batch_size=2, doc_shape=(2, 3), repeats=1,
                   vocab_size=13)


@pytest.mark.slow  # the breakdown's extra rows; the timed step itself is checked quick
def test_breakdown_rows():
  rows = liu_lapata.run_breakdown(2, 4, hidden_size=4, semantic_size=3, input_size=5, repeats=1,
                                  normalizers=('matrix_tree',))
  by_name = {row['component']: row for row in rows}
  assert list(by_name) == ['BiLSTM 5->2x4', 'matrix_tree normaliser', 'matrix_tree layer (eqs. 7-18)',
                           'LU + inverse (matrix-tree core)']
  for normalizer in ('matrix_tree',):
    alone, whole = by_name[f'{normalizer} normaliser'], by_name[f'{normalizer} layer (eqs. 7-18)']
    assert alone['share of layer fwd'] == pytest.approx(alone['fwd ms'] / whole['fwd ms'])
    assert alone['share of layer fwd+bwd'] == pytest.approx(alone['fwd+bwd ms'] / whole['fwd+bwd ms'])
  assert all(row['fwd ms'] > 0 and row['fwd+bwd ms'] > 0 for row in rows)
