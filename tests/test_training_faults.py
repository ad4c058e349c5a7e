"""Training survives its users (issue 50): one run per workdir, SIGINT / SIGTERM, file-system faults.

In-process (the tiny job, a few seconds each): a signal sent from a hook after a step saves that
step and raises `Interrupted`; the resumed run ends with the metrics.json of an uninterrupted one; a
read-only or full workdir and a file given as the workdir are one `WorkdirError` before any data is
loaded; an evaluation that cannot be saved keeps its result. In subprocesses (`python -m
launch.train` / `launch.evaluate`): a second launch on a busy workdir, a relaunch after the holder
was SIGKILLed, the exit statuses and lines of SIGTERM and of a second SIGINT, evaluate's printout.
"""
import errno
import json
import logging
import os
import queue
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import test_training_support as support
from jax_structured import data as data_lib
from jax_structured import errors
from jax_structured import training
from jax_structured.training import interrupts
from jax_structured.training import workdir_lock
from jax_structured.training import metrics as metrics_lib
from launch import _errors

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(REPO, 'tests')
# 2 epochs of 6 steps, dev evaluation (and checkpoint) at each epoch's end only.
OVERRIDES = {'parallel': 'none', 'train.num_steps': 12, 'train.num_epochs': 0, 'train.log_every_steps': 1,
             'train.eval_every_steps': 0, 'train.checkpoint_every_steps': 0}
TIMINGS = ('train_seconds', 'steps_per_second', 'inference_examples_per_second')
# The tiny job for `python -m launch.train`; each train batch waits TINY_STEP_SECONDS (a run to signal).
CONFIG_FILE = f'''
import os, sys, time
sys.path.insert(0, {TESTS!r})
import test_training_support as support

_batches = support.TinySplit.batches


def _slow(self, *args, **kwargs):
  for batch in _batches(self, *args, **kwargs):
    if self.name == 'train':
      time.sleep(float(os.environ.get('TINY_STEP_SECONDS', '0')))
    yield batch


support.TinySplit.batches = _slow


def get_config():
  return support.make_config(**{OVERRIDES!r})
'''


def _without_timings(metrics):
  return {k: v for k, v in metrics.items() if k not in TIMINGS}


def _metrics(workdir):
  with open(os.path.join(workdir, 'metrics.json'), encoding='utf-8') as f:
    return _without_timings(json.load(f))


@pytest.fixture(scope='module')
def uninterrupted(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp('faults') / 'uninterrupted')
  training.train_and_evaluate(support.make_config(**OVERRIDES), workdir)
  return workdir


# --- signals (in-process) ---------------------------------------------------------------------------

@pytest.mark.parametrize('signum, at_step', [(signal.SIGINT, 3), (signal.SIGTERM, 8)])
def test_a_signal_saves_the_step_and_resuming_equals_an_uninterrupted_run(uninterrupted, tmp_path, signum,
                                                                          at_step):
  workdir = str(tmp_path / 'run')
  config = support.make_config(**OVERRIDES)
  send = lambda step: step == at_step and os.kill(os.getpid(), signum)  # noqa: E731
  # What the process had (SIG_IGN for SIGINT when started in the background by a shell).
  before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
  with pytest.raises(interrupts.Interrupted) as caught:
    training.train_and_evaluate(config, workdir, hooks=[send])
  assert (caught.value.step, caught.value.exit_status) == (at_step, 128 + signum)
  assert str(caught.value).startswith(f'{signal.Signals(signum).name}: stopped after step {at_step}, '
                                      f'saved in {os.path.join(workdir, "checkpoints", str(at_step))}')
  assert os.path.isdir(os.path.join(workdir, 'checkpoints', str(at_step)))  # mid-epoch, no periodic save
  assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before  # restored
  assert not os.path.getsize(os.path.join(workdir, workdir_lock.LOCK_FILE))  # released
  training.train_and_evaluate(config, workdir)  # resumes
  assert _metrics(workdir) == _metrics(uninterrupted)


def _signal_at_progress(monkeypatch, at_step, signum=signal.SIGINT):
  """Sends `signum` to this process when the loop reports the progress of step `at_step` (a hook
  would not do: the loop finishes the open step before its hooks, which hid the fault)."""
  report = metrics_lib.ProgressReport.__call__

  def call(self, step, *args, **kwargs):
    if step == at_step:
      os.kill(os.getpid(), signum)
    return report(self, step, *args, **kwargs)
  monkeypatch.setattr(metrics_lib.ProgressReport, '__call__', call)


