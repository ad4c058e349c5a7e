"""The training loop (restoring a workdir without it: `restore`).

`train_and_evaluate(config, workdir)` trains (resuming from `<workdir>/checkpoints` when present),
evaluates on the dev split every `train.eval_every_steps` steps (or every epoch), keeps the latest and
the best checkpoint, stops early on the dev metric, finally evaluates the best checkpoint on the
validation and test splits and writes `<workdir>/metrics.json`. With `config.variants` it trains every
variant into `<workdir>/<name>` and writes a side-by-side comparison (`comparison`: comparison.md /
.json, beside the linear baseline's row for sentence and pair tasks); so does a single run with
`config.train.linear_baseline` (its row and the baseline's). Multi-host start-up: `distributed`.

`_train` reads top to bottom: `_plan_run` (data, model, optimiser, steps), `_TrainLoop` (restore, then
`train`: `_step`, `_log_train`, `_evaluate`, `_save`, progress), `_final_evaluation`, the trees drawn
by the caller's `induce_trees` (the analysis layer, above this one) and metrics.json. Running out of
device memory is a `DeviceMemoryError` naming the batch shapes and the config keys that bound them.
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
from typing import Any, Callable, Iterable, Mapping

from absl import logging
import jax
import ml_collections
import numpy as np

from jax_structured import errors
from jax_structured.training import checkpoints as ckpt_lib
from jax_structured.training import comparison
from jax_structured import config as config_lib
from jax_structured.training import metrics as metrics_lib
from jax_structured.training import optimizers
from jax_structured.training import parallel
from jax_structured.training import steps
from jax_structured.training import distributed
from jax_structured.training import interrupts
from jax_structured.training import workdir_lock
from jax_structured.training.assembly import EVAL_SPLITS
from jax_structured.training.assembly import Assembled
from jax_structured.training.assembly import check_batch
from jax_structured.training.assembly import evaluate_split
from jax_structured.training.assembly import evaluate_sums as _evaluate_sums
from jax_structured.training.assembly import out_of_memory_names as _out_of_memory_names
from jax_structured.training.assembly import batch_shapes as _shapes
from jax_structured.training.assembly import assemble

# --- data helpers -----------------------------------------------------------------------------------

def _num_batches(split, batch_size: int, num_shards: int) -> int:
  if hasattr(split, 'num_batches'):
    return int(split.num_batches(batch_size, num_shards=num_shards))
  return sum(1 for _ in split.batches(batch_size, shuffle=False, num_shards=num_shards))


def _batch_spec(batch: Mapping[str, np.ndarray]) -> dict[str, list]:
  return {k: [list(np.shape(v)), str(np.asarray(v).dtype)] for k, v in batch.items()}


def _model_init_sample(split, batch_size: int) -> dict[str, np.ndarray]:
  batch = next(iter(split.batches(batch_size, shuffle=False)))
  return {k: np.asarray(v) for k, v in batch.items()}


# --- the loop ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class LoopState:
  """Host-side position of the loop (saved as JSON in every checkpoint's meta)."""
  epoch: int = 0
  batch_in_epoch: int = 0
  best: float | None = None
  best_step: int | None = None
  evals_since_best: int = 0
  history: list = dataclasses.field(default_factory=list)
  plateau: dict = dataclasses.field(default_factory=dict)
  train_seconds: float = 0.0  # wall time of the training loop over all sessions, up to the last save


def _abstract_like(state: Any, sharding) -> Any:
  return jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), x.dtype, sharding=sharding), state)


def _set_scalar(runner: parallel.Runner, state: Any, **values) -> Any:
  """Replaces float32 scalar fields of a device state (in the runner's layout)."""
  if runner.mode == 'pmap':
    n = len(runner.local_devices)
    new = {k: jax.device_put(np.full((n,), v, np.float32), runner.stacked) for k, v in values.items()}
  else:
    new = {k: runner.replicate(np.asarray(v, np.float32)) for k, v in values.items()}
  return state.replace(**new)


