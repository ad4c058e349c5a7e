"""Optimisers from config against float64 numpy transcriptions of the papers' update rules."""
import jax
import ml_collections
import numpy as np
import pytest

import test_training_support as support
from jax_structured import config as config_lib
from jax_structured.training import optimizers
from jax_structured.training import parallel
from jax_structured.training import steps
from jax_structured.training import tasks


def _opt(**kwargs):
  return config_lib.resolve(ml_collections.ConfigDict({'optimizer': kwargs})).optimizer


def _params(rng):
  return {'embed': {'embedding': rng.normal(size=(5, 3))}, 'dense': {'kernel': rng.normal(size=(3, 2)),
                                                                      'bias': rng.normal(size=(2,))}}


def _apply(opt, params, grads_seq, total_steps=100):
  tx, _ = optimizers.build(opt, params, total_steps)
  state = tx.init(params)
  update = jax.jit(tx.update)
  for grads in grads_seq:
    updates, state = update(grads, state, params)
    params = jax.tree.map(lambda p, u: p + u, params, updates)
  return jax.device_get(params)


def _grads(rng, params, n):
  return [jax.tree.map(lambda p: rng.normal(size=p.shape) * 3.0, params) for _ in range(n)]


def test_adagrad_with_initial_accumulator():
  rng = np.random.default_rng(0)
  params = _params(rng)
  grads = _grads(rng, params, 4)
  got = _apply(_opt(name='adagrad', learning_rate=0.05, initial_accumulator=0.1, eps=1e-10), params, grads)
  # Duchi et al. (2011): acc_t = acc_0 + sum_s g_s^2;  w_t = w_{t-1} - lr g_t / sqrt(acc_t).
  def ref(p, *gs):
    acc = np.full_like(p, 0.1)
    for g in gs:
      acc = acc + g * g
      p = p - 0.05 * g / np.sqrt(acc + 1e-10)
    return p
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-10), got,
               jax.tree.map(ref, params, *grads))


def test_sgd_momentum_l2_on_non_embeddings_and_global_norm_clipping():
  rng = np.random.default_rng(1)
  params = _params(rng)
  grads = _grads(rng, params, 3)
  lr, wd, clip, mom = 0.1, 0.01, 2.0, 0.9
  got = _apply(_opt(name='sgd', learning_rate=lr, weight_decay=wd, clip_norm=clip, momentum=mom),
               params, grads)
  p = jax.tree.map(np.array, params)
  buf = jax.tree.map(np.zeros_like, params)
  for g in grads:
    # L2 (lambda/2 ||w||^2 of non-embedding weights) adds wd * w to their gradient; then clip the
    # global norm (Pascanu et al. 2013); then heavy-ball momentum.
    g = {'embed': g['embed'], 'dense': {k: v + wd * p['dense'][k] for k, v in g['dense'].items()}}
    norm = np.sqrt(sum((x ** 2).sum() for x in jax.tree.leaves(g)))
    assert norm > clip
    g = jax.tree.map(lambda x: x * clip / norm, g)
    buf = jax.tree.map(lambda b, x: mom * b + x, buf, g)
    p = jax.tree.map(lambda w, b: w - lr * b, p, buf)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-10), got, p)


def test_adadelta_and_adam():
  rng = np.random.default_rng(2)
  params = _params(rng)
  grads = _grads(rng, params, 3)
  got = _apply(_opt(name='adadelta', learning_rate=1.0, rho=0.95, eps=1e-6), params, grads)

  def adadelta(p, *gs):  # Zeiler (2012), Algorithm 1.
    eg, ex = np.zeros_like(p), np.zeros_like(p)
    for g in gs:
      eg = 0.95 * eg + 0.05 * g * g
      dx = -np.sqrt(ex + 1e-6) / np.sqrt(eg + 1e-6) * g
      ex = 0.95 * ex + 0.05 * dx * dx
      p = p + dx
    return p
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-9), got,
               jax.tree.map(adadelta, params, *grads))
  got = _apply(_opt(name='adam', learning_rate=2e-3, b1=0.9, b2=0.999, eps=1e-8), params, grads)

  def adam(p, *gs):  # Kingma & Ba (2015), Algorithm 1.
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(gs, 1):
      m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
      p = p - 2e-3 * (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-8)
    return p
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-9), got,
               jax.tree.map(adam, params, *grads))


def test_frozen_embeddings_never_move_and_group_masks():
  rng = np.random.default_rng(3)
  params = _params(rng)
  got = _apply(_opt(name='adam', learning_rate=0.1, freeze_embeddings=True), params, _grads(rng, params, 3))
  np.testing.assert_array_equal(got['embed']['embedding'], params['embed']['embedding'])
  assert not np.allclose(got['dense']['kernel'], params['dense']['kernel'])
  mask = optimizers.embedding_mask(params, '(?i)embed')
  assert mask == {'embed': {'embedding': True}, 'dense': {'kernel': False, 'bias': False}}
  opt = _opt(embedding_grad_scale=0.35, embedding_scale_epochs=1)
  assert [optimizers.embedding_scale(opt, e) for e in range(3)] == [0.35, 1.0, 1.0]
  assert optimizers.embedding_scale(_opt(freeze_embeddings=True), 5) == 0.0


