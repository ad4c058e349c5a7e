"""Metric writing: TensorBoard event files through `clu.metric_writers`, console progress, JSON files.

clu 0.0.12 writes TensorBoard summaries with TensorFlow (`clu.metric_writers.summary_writer` imports
it unconditionally, so even `from clu import metric_writers, periodic_actions` fails without it). The
project is TensorFlow-free (ARCHITECTURE.md), so when TensorFlow is not installed `install_clu_writer()`
provides that one module with a `SummaryWriter` backed by tensorboardX (event files readable by
TensorBoard); the rest of clu (`MultiWriter`, `LoggingWriter`, `periodic_actions.ReportProgress`) is
used unchanged. `create_writer` uses that SummaryWriter with or without TensorFlow: it writes every
event to its file before returning (a killed run keeps its history) and starts a resumed session with
a SessionLog START event, so TensorBoard reads each step once (`read_events` reads the files back).
"""
from __future__ import annotations

import importlib.util
import json
import logging as std_logging
import os
import struct
import sys
import time
import types
from typing import Any, Callable, Mapping

from absl import logging
import jax
import numpy as np

_SHIM = 'clu.metric_writers.summary_writer'


def _event_writer_class():
  """`event_writer.SummaryWriter`, imported on first use: its module imports `clu.metric_writers`
  (`interface`), which must find the shim `install_clu_writer` puts in place first."""
  return importlib.import_module('jax_structured.training.event_writer').SummaryWriter


def install_clu_writer() -> None:
  """Makes `clu.metric_writers` importable without TensorFlow (see the module docstring)."""
  if _SHIM in sys.modules or 'clu.metric_writers' in sys.modules:
    return
  if importlib.util.find_spec('tensorflow') is not None:
    return
  module = types.ModuleType(_SHIM, 'TensorFlow-free SummaryWriter (jax_structured.training.metrics).')
  cache = {}

  def __getattr__(name):  # PEP 562: built when clu.metric_writers imports it (after `interface`).
    if name != 'SummaryWriter':
      raise AttributeError(name)
    if name not in cache:
      cache[name] = _event_writer_class()
    return cache[name]

  module.__getattr__ = __getattr__
  sys.modules[_SHIM] = module


install_clu_writer()
from clu import metric_writers  # pylint: disable=g-import-not-at-top,wrong-import-position
from clu import periodic_actions  # pylint: disable=g-import-not-at-top,wrong-import-position
from jax_structured.training import event_writer  # pylint: disable=g-import-not-at-top,wrong-import-position

HPARAMS_TAG = event_writer.HPARAMS_TAG  # the config, as JSON text at step 0 (`write_hparams`)


# Libraries whose INFO logs are their own bookkeeping (Orbax writes ~60 lines per checkpoint, clu
# repeats every metric, jax reports the platforms it did not find, gensim ~20 lines per word2vec
# training) and their known harmless warnings.
QUIET_PACKAGES = ('orbax', 'clu', 'jax', 'jaxlib', 'flax', 'optax', 'tensorflow_datasets', 'etils',
                  'array_record', 'tensorboardX', 'gensim')
HARMLESS_WARNINGS = ('Given directory is read only',  # Orbax, opening checkpoints to evaluate them
                     'has no dataset_info.json',  # TFDS, looking at a dataset folder not built yet
                     'Using custom data configuration',  # TFDS, a builder given a BuilderConfig (UD)
                     )
_quiet_filter = None


class _LibraryLogFilter(std_logging.Filter):
  """Drops log records below WARNING, and known harmless warnings, logged from `roots` (package
  directories) unless absl's verbosity asks for debug output (`--verbosity=1`)."""

  def __init__(self, roots: tuple[str, ...]):
    super().__init__()
    self.roots = roots

  def filter(self, record: std_logging.LogRecord) -> bool:
    if not (record.pathname or '').startswith(self.roots) or logging.get_verbosity() > logging.INFO:
      return True
    if record.levelno < std_logging.WARNING:
      return False
    return not any(text in record.getMessage() for text in HARMLESS_WARNINGS)


