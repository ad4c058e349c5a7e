"""Orbax checkpoints and the files saved beside them in a workdir.

Workdir layout (written by process 0; Orbax coordinates the processes for checkpoints)::

  config.json, config.py   the resolved config (`config.py` rebuilds it: `get_config()`; `read_config`
                           resolves it again: `jax_structured.config.resolve`)
  vocab.json               the vocabulary tokens (`data.Vocabulary.save`)
  labels.json              the label names
  extras.json              JSON-able `TaskData.extras` (Vocabulary values as {'__vocabulary__': tokens})
  run.json                 task / data facts needed to rebuild the model without the data
  checkpoints/<step>/      Orbax CheckpointManager: items 'state' (the TrainState) and 'meta' (JSON:
                           loop position, best dev metric, plateau state, fingerprint of the state)

Saves are atomic (Orbax writes a temporary directory and renames it when complete; unfinished
temporary directories are ignored and cleaned up), so a checkpoint is never half-written. The
manager keeps the latest checkpoint and the best one by the dev metric (`best_fn`). A checkpoint
whose files were damaged is detected on restore -- Orbax fails to read it, or the restored arrays no
longer match the SHA-256 fingerprint saved with them. Restoring it by name is an error naming its path
and the cause; resuming (`restore_latest`) moves it aside to `checkpoints/damaged/<step>-<time>` and
restores the newest good one. Nothing is ever deleted. The messages name what failed: the array and
the file a restore could not read, the JSON file missing or garbled, or, for a save the file system
refused, the last saved step and what to do (`checkpoint_faults`).
"""
from __future__ import annotations

import gc
import hashlib
import json
import os
import time
from typing import Any, Mapping

from absl import logging
from etils import epath
import jax
import numpy as np
import orbax.checkpoint as ocp
from orbax.checkpoint import checkpoint_managers

from jax_structured import config as config_lib
from jax_structured import errors
from jax_structured.training import checkpoint_faults as faults

CHECKPOINT_DIR = 'checkpoints'


class CheckpointError(ValueError):
  """A checkpoint (or the files beside it) cannot be used; the message names the path."""


class _DamagedCheckpoint(CheckpointError):
  """A checkpoint whose files cannot be read or no longer hold what was saved (its `cause`: one line)."""

  def __init__(self, path: str, cause: str):
    super().__init__(f'checkpoint {path} is corrupted: {cause}')
    self.path, self.cause = path, cause


def _host_leaves(tree: Any) -> list[tuple[str, np.ndarray]]:
  """(path, host copy) of every leaf (the first addressable shard of replicated arrays)."""
  out = []
  for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
    if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
      leaf = leaf.addressable_data(0)
    out.append((jax.tree_util.keystr(path), np.asarray(leaf)))
  return out


def _fingerprint_of(leaves: list[tuple[str, np.ndarray]]) -> str:
  digest = hashlib.sha256()
  for path, arr in leaves:
    arr = np.ascontiguousarray(arr)
    digest.update(path.encode())
    digest.update(f'{arr.dtype.str}{arr.shape}'.encode())
    digest.update(arr.tobytes())
  return digest.hexdigest()


def fingerprint(tree: Any) -> str:
  """SHA-256 over every leaf's path, dtype, shape and bytes (host copies of replicated arrays)."""
  return _fingerprint_of(_host_leaves(tree))


def _non_finite(leaves: list[tuple[str, np.ndarray]]) -> str:
  """'' if every floating-point leaf is finite, else the offending paths (at most 5) and counts."""
  bad = [f'{path} ({int((~np.isfinite(arr)).sum())} of {arr.size})' for path, arr in leaves
         if np.issubdtype(arr.dtype, np.inexact) and not np.isfinite(arr).all()]
  return ', '.join(bad[:5]) + (' ...' if len(bad) > 5 else '')


def _key_name(entry: Any) -> str:
  for attr in ('key', 'name', 'idx'):
    if hasattr(entry, attr):
      return str(getattr(entry, attr))
  return str(entry)


def _leaf_shapes(tree: Any) -> dict[str, tuple[int, ...]]:
  """{'params/encoder/kernel': shape} of every array leaf (dataclass fields, dict keys and tuple
  indices alike, so a TrainState and the checkpoint's metadata tree of it give the same paths)."""
  out = {}
  for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
    if hasattr(leaf, 'shape'):
      out['/'.join(_key_name(e) for e in path)] = tuple(leaf.shape)
  return out