def train_and_evaluate(config: config_lib.ResolvedConfig | ml_collections.ConfigDict, workdir: str, *,
                       hooks: Iterable[Callable[[int], None]] = (),
                       induce_trees: Callable[..., dict] | None = None) -> dict[str, Any]:
  """Trains `config` into `workdir` (resuming when it holds checkpoints); returns the final metrics.

  Args:
    config: the experiment config, resolved (`jax_structured.config.resolve`) or not: a plain
      ConfigDict is resolved here, once.
    workdir: run directory (checkpoints, event files, config, vocabulary, metrics.json).
    hooks: callables `hook(step)` run after every training step (after evaluation/checkpointing).
    induce_trees: `analysis.induce_trees` (or a function with its signature), called after training
      as `induce_trees(workdir, split='test', num_pictures=config.train.render_trees)` when
      `config.train.render_trees > 0`; its statistics go to metrics.json under 'induced_trees'.
      It is passed in because the analysis of trained workdirs is a layer above training.

  Returns:
    {'validation': {...}, 'test': {...}, 'best_step', 'dev_metric', 'steps', ...}; with
    `config.variants`: {variant name: that dict}.

  Raises:
    ValueError before training when `config.train.render_trees > 0` and no `induce_trees` is given;
    DeviceMemoryError naming the batch shape and the config keys that bound it when the device runs
    out of memory; `workdir_lock.WorkdirBusyError` when another live run holds `workdir` (one run per
    workdir: process 0 locks it, `workdir_lock.hold`) and `errors.WorkdirError` when it is a file or
    cannot be written, both before any data is loaded; `interrupts.Interrupted` after SIGINT /
    SIGTERM stopped training with the current step saved (the same call resumes from it).
  """
  metrics_lib.quiet_library_logs()
  config = config_lib.resolve(config)
  distributed.maybe_initialize_distributed()  # asked by JAX_COORDINATOR_ADDRESS (launch.train: flags)
  with workdir_lock.hold(workdir) if jax.process_index() == 0 else contextlib.nullcontext():
    runs = config_lib.variants(config) if config.variants else {'': config}
    for run_config in runs.values():
      _check_render_trees(run_config, induce_trees)  # before any run trains
    train_one = lambda c, w: _train(c, w, hooks=hooks, induce_trees=induce_trees)  # noqa: E731
    try:
      if config.variants:
        return comparison.train_variants(config, workdir, train_one)
      results = train_one(config, workdir)
      if config.train.linear_baseline:
        comparison.write_run_and_baseline(config, workdir, results)
      return results
    except (OSError, ValueError) as e:  # a disk that filled up (or went read-only) mid-run
      disk = errors.disk_error(e, workdir)  # names the workdir where the error names no file
      if disk is None:
        raise
      raise disk from e


def _train(config: config_lib.ResolvedConfig, workdir: str, *, hooks=(), induce_trees=None
           ) -> dict[str, Any]:
  """One run: prepare, restore or start, train with periodic evaluation, final evaluation, files."""
  run = _plan_run(config, workdir)
  with ckpt_lib.Checkpoints(workdir, dev_metric=run.parts.task.dev_metric,
                             higher_is_better=run.parts.task.higher_is_better) as ckpts:
    loop = _TrainLoop(run, ckpts, workdir)  # restores the latest checkpoint, if any
    try:
      _write_run_files(run, workdir)
      loop.train(hooks)
      results = _final_evaluation(run.parts, ckpts, run.task_data, run.eval_batch_size)
      results.update(loop.summary(previous=_read_metrics(workdir)))
      loop.write_final(results)
    finally:  # an error mid-run still flushes its events and ends the writer's thread
      loop.close()
  if config.train.render_trees:  # reads the closed checkpoints
    results['induced_trees'] = _render_trees(induce_trees, workdir, config.train.render_trees)
  results = metrics_lib.jsonable(results)  # returned exactly as metrics.json reads back
  metrics_lib.write_json(os.path.join(workdir, 'metrics.json'), results)
  return results


def _check_render_trees(config: config_lib.ResolvedConfig, induce_trees) -> None:
  render = config.train.render_trees
  if render and induce_trees is None:
    raise ValueError(f'config.train.render_trees={render} draws induced trees after training, which '
                     'needs the analysis layer: pass induce_trees=jax_structured.analysis.induce_trees '
                     '(launch.train does), or set config.train.render_trees=0')