def quiet_library_logs() -> None:
  """Keeps the console for the run's progress and results: filters out the INFO logs of
  `QUIET_PACKAGES` (and their `HARMLESS_WARNINGS`) from absl's handler and logger. Their warnings
  and errors still show; `--verbosity=1` shows everything again. Idempotent.
  """
  global _quiet_filter
  if _quiet_filter is None:
    roots = []
    for name in QUIET_PACKAGES:
      spec = importlib.util.find_spec(name)
      for location in (spec.submodule_search_locations or []) if spec else []:
        roots.append(os.path.join(os.path.realpath(location), ''))
        roots.append(os.path.join(os.path.abspath(location), ''))
    _quiet_filter = _LibraryLogFilter(tuple(sorted(set(roots))))
  for target in (logging.get_absl_handler(), logging.get_absl_logger()):
    if _quiet_filter not in target.filters:
      target.addFilter(_quiet_filter)


def create_writer(workdir: str, *, start_step: int | None = None):
  """clu's writer: console logging + TensorBoard event files in `workdir` on process 0.

  Synchronous: an event is in its file when the write returns, so a killed run keeps its history.

  Args:
    workdir: the run directory (event files `events.out.tfevents.<time>.<host>.<pid>`).
    start_step: the step a training session starts from (the restored checkpoint's; 0 for a fresh
      run). Events the earlier sessions logged after it are dropped by TensorBoard (a SessionLog
      START at `start_step + 1`), as this session logs those steps again. None: no such event.
  """
  if jax.process_index() > 0:
    return metric_writers.create_default_writer(None, just_logging=True, asynchronous=False)
  if importlib.util.find_spec('tensorboardX') is None:
    logging.warning('tensorboardX is not installed: metrics go to the log only, no event files in %s '
                    '(pip install "tensorboardX>=2.6")', workdir)
    return metric_writers.create_default_writer(None, asynchronous=False)
  return metric_writers.MultiWriter([metric_writers.LoggingWriter(),
                                     event_writer.SummaryWriter(
      workdir, purge_step=None if start_step is None else start_step + 1)])


def read_events(logdir: str) -> list[Any]:
  """Every event (tensorboardX `Event` proto) of the event files in `logdir`, in TensorBoard's order.

  Files are read in name order (their names start with the creation time), each up to its first
  incomplete or damaged record (a run killed in the middle of a write).
  """
  from tensorboardX.record_writer import masked_crc32c  # pylint: disable=g-import-not-at-top
  from tensorboardX.proto import event_pb2  # pylint: disable=g-import-not-at-top
  events = []
  names = sorted(n for n in os.listdir(logdir) if n.startswith('events.out.tfevents.')) \
      if os.path.isdir(logdir) else []
  for name in names:
    with open(os.path.join(logdir, name), 'rb') as f:
      raw = f.read()
    offset = 0
    while offset + 12 <= len(raw):  # TFRecord: length (u64), its crc, data, the data's crc (u32)
      header = raw[offset:offset + 8]
      length, header_crc = struct.unpack('<QI', raw[offset:offset + 12])
      data = raw[offset + 12:offset + 12 + length]
      end = offset + 16 + length
      if header_crc != masked_crc32c(header) or end > len(raw) or \
          struct.unpack('<I', raw[end - 4:end])[0] != masked_crc32c(data):
        break
      events.append(event_pb2.Event.FromString(data))
      offset = end
  return events


def hparams_written(logdir: str) -> bool:
  """Whether the event files in `logdir` hold the hyperparameters (`write_hparams`)."""
  return any(value.tag.split('/')[0] == HPARAMS_TAG for event in read_events(logdir)
             for value in event.summary.value)