def _is_primary() -> bool:
  return jax.process_index() == 0


def _write_json(path: str, value: Any) -> None:
  """Atomic JSON write (temporary file + rename), process 0 only."""
  if not _is_primary():
    return
  tmp = f'{path}.tmp-{os.getpid()}'
  with open(tmp, 'w', encoding='utf-8') as f:
    json.dump(value, f, indent=2, sort_keys=True, ensure_ascii=False)
  os.replace(tmp, path)


def _read_json(path: str) -> Any:
  if not os.path.exists(path):
    raise FileNotFoundError(f'{path} does not exist')
  try:
    with open(path, encoding='utf-8') as f:
      return json.load(f)
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise CheckpointError(f'{path} is corrupted: {e}') from e


# --- the files beside the checkpoints ---------------------------------------------------------------

def check_config(workdir: str, config: config_lib.ResolvedConfig) -> None:
  """Raises when `workdir` was trained with a config incompatible with `config` (resume check).

  Both configs are compared resolved (a key the saved one leaves out counts as its default). Only
  `train.*`, `parallel` and `variants` may differ (see `config.RESUMABLE_PREFIXES`). The
  error names every differing key with both values.
  """
  path = os.path.join(workdir, 'config.json')
  if not os.path.exists(path):
    if os.path.isdir(os.path.join(workdir, CHECKPOINT_DIR)) and os.listdir(
        os.path.join(workdir, CHECKPOINT_DIR)):
      raise CheckpointError(f'{workdir} holds checkpoints but no config.json: cannot check that they '
                            'belong to this config; use a fresh workdir')
    return
  diff = config_lib.incompatible_keys(config_lib.to_dict(read_config(workdir)), config_lib.to_dict(config))
  if diff:
    raise CheckpointError(f'workdir {workdir} holds a run of another config ({path}); differing keys:\n  '
                          + '\n  '.join(diff) + '\nuse a fresh --workdir or the same config')


def write_config(workdir: str, config: config_lib.ResolvedConfig) -> None:
  """Writes config.json and config.py (whose `get_config()` returns it as a ConfigDict)."""
  as_dict = config_lib.to_dict(config)
  _write_json(os.path.join(workdir, 'config.json'), as_dict)
  if _is_primary():
    source = ('"""The resolved config of this run (written by jax_structured.training)."""\n'
              'import json\n\nimport ml_collections\n\n_CONFIG = json.loads(r"""\n'
              f'{json.dumps(as_dict, indent=2, sort_keys=True)}\n""")\n\n\n'
              'def get_config():\n  return ml_collections.ConfigDict(_CONFIG)\n')
    tmp = os.path.join(workdir, f'config.py.tmp-{os.getpid()}')
    with open(tmp, 'w', encoding='utf-8') as f:
      f.write(source)
    os.replace(tmp, os.path.join(workdir, 'config.py'))


def check_workdir(workdir: str) -> None:
  """Raises when `workdir`, a trained run to read, is not a folder.

  Raises:
    FileNotFoundError ('workdir W does not exist'); NotADirectoryError when it is a file.
  """
  if os.path.isdir(workdir):
    return
  if os.path.exists(workdir):
    raise NotADirectoryError(f'workdir {workdir} is a file, not a directory: give --workdir the folder '
                             'a training run wrote')
  raise FileNotFoundError(f'workdir {workdir} does not exist')


def read_config(workdir: str) -> config_lib.ResolvedConfig:
  """The config saved in `workdir`'s config.json, resolved (`jax_structured.config.resolve`).

  Raises:
    FileNotFoundError when the workdir has no config.json; NotADirectoryError when it is a file;
    CheckpointError naming the file when it is damaged or no longer a valid config (e.g. it holds a
    key this version does not know).
  """
  if os.path.exists(workdir):
    check_workdir(workdir)  # a file given as the workdir
  path = os.path.join(workdir, 'config.json')
  if not os.path.exists(path):
    raise FileNotFoundError(f'workdir {workdir} has no config.json: not a training workdir (or training '
                            'has not started)')
  try:
    saved = _read_json(path)
    saved.pop('distributed', None)  # a record of how an older run started, not a request (config.py)
    return config_lib.resolve(saved)
  except errors.ConfigError as e:
    raise CheckpointError(f'{path} is not a valid config for this version of jax_structured: {e}') from e


