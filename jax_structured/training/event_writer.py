"""The TensorBoard event-file writer of training runs: a clu `MetricWriter` backed by tensorboardX.

`SummaryWriter` writes TensorBoard event files without TensorFlow. `metrics.create_writer` uses it, and
`metrics.install_clu_writer` serves it as `clu.metric_writers.summary_writer.SummaryWriter` when
TensorFlow is absent (clu imports that module unconditionally). This module imports
`clu.metric_writers.interface`; tensorboardX is imported when a writer is made (an ImportError saying
what to install when it is missing).
"""
from __future__ import annotations

import json
import os
import socket
import struct
import time

from absl import logging
from clu.metric_writers import interface
import numpy as np

HPARAMS_TAG = 'hparams'  # the config, as JSON text at step 0 (`write_hparams`)


class SummaryWriter(interface.MetricWriter):
  """A clu MetricWriter writing TensorBoard event files with tensorboardX (no TensorFlow).

  Every write reaches the file before the call returns (no queue, no writer thread), so a killed
  run keeps every event it wrote. `purge_step`: a resumed run's first step; a SessionLog START
  event at that step makes TensorBoard drop the events of earlier files from that step on (what the
  killed session logged after its last checkpoint), so each step is read once.
  """

  def __init__(self, logdir: str, *, purge_step: int | None = None):
    super().__init__()
    try:
      from tensorboardX import record_writer  # pylint: disable=g-import-not-at-top
      from tensorboardX import summary  # pylint: disable=g-import-not-at-top
      from tensorboardX.proto import event_pb2  # pylint: disable=g-import-not-at-top
    except ImportError as e:
      raise ImportError('TensorBoard event files without TensorFlow need tensorboardX: '
                        'pip install "tensorboardX>=2.6"') from e
    os.makedirs(logdir, exist_ok=True)
    self._summary, self._event_pb2, self._crc = summary, event_pb2, record_writer.masked_crc32c
    self._file = _new_event_file(logdir)
    self._write(0, file_version='brain.Event:2')
    if purge_step is not None:
      self._write(purge_step, session_log=event_pb2.SessionLog(status=event_pb2.SessionLog.START))

  def _write(self, step: int, *summaries, **fields) -> None:
    """One TFRecord-framed event per summary (or one of `fields`) at `step`, then handed to the OS
    (a killed process keeps it; `flush` also syncs the file to the disk)."""
    for proto in summaries or (None,):
      event = self._event_pb2.Event(wall_time=time.time(), step=int(step), **fields)
      if proto is not None:
        event.summary.CopyFrom(proto)
      data = event.SerializeToString()
      header = struct.pack('<Q', len(data))
      self._file.write(header + struct.pack('<I', self._crc(header)) + data
                       + struct.pack('<I', self._crc(data)))
    self._file.flush()

  def write_summaries(self, step, values, metadata=None):
    del metadata
    self.write_histograms(step, {k: v for k, v in values.items() if np.ndim(v)})
    self.write_scalars(step, {k: v for k, v in values.items() if not np.ndim(v)})

  def write_scalars(self, step, scalars):
    if scalars:
      self._write(step, *(self._summary.scalar(k, float(np.asarray(v))) for k, v in scalars.items()))

  def write_images(self, step, images):
    protos = []
    for key, value in images.items():
      value = np.asarray(value)
      protos.append(self._summary.image(key, value[None] if value.ndim == 3 else value,
                                        dataformats='NHWC'))
    if protos:
      self._write(step, *protos)

  def write_videos(self, step, videos):
    logging.log_first_n(logging.WARNING, 'SummaryWriter does not support writing videos.', 1)

  def write_audios(self, step, audios, *, sample_rate):
    if audios:
      self._write(step, *(self._summary.audio(k, np.asarray(v)[0], sample_rate=sample_rate)
                          for k, v in audios.items()))

  def write_texts(self, step, texts):
    if texts:
      self._write(step, *(self._summary.text(k, v) for k, v in texts.items()))

  def write_histograms(self, step, arrays, num_buckets=None):
    if arrays:
      bins = lambda k: num_buckets.get(k, 'tensorflow') if num_buckets else 'tensorflow'  # noqa: E731
      self._write(step, *(self._summary.histogram(k, np.asarray(v), bins(k))
                          for k, v in arrays.items()))

  def write_hparams(self, hparams):
    self.write_texts(0, {HPARAMS_TAG: json.dumps(dict(hparams), sort_keys=True, default=str)})

  def flush(self):
    self._file.flush()
    os.fsync(self._file.fileno())

  def close(self):
    if not self._file.closed:
      self.flush()
      self._file.close()


def _new_event_file(logdir: str):
  """A new event file `events.out.tfevents.<time>.<host>.<pid>[.<k>]`, opened for writing.

  The time and process id tell sessions apart; a session that starts in the same second of the same
  process as an earlier one (a run resumed at once, in a notebook or a test) gets the next free suffix
  `.1`, `.2`, ...: created exclusively, never truncating the earlier session's events, and sorted after
  them as TensorBoard reads files in name order.
  """
  base = os.path.join(logdir, f'events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}.'
                              f'{os.getpid()}')
  for k in range(1000):
    try:
      return open(base if k == 0 else f'{base}.{k}', 'xb')  # pylint: disable=consider-using-with
    except FileExistsError:
      continue
  raise FileExistsError(f'{base}: 1000 event files of this process in one second')
