"""Training survives its users (issue 50): the metrics history of a killed run, damaged checkpoints.

A run of the default job (tiny: 80 steps, evaluated and saved every 40) is killed with SIGKILL after
it has logged a step past its first checkpoint, then resumed: TensorBoard (whose event accumulator
drops the events of earlier files from the step of a SessionLog START on) reads every logged step
once, and the hyperparameters once. Damaged checkpoints (an array file truncated, the meta file
deleted or garbled) are moved aside on resume; a damaged checkpoint asked for by name, or a run with
no good checkpoint, is one `error:` line and exit status 2.
"""
import concurrent.futures
import glob
import json
import logging
import os
import re
import shutil
import signal
import struct
import subprocess
import sys

import jax
import pytest
from tensorboardX.proto import event_pb2

import test_training_support as support
from stages import quick_and_slow
from jax_structured import training
from jax_structured.training import checkpoints as ckpt_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NUM_STEPS, LOG_EVERY, EVAL_EVERY = 80, 2, 40
TINY_DEFAULT = f"""
import ml_collections
from configs import default

def get_config():
  config = default.get_config()
  config.variants = ml_collections.ConfigDict()
  config.data.update({{'num_train': 640, 'num_dev': 64, 'num_test': 64}})
  config.train.update({{'num_steps': {NUM_STEPS}, 'log_every_steps': {LOG_EVERY},
                       'eval_every_steps': {EVAL_EVERY}, 'render_trees': 0}})
  return config
"""


