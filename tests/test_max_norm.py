"""The max-norm constraint on output weights (Kim 2014 sec. 2.1; Chen et al. 2017 sec. 2.5):
`optimizers.max_norm_columns` against numpy, and the train step's projection after the update."""
import jax
import ml_collections
import numpy as np
import pytest

import test_training_support as support
from jax_structured import config as config_lib
from jax_structured import errors
from jax_structured.training import optimizers
from jax_structured.training import parallel
from jax_structured.training import steps
from jax_structured.training import tasks


def _opt(**kwargs):
  return config_lib.resolve(ml_collections.ConfigDict({'optimizer': kwargs})).optimizer


def test_max_norm_columns_matches_numpy_and_keeps_short_columns_bit_for_bit():
  rng = np.random.default_rng(0)
  w = rng.normal(size=(6, 5)) * np.array([0.1, 0.5, 1.0, 2.0, 3.0])  # column norms ~0.2 .. ~7
  got = np.asarray(jax.jit(optimizers.max_norm_columns, static_argnums=1)(w, 3.0))
  norms = np.linalg.norm(w, axis=0)
  want = np.where(norms > 3.0, w * 3.0 / norms, w)
  np.testing.assert_allclose(got, want, rtol=1e-12)
  assert (norms > 3.0).any() and (norms <= 3.0).any()
  np.testing.assert_array_equal(got[:, norms <= 3.0], w[:, norms <= 3.0])
  np.testing.assert_allclose(np.linalg.norm(got[:, norms > 3.0], axis=0), 3.0, rtol=1e-12)
  # A 3-d kernel [..., C]: the norm runs over every axis but the last.
  w3 = rng.normal(size=(2, 4, 3)) * 4.0
  n3 = np.sqrt((w3 ** 2).sum((0, 1)))
  np.testing.assert_allclose(optimizers.max_norm_columns(w3, 1.5), np.where(n3 > 1.5, w3 * 1.5 / n3, w3))
  # A zero column stays zero (no 0/0).
  np.testing.assert_array_equal(optimizers.max_norm_columns(np.zeros((3, 2)), 3.0), 0.0)


def _step(opt, variables, batch, model, task):
  tx, _ = optimizers.build(opt, variables['params'], 10)
  emb = optimizers.embedding_mask(variables['params'], opt.embedding_pattern)
  runner = parallel.Runner('shard_map', parallel.bind(
      steps.train_step, apply_fn=model.apply, task=task, tx=tx, embed_mask=emb,
      project=optimizers.projection(opt, variables['params'])), lambda *a: None)
  state = steps.create_state(variables, tx)
  new, _ = runner.train(runner.place(runner.replicate(jax.device_get(state))), runner.shard_batch(batch),
                        runner.put_rng(jax.random.PRNGKey(1)))
  return parallel.to_host(new.params)


@pytest.fixture(scope='module')
def tiny():
  batch = support.global_batches(1, batch_size=8, padding=2)[0]
  config = support.make_config()
  model = support.build_tiny_model(config.model, vocab_size=12, num_classes=2)
  variables = jax.device_get(jax.jit(lambda b: model.init(jax.random.PRNGKey(0), b))(batch))
  return batch, model, variables, tasks.Classification(config)


def test_huge_step_lands_on_the_norm_ball_and_leaves_other_parameters_alone(tiny):
  batch, model, variables, task = tiny
  free = _step(_opt(name='sgd', learning_rate=1e4), variables, batch, model, task)
  constrained = _step(_opt(name='sgd', learning_rate=1e4, max_norm=3.0, max_norm_pattern='(^|/)out/kernel$'),
                      variables, batch, model, task)
  free_norms = np.linalg.norm(free['out']['kernel'], axis=0)
  assert (free_norms > 3.0).all()  # the unconstrained step leaves the ball
  norms = np.linalg.norm(constrained['out']['kernel'], axis=0)
  assert (norms <= 3.0 * (1 + 1e-6)).all(), norms
  np.testing.assert_allclose(constrained['out']['kernel'], free['out']['kernel'] * 3.0 / free_norms, rtol=1e-5)
  for name in ('embed', 'hidden', 'root'):
    jax.tree.map(np.testing.assert_array_equal, constrained[name], free[name])
  np.testing.assert_array_equal(constrained['out']['bias'], free['out']['bias'])


def test_tiny_step_inside_the_ball_is_the_unconstrained_step(tiny):
  batch, model, variables, task = tiny
  assert (np.linalg.norm(variables['params']['out']['kernel'], axis=0) < 2.0).all()
  free = _step(_opt(name='sgd', learning_rate=1e-3), variables, batch, model, task)
  constrained = _step(_opt(name='sgd', learning_rate=1e-3, max_norm=3.0, max_norm_pattern='out/kernel'),
                      variables, batch, model, task)
  jax.tree.map(np.testing.assert_array_equal, constrained, free)
  assert not np.array_equal(free['out']['kernel'], variables['params']['out']['kernel'])


def test_bad_max_norm_settings_are_named():
  params = {'logits': {'kernel': np.ones((3, 2)), 'bias': np.zeros(2)}}
  assert optimizers.projection(_opt(), params) is None  # off by default
  assert optimizers.projection(_opt(max_norm=3.0), params) is not None  # default pattern: logits/kernel
  with pytest.raises(ValueError, match=r"max_norm_pattern='nothing' matches no parameter.*logits/kernel"):
    optimizers.projection(_opt(max_norm=3.0, max_norm_pattern='nothing'), params)
  with pytest.raises(errors.ConfigError, match='config.optimizer.max_norm must be >= 0'):
    _opt(max_norm=-1.0)
