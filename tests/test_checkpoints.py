"""Checkpoints: bit-identical resume, keep latest + best, and clear errors for bad workdirs."""
import asyncio
import gc
import hashlib
import json
import logging
import os

import flax.linen as nn
import jax
import numpy as np
import pytest

import test_training_support as support
from stages import quick_and_slow
from jax_structured import training



def _tree_equal(a, b):
  la, lb = jax.tree_util.tree_leaves_with_path(a), jax.tree_util.tree_leaves_with_path(b)
  assert [p for p, _ in la] == [p for p, _ in lb]
  return all(np.array_equal(x, y) for (_, x), (_, y) in zip(la, lb))


def _files(root, skip=()):
  out = {}
  for d, _, names in os.walk(root):
    for n in names:
      p = os.path.join(d, n)
      if p not in skip:
        out[p] = hashlib.sha256(open(p, 'rb').read()).hexdigest()
  return out


# Shuffled data, dropout, adagrad, a plateau decay and an embedding scale that changes after epoch 1:
# everything the resumed run must restore (params, optimizer state, lr scale, data position, rng).
RESUME_CONFIG = {'train.num_epochs': 3, 'train.eval_every_steps': 4, 'train.checkpoint_every_steps': 3,
                 'model.dropout': 0.2, 'optimizer.name': 'adagrad', 'optimizer.learning_rate': 0.2,
                 'optimizer.plateau_factor': 0.5, 'optimizer.embedding_grad_scale': 0.35}


@pytest.fixture(scope='module')
def uninterrupted(tmp_path_factory):
  workdir = str(tmp_path_factory.mktemp('full'))
  results = training.train_and_evaluate(support.make_config(**RESUME_CONFIG), workdir)
  return workdir, results


def test_interrupted_run_resumes_bit_identically(tmp_path, uninterrupted):
  full_dir, full = uninterrupted
  workdir = str(tmp_path / 'resumed')
  config = support.make_config(**RESUME_CONFIG)
  with pytest.raises(support.Crash):  # mid epoch 2 (6 steps per epoch), between evaluations
    training.train_and_evaluate(config, workdir, hooks=[support.crash_after(9)])
  assert training.load_trained(workdir, 'latest').step == 9
  with pytest.raises(support.Crash):  # again, right after an evaluation
    training.train_and_evaluate(config, workdir, hooks=[support.crash_after(12)])
  resumed = training.train_and_evaluate(config, workdir)
  assert resumed['history'] == full['history']
  assert resumed['steps'] == full['steps'] == 18
  assert resumed['test'] == full['test']
  for which in ('latest', 'best'):
    a, b = training.load_trained(full_dir, which), training.load_trained(workdir, which)
    assert a.step == b.step
    assert _tree_equal(a.variables, b.variables), which
  # Keep latest + best only.
  steps = sorted(int(n) for n in os.listdir(os.path.join(workdir, 'checkpoints')) if n.isdigit())
  assert steps == sorted({full['best_step'], 18})
  # A finished run resumed again does not train further.
  again = training.train_and_evaluate(config, workdir)
  assert again['steps'] == 18 and again['history'] == full['history']


def test_workdir_of_another_config_is_an_error_naming_keys(tmp_path, uninterrupted):
  full_dir, _ = uninterrupted
  before = _files(full_dir)
  other = support.make_config(**dict(RESUME_CONFIG, **{'model.dim': 16, 'optimizer.name': 'adam'}))
  with pytest.raises(training.CheckpointError) as err:
    training.train_and_evaluate(other, full_dir)
  message = str(err.value)
  assert full_dir in message
  assert "model.dim: saved=8 current=16" in message
  assert "optimizer.name: saved='adagrad' current='adam'" in message
  assert 'train.' not in message
  assert _files(full_dir) == before
  # train.* keys may change on resume (e.g. more epochs): no error.
  longer = support.make_config(**dict(RESUME_CONFIG, **{'train.num_epochs': 3, 'train.log_every_steps': 5}))
  assert training.train_and_evaluate(longer, full_dir)['steps'] == 18


def _copy_run(src, dst):
  import shutil  # pylint: disable=g-import-not-at-top
  shutil.copytree(src, dst)
  return str(dst)


def _data_files(step_dir):
  return sorted(os.path.join(d, n) for d, _, names in os.walk(os.path.join(step_dir, 'state'))
                for n in names if os.sep + 'd' + os.sep in os.path.join(d, n))