def _launch(*args, **kwargs):
  env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''),
             JAX_PLATFORMS='cpu', OPENBLAS_NUM_THREADS='1')
  return subprocess.Popen([sys.executable, '-m', *args], cwd=REPO, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def _events(logdir):
  """(file name, Event) of every record of the event files, files in name order (TensorBoard's)."""
  out = []
  for path in sorted(glob.glob(os.path.join(logdir, 'events.out.tfevents.*'))):
    raw, offset = open(path, 'rb').read(), 0
    while offset + 12 <= len(raw):  # TFRecord: u64 length, u32 crc, data, u32 crc
      (length,) = struct.unpack('<Q', raw[offset:offset + 8])
      out.append((os.path.basename(path), event_pb2.Event.FromString(raw[offset + 12:offset + 12 + length])))
      offset += 16 + length
  return out


def _tensorboard_view(logdir):
  """{tag: [(step, value)]} as TensorBoard reads `logdir`, with its own event accumulator (which drops
  the points read so far with step >= s at a SessionLog START of step s); text summaries (the
  hyperparameters) as (step, None)."""
  event_accumulator = pytest.importorskip(
      'tensorboard.backend.event_processing.event_accumulator',
      reason='tensorboard (test extra) reads the event files as TensorBoard does')
  accumulator = event_accumulator.EventAccumulator(
      str(logdir), size_guidance={event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0})
  accumulator.Reload()
  tags = accumulator.Tags()
  view = {tag: [(e.step, e.value) for e in accumulator.Scalars(tag)] for tag in tags['scalars']}
  view.update({tag: [(e.step, None) for e in accumulator.Tensors(tag)] for tag in tags['tensors']})
  return view


@pytest.fixture(scope='module')
def killed_and_resumed(tmp_path_factory):
  """A default-job run SIGKILLed after it logged a step past its first checkpoint, then resumed."""
  tmp = tmp_path_factory.mktemp('killed')
  config = tmp / 'tiny_default.py'
  config.write_text(TINY_DEFAULT)
  workdir = str(tmp / 'run')
  args = ('launch.train', f'--config={config}', f'--workdir={workdir}')
  first = _launch(*args)
  seen = []
  for line in first.stdout:  # the console: 'step N/80 (...)' at every logged step
    if line.startswith('step ') and '/' in line.split()[1]:
      seen.append(int(line.split()[1].split('/')[0]))
      if seen[-1] > EVAL_EVERY:
        first.send_signal(signal.SIGKILL)
        break
  first.wait(timeout=60)
  resumed = _launch(*args)
  out, err = resumed.communicate(timeout=240)
  return {'workdir': workdir, 'config': str(config), 'killed_after': seen[-1] if seen else None,
          'first_rc': first.returncode, 'rc': resumed.returncode, 'stdout': out, 'stderr': err}


def test_killed_run_resumes_with_every_step_once_in_the_history(killed_and_resumed):
  run = killed_and_resumed
  assert run['first_rc'] == -signal.SIGKILL and run['killed_after'] > EVAL_EVERY
  assert run['rc'] == 0, run['stderr'][-3000:]
  assert 'tracked_metric' not in run['stderr']  # Orbax's warning on each save without metrics (issue 63)
  workdir = run['workdir']
  files = sorted({name for name, _ in _events(workdir)})
  assert len(files) == 2
  first = [e for name, e in _events(workdir) if name == files[0]]
  # Flushed at every logged step: the killed session's file holds what it logged, up to the kill,
  # including steps after its checkpoint (40) that the resumed session logged again.
  first_steps = {e.step for e in first if any(v.tag == 'train/loss' for v in e.summary.value)}
  assert set(range(LOG_EVERY, EVAL_EVERY + 1, LOG_EVERY)) <= first_steps
  assert max(first_steps) >= run['killed_after'] > EVAL_EVERY
  second = [e for name, e in _events(workdir) if name == files[1]]
  starts = [e.step for e in second if e.session_log.status == event_pb2.SessionLog.START]
  assert starts == [EVAL_EVERY + 1]
  view = _tensorboard_view(workdir)
  logged = list(range(LOG_EVERY, NUM_STEPS + 1, LOG_EVERY))
  for tag in ('train/loss', 'train/accuracy', 'train/learning_rate'):
    assert [s for s, _ in view[tag]] == logged, tag
  evaluated = list(range(EVAL_EVERY, NUM_STEPS + 1, EVAL_EVERY))
  for tag in ('dev/accuracy', 'dev/loss'):
    assert [s for s, _ in view[tag]] == evaluated, tag
  assert [s for s, _ in view['final/test/accuracy']] == [NUM_STEPS]
  assert [s for s, _ in view['hparams/text_summary']] == [0]  # once, from the first session
  metrics = json.load(open(os.path.join(workdir, 'metrics.json')))
  assert [h['step'] for h in metrics['history']] == evaluated
  for entry, (_, value) in zip(metrics['history'], view['dev/accuracy']):
    assert entry['accuracy'] == pytest.approx(value)  # the event holds a float32


def _damage(step_dir, kind):
  """Damages a checkpoint folder: 'truncate' (its array files cut in half), 'overwrite' (its array
  files overwritten with as many random bytes), 'meta_deleted', 'meta_garbled' (the JSON meta item),
  'metadata_deleted' (the state's tree of arrays, `state/_METADATA`)."""
  meta = os.path.join(step_dir, 'meta', 'metadata')
  if kind == 'meta_deleted':
    os.remove(meta)
  elif kind == 'meta_garbled':
    raw = open(meta, 'rb').read()
    open(meta, 'wb').write(raw[:-3] + b'#')
  elif kind == 'metadata_deleted':
    os.remove(os.path.join(step_dir, 'state', '_METADATA'))
  else:  # every OCDBT data file: which ones a restore reads varies (see test_checkpoints)
    victims = [p for p in glob.glob(os.path.join(step_dir, 'state', '**', 'd', '*'), recursive=True)]
    assert victims
    for victim in victims:
      raw = open(victim, 'rb').read()
      damaged = raw[:len(raw) // 2] if kind == 'truncate' else bytes(b ^ 0x5A for b in raw)
      open(victim, 'wb').write(damaged)


# What each damage reads as, after 'checkpoint <path> is corrupted: ' (a regular expression; issue 63:
# the array and the file by name, never TensorStore's driver specs nor Orbax's "pytree structure").
DAMAGE_MESSAGES = {
    'truncate': r"array '(?P<array>[\w/]+)' cannot be read: its file (?P<file>state/d/\w+) is truncated "
                r'\((?P<size>\d+) bytes of (?P<wanted>\d+)\)',
    'overwrite': r"array '(?P<array>[\w/]+)' cannot be read: its file (?P<file>state/d/\w+) is damaged "
                 r'\(overwritten\?\): \S',
    'meta_deleted': r"its file meta/metadata \(the loop's position and the arrays' fingerprint\) is "
                    r'missing',
    'meta_garbled': r"its file meta/metadata \(the loop's position and the arrays' fingerprint\) is not "
                    r'valid JSON \(JSONDecodeError: ',
    'metadata_deleted': r'its file state/_METADATA \(the tree of the saved arrays\) is missing',
}


def _check_damage_message(message, workdir, step, kind):
  """`message` names the damage of `kind` (`DAMAGE_MESSAGES`); a named array is one of the state's,
  a named file one of the checkpoint's, truncated to the size it says."""
  path = os.path.join(workdir, 'checkpoints', str(step))
  found = re.search(f'checkpoint {re.escape(path)} is corrupted: {DAMAGE_MESSAGES[kind]}', message)
  assert found, message
  assert 'tensorstore_spec' not in message and 'driver' not in message and 'pytree' not in message
  names = found.groupdict()
  if 'array' in names:
    def key(entry):  # a dict key, a dataclass field or a tuple index, as Orbax names them
      return str(next(getattr(entry, a) for a in ('key', 'name', 'idx') if hasattr(entry, a)))
    leaves = jax.tree_util.tree_flatten_with_path(_abstract_state(workdir))[0]
    assert names['array'] in {'/'.join(key(k) for k in p) for p, _ in leaves}, names['array']
  if 'size' in names:  # the file is in the checkpoint (or was moved aside with it), cut to that size
    files = glob.glob(os.path.join(workdir, 'checkpoints', '**', names['file']), recursive=True)
    assert files and int(names['size']) == os.path.getsize(files[0]) < int(names['wanted'])


def test_damaged_checkpoints_by_name_or_all_damaged_are_one_message(killed_and_resumed, tmp_path):
  src = killed_and_resumed['workdir']
  steps = sorted(int(n) for n in os.listdir(os.path.join(src, 'checkpoints')) if n.isdigit())
  one = shutil.copytree(src, tmp_path / 'one')
  _damage(os.path.join(one, 'checkpoints', str(NUM_STEPS)), 'truncate')
  every = shutil.copytree(src, tmp_path / 'every')
  for step in steps:
    _damage(os.path.join(every, 'checkpoints', str(step)), 'meta_garbled')
  before = sorted(os.listdir(os.path.join(every, 'checkpoints')))
  runs = [_launch('launch.evaluate', f'--workdir={one}', f'--checkpoint={NUM_STEPS}'),
          _launch('launch.train', f'--config={killed_and_resumed["config"]}', f'--workdir={every}')]
  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    (_, err_one), (_, err_every) = pool.map(lambda p: p.communicate(timeout=240), runs)
  assert [p.returncode for p in runs] == [2, 2], (err_one[-2000:], err_every[-2000:])
  for err in (err_one, err_every):
    lines = [l for l in err.splitlines() if l.startswith('error: ')]
    assert len(lines) == 1 and 'Traceback' not in err, err[-2000:]
    assert len(lines[0]) < 1500 and 'source locations' not in lines[0]
  _check_damage_message(err_one, str(one), NUM_STEPS, 'truncate')
  assert 'the other checkpoints of this run: none' in err_one  # 80 is the latest and the best
  assert f'cannot resume {every}: every checkpoint is damaged' in err_every
  assert 'Nothing was changed' in err_every and 'fresh --workdir' in err_every
  assert sorted(os.listdir(os.path.join(every, 'checkpoints'))) == before


# --- damaged checkpoints, in process (the tiny job of test_training_support) -----------------------

TINY = {'train.num_epochs': 2, 'train.eval_every_steps': 4, 'train.checkpoint_every_steps': 2,
        'train.log_every_steps': 2}


@pytest.fixture(scope='module')
def interrupted(tmp_path_factory):
  """A tiny run stopped after step 10: checkpoints of step 10 (latest) and of the best evaluation."""
  workdir = str(tmp_path_factory.mktemp('interrupted') / 'run')
  with pytest.raises(support.Crash):
    training.train_and_evaluate(support.make_config(**TINY), workdir, hooks=[support.crash_after(10)])
  steps = sorted(int(n) for n in os.listdir(os.path.join(workdir, 'checkpoints')))
  assert len(steps) == 2 and steps[-1] == 10
  return workdir, steps[0]


def _abstract_state(workdir):
  from jax_structured.training import restore  # pylint: disable=g-import-not-at-top
  _, _, _, parts = restore._assemble_saved_run(workdir)  # pylint: disable=protected-access
  return parts.state


@pytest.mark.parametrize('kind', quick_and_slow(  # one array file and one metadata file quick
    ['overwrite', 'meta_garbled'], sorted(set(DAMAGE_MESSAGES) - {'overwrite', 'meta_garbled'})))
def test_resume_steps_over_a_damaged_checkpoint_and_keeps_it_aside(interrupted, tmp_path, kind, caplog):
  src, best = interrupted
  workdir = str(shutil.copytree(src, tmp_path / 'run'))
  _damage(os.path.join(workdir, 'checkpoints', '10'), kind)
  with pytest.raises(training.CheckpointError) as caught:
    training.load_trained(workdir, 10)  # asked for by name: an error
  _check_damage_message(str(caught.value), workdir, 10, kind)
  with caplog.at_level(logging.WARNING), ckpt_lib.Checkpoints(
      workdir, dev_metric='accuracy', higher_is_better=True) as ckpts:
    step, _, meta = ckpts.restore_latest(_abstract_state(workdir))
    assert (step, meta['step']) == (best, best)
    assert ckpts.all_steps() == [best] and ckpts.latest_step() == best
  aside = os.listdir(os.path.join(workdir, 'checkpoints', 'damaged'))
  assert len(aside) == 1 and aside[0].startswith('10-')
  assert os.path.exists(os.path.join(workdir, 'checkpoints', 'damaged', aside[0], 'state'))
  warnings = [r.getMessage() for r in caplog.records if 'is corrupted' in r.getMessage()]
  assert len(warnings) == 1 and f'checkpoints/10 is corrupted' in warnings[0]
  assert f'moved it to {workdir}/checkpoints/damaged/10-' in warnings[0]
  assert f'resumed from the checkpoint of step {best}' in warnings[0]


def test_training_resumed_over_a_damaged_checkpoint_keeps_latest_and_best(interrupted, tmp_path):
  src, best = interrupted
  workdir = str(shutil.copytree(src, tmp_path / 'run'))
  _damage(os.path.join(workdir, 'checkpoints', '10'), 'truncate')
  results = training.train_and_evaluate(support.make_config(**TINY), workdir)
  assert results['steps'] == 12
  history = [h['step'] for h in results['history']]
  assert history == sorted(set(history)) == [4, 8, 12]
  kept = sorted(int(n) for n in os.listdir(os.path.join(workdir, 'checkpoints')) if n.isdigit())
  assert kept == sorted({results['best_step'], 12})
  assert len(os.listdir(os.path.join(workdir, 'checkpoints', 'damaged'))) == 1
  view = _tensorboard_view(workdir)
  assert [s for s, _ in view['train/loss']] == list(range(2, 13, 2))
  assert [s for s, _ in view['dev/accuracy']] == [4, 8, 12]