class ProgressReport(periodic_actions.ReportProgress):
  """Progress every `every_steps` steps: 'steps_per_sec' and 'uptime' to the writer and one console
  line 'step 120/1000 (12.0%), 35.2 steps/s, ETA 0:00:25, loss 0.6931, dev accuracy 0.8125 (step 100)'.

  Steps/s and the ETA leave out the time of calls that compiled a step for a new batch shape
  (`compile_seconds`, e.g. `parallel.Runner.compile_seconds`); the line says how long compiling took.
  `loss` and `dev` are set by the caller (the loop reports after its evaluation, so `dev` is current).
  """

  def __init__(self, *, num_train_steps: int, writer=None, every_steps: int | None = None,
               compile_seconds: Callable[[], float] = lambda: 0.0):
    super().__init__(num_train_steps=num_train_steps, writer=writer, every_steps=every_steps,
                     every_secs=None)
    self.loss: float | None = None
    self.dev: str = ''
    self._compile_seconds = compile_seconds
    self._compiled_before = 0.0

  def _init_and_check(self, step: int, t: float):
    if self._previous_step is None:
      self._compiled_before = self._compile_seconds()
    super()._init_and_check(step, t)

  def _apply(self, step: int, t: float):
    compiled = self._compile_seconds() - self._compiled_before
    self._compiled_before += compiled
    rate = (step - self._previous_step) / max(t - self._previous_time - compiled, 1e-9)
    total = self._num_train_steps or 0
    eta = (total - step) / rate if total and rate > 0 else 0.0
    line = f'step {step}/{total} ({100 * step / max(total, 1):.1f}%), {rate:.2f} steps/s, ETA ' \
           f'{_format_seconds(eta)}'
    if self.loss is not None:
      line += f', loss {self.loss:.4f}'
    if self.dev:
      line += f', {self.dev}'
    if compiled >= 0.05:
      line += f' (compiling steps for new batch shapes: {compiled:.1f} s, not counted in steps/s)'
    if self._writer is not None:
      self._writer.write_scalars(step, {'steps_per_sec': rate, 'uptime': time.monotonic() - self._t0})
    console(line)


def _format_seconds(seconds: float) -> str:
  seconds = int(round(seconds))
  return f'{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}'


def console(line: str) -> None:
  """Prints `line` on process 0's standard output (the run's console: progress and results)."""
  if jax.process_index() == 0:
    print(line, flush=True)


class Accumulator:
  """Adds up {name: (sum, count)} device results on the host (one transfer per `add`)."""

  def __init__(self):
    self.sums: dict[str, list[float]] = {}

  def add(self, metrics: Mapping[str, Any]) -> None:
    for name, (s, c) in jax.device_get(_local(metrics)).items():
      acc = self.sums.setdefault(name, [0.0, 0.0])
      acc[0] += float(s)
      acc[1] += float(c)

  def result(self) -> dict[str, tuple[float, float]]:
    return {k: (v[0], v[1]) for k, v in self.sums.items()}


def _local(tree):
  return jax.tree.map(lambda x: x.addressable_data(0) if isinstance(x, jax.Array)
                      and not x.is_fully_addressable else x, tree)


def jsonable(value: Any) -> Any:
  """`value` as it reads back from JSON (numpy scalars -> numbers, int keys -> str, tuples -> lists)."""
  return json.loads(json.dumps(value, sort_keys=True, default=_json_default))


def write_json(path: str, value: Any) -> None:
  """Atomic JSON write on process 0."""
  if jax.process_index() != 0:
    return
  tmp = f'{path}.tmp-{os.getpid()}'
  with open(tmp, 'w', encoding='utf-8') as f:
    json.dump(value, f, indent=2, sort_keys=True, default=_json_default)
  os.replace(tmp, path)


def _json_default(value):
  if isinstance(value, (np.floating, np.integer)):
    return value.item()
  if isinstance(value, np.ndarray):
    return value.tolist()
  raise TypeError(f'not JSON-able: {type(value).__name__}')