# Damaged metadata is quick in test_training_history.
@pytest.mark.parametrize('damage', quick_and_slow(['truncate'], ['garble', 'meta']))
def test_corrupted_checkpoint_is_a_clear_error_or_set_aside_on_resume(tmp_path, uninterrupted, damage,
                                                                     caplog):
  workdir = _copy_run(uninterrupted[0], tmp_path / 'run')
  step_dir = os.path.join(workdir, 'checkpoints', '18')
  # Every OCDBT data file is damaged, not one: a restore reads only the B-tree nodes the root
  # manifest reaches (for this small model, values inlined in the merged node under state/d/), so
  # the per-process files under state/ocdbt.process_0/d/ may never be read, and which file is the
  # largest changes from run to run (CI once damaged an unread one).
  victims = [os.path.join(step_dir, 'meta', 'metadata')] if damage == 'meta' else _data_files(step_dir)
  assert victims
  for victim in victims:
    raw = open(victim, 'rb').read()
    if damage == 'truncate':
      damaged = raw[:len(raw) // 2]
    elif damage == 'garble':  # 16 flipped bytes at each eighth of the file
      damaged = bytearray(raw)
      for spot in range(1, 8):
        start = spot * len(raw) // 8
        damaged[start:start + 16] = bytes(b ^ 0xFF for b in raw[start:start + 16])
      damaged = bytes(damaged)
    else:
      damaged = raw[:-3] + b'#'
    open(victim, 'wb').write(damaged)
  before = _files(workdir)
  with caplog.at_level(logging.ERROR):
    with pytest.raises(training.CheckpointError, match=f'checkpoint {step_dir} is corrupted'):
      training.load_trained(workdir, 'latest')
    gc.collect()
  assert _files(workdir) == before  # asked for by name: an error, nothing touched
  # The other failed reads of that restore: not one traceback each (asyncio's 'never retrieved').
  assert not [r for r in caplog.records if r.name == 'asyncio'], caplog.text[-2000:]
  others = [n for n in os.listdir(os.path.join(workdir, 'checkpoints')) if n.isdigit() and n != '18']
  if others:  # auto-resume steps over it to the best checkpoint, moving it aside
    training.train_and_evaluate(support.make_config(**RESUME_CONFIG), workdir)
    assert os.listdir(os.path.join(workdir, 'checkpoints', 'damaged'))[0].startswith('18-')
  else:  # no good checkpoint: one error, nothing touched (test_training_history has the other case)
    with pytest.raises(training.CheckpointError, match='every checkpoint is damaged'):
      training.train_and_evaluate(support.make_config(**RESUME_CONFIG), workdir)
    after = _files(workdir)
    assert {p: h for p, h in after.items() if 'tfevents' not in p} == \
           {p: h for p, h in before.items() if 'tfevents' not in p}


@pytest.mark.parametrize('left_in', ['task', 'future'])
def test_unretrieved_reads_are_quiet_only_for_checkpoints_reported_damaged(tmp_path, caplog, left_in):
  from jax_structured.training import checkpoint_faults  # pylint: disable=g-import-not-at-top
  damaged, other = str(tmp_path / 'checkpoints' / '8'), str(tmp_path / 'checkpoints' / '80')

  def leave_failed_read(path):
    error = ValueError(f'OUT_OF_RANGE: Error reading "{path}/state/d/0a1b"')

    async def read():
      raise error

    async def main():
      if left_in == 'task':
        pending = asyncio.ensure_future(read())
        await asyncio.sleep(0.01)  # it fails; nobody retrieves its exception
      else:
        pending = asyncio.get_running_loop().create_future()
        pending.set_exception(error)
      del pending

    asyncio.run(main())
    gc.collect()

  checkpoint_faults.quiet_unretrieved_reads_of(damaged)
  with caplog.at_level(logging.ERROR, logger='asyncio'):
    leave_failed_read(damaged)
    assert not [r for r in caplog.records if r.name == 'asyncio']
    leave_failed_read(other)  # '.../80/' is not under '.../8/': still reported
    reported = [r for r in caplog.records if r.name == 'asyncio']
  kind = 'Task' if left_in == 'task' else 'Future'
  assert len(reported) == 1 and reported[0].getMessage().startswith(f'{kind} exception was never retrieved')
  assert other in str(reported[0].exc_info[1])


def test_non_finite_states_are_never_saved_nor_silently_restored(tmp_path, uninterrupted):
  import orbax.checkpoint as ocp  # pylint: disable=g-import-not-at-top
  from jax_structured.training import checkpoints as ckpt_lib  # pylint: disable=g-import-not-at-top
  workdir = _copy_run(uninterrupted[0], tmp_path / 'run')
  trained = training.load_trained(workdir, 'latest')
  state = {'params': jax.tree.map(np.array, trained.variables['params'])}
  state['params']['embed']['embedding'][1, 2] = np.nan
  with ckpt_lib.Checkpoints(workdir, dev_metric='accuracy', higher_is_better=True) as ckpts:
    before = ckpts.all_steps()
    with pytest.raises(training.CheckpointError,
                       match=r"not saving step 99 .*non-finite values in \['params'\]\['embed'\]"
                             r"\['embedding'\] \(1 of "):
      ckpts.save(99, state, {'loop': {}})
    assert ckpts.all_steps() == before
    # One written by other means (an older version, another tool) is refused when read back.
    ckpts.manager.save(99, args=ocp.args.Composite(
        state=ocp.args.StandardSave(state),
        meta=ocp.args.JsonSave({'fingerprint': ckpt_lib.fingerprint(state), 'step': 99})), force=True)
    ckpts.manager.wait_until_finished()
    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), state)
    with pytest.raises(training.CheckpointError, match=r'checkpoint .*99 holds non-finite values'):
      ckpts.restore(99, abstract)


