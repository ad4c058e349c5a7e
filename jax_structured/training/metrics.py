"""Metric writing: TensorBoard event files through `clu.metric_writers`, console progress, JSON files.

clu 0.0.12 writes TensorBoard summaries with TensorFlow (`clu.metric_writers.summary_writer` imports
it unconditionally, so even `from clu import metric_writers, periodic_actions` fails without it). The
project is TensorFlow-free (ARCHITECTURE.md), so when TensorFlow is not installed `install_clu_writer()`
provides that one module with a `SummaryWriter` backed by tensorboardX (event files readable by
TensorBoard); the rest of clu (`create_default_writer`, `AsyncMultiWriter`, `LoggingWriter`,
`periodic_actions.ReportProgress`) is used unchanged.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import types
from typing import Any, Mapping

from absl import logging
import jax
import numpy as np

_SHIM = 'clu.metric_writers.summary_writer'


def _tensorboardx_writer_class():
  from clu.metric_writers import interface  # pylint: disable=g-import-not-at-top

  class SummaryWriter(interface.MetricWriter):
    """A clu MetricWriter writing TensorBoard event files with tensorboardX (no TensorFlow)."""

    def __init__(self, logdir: str):
      super().__init__()
      try:
        import tensorboardX  # pylint: disable=g-import-not-at-top
      except ImportError as e:
        raise ImportError('TensorBoard event files without TensorFlow need tensorboardX: '
                          'pip install "tensorboardX>=2.6"') from e
      self._writer = tensorboardX.SummaryWriter(logdir, flush_secs=30)

    def write_summaries(self, step, values, metadata=None):
      del metadata
      for key, value in values.items():
        value = np.asarray(value)
        if value.ndim == 0:
          self._writer.add_scalar(key, float(value), step)
        else:
          self._writer.add_histogram(key, value, step)

    def write_scalars(self, step, scalars):
      for key, value in scalars.items():
        self._writer.add_scalar(key, float(np.asarray(value)), step)

    def write_images(self, step, images):
      for key, value in images.items():
        value = np.asarray(value)
        self._writer.add_images(key, value[None] if value.ndim == 3 else value, step,
                                dataformats='NHWC')

    def write_videos(self, step, videos):
      logging.log_first_n(logging.WARNING, 'SummaryWriter does not support writing videos.', 1)

    def write_audios(self, step, audios, *, sample_rate):
      for key, value in audios.items():
        self._writer.add_audio(key, np.asarray(value)[0], step, sample_rate=sample_rate)

    def write_texts(self, step, texts):
      for key, value in texts.items():
        self._writer.add_text(key, value, step)

    def write_histograms(self, step, arrays, num_buckets=None):
      for key, value in arrays.items():
        bins = num_buckets.get(key, 'tensorflow') if num_buckets else 'tensorflow'
        self._writer.add_histogram(key, np.asarray(value), step, bins=bins)

    def write_hparams(self, hparams):
      self._writer.add_text('hparams', json.dumps(dict(hparams), sort_keys=True, default=str), 0)

    def flush(self):
      self._writer.flush()

    def close(self):
      self._writer.close()

  return SummaryWriter


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
      cache[name] = _tensorboardx_writer_class()
    return cache[name]

  module.__getattr__ = __getattr__
  sys.modules[_SHIM] = module


install_clu_writer()
from clu import metric_writers  # pylint: disable=g-import-not-at-top,wrong-import-position
from clu import periodic_actions  # pylint: disable=g-import-not-at-top,wrong-import-position


def create_writer(workdir: str):
  """clu's default writer: console logging + TensorBoard event files in `workdir` on process 0."""
  if jax.process_index() > 0:
    return metric_writers.create_default_writer(None, just_logging=True)
  if importlib.util.find_spec('tensorflow') is None and importlib.util.find_spec('tensorboardX') is None:
    logging.warning('tensorboardX is not installed: metrics go to the log only, no event files in %s '
                    '(pip install "tensorboardX>=2.6")', workdir)
    return metric_writers.create_default_writer(None)
  return metric_writers.create_default_writer(workdir)


class ProgressReport(periodic_actions.ReportProgress):
  """clu's ReportProgress (steps/s and uptime to the writer, work-unit notes) plus a console line
  'step 120/1000 (12.0%), 35.2 steps/s, ETA 0:00:25, loss 0.6931, dev accuracy 0.8125'.
  """

  def __init__(self, *, num_train_steps: int, writer=None, every_steps: int | None = None):
    super().__init__(num_train_steps=num_train_steps, writer=writer, every_steps=every_steps,
                     every_secs=None)
    self.loss: float | None = None
    self.dev: str = ''

  def _apply(self, step: int, t: float):
    super()._apply(step, t)
    rate = (step - self._previous_step) / max(t - self._previous_time, 1e-9)
    total = self._num_train_steps or 0
    eta = (total - step) / rate if total and rate > 0 else 0.0
    line = f'step {step}/{total} ({100 * step / max(total, 1):.1f}%), {rate:.2f} steps/s, ETA ' \
           f'{time.strftime("%H:%M:%S", time.gmtime(eta))}'
    if self.loss is not None:
      line += f', loss {self.loss:.4f}'
    if self.dev:
      line += f', {self.dev}'
    logging.info('%s', line)
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
