"""The exact path out of the programs models run (issue 48): train and eval steps hold the trees
functions' LU path only; the examples with flagged trees are recomputed by a separate exact program.

Checked against the step with the exact path inside the program (`trees.exact_mode('in_program')`,
the previous design): same parameters after several steps, same evaluation sums, on one device, over a
shard_map mesh of 8 and with pmap; the pair model stacks premise and hypothesis along the batch axis
(`sow_splits`) and the document model flattens sentences, the two layouts of the flags' contract.
"""
import re
import sys

import jax
from jax.extend import core as jex_core
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from stages import quick_and_slow
from jax_structured import config as config_lib
from jax_structured import models
from jax_structured import trees
from jax_structured.nn import exactness
from jax_structured.training import parallel
from jax_structured.training import steps
from jax_structured.training import tasks

from test_liu_lapata import _config, document_batch, pair_batch  # pylint: disable=g-bad-import-order

BATCH = 8


def _sharpened(params, scale=30.0):
  """Attention parameters whose arc scores are s <t_i, t_j> with saturated t: two words with close
  vectors form a dominant 2-cycle, so some sentences are beyond the LU path (scale 30: 5 of 8 pairs)."""
  params = jax.tree.map(lambda x: x, params)
  for attention in _attention_layers(params):
    attention['parent'] = {k: x * 10 for k, x in attention['parent'].items()}
    attention['child'] = attention['parent']
    attention['bilinear'] = jnp.eye(attention['bilinear'].shape[0]) * scale
  return params


def _attention_layers(tree):
  if isinstance(tree, dict):
    if 'bilinear' in tree and 'parent' in tree:
      yield tree
    for value in tree.values():
      yield from _attention_layers(value)


def _in_program(fn):
  def wrapped(*args, **kwargs):
    with trees.exact_mode('in_program'):
      return fn(*args, **kwargs)
  return wrapped


def _problem(kind):
  rng = np.random.default_rng(0)
  if kind == 'pair':
    model = models.build(_config('pair_classifier', attention='structured', dropout_rate=0.0),
                         vocab_size=13, num_classes=3)
    batch = pair_batch(rng, [5, 3, 7, 2, 6, 4, 5, 3], [4, 6, 2, 5, 3, 7, 2, 4], 7, 7)
  else:
    model = models.build(_config('document_classifier', sentence_attention='structured',
                                 document_attention='structured', dropout_rate=0.0),
                         vocab_size=13, num_classes=3)
    batch = document_batch(rng, [[5, 3], [7], [2, 6, 4], [5, 3, 4], [6], [4, 4], [3, 7, 2], [5]], 3, 7)
  batch['label'] = rng.integers(0, 3, BATCH).astype(np.int32)
  batch['example_mask'][-1] = 0.0  # a padding example
  variables = jax.jit(model.init)(jax.random.key(0), batch)
  return model, batch, {'params': _sharpened(variables['params'])}


def _runners(model, variables, mode):
  """(tx, the Runner as the trainer builds it, a Runner whose steps run the exact path inside)."""
  task = tasks.Classification(config_lib.resolve({'model': {}}))
  tx = optax.adam(0.05)
  bound = parallel.model_steps(model.apply, task, tx, jax.tree.map(lambda _: False, variables['params']))
  split = parallel.Runner(mode, **bound)
  reference = parallel.Runner(mode, _in_program(bound['train_step']), _in_program(bound['eval_step']))
  return tx, split, reference


# One case in the quick suite; the other parallel modes (about 80 s on two cores) in the slow stage.
@pytest.mark.parametrize('kind,mode', quick_and_slow([('pair', 'none')], [('pair', 'shard_map'), ('document', 'pmap')]))
def test_split_steps_equal_the_in_program_steps(kind, mode):
  model, batch, variables = _problem(kind)
  tx, split, reference = _runners(model, variables, mode)
  states = [r.place(r.replicate(jax.device_get(steps.create_state(variables, tx)))) for r in (split, reference)]
  rng = split.put_rng(jax.random.PRNGKey(1))
  flagged_counts = []
  for step in range(3):
    device_batch = split.shard_batch(batch)
    state, metrics, pending = split.start_train(states[0], device_batch, rng)
    flagged_counts.append(int(split._first(pending['num_flagged'])))  # pylint: disable=protected-access
    states[0], metrics = split.finish_train(state, metrics, pending, device_batch, rng)
    states[1], ref_metrics = reference.train(states[1], reference.shard_batch(batch), rng)
    for name in ('loss', 'accuracy', 'grad_norm'):
      np.testing.assert_allclose(np.asarray(parallel.to_host(metrics[name])),
                                 np.asarray(parallel.to_host(ref_metrics[name])), rtol=2e-5, atol=1e-6,
                                 err_msg=f'step {step} {name}')
  assert 0 < flagged_counts[0] < BATCH - 1, flagged_counts  # some examples took the exact program
  ours, theirs = (parallel.to_host(r.canonical(s)) for r, s in zip((split, reference), states))
  assert int(ours.step) == int(theirs.step) == 3
  for a, b in zip(jax.tree.leaves(ours.params), jax.tree.leaves(theirs.params)):
    np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
  evaluated = parallel.to_host(split.evaluate(states[0], split.shard_batch(batch)))
  expected = parallel.to_host(reference.evaluate(states[1], reference.shard_batch(batch)))
  assert set(evaluated) == set(expected)
  for name, (total, count) in expected.items():
    np.testing.assert_allclose(evaluated[name][0], total, rtol=2e-5, atol=1e-6, err_msg=name)
    np.testing.assert_allclose(evaluated[name][1], count, err_msg=name)