def test_missing_checkpoints_and_workdirs_are_clear_errors(tmp_path, uninterrupted):
  missing = str(tmp_path / 'nowhere')
  with pytest.raises(FileNotFoundError, match=f'workdir {missing} does not exist'):
    training.evaluate(missing, 'test')
  with pytest.raises(FileNotFoundError, match='no config.json'):
    training.load_trained(missing)
  workdir = _copy_run(uninterrupted[0], tmp_path / 'run')
  import shutil  # pylint: disable=g-import-not-at-top
  shutil.rmtree(os.path.join(workdir, 'checkpoints'))
  with pytest.raises(FileNotFoundError, match=f'no checkpoint in workdir {workdir}'):
    training.evaluate(workdir, 'test')
  os.makedirs(os.path.join(workdir, 'checkpoints'))
  with pytest.raises(FileNotFoundError, match=f'no checkpoint in workdir {workdir}'):
    training.load_trained(workdir)
  with pytest.raises(FileNotFoundError, match='no checkpoint for step 7'):
    training.load_trained(uninterrupted[0], 7)


def test_unfinished_save_is_ignored(tmp_path, uninterrupted):
  workdir = _copy_run(uninterrupted[0], tmp_path / 'run')
  # What an interrupted Orbax save leaves behind: a temporary directory, never a step directory.
  partial = os.path.join(workdir, 'checkpoints', '24.orbax-checkpoint-tmp-1234567')
  os.makedirs(os.path.join(partial, 'state'))
  open(os.path.join(partial, 'state', 'garbage'), 'wb').write(b'\x00' * 10)
  assert training.load_trained(workdir, 'latest').step == 18
  assert json.load(open(os.path.join(workdir, 'config.json')))['model']['dim'] == 8


class _RenamedTinyModel(support.TinyModel):
  """TinyModel with its hidden layer renamed ('hidden' -> 'hidden_layer') and a wider output."""

  @nn.compact
  def __call__(self, batch, train=False):
    x = nn.Embed(self.vocab_size, self.dim, name='embed')(batch['tokens'])
    pooled = x.mean(1)
    hidden = nn.tanh(nn.Dense(self.dim, name='hidden_layer')(pooled))
    self.param('bilinear', nn.initializers.normal(1.0), (self.dim, self.dim + 1))
    nn.Dense(1, name='root')(x)
    return nn.Dense(self.num_classes, name='out')(hidden)


def test_checkpoint_of_changed_model_code_is_an_error_naming_the_differences(tmp_path, uninterrupted,
                                                                             monkeypatch):
  """A workdir trained before the model's parameters were renamed fails at load, naming them."""
  workdir, _ = uninterrupted
  from jax_structured.training import assembly  # pylint: disable=g-import-not-at-top
  renamed = lambda model_config, **kw: _RenamedTinyModel(kw['vocab_size'], kw['num_classes'],  # noqa: E731
                                                          dim=model_config.get('dim', 8))
  monkeypatch.setattr(assembly, 'build_model', renamed)
  before = _files(workdir)
  for load in (lambda: training.load_trained(workdir), lambda: training.evaluate(workdir, 'test')):
    with pytest.raises(training.CheckpointError) as info:
      load()
    text = str(info.value)
    assert 'does not fit the model' in text and 'The model code or the config changed' in text
    assert 'in the model, not in the checkpoint: params/hidden_layer/kernel' in text
    assert 'in the checkpoint, not in the model: params/hidden/kernel' in text
    assert 'shape [8, 8] in the checkpoint, [8, 9] in the model: params/bilinear' in text
  assert _files(workdir) == before  # nothing written or deleted
