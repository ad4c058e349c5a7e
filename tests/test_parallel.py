"""Data parallelism on 8 simulated CPU devices: shard_map and pmap give the one-device parameters."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

import test_training_support as support
from stages import quick_and_slow
from jax_structured import training
from jax_structured import config as config_lib
from jax_structured.training import optimizers
from jax_structured.training import parallel


def _reference(batches, opt_overrides):
  """Plain single-device optax on the global mean loss (no Runner, no shard weighting)."""
  config = support.make_config(**opt_overrides)
  model = support.build_tiny_model(config.model, vocab_size=12, num_classes=2)
  params = jax.jit(lambda b: model.init(jax.random.PRNGKey(0), b))(batches[0])['params']
  tx, _ = optimizers.build(config_lib.resolve(config).optimizer, params, 100)
  opt_state = tx.init(params)

  def loss(p, batch):
    logits = model.apply({'params': p}, batch)
    nll = -jnp.take_along_axis(jax.nn.log_softmax(logits), batch['label'][:, None], -1)[:, 0]
    return (nll * batch['example_mask']).sum() / batch['example_mask'].sum()

  for batch in batches:
    grads = jax.grad(loss)(params, batch)
    updates, opt_state = tx.update(grads, opt_state, params)
    params = optax.apply_updates(params, updates)
  return jax.device_get(params)


OPTIMIZERS = {
    'adam': {'optimizer.name': 'adam', 'optimizer.learning_rate': 0.05},
    'sgd_momentum_l2_clip': {'optimizer.name': 'sgd', 'optimizer.learning_rate': 0.5,
                             'optimizer.momentum': 0.9, 'optimizer.weight_decay': 1e-3,
                             'optimizer.clip_norm': 0.5},
}


# adam in the slow stage: sgd with momentum, weight decay and clipping covers more of the optimiser code.
@pytest.mark.parametrize('name', quick_and_slow(sorted(set(OPTIMIZERS) - {'adam'}), ['adam']))
def test_shard_map_and_pmap_match_one_device(name):
  assert jax.device_count() == 8
  batches = support.global_batches(3)
  overrides = OPTIMIZERS[name]
  reference = _reference(batches, overrides)
  results = {mode: support.run_steps(mode, batches, overrides) for mode in ('none', 'shard_map', 'pmap')}
  assert results['none'][3].num_shards == 1 and results['shard_map'][3].num_shards == 8
  for mode, (state, losses, evaluated, _) in results.items():
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6, err_msg=mode),
                 state.params, reference)
    np.testing.assert_allclose(losses, results['none'][1], rtol=1e-5, err_msg=mode)
    assert int(state.step) == 3
    # Evaluation sums over shards: counts are the real examples of the global batch.
    assert float(evaluated['accuracy'][1]) == 11.0
    np.testing.assert_allclose(evaluated['loss'][0], results['none'][2]['loss'][0], rtol=1e-5)


def test_padding_only_shards_weigh_nothing():
  # 16 rows of which 12 are padding: shards 3..7 (2 rows each) hold no real example.
  batches = support.global_batches(2, padding=12)
  reference = _reference(batches, OPTIMIZERS['adam'])
  state = support.run_steps('shard_map', batches, OPTIMIZERS['adam'])[0]
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6), state.params, reference)


def test_batch_not_divisible_by_devices_is_an_error():
  runner = parallel.Runner('shard_map', lambda *a: None, lambda *a: None)
  with pytest.raises(ValueError, match='batch size 12 is not divisible by the 8 data shards'):
    runner.shard_batch({'tokens': np.zeros((12, 3), np.int32)})


def test_train_and_evaluate_pmap_equals_shard_map(tmp_path):
  params = {}
  for mode in ('shard_map', 'pmap'):
    config = support.make_config(**{'parallel': mode, 'train.num_steps': 4, 'train.eval_every_steps': 2,
                                    'data.batch_size': 16, 'optimizer.plateau_factor': 0.5})
    results = training.train_and_evaluate(config, str(tmp_path / mode))
    assert results['steps'] == 4
    params[mode] = support.params_of(str(tmp_path / mode))
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6),
               params['pmap'], params['shard_map'])
