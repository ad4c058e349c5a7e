"""The train state and the pure per-shard train / eval steps (the caller picks shard_map or pmap).

Both steps run on ONE shard of the global batch inside a mapped context with the mesh axis
`axis_name` (default 'data'); a single device is a mesh of size 1, so the same code runs everywhere.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Mapping, Optional

import flax
import jax
import jax.numpy as jnp
import optax

from jax_structured import trees
from jax_structured.nn import exactness
from jax_structured.training import tasks as tasks_lib


@flax.struct.dataclass
class TrainState:
  """Everything that changes during training (a pytree; checkpointed as a whole).

  Attributes:
    step: int32 [] number of updates done.
    params: the 'params' collection.
    opt_state: the optax state.
    model_state: the other (non-trainable) variable collections, passed to `apply` unchanged.
    lr_scale: float32 [] learning-rate multiplier (decay on plateau).
    embed_scale: float32 [] embedding-gradient multiplier (per-epoch scaling / freezing).
  """
  step: jax.Array
  params: Any
  opt_state: Any
  model_state: Any
  lr_scale: jax.Array
  embed_scale: jax.Array


def create_state(variables: Mapping[str, Any], tx: optax.GradientTransformation) -> TrainState:
  """A step-0 state from `model.init` variables."""
  variables = dict(variables)
  params = variables.pop('params')
  variables.pop('intermediates', None)
  variables.pop(exactness.FLAGGED, None)
  return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params),
                    model_state=variables, lr_scale=jnp.ones((), jnp.float32),
                    embed_scale=jnp.ones((), jnp.float32))


def _sum_metrics(metrics, axis_name):
  return {k: (jax.lax.psum(s, axis_name), jax.lax.psum(c, axis_name)) for k, (s, c) in metrics.items()}


def flagged_examples(flags: Any, batch: Mapping[str, jax.Array]) -> Optional[jax.Array]:
  """bool [B]: the real examples (`example_mask` > 0) of `batch` with a tree flagged in `flags` (the
  `nn.exactness.FLAGGED` collection); a padding example's trees never send a batch to the exact
  program. None when no module sowed flags (the model computes no trees: known when traced)."""
  if not jax.tree.leaves(flags):
    return None
  real = tasks_lib.example_weights(batch) > 0
  return exactness.example_flags(flags, real.shape[0]) & real


def _gradient_weight(count, axis_name):
  """count * num_shards / total: `pmean` of the weighted shard gradients of mean losses is the
  gradient of the mean loss of the global batch (padding-only shards weigh 0). Returns (weight,
  total)."""
  count = jnp.asarray(count, jnp.float32)
  total = jax.lax.psum(count, axis_name)
  num_shards = jax.lax.psum(jnp.ones((), jnp.float32), axis_name)
  return count * num_shards / jnp.maximum(total, 1.0), total


def _apply_gradients(state: TrainState, grads: Any, *, tx: optax.GradientTransformation, embed_mask: Any,
                     project: Optional[Callable[[Any], Any]]) -> tuple[TrainState, jax.Array]:
  """One optimizer update with the global mean gradient `grads`; returns (new state, grad norm)."""
  grads = jax.tree.map(lambda g, e: g * state.embed_scale.astype(g.dtype) if e else g, grads, embed_mask)
  updates, opt_state = tx.update(grads, state.opt_state, state.params)
  updates = jax.tree.map(lambda u: u * state.lr_scale.astype(u.dtype), updates)
  params = optax.apply_updates(state.params, updates)
  if project is not None:
    params = project(params)
  new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
  return new_state, optax.tree.norm(grads)


def _dropout_key(rng, step, axis_name):
  return jax.random.fold_in(jax.random.fold_in(rng, step), jax.lax.axis_index(axis_name))


def train_step(state: TrainState, batch: Mapping[str, jax.Array], rng: jax.Array,
               blocked: Optional[jax.Array] = None, *, apply_fn: Callable, task: tasks_lib.Task,
               tx: optax.GradientTransformation, embed_mask: Any, axis_name: str = 'data',
               project: Optional[Callable[[Any], Any]] = None,
               ) -> tuple[TrainState, dict[str, Any], dict[str, Any]]:
  """One synchronous data-parallel SGD step on this shard's part of the global batch; the program
  holds the LU path of the trees functions only (`nn.exactness`).

  The model runs with the `FLAGGED` collection mutable: the examples with a tree that the LU error
  estimate flagged (rare: sharp scores) get weight 0 in the loss, and are listed in `pending`. When
  none is flagged anywhere (and the step is not `blocked`), the update is applied here. Otherwise the
  state is returned unchanged and the caller completes the step (`Runner.finish_train`): the flagged
  examples' gradient by `exact_gradients` (the exact path, in a separate program), then one update
  with both (`apply_combined`); losses are sums over examples, so the split is exact.

  `blocked` (bool [], the previous step's `pending['stalled']`) lets the caller dispatch a step before
  it has read whether the previous one needs completing: a blocked step changes nothing (the caller
  reruns it after completing the previous step), so no host round trip sits between two steps.

  The shard's gradient of its mean loss is weighted by count_shard * num_shards / count_total
  (counts of real examples/tokens from the task's `'loss'` metric), so `pmean` over `axis_name`
  yields exactly the gradient of the mean loss of the global batch (padding-only shards weigh 0).
  Dropout keys: fold_in(fold_in(rng, step), shard index).

  Args:
    state: the replicated TrainState.
    batch: this shard's batch dict (numpy layout of docs/internals.md, leading axis B / shards); the
      model and the task see it with 'step' (int32 [], `state.step`) added.
    rng: the base PRNG key of the run (replicated).
    blocked: None, or bool [] (replicated): True leaves the state unchanged (see above).
    apply_fn: `model.apply`.
    task: the task (loss and metrics).
    tx: the optax transformation (`optimizers.build`).
    embed_mask: pytree of bools like params, True for embedding parameters.
    axis_name: the mesh / pmap axis.
    project: applied to the new params after the update (the max-norm constraint,
      `optimizers.projection`); None: none.

  Returns:
    (new state, {metric: (sum, count)} summed over shards, with 'grad_norm': (norm, 1) when the update
    was applied here (0, 0 otherwise) and 'flagged_examples': (number flagged, number of examples),
    pending: {'grads': the global mean gradient of the other examples, 'count': their loss count,
    'flagged': bool [B global] (replicated), 'num_flagged': int32 [], 'stalled': bool [], True when
    the update was not applied here (flagged examples, or blocked)}).
  """
  rng = _dropout_key(rng, state.step, axis_name)
  batch = {**batch, 'step': state.step}  # int32 []: schedules inside models (e.g. Luo & Zhu's slope)

  def loss_fn(params):
    outputs, flags = apply_fn({'params': params, **state.model_state}, batch, train=True,
                              rngs={'dropout': rng}, mutable=[exactness.FLAGGED])
    loss, metrics, flagged = task.deferred_loss_and_metrics(outputs, batch, flagged_examples(flags, batch))
    return loss, (metrics, flagged)

  (_, (metrics, flagged)), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  weight, total = _gradient_weight(metrics['loss'][1], axis_name)
  grads = jax.lax.pmean(jax.tree.map(lambda g: g * weight.astype(g.dtype), grads), axis_name)
  updated, grad_norm = _apply_gradients(state, grads, tx=tx, embed_mask=embed_mask, project=project)
  metrics = _sum_metrics(metrics, axis_name)
  real = jax.lax.psum(jnp.sum(tasks_lib.example_weights(batch) > 0, dtype=jnp.float32), axis_name)
  if flagged is None:  # no trees in this model: the plain step (it never stalls, so is never blocked)
    metrics['grad_norm'] = (grad_norm, jnp.ones((), jnp.float32))
    metrics['flagged_examples'] = (jnp.zeros((), jnp.float32), real)
    return updated, metrics, {'num_flagged': jnp.zeros((), jnp.int32), 'stalled': jnp.zeros((), bool)}
  num_flagged = jax.lax.psum(jnp.sum(flagged, dtype=jnp.int32), axis_name)
  clean = num_flagged == 0
  if blocked is not None:
    clean = clean & ~blocked
  # A select, not a lax.cond: on a GPU a conditional's predicate is read on the host.
  new_state = jax.tree.map(lambda new, old: jnp.where(clean, new, old), updated, state)
  metrics['grad_norm'] = (jnp.where(clean, grad_norm, 0.0), clean.astype(jnp.float32))
  metrics['flagged_examples'] = (num_flagged.astype(jnp.float32), real)
  pending = {'grads': grads, 'count': total,
             'flagged': jax.lax.all_gather(flagged, axis_name, tiled=True), 'num_flagged': num_flagged,
             'stalled': ~clean}
  return new_state, metrics, pending


def exact_gradients(state: TrainState, batch: Mapping[str, jax.Array], rng: jax.Array, *,
                    apply_fn: Callable, task: tasks_lib.Task, axis_name: str = 'data',
                    ) -> tuple[Any, jax.Array, dict[str, Any]]:
  """The gradient of the summed loss of `batch` (the flagged examples of a train step, gathered by the
  caller) with the trees functions' exact path in the program (`trees.exact_mode('in_program')`).
  Summed, so that the gradients of several such batches add up (`Runner.finish_train`).

  Returns:
    (global gradient of the summed loss, global loss count, {metric: (sum, count)} summed over shards).
  """
  rng = _dropout_key(rng, state.step, axis_name)
  batch = {**batch, 'step': state.step}

  def loss_fn(params):
    with trees.exact_mode('in_program'):
      outputs = apply_fn({'params': params, **state.model_state}, batch, train=True,
                         rngs={'dropout': rng})
      return task.loss_and_metrics(outputs, batch)

  (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  count = jnp.asarray(metrics['loss'][1], jnp.float32)
  grads = jax.lax.psum(jax.tree.map(lambda g: g * count.astype(g.dtype), grads), axis_name)
  return grads, jax.lax.psum(count, axis_name), _sum_metrics(metrics, axis_name)


def apply_combined(state: TrainState, hot_grads: Any, hot_count: jax.Array, exact_grad_sums: Any,
                   exact_count: jax.Array, *, tx: optax.GradientTransformation, embed_mask: Any,
                   project: Optional[Callable[[Any], Any]] = None) -> tuple[TrainState, dict[str, Any]]:
  """One update with the gradient of the whole batch's mean loss, from its two parts: `train_step`'s
  pending mean gradient over `hot_count` and the summed-loss gradient of `exact_gradients` over
  `exact_count`.

  Returns:
    (new state, {'grad_norm': (norm, 1)}).
  """
  total = jnp.maximum(hot_count + exact_count, 1.0)
  grads = jax.tree.map(lambda a, b: (a * hot_count.astype(a.dtype) + b) / total.astype(a.dtype),
                       hot_grads, exact_grad_sums)
  state, grad_norm = _apply_gradients(state, grads, tx=tx, embed_mask=embed_mask, project=project)
  return state, {'grad_norm': (grad_norm, jnp.ones((), jnp.float32))}


def eval_step(state: TrainState, batch: Mapping[str, jax.Array], *, apply_fn: Callable,
              task: tasks_lib.Task, axis_name: str = 'data', exact: bool = False,
              ) -> tuple[dict[str, Any], jax.Array]:
  """Metric sums of one evaluation batch shard (loss, task metrics, UAS of induced trees).

  With `exact` False (the evaluation loop's program), the trees functions run their LU path only and
  the examples with a flagged tree are left out (`nn.exactness`); the caller evaluates them with
  `exact=True` (`trees.exact_mode('in_program')`, a separate program) and adds the sums.

  Returns:
    ({metric: (sum, count)} summed over `axis_name`, flagged bool [B global] (replicated; all False
    with `exact`)).
  """
  variables = {'params': state.params, **state.model_state}
  with trees.exact_mode('in_program') if exact else contextlib.nullcontext():
    if exact:
      outputs, mutated = apply_fn(variables, batch, train=False, mutable=['intermediates'])
      _, metrics, flagged = (*task.loss_and_metrics(outputs, batch), None)
    else:
      outputs, mutated = apply_fn(variables, batch, train=False,
                                  mutable=['intermediates', exactness.FLAGGED])
      _, metrics, flagged = task.deferred_loss_and_metrics(
          outputs, batch, flagged_examples(mutated.get(exactness.FLAGGED, {}), batch))
    if flagged is None:
      flagged = jnp.zeros(tasks_lib.example_weights(batch).shape, bool)
    metrics = {**metrics, **task.eval_metrics(outputs, tasks_lib.without_examples(batch, flagged),
                                              mutated.get('intermediates', {}))}
  return _sum_metrics(metrics, axis_name), jax.lax.all_gather(flagged, axis_name, tiled=True)