def _loops_from_trees(jaxpr):
  """The while / cond equations of `jaxpr` (recursively) traced from jax_structured/trees."""
  found = []
  for eqn in jaxpr.eqns:
    if eqn.primitive.name in ('while', 'cond'):
      frames = eqn.source_info.traceback.frames if eqn.source_info.traceback else []
      if any('jax_structured/trees/' in f.file_name for f in frames):
        found.append(eqn.primitive.name)
    for param in eqn.params.values():
      for sub in (param if isinstance(param, (tuple, list)) else (param,)):
        if isinstance(sub, jex_core.ClosedJaxpr):
          found += _loops_from_trees(sub.jaxpr)
        elif isinstance(sub, jex_core.Jaxpr):
          found += _loops_from_trees(sub)
  return found


def test_hot_train_step_lowers_for_cuda_without_a_loop_or_branch_of_trees():
  """The structured-attention training step as the trainer runs it, lowered for the `cuda` platform on
  this CPU: no while loop or conditional of the trees module (the exact path), and no conditional at
  all (a GPU reads a conditional's predicate on the host); under 'in_program' the loop is there (so the
  check can fail)."""
  model, batch, variables = _problem('pair')
  task = tasks.Classification(config_lib.resolve({'model': {}}))
  tx = optax.adam(0.05)
  emb = jax.tree.map(lambda _: False, variables['params'])
  bound = parallel.model_steps(model.apply, task, tx, emb)
  state = steps.create_state(variables, tx)
  mesh = parallel.make_mesh('none')
  spec = jax.sharding.PartitionSpec

  def program(train_step):
    return jax.jit(jax.shard_map(train_step, mesh=mesh, in_specs=(spec(), spec('data'), spec()),
                                 out_specs=(spec(), spec(), spec()), check_vma=False))

  args = (state, batch, jax.random.PRNGKey(1))
  hot = program(bound['train_step'])
  assert not _loops_from_trees(jax.make_jaxpr(hot)(*args).jaxpr)
  text = hot.trace(*args).lower(lowering_platforms=('cuda',)).as_text()
  assert 'stablehlo.case' not in text and 'stablehlo.if' not in text
  assert _loops_from_trees(jax.make_jaxpr(program(_in_program(bound['train_step'])))(*args).jaxpr)


def test_example_flags_contract():
  flags = {'a': {'flagged': (jnp.array([False, True, False]),
                             jnp.array([[False, False], [False, False], [True, False]]))}}
  np.testing.assert_array_equal(exactness.example_flags(flags, 3), [False, True, True])
  with pytest.raises(ValueError, match=r'sowed \(4,\) tree flags .* batch of 3 examples'):
    exactness.example_flags([jnp.zeros(4, bool)], 3)


def test_select_rows_chunk_size_and_merge():
  assert [parallel.exact_chunk_size(b) for b in (1, 8, 9, 32, 64, 100)] == [1, 1, 2, 4, 8, 16]
  assert parallel.exact_chunk_size(32, 8) == 8 and parallel.exact_chunk_size(64, 6) == 12
  batch = {'tokens': np.arange(24).reshape(12, 2), 'example_mask': np.ones(12, np.float32),
           'step': np.int32(3)}
  sub = parallel.select_rows(batch, np.array([1, 4, 5]), 4)
  assert sub['tokens'].shape == (4, 2) and sub['step'] == 3
  np.testing.assert_array_equal(sub['tokens'][:3], batch['tokens'][[1, 4, 5]])
  np.testing.assert_array_equal(sub['example_mask'], [1, 1, 1, 0])
  flagged = np.zeros(12, bool)
  flagged[[1, 4, 5, 9]] = True  # 4 flagged, chunks of 2: two calls of the exact function
  calls = []
  hot = lambda v, b: ({'x': np.zeros((12, 2)), 'y': np.zeros(24)}, flagged)

  def exact(v, b):
    calls.append(b['tokens'].shape[0])
    return {'x': b['tokens'] + 100, 'y': np.repeat(b['tokens'][:, 0], 2)}

  merged = parallel.with_exact_rows(hot, exact, None, batch)
  assert calls == [2, 2]
  rows = [1, 4, 5, 9]
  np.testing.assert_array_equal(merged['x'][rows], batch['tokens'][rows] + 100)
  assert not np.delete(merged['x'], rows, axis=0).any()
  np.testing.assert_array_equal(merged['y'].reshape(12, 2)[rows, 0], batch['tokens'][rows, 0])