def write_run_files(workdir: str, *, vocab, label_names, extras: Mapping[str, Any],
                    run_info: Mapping[str, Any]) -> None:
  """Writes vocab.json, labels.json, extras.json and run.json (process 0)."""
  if _is_primary():
    vocab.save(os.path.join(workdir, 'vocab.json'))
  _write_json(os.path.join(workdir, 'labels.json'), list(label_names))
  _write_json(os.path.join(workdir, 'extras.json'), _encode_extras(extras))
  _write_json(os.path.join(workdir, 'run.json'), dict(run_info))


def read_run_files(workdir: str) -> dict[str, Any]:
  """{'vocab', 'label_names', 'extras', 'run_info'} saved by `write_run_files`."""
  from jax_structured import data  # pylint: disable=g-import-not-at-top
  vocab_path = os.path.join(workdir, 'vocab.json')
  try:
    vocab = data.Vocabulary.load(vocab_path)
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise CheckpointError(f'{vocab_path} is corrupted: {e}') from e
  extras_path = os.path.join(workdir, 'extras.json')
  extras = _decode_extras(_read_json(extras_path)) if os.path.exists(extras_path) else {}
  return {'vocab': vocab, 'label_names': _read_json(os.path.join(workdir, 'labels.json')),
          'extras': extras, 'run_info': _read_json(os.path.join(workdir, 'run.json'))}


def _encode_extras(extras: Mapping[str, Any]) -> dict[str, Any]:
  from jax_structured import data  # pylint: disable=g-import-not-at-top
  out = {}
  for key, value in extras.items():
    if isinstance(value, data.Vocabulary):
      out[key] = {'__vocabulary__': value.tokens}
      continue
    if isinstance(value, np.ndarray):
      value = value.tolist()
    try:
      json.dumps(value)
    except TypeError:
      continue  # not JSON-able (e.g. arrays of embeddings): not needed to rebuild the model
    out[key] = value
  return out


def _decode_extras(encoded: Mapping[str, Any]) -> dict[str, Any]:
  from jax_structured import data  # pylint: disable=g-import-not-at-top
  return {k: data.Vocabulary(v['__vocabulary__']) if isinstance(v, dict) and '__vocabulary__' in v else v
          for k, v in encoded.items()}


# --- the checkpoints --------------------------------------------------------------------------------

