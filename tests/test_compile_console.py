"""The console lines around a compilation: what compiles, for which batch shape, a heartbeat, the time."""
import time

import numpy as np

from jax_structured.training import parallel


def test_report_compile_prints_heartbeats_until_the_call_returns():
  lines = []

  def slow():
    time.sleep(0.35)
    return np.zeros(3)

  out, seconds = parallel.report_compile('train step', [32, 24], slow, heartbeat_seconds=0.1,
                                         console=lines.append)
  assert out.shape == (3,) and seconds >= 0.35
  assert lines[0] == 'compiling the train step for batch [32, 24] ...'
  beats = [line for line in lines if line.startswith('... still compiling the train step (')]
  assert 2 <= len(beats) <= 4, lines
  assert lines[-1].startswith('compiled the train step for batch [32, 24] in 0.')
  time.sleep(0.25)  # the heartbeat thread has stopped: nothing after the last line
  assert lines[-1].startswith('compiled the train step')


def test_report_compile_is_quiet_between_the_lines_when_fast_and_reraises():
  lines = []
  parallel.report_compile('eval step', [8, 5], lambda: 1, heartbeat_seconds=10.0, console=lines.append)
  assert len(lines) == 2
  lines.clear()

  def fails():
    raise RuntimeError('boom')

  try:
    parallel.report_compile('eval step', [8, 5], fails, heartbeat_seconds=0.05, console=lines.append)
  except RuntimeError:
    pass
  time.sleep(0.15)
  assert lines == ['compiling the eval step for batch [8, 5] ...']  # no heartbeat left running


def test_runner_reports_each_new_batch_shape_once(capsys):
  runner = parallel.Runner('none', lambda *a: None, lambda *a: None)
  runner.heartbeat_seconds = 0.05

  def fake_step(state, batch):
    time.sleep(0.12)
    return state

  batch = {'tokens': np.zeros((4, 7), np.int32), 'lengths': np.zeros(4, np.int32)}
  runner._timed_if_new('train', fake_step, None, batch)
  runner._timed_if_new('train', fake_step, None, batch)  # same shape: no line
  runner._timed_if_new('train', fake_step, None, {**batch, 'tokens': np.zeros((4, 9), np.int32)})
  out = capsys.readouterr().out.splitlines()
  starts = [line for line in out if line.startswith('compiling')]
  assert starts == ['compiling the train step for batch [4, 7] ...',
                    'compiling the train step for batch [4, 9] ...']
  assert any(line.startswith('... still compiling the train step') for line in out)
  assert runner.compile_seconds >= 0.24
