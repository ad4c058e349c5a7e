"""What a resolved config builds, shared by the training loop and by restoring a workdir.

`assemble(config, task_data, ...)` builds the model (`build_model`, the `models` registry), the task, the
optimiser, the `parallel.Runner` with its jitted steps and the step-0 state; `evaluate_split` runs the
eval step over a split; `out_of_memory_names` turns XLA's RESOURCE_EXHAUSTED into a `DeviceMemoryError`
naming the batch shapes and the config keys that bound them. `trainer` (the loop) and `restore`
(reading a checkpoint) both build on this module; neither imports the other.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, Mapping, Sequence

import jax
import ml_collections
import numpy as np

from jax_structured import config as config_lib
from jax_structured import models
from jax_structured.training import metrics as metrics_lib
from jax_structured.training import optimizers
from jax_structured.training import parallel
from jax_structured.training import steps
from jax_structured.training import tasks as tasks_lib

EVAL_SPLITS = ('validation', 'test')  # the splits of a run's final evaluation (and comparison)

# --- the model -----------------------------------------------------------------------------------


def build_model(model_config: ml_collections.ConfigDict, *, vocab_size: int, num_classes: int,
                embeddings: np.ndarray | None = None):
  """The Linen module of `config.model`, from the `models.register` registry (`models.build`)."""
  return models.build(model_config, vocab_size=vocab_size, num_classes=num_classes, embeddings=embeddings)


# --- batches ----------------------------------------------------------------------------------------

def check_batch(batch: Mapping[str, np.ndarray], *, where: str, num_classes: int, task_name: str) -> None:
  """Host-side checks of a numpy batch (labels in range, consistent leading sizes)."""
  sizes = {k: np.shape(v)[0] for k, v in batch.items() if np.ndim(v)}
  if len(set(sizes.values())) > 1:
    raise ValueError(f'{where}: batch arrays disagree on the batch size: {sizes}')
  if 'label' in batch and num_classes > 0 and task_name in ('sentence', 'document', 'pair'):
    labels = np.asarray(batch['label'])
    bad = (labels < 0) | (labels >= num_classes)
    if bad.any():
      raise ValueError(f'{where}: label {int(labels[bad][0])} outside [0, {num_classes}) (labels are '
                       f'{num_classes} classes)')


def spec_to_abstract(spec: Mapping[str, Sequence]) -> dict[str, jax.ShapeDtypeStruct]:
  """ShapeDtypeStructs of a saved batch spec ({key: [shape, dtype]}, `run_info.json`'s batch_spec)."""
  return {k: jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype)) for k, (shape, dtype) in spec.items()}


def init_variables(model, sample: Mapping[str, Any], seed: int):
  """`model.init` on a sample batch (numpy or ShapeDtypeStructs: then abstract, via eval_shape)."""
  rng = jax.random.PRNGKey(seed)
  rngs = {'params': jax.random.fold_in(rng, 0), 'dropout': jax.random.fold_in(rng, 1)}
  init = lambda rngs, batch: model.init(rngs, batch, train=False)  # noqa: E731
  if any(isinstance(v, jax.ShapeDtypeStruct) for v in sample.values()):
    return jax.eval_shape(init, rngs, sample)
  return jax.device_get(jax.jit(init)(rngs, dict(sample)))


# --- assembling and evaluation ---------------------------------------------------------------------

@dataclasses.dataclass
class Assembled:
  """What a config builds: model, task, runner (the jitted steps), the step-0 state, optimiser."""
  config: config_lib.ResolvedConfig
  task_data: Any
  task: tasks_lib.Task
  model: Any
  runner: parallel.Runner
  state: Any  # canonical (replicated) step-0 state
  tx: Any
  schedule: Any