@dataclasses.dataclass
class _RunPlan:
  """What one training run reads, planned before it starts: the config, the data, the assembled model
  (`assembly.Assembled`) and the batch and step counts."""
  config: config_lib.ResolvedConfig
  task_data: Any
  parts: Assembled
  sample: dict
  batch_size: int
  eval_batch_size: int
  steps_per_epoch: int
  total_steps: int
  task_name: str


def _plan_run(config: config_lib.ResolvedConfig, workdir: str) -> _RunPlan:
  """Checks the config against the workdir, loads the data, builds the model, optimiser and steps."""
  from jax_structured import data  # pylint: disable=g-import-not-at-top
  from jax_structured.training import embedding_sizes  # pylint: disable=g-import-not-at-top
  mode = config.parallel
  if mode == 'none' and jax.process_count() > 1:
    raise ValueError(f"config.parallel='none' trains on one device, but this job has "
                     f"{jax.process_count()} processes: use 'shard_map' (or 'pmap')")
  config = embedding_sizes.resolve(config)  # data./model.embedding_dim 0: the vectors' size
  os.makedirs(workdir, exist_ok=True)
  ckpt_lib.check_config(workdir, config)
  task_data = data.load(config.data)
  for name in ('train', 'validation'):
    if name not in task_data.splits:
      raise KeyError(f'config.data.name={config.data.name!r} gave no {name!r} split '
                     f'(splits: {sorted(task_data.splits)})')
  train_split = task_data.splits['train']
  batch_size = int(config.data.batch_size)
  steps_per_epoch = _num_batches(train_split, batch_size, parallel.make_mesh(mode).devices.size)
  if steps_per_epoch == 0:
    raise ValueError(f'the train split of {config.data.name!r} is empty')
  total_steps = config.train.num_steps or config.train.num_epochs * steps_per_epoch
  sample = _model_init_sample(train_split, batch_size)
  parts = assemble(config, task_data, sample=sample, mode=mode, total_steps=total_steps)
  return _RunPlan(config, task_data, parts, sample, batch_size, config.train.eval_batch_size or batch_size,
              steps_per_epoch, total_steps, config.task or task_data.kind)


def _write_run_files(run: _RunPlan, workdir: str) -> None:
  """config.json / config.py, vocabulary, labels, extras and run.json (what restoring needs)."""
  task, task_data = run.parts.task, run.task_data
  ckpt_lib.write_config(workdir, run.config)
  ckpt_lib.write_run_files(
      workdir, vocab=task_data.vocab, label_names=task_data.label_names, extras=task_data.extras,
      run_info={'kind': task_data.kind, 'task': run.task_name, 'num_classes': task_data.num_classes,
                'vocab_size': len(task_data.vocab), 'dev_metric': task.dev_metric,
                'higher_is_better': task.higher_is_better, 'batch_spec': _batch_spec(run.sample),
                'embeddings_shape': (None if task_data.embeddings is None
                                     else list(np.shape(task_data.embeddings)))})
  coverage = task_data.extras.get('embedding_coverage') if task_data.extras else None
  if coverage is not None and jax.process_index() == 0:  # pretrained vectors: what they covered
    from jax_structured.data import embeddings as embeddings_lib  # pylint: disable=g-import-not-at-top
    embeddings_lib.write_report(coverage, workdir)


