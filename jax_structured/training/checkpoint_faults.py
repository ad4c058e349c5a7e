"""Checkpoint faults in one line each, and the library output they leave, quieted (`checkpoints`).

- `unreadable(path, error)`: why Orbax could not restore a checkpoint: a missing or garbled JSON
  file named (a missing `state/_METADATA` reads "pytree structure error" in Orbax's words), or the
  array TensorStore was reading and the file that failed (truncated: its size; missing; damaged:
  TensorStore's reason), never TensorStore's kilobytes of driver specs.
- `save_failed(directory, step, last, error)`: a save the file system refused ("Not a directory",
  "Permission denied", a full disk): that a checkpoint save failed, the last saved step, what to do.
- `ignore_late_tensorstore_callbacks`, `quiet_unretrieved_reads_of`: the tracebacks a failed restore
  leaves behind (TensorStore's callbacks on a closed event loop, asyncio's unretrieved reads) dropped,
  only those of a checkpoint already reported damaged.
- `without_log_record(logger, text)`: a known library warning dropped around the call that causes it
  (Orbax's `NO_METRICS_WARNING` on every save without metrics).
"""
from __future__ import annotations

import contextlib
import json
import logging as std_logging
import os
import re
import sys

from jax_structured import errors
from jax_structured.training import interrupts


def ignore_late_tensorstore_callbacks() -> None:
  """Keeps a failed restore to its one error: drops the unraisable `RuntimeError('Event loop is closed')`
  that TensorStore reports (through `sys.unraisablehook`: dozens of tracebacks on stderr) for each
  read still in flight when Orbax closed the event loop of a restore that failed. Idempotent."""
  previous = sys.unraisablehook
  if getattr(previous, 'ignores_late_tensorstore_callbacks', False):
    return

  def hook(unraisable):
    if not (unraisable.exc_type is RuntimeError and 'Event loop is closed' in str(unraisable.exc_value)):
      previous(unraisable)

  hook.ignores_late_tensorstore_callbacks = True
  sys.unraisablehook = hook


# asyncio's messages for an exception nobody retrieved (base_events / futures / tasks).
_NEVER_RETRIEVED = ('Task exception was never retrieved', 'Future exception was never retrieved')


class UnretrievedReadsOfDamagedCheckpoints(std_logging.Filter):
  """Drops asyncio's 'Task exception was never retrieved' and 'Future exception was never retrieved'
  records (each with a multi-kilobyte TensorStore traceback) of the reads of a checkpoint already
  reported as damaged.

  When one read of a restore fails, Orbax raises that error (reported as one `_DamagedCheckpoint`)
  and the other reads of the same checkpoint that failed too are left in tasks or futures nobody
  awaits; asyncio logs each of them when it is garbage-collected, possibly at interpreter exit. A
  record is dropped only when its exception's message names the directory of a damaged checkpoint.
  """

  def __init__(self):
    super().__init__()
    self.damaged_paths: set[str] = set()

  def filter(self, record: std_logging.LogRecord) -> bool:
    if not str(record.msg).startswith(_NEVER_RETRIEVED) or not record.exc_info:
      return True
    message = str(record.exc_info[1])
    return not any(path in message for path in self.damaged_paths)


_unretrieved_reads_filter = UnretrievedReadsOfDamagedCheckpoints()


def quiet_unretrieved_reads_of(path: str) -> None:
  """Installs `_unretrieved_reads_filter` on the 'asyncio' logger (idempotent) for checkpoint `path`."""
  _unretrieved_reads_filter.damaged_paths.add(os.path.join(os.path.abspath(path), ''))
  logger = std_logging.getLogger('asyncio')
  if _unretrieved_reads_filter not in logger.filters:
    logger.addFilter(_unretrieved_reads_filter)


def first_line(error: BaseException) -> str:
  """'Type: first line of the message' (TensorStore's messages run to kilobytes), at most 300 chars."""
  text = str(error).strip().splitlines()
  line = re.sub(r'\s*\[source locations=.*', '', text[0]) if text else ''
  line = f'{type(error).__name__}: {line}'
  return line if len(line) <= 300 else line[:297] + '...'


# Orbax's warning for a save without metrics when the manager ranks checkpoints by a metric: periodic
# and interrupted saves have none by design (they are not candidates for the best checkpoint).
NO_METRICS_WARNING = 'Requested `tracked_metric`; did not provide metrics'


