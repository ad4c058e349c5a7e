"""The train state and the pure per-shard train / eval steps (the caller picks shard_map or pmap).

Both steps run on ONE shard of the global batch inside a mapped context with the mesh axis
`axis_name` (default 'data'); a single device is a mesh of size 1, so the same code runs everywhere.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import flax
import jax
import jax.numpy as jnp
import optax

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
  return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params),
                    model_state=variables, lr_scale=jnp.ones((), jnp.float32),
                    embed_scale=jnp.ones((), jnp.float32))


def _sum_metrics(metrics, axis_name):
  return {k: (jax.lax.psum(s, axis_name), jax.lax.psum(c, axis_name)) for k, (s, c) in metrics.items()}


def train_step(state: TrainState, batch: Mapping[str, jax.Array], rng: jax.Array, *,
               apply_fn: Callable, task: tasks_lib.Task, tx: optax.GradientTransformation,
               embed_mask: Any, axis_name: str = 'data', project: Optional[Callable[[Any], Any]] = None,
               ) -> tuple[TrainState, dict[str, Any]]:
  """One synchronous data-parallel SGD step on this shard's part of the global batch.

  The shard's gradient of its mean loss is weighted by count_shard * num_shards / count_total
  (counts of real examples/tokens from the task's `'loss'` metric), so `pmean` over `axis_name`
  yields exactly the gradient of the mean loss of the global batch (padding-only shards weigh 0).
  Dropout keys: fold_in(fold_in(rng, step), shard index).

  Args:
    state: the replicated TrainState.
    batch: this shard's batch dict (numpy layout of docs/internals.md, leading axis B / shards); the
      model and the task see it with 'step' (int32 [], `state.step`) added.
    rng: the base PRNG key of the run (replicated).
    apply_fn: `model.apply`.
    task: the task (loss and metrics).
    tx: the optax transformation (`optimizers.build`).
    embed_mask: pytree of bools like params, True for embedding parameters.
    axis_name: the mesh / pmap axis.
    project: applied to the new params after the update (the max-norm constraint,
      `optimizers.projection`); None: none.

  Returns:
    (new state, {metric: (sum, count)} summed over shards, plus 'grad_norm': (norm, 1)).
  """
  rng = jax.random.fold_in(jax.random.fold_in(rng, state.step), jax.lax.axis_index(axis_name))
  batch = {**batch, 'step': state.step}  # int32 []: schedules inside models (e.g. Luo & Zhu's slope)

  def loss_fn(params):
    outputs = apply_fn({'params': params, **state.model_state}, batch, train=True,
                       rngs={'dropout': rng})
    return task.loss_and_metrics(outputs, batch)

  (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  count = jnp.asarray(metrics['loss'][1], jnp.float32)
  total = jax.lax.psum(count, axis_name)
  num_shards = jax.lax.psum(jnp.ones((), jnp.float32), axis_name)
  weight = count * num_shards / jnp.maximum(total, 1.0)
  grads = jax.tree.map(lambda g: g * weight.astype(g.dtype), grads)
  grads = jax.lax.pmean(grads, axis_name)
  grads = jax.tree.map(lambda g, e: g * state.embed_scale.astype(g.dtype) if e else g, grads, embed_mask)
  updates, opt_state = tx.update(grads, state.opt_state, state.params)
  updates = jax.tree.map(lambda u: u * state.lr_scale.astype(u.dtype), updates)
  params = optax.apply_updates(state.params, updates)
  if project is not None:
    params = project(params)
  metrics = _sum_metrics(metrics, axis_name)
  metrics['grad_norm'] = (optax.tree.norm(grads), jnp.ones((), jnp.float32))
  new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state)
  return new_state, metrics


def eval_step(state: TrainState, batch: Mapping[str, jax.Array], *, apply_fn: Callable,
              task: tasks_lib.Task, axis_name: str = 'data') -> dict[str, Any]:
  """Metric sums of one evaluation batch shard (loss, task metrics, UAS of induced trees).

  Returns:
    {metric: (sum, count)} summed over `axis_name`.
  """
  outputs, mutated = apply_fn({'params': state.params, **state.model_state}, batch, train=False,
                              mutable=['intermediates'])
  _, metrics = task.loss_and_metrics(outputs, batch)
  metrics = dict(metrics)
  metrics.update(task.eval_metrics(outputs, batch, mutated.get('intermediates', {})))
  return _sum_metrics(metrics, axis_name)
