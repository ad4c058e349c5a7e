"""SIGINT (Ctrl-C) and SIGTERM (a preempted VM) during training: stop after the current step, saved.

    with interrupts.deferred(last_saved=lambda: loop.last_saved) as request:
      for ...:
        step()
        if request.signum is not None:
          save(); raise interrupts.Interrupted(request.signum, step, path)

Inside `deferred` the first SIGINT or SIGTERM only records itself (one line on stderr says so); the
loop finishes its step, saves a checkpoint, flushes its metrics and raises `Interrupted`, which the
launchers print as one line (where it saved, the command that resumes) and exit with 128 + the
signal (130 for SIGINT, 143 for SIGTERM). A second signal exits at once (`os._exit`), unsaved. The
previous handlers are restored on the way out. Outside the main thread (where Python cannot install
handlers) `deferred` changes nothing.

Multi-process runs: each process reacts to its own signals; a scheduler that preempts a job
signals every process, but they may stop after different steps (then the save waits on the others).
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import threading
from typing import Callable, Iterator

from jax_structured.training import workdir_lock

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(Exception):
  """Training stopped on signal `signum` after saving step `step` in `checkpoint`.

  `str()` is the line to print; `exit_status` is 128 + signum (the shell's status for the signal).
  """

  def __init__(self, signum: int, step: int, checkpoint: str):
    self.signum, self.step, self.checkpoint = signum, step, checkpoint
    super().__init__(f'{signal.Signals(signum).name}: stopped after step {step}, saved in {checkpoint}; '
                     f'{resume_hint()}')

  @property
  def exit_status(self) -> int:
    return 128 + self.signum


@dataclasses.dataclass
class Request:
  """The signal received inside `deferred` (None until one is)."""
  signum: int | None = None


def resume_hint() -> str:
  """How to resume: the same command (a launcher run) or the same call on the same workdir."""
  main = getattr(sys.modules.get('__main__'), '__spec__', None)
  if main is not None and str(main.name).startswith('launch.'):
    return f'resume with the same command: {workdir_lock.command_line()}'
  return 'resume by training the same config into the same workdir'


@contextlib.contextmanager
def deferred(last_saved: Callable[[], int | None]) -> Iterator[Request]:
  """Records the first SIGINT / SIGTERM in the yielded `Request`; a second one exits at once.

  Args:
    last_saved: the last saved step (named by the line printed when a second signal exits unsaved).
  """
  request = Request()
  if threading.current_thread() is not threading.main_thread():
    yield request
    return

  def handle(signum, frame):
    del frame
    name = signal.Signals(signum).name
    if request.signum is None:
      request.signum = signum
      _say(f'{name}: stopping after the current step, which will be saved '
           f'(send {name} again to exit at once, unsaved)')
      return
    saved = last_saved()
    _say(f'{name} again: exiting at once, unsaved; '
         + (f'the last checkpoint is step {saved}; ' if saved is not None else 'nothing saved; ')
         + resume_hint())
    os._exit(128 + signum)  # pylint: disable=protected-access

  previous = {s: signal.getsignal(s) for s in SIGNALS}
  for s in SIGNALS:
    signal.signal(s, handle)
  try:
    yield request
  finally:
    for s, handler in previous.items():
      signal.signal(s, signal.SIG_DFL if handler is None else handler)


def _say(line: str) -> None:
  """One line on stderr from a signal handler (a raw write: the handler may interrupt a print)."""
  with contextlib.suppress(Exception):
    sys.stdout.flush()
  with contextlib.suppress(OSError):
    os.write(2, (line + '\n').encode())