def _tensorboard_scalars(workdir, tag):
  """[(step, value)] of `tag` as TensorBoard reads `workdir` (its own event accumulator)."""
  event_accumulator = pytest.importorskip(
      'tensorboard.backend.event_processing.event_accumulator',
      reason='tensorboard (test extra) reads the event files as TensorBoard does')
  accumulator = event_accumulator.EventAccumulator(
      str(workdir), size_guidance={event_accumulator.SCALARS: 0})
  accumulator.Reload()
  return [(e.step, e.value) for e in accumulator.Scalars(tag)]


def test_a_signal_on_the_first_step_after_a_log_point_logs_that_step(uninterrupted, tmp_path,
                                                                    monkeypatch):
  """SIGINT on step 4 with a log point every 3 steps: step 4's train metrics are written before its
  save, and the resumed run logs 5-6 at step 6; every value is the mean of the uninterrupted run's
  (logged at every step) over the steps it covers (equal batch sizes: 48 examples, batches of 8)."""
  workdir = str(tmp_path / 'run')
  config = support.make_config(**{**OVERRIDES, 'train.log_every_steps': 3})
  _signal_at_progress(monkeypatch, 4)
  with pytest.raises(interrupts.Interrupted) as caught:
    training.train_and_evaluate(config, workdir)
  assert caught.value.step == 4
  monkeypatch.undo()
  training.train_and_evaluate(config, workdir)  # resumes from step 4
  assert _metrics(workdir) == _metrics(uninterrupted)
  covered = {3: (1, 2, 3), 4: (4,), 6: (5, 6), 9: (7, 8, 9), 12: (10, 11, 12)}
  for tag in ('train/loss', 'train/accuracy'):
    every_step = dict(_tensorboard_scalars(uninterrupted, tag))
    assert sorted(every_step) == list(range(1, 13))
    expected = [(step, sum(every_step[s] for s in steps) / len(steps)) for step, steps in covered.items()]
    read = _tensorboard_scalars(workdir, tag)
    assert [s for s, _ in read] == [s for s, _ in expected], tag
    assert [v for _, v in read] == pytest.approx([v for _, v in expected], rel=1e-5), tag


def test_an_interrupted_step_that_diverged_is_not_saved(tmp_path, monkeypatch):
  """Step 4 (after the log point 3) reports a NaN loss and SIGINT comes: the divergence check runs
  before the save (one `training diverged` error naming step 4), nothing of step 4 is saved."""
  from jax_structured.training import parallel  # pylint: disable=g-import-not-at-top
  workdir = tmp_path / 'run'
  start_train, calls = parallel.Runner.start_train, []

  def nan_loss_at_step_4(self, *args, **kwargs):
    state, metrics, pending = start_train(self, *args, **kwargs)
    calls.append(1)
    if len(calls) == 4:
      zero = metrics['loss'][0] - metrics['loss'][0]  # on the device (no host-to-device copy)
      metrics = dict(metrics, loss=(zero / zero, metrics['loss'][1]))
    return state, metrics, pending
  monkeypatch.setattr(parallel.Runner, 'start_train', nan_loss_at_step_4)
  _signal_at_progress(monkeypatch, 4)
  config = support.make_config(**{**OVERRIDES, 'train.log_every_steps': 3})
  with pytest.raises(FloatingPointError, match=r'training diverged: train/loss = nan over steps 4-4'):
    training.train_and_evaluate(config, str(workdir))
  assert not (workdir / 'checkpoints' / '4').exists()


# --- file-system faults (in-process) ----------------------------------------------------------------

def _loads_nothing(monkeypatch):
  """Makes loading the data an error: the faults must be found before it."""
  def load(*args, **kwargs):
    raise AssertionError('the data was loaded before the workdir was checked')
  monkeypatch.setattr(data_lib, 'load', load)