class DropRecords(std_logging.Filter):
  """Drops the log records whose message contains `text`."""

  def __init__(self, text: str):
    super().__init__()
    self.text = text

  def filter(self, record: std_logging.LogRecord) -> bool:
    return self.text not in record.getMessage()


@contextlib.contextmanager
def without_log_record(logger: std_logging.Logger, text: str, *, enabled: bool = True):
  """Within the block, `logger` drops the records whose message contains `text` (when `enabled`)."""
  if not enabled:
    yield
    return
  drop = DropRecords(text)
  logger.addFilter(drop)
  try:
    yield
  finally:
    logger.removeFilter(drop)


# The JSON files of a checkpoint whose loss Orbax reports obscurely (a missing state/_METADATA is a
# "pytree structure error"), checked after a restore failed: (path in the checkpoint, what it holds).
_JSON_FILES = (('state/_METADATA', 'the tree of the saved arrays'),
               ('meta/metadata', "the loop's position and the arrays' fingerprint"))


def unreadable(path: str, error: BaseException) -> str:
  """Why the checkpoint `path` could not be restored (Orbax raised `error`), in one line.

  A JSON file of `_JSON_FILES` missing or not JSON is named; a TensorStore read error names the
  array it was reading (`params/encoder/kernel`) and the file that failed: truncated (its size and
  the size read), missing, or damaged (TensorStore's reason). Anything else: 'unreadable (its first
  line)'.
  """
  for name, holds in _JSON_FILES:
    file = os.path.join(path, name)
    if not os.path.exists(file):
      return f'its file {name} ({holds}) is missing'
    try:
      with open(file, encoding='utf-8') as f:
        json.load(f)
    except (ValueError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
      return f'its file {name} ({holds}) is not valid JSON ({type(e).__name__}: {e})'
    except OSError:
      pass
  text = re.sub(r'\s*\[(tensorstore_spec|source locations).*', '', str(error), flags=re.S)
  array = re.search(r'(?:Error reading|Metadata at) "([^"]+?)/\.zarray"', text)
  files = [m for m in re.finditer(r'local file "([^"]+)"(?::\s*)?', text) if not m.group(1).endswith('/')]
  if not files:
    index = os.path.join(path, 'state', 'manifest.ocdbt')  # an OCDBT checkpoint's index of its files
    if array is not None and 'OCDBT' in text and not os.path.exists(index):
      return (f"array '{array.group(1).replace('.', '/')}' cannot be read: its file "
              'state/manifest.ocdbt (the index of the array files) is missing')
    return f'unreadable ({first_line(error)})'
  file = files[-1]
  where = os.path.relpath(file.group(1), path)
  size = re.search(r'is not valid for value of size (\d+)', text)
  wanted = re.search(r'[Bb]yte range \[0, (\d+)\)', text)
  reason = text[file.end():].strip()
  if size:
    state = f'is truncated ({size.group(1)} bytes' + (f' of {wanted.group(1)})' if wanted else ')')
  elif not os.path.exists(file.group(1)):
    state = 'is missing'
  else:
    reason = reason.split('; ')[0]
    state = 'is damaged (overwritten?)' + (f': {reason[:200]}' if reason else '')
  if array is None:
    return f'its file {where} {state}'
  return f"array '{array.group(1).replace('.', '/')}' cannot be read: its file {where} {state}"


def save_failed(directory: str, step: int, last: int | None, error: BaseException) -> str:
  """The one line of a save of `step` into the checkpoint folder `directory` that failed with
  `error`: why (the path and the file system's reason), the last saved step (`last`, None when none
  is) and what to do (make the folder writable, or what a disk fault asks), then how to resume."""
  disk = errors.disk_error(error, directory)
  if disk is not None:  # names the folder and what to do (free space, another disk)
    cause, fix = str(disk), 'once it can be written,'
  else:
    cause = (f'{error.filename}: {error.strerror}' if isinstance(error, OSError) and error.filename
             else re.sub(r"\s*\[os_error_code='\d+'\]", '', first_line(error)))
    fix = (f'make {directory} a folder this run can write (a file in its place, or missing '
           'permissions?), then')
  kept = (f'the last saved checkpoint is step {last} ({os.path.join(directory, str(last))}), where '
          'training resumes' if last is not None else 'no checkpoint of this run is saved yet')
  return (f'checkpoint save failed: step {step} was not saved ({cause}); {kept}; {fix} '
          f'{interrupts.resume_hint()}')