def test_trainer_runs_flagged_examples_through_the_exact_program(tmp_path, monkeypatch):
  """The train loop with examples flagged in every batch (a patched flag reader: the tiny model has
  no trees, so its exact program computes what the hot one would): the same parameters and metrics as
  an unflagged run, the flagged examples logged, resume still exact (the lookahead finishes the open
  step before every save, log and evaluation)."""
  import test_training_support as support  # pylint: disable=g-import-not-at-top
  from jax_structured import training  # pylint: disable=g-import-not-at-top
  config = support.make_config(**{'train.num_steps': 6, 'train.log_every_steps': 2,
                                  'train.eval_every_steps': 3, 'parallel': 'none'})
  plain = training.train_and_evaluate(config, str(tmp_path / 'plain'))
  real_flags = steps.flagged_examples

  def every_other(flags, batch):
    assert real_flags(flags, batch) is None  # the tiny model computes no trees
    real = tasks.example_weights(batch) > 0
    return (jnp.arange(real.shape[0]) % 2 == 0) & real

  monkeypatch.setattr(steps, 'flagged_examples', every_other)
  flagged = training.train_and_evaluate(config, str(tmp_path / 'flagged'))
  assert flagged['validation'] == pytest.approx(plain['validation'], rel=1e-5)
  for a, b in zip(jax.tree.leaves(support.params_of(str(tmp_path / 'plain'))),
                  jax.tree.leaves(support.params_of(str(tmp_path / 'flagged')))):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  logged = support.read_scalars(str(tmp_path / 'flagged'))
  # Logged with each window of train metrics (every 2 steps, and at the evaluation of step 3): 4 of the
  # 8 examples of every step.
  assert logged['train/flagged_examples'] == [(2, 8.0), (3, 4.0), (4, 4.0), (6, 8.0)]
  losses = lambda d: [v for _, v in support.read_scalars(str(tmp_path / d))['train/loss']]
  np.testing.assert_allclose(losses('flagged'), losses('plain'), rtol=1e-5)


def test_parser_crf_loss_defers_its_flagged_sentences():
  """The parser computes log Z in its loss: under the train program its flagged sentences weigh 0 and
  are reported (the exact program then recomputes them); the rest of the loss is that of the exact
  loss without them, with finite gradients."""
  from jax_structured.training import parse_task  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(5)
  b, n, r = 4, 6, 5
  arc = rng.normal(size=(b, n, n)).astype(np.float32)
  arc[1, 0, 1] = arc[1, 1, 0] = 40.0  # sentence 1: a dominant 2-cycle, beyond the LU path
  outputs = {'arc_scores': jnp.asarray(arc), 'root_scores': jnp.asarray(rng.normal(size=(b, n)), jnp.float32),
             'relation_logits': jnp.asarray(rng.normal(size=(b, n + 1, n, r)), jnp.float32)}
  batch = {'heads': jnp.asarray(np.tile(np.arange(-1, n - 1), (b, 1)), jnp.int32),
           'relations': jnp.full((b, n), 2, jnp.int32), 'lengths': jnp.array([6, 6, 4, 0], jnp.int32),
           'example_mask': jnp.array([1.0, 1.0, 1.0, 0.0])}
  task = parse_task.ParseTask(ml_collections.ConfigDict({'model': {'loss': 'crf', 'tag_loss_weight': 0.0}}))

  def deferred(arc_scores):
    loss, metrics, flagged = task.deferred_loss_and_metrics({**outputs, 'arc_scores': arc_scores}, batch,
                                                            jnp.zeros(b, bool))
    return loss, (metrics, flagged)

  (loss, (metrics, flagged)), grad = jax.jit(jax.value_and_grad(deferred, has_aux=True))(outputs['arc_scores'])
  np.testing.assert_array_equal(flagged, [False, True, False, False])
  assert np.isfinite(loss) and np.isfinite(grad).all() and not np.asarray(grad[1]).any()
  without = {**batch, 'example_mask': jnp.array([1.0, 0.0, 1.0, 0.0])}
  with trees.exact_mode('in_program'):
    exact_loss, exact_metrics = jax.jit(task.loss_and_metrics)(outputs, without)
  np.testing.assert_allclose(loss, exact_loss, rtol=1e-6)
  np.testing.assert_allclose(metrics['loss'], exact_metrics['loss'], rtol=1e-6)