@pytest.mark.parametrize('number, says', [(errno.EROFS, 'read-only'), (errno.ENOSPC, 'disk is full')])
def test_an_unwritable_workdir_is_one_message_before_any_step(tmp_path, monkeypatch, number, says):
  folder = tmp_path / 'readonly'
  folder.mkdir()
  folder.chmod(0o555)
  workdir = str(folder / 'run')
  try:
    os.mkdir(workdir)  # root writes anyway: then the file system's error is simulated
    os.rmdir(workdir)
    real_open = os.open

    def failing_open(path, *args, **kwargs):
      if str(path).startswith(str(folder)):
        raise OSError(number, os.strerror(number), str(path))
      return real_open(path, *args, **kwargs)
    monkeypatch.setattr(os, 'open', failing_open)
    monkeypatch.setattr(os, 'makedirs', lambda path, **kwargs: None)
  except PermissionError:
    if number != errno.EROFS:
      pytest.skip('a full disk is only simulated')
    says = 'permission denied'
  _loads_nothing(monkeypatch)
  with pytest.raises(errors.WorkdirError, match=says) as caught:
    training.train_and_evaluate(support.make_config(**OVERRIDES), workdir)
  assert str(folder) in str(caught.value)
  assert _errors.user_message(caught.value) == str(caught.value)


def test_a_file_given_as_the_workdir_is_one_message(tmp_path, monkeypatch):
  path = tmp_path / 'notes.txt'
  path.write_text('not a folder')
  _loads_nothing(monkeypatch)
  with pytest.raises(errors.WorkdirError, match=f'workdir {path} is a file, not a folder'):
    training.train_and_evaluate(support.make_config(**OVERRIDES), str(path))


def test_a_failed_save_says_so_with_the_last_saved_step_and_resumes(uninterrupted, tmp_path, caplog):
  """The checkpoint folder replaced by a file after step 5: the save of step 6 fails with one line
  (that a checkpoint save failed, the file system's reason, the last saved step 4, what to do); put
  back, the run resumes from step 4 and ends as an uninterrupted one. No save logs Orbax's warning
  about missing metrics (`Requested tracked_metric`), though step 4's periodic save has none."""
  workdir = tmp_path / 'run'
  folder, aside = workdir / 'checkpoints', workdir / 'aside'

  def block_the_folder(step):
    if step == 5:
      folder.rename(aside)
      folder.write_text('in the way')
  config = support.make_config(**{**OVERRIDES, 'train.checkpoint_every_steps': 4})
  with caplog.at_level(logging.WARNING), pytest.raises(training.CheckpointError) as caught:
    training.train_and_evaluate(config, str(workdir), hooks=[block_the_folder])
  assert str(caught.value) == (
      f'checkpoint save failed: step 6 was not saved ({folder}/6.orbax-checkpoint-tmp: Not a '
      f'directory); the last saved checkpoint is step 4 ({folder}/4), where training resumes; make '
      f'{folder} a folder this run can write (a file in its place, or missing permissions?), then '
      'resume by training the same config into the same workdir')
  assert _errors.user_message(caught.value) == str(caught.value)
  assert 'tracked_metric' not in caplog.text
  folder.unlink()
  aside.rename(folder)
  training.train_and_evaluate(config, str(workdir))
  assert _metrics(workdir) == _metrics(uninterrupted)


def test_save_failures_name_the_step_the_reason_and_what_to_do():
  from jax_structured.training import checkpoint_faults  # pylint: disable=g-import-not-at-top
  denied = PermissionError(errno.EACCES, os.strerror(errno.EACCES), '/w/checkpoints/8.orbax-checkpoint-tmp')
  assert checkpoint_faults.save_failed('/w/checkpoints', 8, None, denied) == (
      'checkpoint save failed: step 8 was not saved (/w/checkpoints/8.orbax-checkpoint-tmp: Permission '
      'denied); no checkpoint of this run is saved yet; make /w/checkpoints a folder this run can write '
      '(a file in its place, or missing permissions?), then resume by training the same config into '
      'the same workdir')
  full = ValueError('RESOURCE_EXHAUSTED: Error writing "step" in OCDBT database at local file '
                    '"/w/checkpoints/12.orbax-checkpoint-tmp/state/": Failed to write 496 bytes to file '
                    "9: No space left on device [os_error_code='28']")
  message = checkpoint_faults.save_failed('/w/checkpoints', 12, 10, full)
  assert message.startswith('checkpoint save failed: step 12 was not saved (/w/checkpoints: cannot write '
                            '(No space left on device): the disk is full: free space there')
  assert '; the last saved checkpoint is step 10 (/w/checkpoints/10), where training resumes; once it ' \
         'can be written, resume by training' in message
  assert errors.disk_error(training.CheckpointError(message)) is None  # not made a generic disk line