def test_train_step_scales_embedding_gradients_and_learning_rate():
  """One plain-SGD train_step: delta = -lr * lr_scale * grad, embeddings also * embed_scale."""
  batch = support.global_batches(1, batch_size=8, padding=2)[0]
  config = support.make_config()
  model = support.build_tiny_model(config.model, vocab_size=12, num_classes=2)
  variables = jax.device_get(jax.jit(lambda b: model.init(jax.random.PRNGKey(0), b))(batch))
  task = tasks.Classification(config)
  opt = _opt(name='sgd', learning_rate=0.5)
  tx, _ = optimizers.build(opt, variables['params'], 10)
  emb = optimizers.embedding_mask(variables['params'], opt.embedding_pattern)
  runner = parallel.Runner('shard_map', parallel.bind(steps.train_step, apply_fn=model.apply, task=task,
                                                      tx=tx, embed_mask=emb), lambda *a: None)
  state = steps.create_state(variables, tx).replace(lr_scale=np.float32(0.5), embed_scale=np.float32(0.35))
  new, _ = runner.train(runner.place(runner.replicate(jax.device_get(state))), runner.shard_batch(batch),
                        runner.put_rng(jax.random.PRNGKey(1)))
  new = parallel.to_host(new.params)

  def loss(p):
    return task.loss_and_metrics(model.apply({'params': p}, batch), batch)[0]
  grads = jax.device_get(jax.grad(loss)(variables['params']))
  for path in [('embed', 'embedding'), ('out', 'kernel'), ('hidden', 'bias')]:
    old, upd, g = (variables['params'], new, grads)
    for k in path:
      old, upd, g = old[k], upd[k], g[k]
    scale = 0.35 if path[0] == 'embed' else 1.0
    np.testing.assert_allclose(upd - old, -0.5 * 0.5 * scale * g, rtol=1e-4, atol=1e-7, err_msg=str(path))


def test_plateau_decay():
  # Cheng et al. (2016), PTB: lr 0.65 decayed by 0.85 whenever the dev metric stops improving.
  p = optimizers.Plateau(factor=0.85, patience=1, threshold=0.0, higher_is_better=False)
  scales = [p.update(v) for v in [120.0, 110.0, 111.0, 109.0, 109.0, 108.9]]
  np.testing.assert_allclose(scales, [1, 1, 0.85, 0.85, 0.85 ** 2, 0.85 ** 2])
  p = optimizers.Plateau(factor=0.5, patience=2, threshold=0.1, higher_is_better=True)
  scales = [p.update(v) for v in [0.5, 0.52, 0.54, 0.6, 0.6, 0.6, 0.6]]
  # 0.52, 0.54 are within 10% of 0.5 (2 bad evaluations -> halve); 0.6 improves; then 2 more bad.
  np.testing.assert_allclose(scales, [1, 1, 0.5, 0.5, 0.5, 0.25, 0.25])
  restored = optimizers.Plateau(factor=0.5, patience=2, threshold=0.1, higher_is_better=True)
  restored.restore(p.state())
  assert restored.state() == p.state()
  off = optimizers.Plateau(factor=1.0, patience=1, threshold=0.0, higher_is_better=True)
  assert [off.update(v) for v in [1.0, 0.0, 0.0]] == [1.0, 1.0, 1.0]


def test_learning_rate_schedules():
  def sched(**kw):
    return jax.jit(optimizers.learning_rate_schedule(_opt(learning_rate=0.1, **kw), 100))
  s = sched(schedule='warmup_cosine', warmup_steps=10, end_learning_rate=0.01)
  np.testing.assert_allclose([s(0), s(5), s(10), s(55), s(100)],
                             [0.0, 0.05, 0.1, 0.01 + 0.09 * 0.5, 0.01], rtol=1e-6, atol=1e-9)
  s = sched(schedule='exponential', decay_steps=10, decay_rate=0.5)
  np.testing.assert_allclose([s(0), s(10), s(25)], [0.1, 0.05, 0.1 * 0.5 ** 2.5], rtol=1e-6)
  s = sched(schedule='linear', end_learning_rate=0.0)
  np.testing.assert_allclose([s(0), s(50), s(100)], [0.1, 0.05, 0.0], rtol=1e-6, atol=1e-9)
  s = sched(schedule='constant', warmup_steps=4)
  np.testing.assert_allclose([s(0), s(2), s(4), s(50)], [0.0, 0.05, 0.1, 0.1], rtol=1e-6)
  with pytest.raises(ValueError, match='decay_steps must be > 0'):
    _opt(schedule='exponential')
  with pytest.raises(ValueError, match="schedule='step'"):
    _opt(schedule='step')
