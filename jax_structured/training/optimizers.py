"""Optimisers, learning-rate schedules and parameter groups from `config.optimizer` (optax).

The update of one step is, in order (see `config.OPTIMIZER_DEFAULTS` for the keys):

1. g_emb *= embedding scale (`embedding_grad_scale` during the first `embedding_scale_epochs`
   epochs; applied in the train step from `TrainState.embed_scale`, see `embedding_scale`);
2. g += weight_decay * w for every non-embedding parameter (L2 regularisation as the papers'
   loss term lambda/2 ||w||^2, added to the gradient; Liu & Lapata 2018 exclude word embeddings);
3. global-norm clipping to `clip_norm` (Pascanu et al. 2013; "renormalise if the norm > 5");
4. the optimiser: adagrad (Duchi et al. 2011, accumulator initialised to `initial_accumulator`),
   adam (Kingma & Ba 2015), adadelta (Zeiler 2012), sgd (+ momentum / Nesterov);
5. frozen embeddings get a zero update (`freeze_embeddings`);
6. the update is multiplied by `TrainState.lr_scale` (decay on plateau, host side: `Plateau`).
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any

import jax
import ml_collections
import optax


def embedding_mask(params: Any, pattern: str) -> Any:
  """A pytree of bools like `params`: True where the '/'-joined parameter path matches `pattern`."""
  regex = re.compile(pattern)

  def is_embedding(path, _):
    names = [str(getattr(k, 'key', getattr(k, 'name', getattr(k, 'idx', k)))) for k in path]
    return bool(regex.search('/'.join(names)))

  return jax.tree_util.tree_map_with_path(is_embedding, params)


def learning_rate_schedule(opt: ml_collections.ConfigDict, total_steps: int) -> optax.Schedule:
  """The base learning rate as a function of the step (before the plateau scale).

  Args:
    opt: a resolved optimizer config (`config.optimizer_config`).
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
    opt: a resolved optimizer config (`config.optimizer_config`).
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
  """Decay on plateau: lr_scale *= factor after `patience` evaluations without improvement.

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
    return {'best': self.best, 'bad_evals': self.bad_evals, 'scale': self.scale}

  def restore(self, state: dict[str, Any]) -> None:
    self.best, self.bad_evals, self.scale = state['best'], state['bad_evals'], state['scale']