def test_disk_errors_anywhere_are_user_messages():
  full = OSError(errno.ENOSPC, 'No space left on device', '/w/checkpoints/3')
  assert _errors.user_message(full) == ('/w/checkpoints/3: cannot write (No space left on device): the '
                                        'disk is full: free space there (e.g. old runs) or use a folder '
                                        'on another disk')
  assert errors.disk_error(OSError(errno.EIO, 'I/O error')) is None
  # A checkpoint write on a full disk (tensorstore's error, as Orbax raises it): its folder is named.
  save = ValueError('RESOURCE_EXHAUSTED: Error writing "step" in OCDBT database at local file '
                    '"/w/checkpoints/12.orbax-checkpoint-tmp/state.orbax-checkpoint-tmp/ocdbt.process_0/": '
                    "Failed to write 496 bytes to file 9: No space left on device [os_error_code='28']")
  assert _errors.user_message(save).startswith('/w/checkpoints: cannot write (No space left on device)')


def test_an_evaluation_that_cannot_be_saved_keeps_its_result(uninterrupted, monkeypatch):
  def full(*args):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), args[-1])
  monkeypatch.setattr(os, 'replace', full)
  with pytest.raises(errors.NotSavedError) as caught:
    training.evaluate(uninterrupted, 'test')
  path = os.path.join(uninterrupted, 'eval_test.json')
  assert str(caught.value).startswith(f'could not save the evaluation: {path}: cannot write')
  assert caught.value.result['accuracy'] == _metrics(uninterrupted)['test']['accuracy']
  assert not os.path.exists(path)


# --- launchers (subprocesses) -----------------------------------------------------------------------