class _TrainLoop:
  """The training loop of one run: steps, train logging, evaluation, checkpoints, early stopping.

  `train(hooks)` runs epochs of `_step` until `total_steps` or early stopping; after each step it
  logs the train metrics every `train.log_every_steps`, evaluates on dev (and saves) every
  `train.eval_every_steps` or epoch, saves every `train.checkpoint_every_steps`, and reports progress.
  """

  def __init__(self, run: _RunPlan, ckpts, workdir: str):
    self.run, self.ckpts, self.workdir = run, ckpts, workdir
    parts, opt_cfg = run.parts, run.config.optimizer
    self.task, self.runner = parts.task, parts.runner
    self.plateau = optimizers.Plateau(opt_cfg.plateau_factor, opt_cfg.plateau_patience,
                                      opt_cfg.plateau_threshold, self.task.higher_is_better)
    self.loop, state = LoopState(), parts.state
    # The newest checkpoint that restores (damaged newer ones are moved aside, with a warning).
    restored = ckpts.restore_latest(_abstract_like(state, self.runner.replicated))
    self.last_saved = None
    if restored is not None:
      self.last_saved, state, meta = restored
      self.loop = LoopState(**meta['loop'])
      self.plateau.restore(self.loop.plateau)
      logging.info('resumed from %s (step %d, epoch %d, batch %d)', ckpts.step_path(self.last_saved),
                   self.last_saved, self.loop.epoch, self.loop.batch_in_epoch)
    # Events of earlier sessions after the restored step are superseded: this session logs them again.
    self.writer = metrics_lib.create_writer(workdir, start_step=self.last_saved or 0)
    if not metrics_lib.hparams_written(workdir):  # once per run (a killed first session may lack them)
      self.writer.write_hparams(config_lib.flatten(config_lib.to_dict(run.config)))
    self.progress = metrics_lib.ProgressReport(
        num_train_steps=run.total_steps, writer=self.writer, every_steps=run.config.train.log_every_steps,
        compile_seconds=lambda: self.runner.compile_seconds)
    self._state = self.runner.place(state)
    # The train step dispatched last, not yet finished (`_finish`): (metrics, pending, batch, shapes).
    self._open: tuple | None = None
    self._flagged_last = False  # the last finished step needed the exact program
    self.rng = self.runner.put_rng(jax.random.fold_in(jax.random.PRNGKey(run.config.seed), 2))
    self.step = self.step_start = self.logged_step = int(parallel.to_host(state.step))
    self.pending: list[tuple[Any, dict]] = []  # (device metrics, batch shapes) of steps not yet logged
    self.t_start = time.time()
    self.seconds_before = self.loop.train_seconds  # of earlier sessions of this run

  @property
  def state(self) -> Any:
    """The state after every dispatched step (finishes the open one: `_finish`)."""
    self._finish()
    return self._state

  @state.setter
  def state(self, value: Any) -> None:
    self._finish()
    self._state = value

  def _finish(self) -> None:
    """Completes the open train step (`_settle`), so that the state is that after every step."""
    if self._open is not None:
      record, self._open = self._open, None
      self._settle(record)

  def _settle(self, record: tuple) -> None:
    """Reads whether `record`'s step had flagged examples (waits for it) and queues its metrics for
    logging; if it had, completes it with the exact program (`parallel.Runner.finish_train`) and runs
    the open step again, which was dispatched blocked (`steps.train_step`) before this was known."""
    metrics, pending, (batch, device_batch), shapes = record
    with _out_of_memory_names(self.run.config, f'the train step {self.step}', [shapes]):
      self._flagged_last = bool(self.runner.flagged_count(pending))
      if self._flagged_last:
        self._state, metrics = self.runner.finish_train(self._state, metrics, pending, batch, self.rng)
        if self._open is not None:
          _, _, open_batches, open_shapes = self._open
          self._open = self._dispatch(open_batches, open_shapes, blocked=None)
    self.pending.append((metrics, shapes))

  def _dispatch(self, batches, shapes, blocked) -> tuple:
    """Starts a train step on the device; returns its record (metrics, pending, (numpy batch, device
    batch), shapes)."""
    with _out_of_memory_names(self.run.config, f'the train step {self.step + 1}', [shapes]):
      # Batches and states are placed explicitly; an implicit host-to-device copy in the step is a
      # bug (jax.pmap itself transfers a scalar per call, so its driver is exempt).
      with jax.transfer_guard_host_to_device('allow' if self.runner.mode == 'pmap' else 'disallow'):
        self._state, metrics, pending = self.runner.start_train(self._state, batches[1], self.rng,
                                                                blocked)
    return metrics, pending, batches, shapes

  def train(self, hooks) -> None:
    """Trains to the end; after SIGINT / SIGTERM, saves the current step and raises `Interrupted`."""
    with interrupts.deferred(last_saved=lambda: self.last_saved) as self._interrupt:
      self._train_epochs(hooks)

  def _stop_if_interrupted(self) -> None:
    """After a step: when a signal came, saves this step, flushes the metrics, raises `Interrupted`."""
    if self._interrupt.signum is None:
      return
    if self.last_saved != self.step:
      self._save()
    self.writer.flush()
    raise interrupts.Interrupted(self._interrupt.signum, self.step, self.ckpts.step_path(self.step))

  def _train_epochs(self, hooks) -> None:
    run, cfg = self.run, self.run.config.train
    stop = self.step >= run.total_steps
    while not stop:
      self.state = _set_scalar(self.runner, self.state,
                               embed_scale=optimizers.embedding_scale(run.config.optimizer,
                                                                      self.loop.epoch))
      for i, batch in enumerate(run.task_data.splits['train'].batches(
          run.batch_size, shuffle=cfg.shuffle, seed=run.config.seed, epoch=self.loop.epoch,
          num_shards=self.runner.num_shards)):
        if i < self.loop.batch_in_epoch:
          continue  # resuming inside this epoch: same order, skip what was done
        epoch_end = self._step(i, batch)
        if self.step % cfg.log_every_steps == 0 or self.step >= run.total_steps:
          self._log_train()
        if ((cfg.eval_every_steps and self.step % cfg.eval_every_steps == 0)
            or (not cfg.eval_every_steps and epoch_end) or self.step >= run.total_steps):
          stop = self._evaluate() or self.step >= run.total_steps  # evaluates and saves
        elif cfg.checkpoint_every_steps and self.step % cfg.checkpoint_every_steps == 0:
          self._save()
        self.progress(self.step)  # after the evaluation: the line shows this step's dev metric
        if hooks:
          self._finish()
        for hook in hooks:
          hook(self.step)
        self._stop_if_interrupted()
        if stop or epoch_end:
          break
      else:  # every full epoch breaks at epoch_end above
        raise RuntimeError(f'train epoch {self.loop.epoch} gave {self.loop.batch_in_epoch} batches, '
                           f'expected {run.steps_per_epoch}: the split\'s num_batches disagrees with its '
                           'batches')
    if self.pending or self._open:
      self._log_train()
    if not self.loop.history:
      self._evaluate()  # resumed a run that had stopped before its first evaluation
    self._say_if_capped()

  def _say_if_capped(self) -> None:
    """One console line when training stopped at its step cap while dev was still improving: the best
    dev metric came within the last `early_stopping_patience` evaluations (0: at the last one)."""
    run, cfg, loop = self.run, self.run.config.train, self.loop
    patience = cfg.early_stopping_patience
    if (self.step == self.step_start or self.step < run.total_steps or not loop.history
        or loop.evals_since_best >= max(patience, 1)):
      return
    cap = f'train.num_steps={cfg.num_steps}' if cfg.num_steps else f'train.num_epochs={cfg.num_epochs}'
    metric = self.task.dev_metric
    metrics_lib.console(f'stopped at the cap {cap} (step {self.step}) while dev {metric} was still '
                        f'improving (best {loop.best:.4f} at step {loop.best_step}): raise '
                        f'{cap.split("=")[0]} to train to convergence')

  def _step(self, i: int, batch: Mapping[str, np.ndarray]) -> bool:
    """One train step on batch `i` of the epoch; True when it ends the epoch."""
    run = self.run
    check_batch(batch, where=f'train epoch {self.loop.epoch} batch {i}',
                num_classes=run.task_data.num_classes, task_name=run.task_name)
    shapes = _shapes(batch)
    with _out_of_memory_names(run.config, f'the train step {self.step + 1}', [shapes]):
      device_batch = self.runner.shard_batch(batch)
    if self._flagged_last:
      # The last step needed the exact program: sharp trees come in runs (a sharpening model), so
      # the previous step is completed first and this one runs once, unblocked.
      self._finish()
    # Otherwise dispatched before the previous step is read: no host round trip between two steps.
    # It is blocked (changes nothing) if the previous step turns out to need the exact program, and
    # then runs again once that is done (`_settle`).
    previous = self._open
    self._open = self._dispatch((batch, device_batch), shapes,
                                blocked=None if previous is None else previous[1]['stalled'])
    if previous is not None:
      self._settle(previous)
    self.step += 1
    self.loop.batch_in_epoch = i + 1
    if self.loop.batch_in_epoch < run.steps_per_epoch:
      return False
    self.loop.epoch, self.loop.batch_in_epoch = self.loop.epoch + 1, 0  # saved: the next epoch's start
    return True

  def _log_train(self) -> None:
    """Writes the train metrics of the steps since the last call; raises if they are not finite."""
    self._finish()
    acc = metrics_lib.Accumulator()
    steps = f'steps {self.logged_step + 1}-{self.step}'
    with _out_of_memory_names(self.run.config, f'the train {steps}', [s for _, s in self.pending]):
      for metrics, _ in self.pending:
        acc.add(metrics)  # waits for the steps: a deferred device error surfaces here
    self.pending.clear()
    sums = acc.result()
    summary = self.task.summarize({k: v for k, v in sums.items()
                                   if k not in ('grad_norm', 'flagged_examples')})
    scalars = {f'train/{k}': v for k, v in summary.items()}
    if sums.get('grad_norm'):
      scalars['train/grad_norm'] = sums['grad_norm'][0] / sums['grad_norm'][1]
    if sums.get('flagged_examples'):  # examples whose trees took the exact program (nn.exactness)
      scalars['train/flagged_examples'] = sums['flagged_examples'][0]
    diverged = {k: v for k, v in scalars.items() if k in ('train/loss', 'train/grad_norm')
                and not math.isfinite(v)}
    if diverged:  # before the state of these steps is ever saved
      raise FloatingPointError(
          f'training diverged: {", ".join(f"{k} = {v}" for k, v in diverged.items())} over {steps}. '
          + (f'Nothing after step {self.last_saved} was saved: the checkpoints in {self.workdir} hold '
             'finite states. ' if self.last_saved is not None else 'Nothing was saved. ')
          + 'Lower optimizer.learning_rate, set optimizer.clip_norm, or check the data of those '
          'steps (a changed config trains into a fresh --workdir).')
    scalars['train/learning_rate'] = float(self.run.parts.schedule(self.step - 1)) * self.plateau.scale
    self.writer.write_scalars(self.step, scalars)
    self.progress.loss = summary.get('loss')
    self.logged_step = self.step

  def _save(self, metrics_for_best=None) -> None:
    self._finish()  # the open step too (the first one after a log point has nothing else pending)
    if self.pending:
      self._log_train()  # writes the unlogged steps and checks them for divergence first
    self.loop.plateau = self.plateau.state()
    self.loop.train_seconds = self.seconds_before + time.time() - self.t_start
    self.ckpts.save(self.step, self.runner.canonical(self.state), {'loop': dataclasses.asdict(self.loop)},
                    metrics_for_best)
    self.last_saved = self.step

  def _evaluate(self) -> bool:
    """Evaluates on dev, updates best / plateau / early stopping, saves; True to stop."""
    task, loop, metric = self.task, self.loop, self.task.dev_metric
    with self.progress.timed('eval'):
      dev = evaluate_split(self.run.parts, self.state, self.run.task_data.splits['validation'],
                           self.run.eval_batch_size)
    value = dev[metric]
    if task.is_better(value, loop.best):
      loop.best, loop.best_step, loop.evals_since_best = value, self.step, 0
    else:
      loop.evals_since_best += 1
    old_scale = self.plateau.scale
    if self.plateau.update(value) != old_scale:
      logging.info('dev %s did not improve: learning rate scale %.4g -> %.4g', metric, old_scale,
                   self.plateau.scale)
      self.state = _set_scalar(self.runner, self.state, lr_scale=self.plateau.scale)
    loop.history.append({'step': self.step, 'epoch': loop.epoch, **dev})
    self.writer.write_scalars(self.step, {f'dev/{k}': v for k, v in dev.items()})
    self.progress.dev = f'dev {metric} {value:.4f} (step {self.step})'
    metrics_lib.console(f'step {self.step}: dev ' + ', '.join(f'{k} {v:.4f}' for k, v in dev.items())
                        + f' (best {metric} {loop.best:.4f} at step {loop.best_step})')
    self._save({metric: value} if not math.isnan(value) else None)
    patience = self.run.config.train.early_stopping_patience
    if patience and loop.evals_since_best >= patience:
      logging.info('early stopping at step %d: no dev improvement in %d evaluations', self.step, patience)
      return True
    return False

  def summary(self, previous: Mapping[str, Any] | None) -> dict[str, Any]:
    """The loop's figures for metrics.json: steps, history and the training time of all sessions.

    A session that trains no step (re-running a finished workdir) keeps the training figures: from
    the checkpoint, or from `previous` (the metrics.json of a run saved before the checkpoints kept
    the training time).
    """
    seconds = self.loop.train_seconds  # up to the last save, which the last step's evaluation made
    if self.last_saved != self.step:
      seconds = self.seconds_before + time.time() - self.t_start
    out = {'dev_metric': self.task.dev_metric, 'higher_is_better': self.task.higher_is_better,
           'steps': self.step, 'epochs_completed': self.loop.epoch, 'history': self.loop.history,
           'train_seconds': seconds, 'steps_per_second': self.step / seconds if seconds > 0 else None}
    if seconds <= 0 and previous and previous.get('steps') == self.step:
      out.update({k: previous[k] for k in ('train_seconds', 'steps_per_second') if k in previous})
    return out

  def write_final(self, results: Mapping[str, Any]) -> None:
    self.writer.write_scalars(self.step, {f'final/{split}/{k}': v for split in EVAL_SPLITS
                                          if split in results for k, v in results[split].items()})

  def close(self) -> None:
    self.writer.flush()
    self.writer.close()