class Checkpoints:
  """Latest + best-by-dev-metric Orbax checkpoints of a TrainState in `<workdir>/checkpoints`.

  Args:
    workdir: the run directory.
    dev_metric: the metric name ranking checkpoints (`metrics[dev_metric]` passed to `save`).
    higher_is_better: ranking direction.
    read_only: open an existing directory for restoring only (an error naming the workdir when
      there is no checkpoint).
  """

  def __init__(self, workdir: str, *, dev_metric: str, higher_is_better: bool, read_only: bool = False):
    self.workdir = os.path.abspath(workdir)
    self.directory = os.path.join(self.workdir, CHECKPOINT_DIR)
    if read_only and not os.path.isdir(self.directory):
      raise FileNotFoundError(f'no checkpoint in workdir {workdir}: {self.directory} does not exist')

    def best_fn(metrics):
      # Ties go to the earliest step (the one early stopping / the loop's history calls best).
      step = metrics.get('step', 0)
      return (metrics[dev_metric], -step if higher_is_better else step)

    policy = checkpoint_managers.AnyPreservationPolicy([
        checkpoint_managers.LatestN(n=1),
        checkpoint_managers.BestN(get_metric_fn=best_fn, reverse=not higher_is_better, n=1,
                                  keep_checkpoints_without_metrics=False),
    ])
    options = ocp.CheckpointManagerOptions(
        best_fn=best_fn, best_mode='max' if higher_is_better else 'min',
        preservation_policy=None if read_only else policy, enable_async_checkpointing=False,
        create=not read_only, read_only=read_only, cleanup_tmp_directories=not read_only,
        save_interval_steps=0 if read_only else 1)
    self.manager = ocp.CheckpointManager(self.directory, options=options, item_names=('state', 'meta'))

  def step_path(self, step: int) -> str:
    """The directory of the checkpoint of `step` (it need not exist)."""
    return os.path.join(self.directory, str(step))

  def latest_step(self) -> int | None:
    """The newest saved step, or None when there is no checkpoint."""
    return self.manager.latest_step()

  def best_step(self) -> int | None:
    """The step with the best `dev_metric` (ties: the earliest), or None when none was saved with metrics."""
    return self.manager.best_step()

  def all_steps(self) -> list[int]:
    """Every saved step (the latest and the best are kept)."""
    return list(self.manager.all_steps())

  def save(self, step: int, state: Any, meta: Mapping[str, Any],
           metrics: Mapping[str, float] | None = None) -> None:
    """Saves `state` (replicated arrays) and JSON `meta` at `step` (synchronously, atomically).

    A save without `metrics` (a periodic or interrupted one) is not ranked for the best checkpoint;
    Orbax's warning about it ('Requested `tracked_metric`; did not provide metrics') is dropped.

    Raises:
      CheckpointError (nothing written) when the state holds non-finite values; CheckpointError
      saying that the save failed, why (the path and the file system's reason), the last saved step
      and what to do when the checkpoint folder cannot be written.
    """
    leaves = _host_leaves(state)
    bad = _non_finite(leaves)
    if bad:
      raise CheckpointError(f'not saving step {step} to {self.directory}: non-finite values in {bad}')
    meta = dict(meta, fingerprint=_fingerprint_of(leaves), step=int(step))
    last = self.latest_step()
    try:
      with faults.without_log_record(logging.get_absl_logger(), faults.NO_METRICS_WARNING,
                                     enabled=not metrics):
        self.manager.save(int(step), args=ocp.args.Composite(state=ocp.args.StandardSave(state),
                                                             meta=ocp.args.JsonSave(meta)),
                          metrics=dict(metrics, step=int(step)) if metrics else None, force=True)
      self.manager.wait_until_finished()
    except (OSError, ValueError) as e:
      if not isinstance(e, OSError) and 'local file' not in str(e):
        raise  # not a file-system error (TensorStore's name a local file)
      raise CheckpointError(faults.save_failed(self.directory, int(step), last, e)) from e

  def resolve(self, which: str | int) -> int:
    """'best' | 'latest' | a step -> a saved step (errors name the workdir)."""
    steps = self.all_steps()
    if not steps:
      raise FileNotFoundError(f'no checkpoint in workdir {self.workdir} ({self.directory} is empty)')
    if which == 'latest':
      return self.latest_step()
    if which == 'best':
      step = self.best_step()
      return self.latest_step() if step is None else step
    if isinstance(which, int) or str(which).isdigit():
      if int(which) not in steps:
        raise FileNotFoundError(f'no checkpoint for step {which} in {self.directory}; saved: {steps}')
      return int(which)
    raise ValueError(f"checkpoint must be 'best', 'latest' or a step, got {which!r}")

  def restore(self, step: int, abstract_state: Any) -> tuple[Any, dict[str, Any]]:
    """Restores (state, meta) of `step` into `abstract_state` (ShapeDtypeStructs with shardings).

    Raises:
      CheckpointError naming the checkpoint path when it cannot be read or its arrays do not match
      the fingerprint saved with them (damaged files: the message gives the cause's first line and
      the other checkpoints), or they hold non-finite values.
    """
    try:
      return self._restore(step, abstract_state)
    except _DamagedCheckpoint as e:
      others = [s for s in self.all_steps() if s != step]
      raise CheckpointError(f'{e}; the other checkpoints of this run: '
                            + (f'steps {others} (pass one of them)' if others else 'none')) from e

  def _restore(self, step: int, abstract_state: Any) -> tuple[Any, dict[str, Any]]:
    """`restore`, raising `_DamagedCheckpoint` for damaged files."""
    path = self.step_path(step)
    self._check_tree(path, abstract_state)
    faults.ignore_late_tensorstore_callbacks()
    try:
      restored = self.manager.restore(step, args=ocp.args.Composite(
          state=ocp.args.StandardRestore(abstract_state), meta=ocp.args.JsonRestore()))
    except Exception as e:  # pylint: disable=broad-except  (Orbax / tensorstore raise many types)
      faults.quiet_unretrieved_reads_of(path)
      time.sleep(0.05)  # the reads still in flight end (within ~5 ms) while the filter is installed
      gc.collect()  # the failed reads' tasks are logged (and dropped by the filter) now, not at exit
      raise _DamagedCheckpoint(path, faults.unreadable(path, e)) from e
    state, meta = restored['state'], restored['meta']
    if not isinstance(meta, dict) or 'fingerprint' not in meta:
      raise _DamagedCheckpoint(path, 'its meta item has no fingerprint')
    leaves = _host_leaves(state)
    if _fingerprint_of(leaves) != meta['fingerprint']:
      raise _DamagedCheckpoint(path, 'the restored arrays do not match the SHA-256 fingerprint saved '
                               'with them')
    bad = _non_finite(leaves)
    if bad:  # saved by something other than `save` (which refuses such states)
      raise CheckpointError(f'checkpoint {path} holds non-finite values (a diverged run?) in {bad}')
    return state, meta

  def restore_latest(self, abstract_state: Any) -> tuple[int, Any, dict[str, Any]] | None:
    """(step, state, meta) of the newest checkpoint that restores, to resume from; None if none.

    Damaged checkpoints newer than it (files that cannot be read or no longer match their
    fingerprint) are moved aside to `<workdir>/checkpoints/damaged/<step>-<time>`, each with a
    warning that names it; nothing is deleted, and the manager keeps the latest and the best of the
    checkpoints left.

    Raises:
      CheckpointError when every checkpoint is damaged (nothing moved: the message gives each one's
      cause and what to do), or for any other reason `restore` raises.
    """
    damaged = []
    for step in sorted(self.all_steps(), reverse=True):
      try:
        state, meta = self._restore(step, abstract_state)
      except _DamagedCheckpoint as e:
        damaged.append(e)
        continue
      for error in damaged:
        self._set_aside(error, resumed=step)
      if damaged:
        self._sync_processes('set_aside_damaged_checkpoints')
        self.manager.reload()
      return step, state, meta
    if not damaged:
      return None
    raise CheckpointError(
        f'cannot resume {self.workdir}: every checkpoint is damaged: '
        + '; '.join(f'{e.path}: {e.cause}' for e in damaged)
        + f'. Nothing was changed. To train again from step 0, move {self.directory} away (or use a '
        'fresh --workdir); to keep trying, restore the checkpoint files from a backup.')

  def _set_aside(self, error: _DamagedCheckpoint, *, resumed: int) -> None:
    """Moves the damaged checkpoint of `error` to `<checkpoints>/damaged/<step>-<time>` (process 0)."""
    target = os.path.join(self.directory, 'damaged',
                          f'{os.path.basename(error.path)}-{time.strftime("%Y%m%d-%H%M%S")}')
    if _is_primary():
      os.makedirs(os.path.dirname(target), exist_ok=True)
      os.replace(error.path, target)
    logging.warning('%s; moved it to %s and resumed from the checkpoint of step %d', error, target,
                    resumed)

  @staticmethod
  def _sync_processes(name: str) -> None:
    if jax.process_count() > 1:
      from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
      multihost_utils.sync_global_devices(name)

  def _check_tree(self, path: str, abstract_state: Any) -> None:
    """Raises CheckpointError when the arrays saved at `path` are not those of `abstract_state`.

    Compares the paths and shapes of every leaf (parameters, optimiser state, ...) with the
    checkpoint's metadata, so that a renamed or resized parameter is an error naming it, never a
    silent partial restore. A checkpoint whose metadata cannot be read is left to `restore`.
    """
    try:
      saved = ocp.StandardCheckpointHandler().metadata(epath.Path(path) / 'state')
    except Exception:  # pylint: disable=broad-except  (damaged files: reported by the restore itself)
      return
    saved = _leaf_shapes(getattr(saved, 'tree', saved))
    wanted = _leaf_shapes(abstract_state)
    if not saved or saved == wanted:
      return
    missing = [k for k in wanted if k not in saved]
    extra = [k for k in saved if k not in wanted]
    resized = [k for k in wanted if k in saved and saved[k] != wanted[k]]
    first = lambda keys: sorted(keys, key=lambda k: (not k.startswith('params/'), k))[:5]  # noqa: E731
    lines = ([f'in the model, not in the checkpoint: {k}' for k in first(missing)]
             + [f'in the checkpoint, not in the model: {k}' for k in first(extra)]
             + [f'shape {list(saved[k])} in the checkpoint, {list(wanted[k])} in the model: {k}'
                for k in first(resized)])
    raise CheckpointError(
        f'checkpoint {path} does not fit the model built from {self.workdir}/config.json: '
        f'{len(missing)} arrays only in the model, {len(extra)} only in the checkpoint, {len(resized)} '
        'with another shape; first differences:\n  ' + '\n  '.join(lines)
        + '\nThe model code or the config changed since this checkpoint was written (e.g. renamed '
        'parameters): retrain into a fresh --workdir, or check out the code that wrote it.')

  def close(self) -> None:
    """Waits for pending work and releases the checkpoint manager (also on leaving a `with` block)."""
    self.manager.close()

  def __enter__(self) -> 'Checkpoints':
    return self

  def __exit__(self, *exc) -> None:
    self.close()