def assemble(config: config_lib.ResolvedConfig, task_data, *, sample, mode: str, total_steps: int) -> Assembled:
  """Model, task, optimiser, runner and step-0 state of `config` for `task_data`; `sample` is a batch
  (numpy, or ShapeDtypeStructs: then the state is abstract, a restore target), `mode` a
  `parallel.Runner` mode."""
  opt_cfg = config.optimizer
  model = build_model(config.model, vocab_size=len(task_data.vocab), num_classes=task_data.num_classes,
                      embeddings=task_data.embeddings)
  task = tasks_lib.build(config, task_data.kind, task_data)  # after the model: families register tasks
  variables = init_variables(model, sample, config.seed)
  tx, schedule = optimizers.build(opt_cfg, variables['params'], total_steps)
  emb_mask = optimizers.embedding_mask(variables['params'], opt_cfg.embedding_pattern)
  runner = parallel.Runner(mode, **parallel.model_steps(
      model.apply, task, tx, emb_mask, optimizers.projection(opt_cfg, variables['params'])))
  if any(isinstance(x, jax.ShapeDtypeStruct) for x in jax.tree.leaves(variables)):
    state = jax.eval_shape(lambda v: steps.create_state(v, tx), variables)
    state = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=runner.replicated),
                         state)
  else:
    state = runner.replicate(jax.device_get(steps.create_state(variables, tx)))
  return Assembled(config, task_data, task, model, runner, state, tx, schedule)


def evaluate_split(parts: Assembled, state: Any, split, batch_size: int) -> dict[str, float]:
  """Task metrics of `state` (in the runner's layout) on every batch of `split`."""
  return parts.task.summarize(evaluate_sums(parts, state, split, batch_size))


def evaluate_sums(parts: Assembled, state: Any, split, batch_size: int) -> dict[str, tuple[float, float]]:
  """{metric: (sum, count)} of `state` over every batch of `split` (host numbers)."""
  acc = metrics_lib.Accumulator()
  task_name = parts.config.task or parts.task_data.kind
  for i, batch in enumerate(split.batches(batch_size, shuffle=False, num_shards=parts.runner.num_shards)):
    where = f'{split.name} batch {i}'
    check_batch(batch, where=where, num_classes=parts.task_data.num_classes, task_name=task_name)
    with out_of_memory_names(parts.config, f'the evaluation of {where}', [batch_shapes(batch)], eval_batch=True):
      acc.add(parts.runner.evaluate(state, parts.runner.shard_batch(batch), batch))
  sums = acc.result()
  if not sums:
    raise ValueError(f'split {split.name!r} produced no batches')
  return sums


# --- out of device memory ---------------------------------------------------------------------------

class DeviceMemoryError(MemoryError):
  """The accelerator ran out of memory (XLA RESOURCE_EXHAUSTED); the message names the batch shapes
  and the config keys that bound them."""


# Config keys that bound the shape of a batch (those present in `config.data` are named).
_BATCH_SHAPE_KEYS = ('batch_size', 'bucket_boundaries', 'max_length', 'max_sentences',
                     'max_sentence_length', 'max_chars', 'context')


def batch_shapes(batch: Mapping[str, Any]) -> dict[str, tuple]:
  """{key: shape} of a batch."""
  return {k: tuple(np.shape(v)) for k, v in batch.items()}


@contextlib.contextmanager
def out_of_memory_names(config, where: str, shapes: Sequence[Mapping[str, tuple]], *,
                         eval_batch: bool = False):
  """Turns an XLA RESOURCE_EXHAUSTED error raised inside into a `DeviceMemoryError` naming `where`,
  the largest batch of `shapes` and the config keys that bound it."""
  try:
    yield
  except jax.errors.JaxRuntimeError as e:
    if 'RESOURCE_EXHAUSTED' not in str(e):
      raise
    largest = max(shapes, key=lambda s: sum(int(np.prod(v)) for v in s.values()), default={})
    distinct = len({tuple(sorted(s.items())) for s in shapes})
    keys = ', '.join(f'data.{k}={config.data[k]!r}' for k in _BATCH_SHAPE_KEYS if k in config.data)
    if eval_batch:
      eval_size = config.train.eval_batch_size
      keys = f'train.eval_batch_size={eval_size!r} (0 = data.batch_size), {keys}'
    shape_text = ', '.join(f'{k} {list(v)}' for k, v in largest.items())
    raise DeviceMemoryError(
        f'out of device memory (XLA RESOURCE_EXHAUSTED) in {where}; '
        + (f'the largest of its {distinct} batch shapes' if distinct > 1 else 'its batch')
        + f': {shape_text}. The batch shape is bound by {keys}: lower them (smaller batches, '
        f'shorter or fewer sentences, tighter bucket boundaries) or use a device with more memory. '
        f'XLA: {str(e).strip().splitlines()[0][:300]}') from e