def _read_metrics(workdir: str) -> dict[str, Any] | None:
  """The metrics.json a previous session wrote, or None."""
  path = os.path.join(workdir, 'metrics.json')
  if not os.path.exists(path):
    return None
  try:
    with open(path, encoding='utf-8') as f:
      return json.load(f)
  except (OSError, json.JSONDecodeError):
    return None


def _final_evaluation(parts: Assembled, ckpts, task_data, batch_size: int) -> dict:
  """Restores the best checkpoint and evaluates it on the validation and test splits.

  A split the data does not have gets no metrics: `results['absent_splits'][split]` says so
  ('none (the data has no test split)'), and so does the console line of the final evaluation.
  """
  best = ckpts.resolve('best')
  state, _ = ckpts.restore(best, _abstract_like(parts.state, parts.runner.replicated))
  placed = parts.runner.place(state)
  results: dict[str, Any] = {'best_step': best,
                             'num_parameters': int(sum(np.size(x) for x in jax.tree.leaves(state.params)))}
  shown = []
  for split in EVAL_SPLITS:
    if split in task_data.splits:
      results[split] = evaluate_split(parts, placed, task_data.splits[split], batch_size)
      shown.append(f'{split} ' + ', '.join(f'{k} {v:.4f}' for k, v in results[split].items()))
    else:
      name = 'dev' if split == 'validation' else split
      results.setdefault('absent_splits', {})[split] = f'none (the data has no {name} split)'
      shown.append(f'{split}: {results["absent_splits"][split]}')
  metrics_lib.console(f'final evaluation (best step {best}): ' + '; '.join(shown))
  if 'test' in task_data.splits:  # inference speed: a second, compiled pass over test, timed
    start = time.perf_counter()
    sums = _evaluate_sums(parts, placed, task_data.splits['test'], batch_size)
    seconds = time.perf_counter() - start
    examples = float(sums.get('accuracy', sums['loss'])[1])
    results['inference_examples_per_second'] = examples / seconds if seconds > 0 else None
  return results


def _render_trees(induce_trees: Callable[..., dict], workdir: str, num_pictures: int) -> dict[str, Any]:
  """`induce_trees(workdir, split='test', num_pictures=...)` statistics for metrics.json."""
  try:
    return induce_trees(workdir, split='test', num_pictures=num_pictures)
  except ValueError as e:  # e.g. a variant without attention scores: nothing to decode (expected)
    logging.info('config.train.render_trees: no trees induced for %s: %s', workdir, e)
    return {'skipped': str(e)}
