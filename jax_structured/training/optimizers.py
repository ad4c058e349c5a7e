"""Optimisers, learning-rate schedules and parameter groups from `config.optimizer` (optax).

The update of one step is, in order (see `config.OPTIMIZER_DEFAULTS` for the keys):

1. `g_emb *= embedding scale` (`embedding_grad_scale` during the first `embedding_scale_epochs`
   epochs; applied in the train step from `TrainState.embed_scale`, see `embedding_scale`);
2. g += weight_decay * w for every non-embedding parameter (L2 regularisation as the papers'
   loss term lambda/2 ||w||^2, added to the gradient; Liu & Lapata 2018 exclude word embeddings);
3. global-norm clipping to `clip_norm` (Pascanu et al. 2013; "renormalise if the norm > 5");
4. the optimiser: adagrad (Duchi et al. 2011, accumulator initialised to `initial_accumulator`),
   adam (Kingma & Ba 2015), adadelta (Zeiler 2012), sgd (+ momentum / Nesterov);
5. frozen embeddings get a zero update (`freeze_embeddings`);
6. the update is multiplied by `TrainState.lr_scale` (decay on plateau, host side: `Plateau`);
7. after `optax.apply_updates`, the max-norm projection (`max_norm`: `projection`, applied by the train
   step, so that it holds whatever the learning-rate scale).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp
import ml_collections
import optax


def embedding_mask(params: Any, pattern: str) -> Any:
  """A pytree of bools like `params`: True where the '/'-joined parameter path matches `pattern`."""
  regex = re.compile(pattern)

  def is_embedding(path, _):
    names = [str(getattr(k, 'key', getattr(k, 'name', getattr(k, 'idx', k)))) for k in path]
    return bool(regex.search('/'.join(names)))

  return jax.tree_util.tree_map_with_path(is_embedding, params)


def _path_names(params: Any) -> list[str]:
  names = []
  jax.tree_util.tree_map_with_path(
      lambda path, _: names.append('/'.join(
          str(getattr(k, 'key', getattr(k, 'name', getattr(k, 'idx', k)))) for k in path)), params)
  return names


def max_norm_columns(w: jax.Array, max_norm: float) -> jax.Array:
  """Rescales each column w[..., c] (the weights into output unit c: the norm runs over every axis but the
  last) whose L2 norm exceeds `max_norm` to norm `max_norm`; the other columns are returned unchanged,
  bit for bit (Kim 2014 sec. 2.1: "rescale w to have ||w||_2 = s whenever ||w||_2 > s"; Chen et al. 2017
  sec. 2.5: "a l-2 norm constraint of the output weights W_s").

  Args:
    w: float [..., C] (a Dense kernel [D, C]; a vector [C] is C columns of one weight each).
    max_norm: s > 0.

  Returns:
    float [..., C] like w.
  """
  axes = tuple(range(w.ndim - 1))
  norms = jnp.sqrt(jnp.sum(jnp.square(w), axis=axes, keepdims=True))
  too_long = norms > max_norm
  return jnp.where(too_long, w * (max_norm / jnp.where(too_long, norms, 1.0)), w)


def projection(opt: ml_collections.ConfigDict, params: Any) -> Optional[Callable[[Any], Any]]:
  """The max-norm projection of a resolved optimizer config (step 7 above), or None when `max_norm` is 0.

  Returns `project(params) -> params`, a pure function applying `max_norm_columns` to every parameter
  whose '/'-joined path matches `opt.max_norm_pattern` (the others pass through untouched).

  Raises:
    ValueError naming config.optimizer.max_norm_pattern when it matches no parameter (listing them).
  """
  if not opt.max_norm:
    return None
  mask = embedding_mask(params, opt.max_norm_pattern)
  if not any(jax.tree.leaves(mask)):
    names = _path_names(params)
    raise ValueError(f'config.optimizer.max_norm={opt.max_norm} but config.optimizer.max_norm_pattern='
                     f'{opt.max_norm_pattern!r} matches no parameter; parameters: {names[:30]}'
                     + (f' (and {len(names) - 30} more)' if len(names) > 30 else ''))
  max_norm = float(opt.max_norm)

  def project(tree):
    return jax.tree.map(lambda w, m: max_norm_columns(w, max_norm) if m else w, tree, mask)

  return project


def learning_rate_schedule(opt: ml_collections.ConfigDict, total_steps: int) -> optax.Schedule:
  """The base learning rate as a function of the step (before the plateau scale).

  Args:
    opt: the optimizer section of a resolved config (`jax_structured.config.resolve(config).optimizer`).
    total_steps: number of training steps (horizon of cosine / linear when `decay_steps` is 0).
  """
  lr = opt.learning_rate
  horizon = opt.decay_steps or max(total_steps, 1)
  if opt.schedule == 'constant':
    base = optax.constant_schedule(lr)
    if opt.warmup_steps:
      return optax.join_schedules([optax.linear_schedule(0.0, lr, opt.warmup_steps), base],
                                  [opt.warmup_steps])
    return base
  if opt.schedule == 'warmup_cosine':
    return optax.warmup_cosine_decay_schedule(0.0, lr, opt.warmup_steps, max(horizon, opt.warmup_steps + 1),
                                              end_value=opt.end_learning_rate)
  if opt.schedule == 'exponential':
    return optax.exponential_decay(lr, opt.decay_steps, opt.decay_rate,
                                   transition_begin=opt.warmup_steps)
  if opt.schedule == 'linear':
    return optax.linear_schedule(lr, opt.end_learning_rate, horizon, transition_begin=opt.warmup_steps)
  raise ValueError(f'config.optimizer.schedule={opt.schedule!r} is unknown')


def _base_optimizer(opt: ml_collections.ConfigDict, schedule: optax.Schedule):
  if opt.name == 'adagrad':
    return optax.adagrad(schedule, initial_accumulator_value=opt.initial_accumulator, eps=opt.eps)
  if opt.name == 'adam':
    return optax.adam(schedule, b1=opt.b1, b2=opt.b2, eps=opt.eps)
  if opt.name == 'adadelta':
    return optax.adadelta(schedule, rho=opt.rho, eps=opt.eps)
  if opt.name == 'sgd':
    return optax.sgd(schedule, momentum=opt.momentum or None, nesterov=opt.nesterov)
  raise ValueError(f'config.optimizer.name={opt.name!r} is unknown')


def build(opt: ml_collections.ConfigDict, params: Any, total_steps: int
          ) -> tuple[optax.GradientTransformation, optax.Schedule]:
  """Steps 2-5 above as one optax transformation, and the learning-rate schedule.

  Args:
    opt: the optimizer section of a resolved config (`jax_structured.config.resolve(config).optimizer`).
    params: the parameters (only their tree structure and paths are used).
    total_steps: number of training steps (for schedules).

  Returns:
    (tx, schedule).
  """
  schedule = learning_rate_schedule(opt, total_steps)
  emb = embedding_mask(params, opt.embedding_pattern)
  non_emb = jax.tree.map(lambda e: not e, emb)
  parts = []
  if opt.weight_decay:
    parts.append(optax.add_decayed_weights(opt.weight_decay, mask=non_emb))
  if opt.clip_norm:
    parts.append(optax.clip_by_global_norm(opt.clip_norm))
  parts.append(_base_optimizer(opt, schedule))
  if opt.freeze_embeddings:
    parts.append(optax.masked(optax.set_to_zero(), emb))
  return optax.chain(*parts), schedule


def embedding_scale(opt: ml_collections.ConfigDict, epoch: int) -> float:
  """The embedding gradient multiplier for 0-based `epoch` (step 1 above)."""
  if opt.freeze_embeddings:
    return 0.0
  return opt.embedding_grad_scale if epoch < opt.embedding_scale_epochs else 1.0


@dataclasses.dataclass
class Plateau:
  """Decay on plateau: `lr_scale *= factor` after `patience` evaluations without improvement.

  An evaluation improves when it beats the best value so far by more than `threshold` (relative);
  after a decay the count restarts. State is plain JSON (saved with the checkpoints).
  """
  factor: float
  patience: int
  threshold: float
  higher_is_better: bool
  best: float | None = None
  bad_evals: int = 0
  scale: float = 1.0

  def update(self, value: float) -> float:
    """Records one evaluation's dev metric; returns the new learning-rate scale."""
    if self.factor >= 1.0:
      return self.scale
    if self.best is None:
      improved = True
    elif self.higher_is_better:
      improved = value > self.best + self.threshold * abs(self.best)
    else:
      improved = value < self.best - self.threshold * abs(self.best)
    if improved:
      self.best, self.bad_evals = value, 0
    else:
      self.bad_evals += 1
      if self.bad_evals >= self.patience:
        self.scale *= self.factor
        self.bad_evals = 0
    return self.scale

  def state(self) -> dict[str, Any]:
    """The JSON-serialisable state (`best`, `bad_evals`, `scale`) saved with the checkpoints."""
    return {'best': self.best, 'bad_evals': self.bad_evals, 'scale': self.scale}

  def restore(self, state: dict[str, Any]) -> None:
    """Restores the state returned by `state` (on resuming a run)."""
    self.best, self.bad_evals, self.scale = state['best'], state['bad_evals'], state['scale']
