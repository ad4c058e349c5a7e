"""One training run per workdir: a lock held for the run, and the clean-up of dead runs' leftovers.

    with workdir_lock.hold(workdir):  # WorkdirBusyError naming the holder; WorkdirError if unwritable
      ...  # train

`hold` creates the workdir, takes an exclusive `fcntl.flock` on `<workdir>/.lock` (never blocking),
writes the holder's pid, host, start time and command line into it (the message a second launch
prints), removes the temporary checkpoint folders that a dead run left in `<workdir>/checkpoints`
(and `<workdir>/<variant>/checkpoints`), and releases the lock on any exit. The kernel releases a
flock when its process dies (a crash, SIGKILL), so a stale lock file never blocks a relaunch: the
file is opened without truncation and rewritten only once locked. Writing the holder's line is also
the check that the workdir is writable, before any data is loaded or any step compiled.

Multi-process runs take it on process 0 only (the caller decides). flock on NFS is emulated with
POSIX locks by Linux clients (shared across hosts); on file systems without locks it fails
(`WorkdirError`).
"""
from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import glob
import json
import os
import shlex
import shutil
import socket
import sys
from typing import Iterator

from absl import logging

from jax_structured import errors

LOCK_FILE = '.lock'
# Orbax writes a checkpoint into `<step>.orbax-checkpoint-tmp-<time>` and renames it when complete.
_UNFINISHED_CHECKPOINTS = ('checkpoints/*.orbax-checkpoint-tmp*', '*/checkpoints/*.orbax-checkpoint-tmp*')


class WorkdirBusyError(errors.WorkdirError):
  """Another live process holds the workdir's lock; the message names it."""


def command_line() -> str:
  """This process's command line as the user typed it (`python -m launch.train --workdir=...`)."""
  argv = list(getattr(sys, 'orig_argv', None) or [sys.executable] + sys.argv)
  argv[0] = os.path.basename(argv[0])
  return shlex.join(argv)


@contextlib.contextmanager
def hold(workdir: str) -> Iterator[None]:
  """Holds `workdir`'s lock (creating the workdir) for the body; see the module docstring.

  Raises:
    WorkdirBusyError naming the pid, host, start time and command of the live holder;
    WorkdirError naming the path when the workdir is a file, or cannot be created or written.
  """
  make_folder(workdir)
  path = os.path.join(workdir, LOCK_FILE)
  try:
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)  # never truncated before locked
  except OSError as e:
    raise cannot_write(e, path) from e
  try:
    _lock(fd, workdir)
    _write_holder(fd, path)
    _remove_unfinished_checkpoints(workdir)
    try:
      yield
    finally:
      with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)  # still locked: no other process reads it half-cleared
  finally:
    os.close(fd)  # releases the lock


def make_folder(workdir: str) -> None:
  """Creates `workdir`; a `WorkdirError` naming the path when a file is in the way or it cannot be made."""
  if os.path.exists(workdir) and not os.path.isdir(workdir):
    raise errors.WorkdirError(f'workdir {workdir} is a file, not a folder: give --workdir a folder path '
                              '(created when missing), or move the file away')
  try:
    os.makedirs(workdir, exist_ok=True)
  except OSError as e:
    raise cannot_write(e, workdir) from e


def cannot_write(error: OSError, path: str) -> Exception:
  """The user's message for an OSError while writing `path` (or `error` itself for anything else)."""
  disk = errors.disk_error(error, path)
  if disk is not None:
    return disk
  where = error.filename or path
  if error.errno in (errno.EACCES, errno.EPERM):
    return errors.WorkdirError(f'{where}: cannot write (permission denied): make the folder writable '
                               '(chmod u+w) or use another --workdir')
  if error.errno in (errno.ENOTDIR, errno.EEXIST):
    return errors.WorkdirError(f'{where}: a file is where a folder must be: move it away or use '
                               'another --workdir')
  return error


def _lock(fd: int, workdir: str) -> None:
  try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except BlockingIOError:
    raise WorkdirBusyError(_busy_message(workdir, _read_holder(fd))) from None
  except OSError as e:  # e.g. a file system without locks
    raise errors.WorkdirError(f'{os.path.join(workdir, LOCK_FILE)}: cannot lock the workdir '
                              f'({e.strerror}): use a --workdir on a local disk') from e


def _write_holder(fd: int, path: str) -> None:
  holder = {'pid': os.getpid(), 'host': socket.gethostname(), 'command': command_line(),
            'since': datetime.datetime.now().astimezone().isoformat(timespec='seconds')}
  try:
    os.ftruncate(fd, 0)
    os.pwrite(fd, (json.dumps(holder) + '\n').encode(), 0)
  except OSError as e:
    raise cannot_write(e, path) from e


def _read_holder(fd: int) -> dict:
  try:
    return json.loads(os.pread(fd, 1 << 16, 0).decode() or '{}')
  except (OSError, ValueError):
    return {}


def _busy_message(workdir: str, holder: dict) -> str:
  if not holder:  # locked a moment ago, its line not yet written
    who = 'another process (which has not yet written its details)'
  else:
    who = (f'process {holder.get("pid")} on host {holder.get("host")} since {holder.get("since")} '
           f'({holder.get("command")})')
  return (f'workdir {workdir} is in use by another training run: {who}. One run per workdir: wait '
          'for it to end, stop it, or train into another --workdir')


def _remove_unfinished_checkpoints(workdir: str) -> None:
  """Removes the temporary checkpoint folders of dead runs (only dead ones: the lock is held)."""
  found = sorted(p for pattern in _UNFINISHED_CHECKPOINTS
                 for p in glob.glob(os.path.join(glob.escape(workdir), pattern)))
  for path in found:
    shutil.rmtree(path, ignore_errors=True)
  if found:
    logging.info('removed %d unfinished checkpoint folder(s) of an earlier run that ended mid-save: %s',
                 len(found), ', '.join(found))