class _Launch:
  """`python -m launch.train` in the background; its stdout lines are read as they come."""

  def __init__(self, tmp_path, workdir, step_seconds):
    env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS='cpu', OPENBLAS_NUM_THREADS='1',
               TINY_STEP_SECONDS=str(step_seconds))
    self.stderr_path = tmp_path / f'stderr-{time.monotonic_ns()}'
    with open(self.stderr_path, 'w', encoding='utf-8') as stderr:
      self.process = subprocess.Popen(
          [sys.executable, '-m', 'launch.train', f'--config={tmp_path / "tiny.py"}', f'--workdir={workdir}'],
          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
    self.lines = queue.Queue()
    threading.Thread(target=lambda: [self.lines.put(line) for line in self.process.stdout],
                     daemon=True).start()

  def wait_for_step(self, timeout=120):
    """Waits for a progress line ('step N/12 ...'); returns N."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
      try:
        match = re.match(r'step (\d+)/12 ', self.lines.get(timeout=1))
      except queue.Empty:
        assert self.process.poll() is None, self.stderr()[-3000:]
        continue
      if match:
        return int(match.group(1))
    raise AssertionError(f'no step logged in {timeout} s: {self.stderr()[-3000:]}')

  def stderr(self):
    return self.stderr_path.read_text(encoding='utf-8')

  def last_line(self, timeout=120):
    self.process.wait(timeout)
    return [line for line in self.stderr().splitlines() if line.strip()][-1]


@pytest.mark.slow  # end to end from the command line: runs after the suite (.ci/run)
def test_one_run_per_workdir_and_the_launcher_lines_of_signals(tmp_path):
  (tmp_path / 'tiny.py').write_text(textwrap.dedent(CONFIG_FILE))
  workdir = tmp_path / 'run'
  holder = _Launch(tmp_path, workdir, step_seconds=4)  # still training while the second one starts
  holder.wait_for_step()
  second = _Launch(tmp_path, workdir, step_seconds=0)
  line = second.last_line()
  assert second.process.returncode == 2, second.stderr()[-3000:]
  assert re.fullmatch(
      rf'error: workdir {workdir} is in use by another training run: process {holder.process.pid} on '
      r'host \S+ since \S+ \(python\S* -m launch.train --config=\S+ --workdir=\S+\)\. One run per '
      r'workdir: wait for it to end, stop it, or train into another --workdir', line), line
  holder.process.kill()  # SIGKILL: its lock goes with it
  holder.process.wait()
  unfinished = workdir / 'checkpoints' / '7.orbax-checkpoint-tmp-1796000000'
  unfinished.mkdir(parents=True)
  relaunch = _Launch(tmp_path, workdir, step_seconds=0.3)
  relaunch.wait_for_step()
  relaunch.process.send_signal(signal.SIGTERM)
  line = relaunch.last_line()
  assert relaunch.process.returncode == 143, relaunch.stderr()[-3000:]
  step = int(re.fullmatch(rf'SIGTERM: stopped after step (\d+), saved in {workdir}/checkpoints/\1; '
                          rf'resume with the same command: python\S* -m launch.train --config=\S+ '
                          rf'--workdir={workdir}', line).group(1))
  assert (workdir / 'checkpoints' / str(step)).is_dir() and not unfinished.exists()
  assert 'removed 1 unfinished checkpoint folder(s)' in relaunch.stderr()
  assert 'tracked_metric' not in relaunch.stderr()  # Orbax's warning at the stop's save (no metrics)
  impatient = _Launch(tmp_path, workdir, step_seconds=0.5)
  impatient.wait_for_step()
  impatient.process.send_signal(signal.SIGINT)
  time.sleep(0.05)
  impatient.process.send_signal(signal.SIGINT)
  line = impatient.last_line(timeout=10)  # at once: no waiting for a save
  assert impatient.process.returncode == 130
  assert line.startswith(f'SIGINT again: exiting at once, unsaved; the last checkpoint is step '), line
  assert 'resume with the same command: python' in line


SLOW_LOADING_CONFIG = f'''
import sys, time
sys.path.insert(0, {TESTS!r})
import test_training_support as support
from jax_structured import data


@data.register('tiny_slow_sentences')
def _slow(config):
  print('loading the data', flush=True)
  # Short sleeps, as loading runs Python code: a process-directed SIGTERM may be delivered to another
  # thread (XLA's), and then only the main thread's next bytecode runs the handler, not an ongoing sleep.
  for _ in range(1200):
    time.sleep(0.1)
  return support.tiny_sentences(config)


def get_config():
  return support.make_config(**{{**{OVERRIDES!r}, 'data.name': 'tiny_slow_sentences'}})
'''


def test_sigterm_before_training_is_one_line_and_status_143(tmp_path):
  """SIGTERM while the data loads (before the loop's own handlers): `interrupted (SIGTERM)`, exit 143
  (a scheduler's preemption at start-up used to end the process silently, status -15)."""
  (tmp_path / 'slow.py').write_text(SLOW_LOADING_CONFIG)
  env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS='cpu', OPENBLAS_NUM_THREADS='1')
  process = subprocess.Popen(
      [sys.executable, '-m', 'launch.train', f'--config={tmp_path / "slow.py"}',
       f'--workdir={tmp_path / "run"}'], cwd=REPO, env=env, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  try:
    assert process.stdout.readline() == 'loading the data\n', process.stderr.read()[-3000:]
    process.send_signal(signal.SIGTERM)
    _, err = process.communicate(timeout=60)
  finally:
    process.kill()
  assert process.returncode == 143, err[-3000:]
  assert [line for line in err.splitlines() if line.strip()][-1] == 'interrupted (SIGTERM)', err[-3000:]
  assert 'Traceback' not in err


def test_evaluate_prints_its_metrics_when_it_cannot_save_them(uninterrupted, tmp_path):
  wrapper = tmp_path / 'evaluate_full_disk.py'
  wrapper.write_text(textwrap.dedent(f'''
      import errno, os, runpy, sys
      sys.path.insert(0, {TESTS!r})
      import test_training_support

      def full(*args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), args[-1])
      os.replace = full
      sys.argv = ['launch.evaluate'] + sys.argv[1:]
      runpy.run_module('launch.evaluate', run_name='__main__')
  '''))
  env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS='cpu', OPENBLAS_NUM_THREADS='1')
  out = subprocess.run([sys.executable, str(wrapper), f'--workdir={uninterrupted}'], cwd=REPO, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
  assert out.returncode == 2, out.stderr[-3000:]
  printed = json.loads(out.stdout[out.stdout.index('{'):])
  assert printed['accuracy'] == _metrics(uninterrupted)['test']['accuracy']
  path = os.path.join(uninterrupted, 'eval_test.json')
  assert out.stderr.strip().splitlines()[-1] == (
      f'error: could not save the evaluation: {path}: cannot write (No space left on device): the disk '
      'is full: free space there (e.g. old runs) or use a folder on another disk')
