"""Every launcher turns a user's mistake into one `error:` line on stderr and exit status 2 (issue 23).

The launchers run in subprocesses, all at once (a module fixture starts them in a thread pool; most
fail before JAX is imported); the classification of exceptions and the config-key messages are
tested in-process.
"""
import concurrent.futures
import os
import subprocess
import sys

import ml_collections
import pytest

from jax_structured import errors
from jax_structured.data import builders
from launch import _errors

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BAD_UTF8 = b'pos\tgood film\nneg\tbad \x93film\x94\npos\tfine\nneg\t\x93awful\n\n'
# Every config under configs/ imports jax_structured.training (hence JAX, ~3 s) for its defaults; the
# flag-level cases use this light one, so that they fail in a fraction of a second.
LIGHT_CONFIG = """
import ml_collections
def get_config():
  return ml_collections.ConfigDict({'seed': 0, 'train': {'num_steps': 2, 'num_epochs': 1},
                                    'data': {'name': 'synthetic_trees', 'batch_size': 4},
                                    'model': {'dim': 3}})
"""

# name -> (module and arguments; {tmp} is the test's folder, expected parts of the error line).
CASES = {
    'train unknown key': (
        ['launch.train', '--config=configs/default.py', '--workdir={tmp}/w', '--config.train.nope=1'],
        ['unknown config key config.train.nope', 'valid keys of config.train: ', 'num_steps']),
    'train misspelt section': (
        ['launch.train', '--config={tmp}/light.py', '--workdir={tmp}/w',
         '--config.trian.num_steps=1'],
        ['unknown config key config.trian.num_steps; did you mean config.train.num_steps?; valid keys '
         'of config: data, model, seed, train']),
    'train missing config file': (
        ['launch.train', '--config=configs/defualt.py', '--workdir={tmp}/w'],
        ['--config=configs/defualt.py: no such config file', 'did you mean configs/default.py']),
    # A missing config file with overrides (absl raises applying them) in both spellings, with the
    # flags of --text_classification_dir (its data overrides are taken before absl parses) and with
    # another flag's mistake: the same one line (issue 63).
    'train missing config file with overrides': (
        ['launch.train', '--config=configs/defualt.py', '--workdir={tmp}/w', '--config.train.num_steps=3',
         '--config.model.dim', '4'],
        ['--config=configs/defualt.py: no such config file', 'did you mean configs/default.py']),
    'train missing config file with a text folder': (
        ['launch.train', '--config', 'configs/defualt.py', '--workdir={tmp}/w',
         '--text_classification_dir={tmp}/reviews', '--config.data.min_count=2',
         '--config.train.num_steps=3'],
        ['--config=configs/defualt.py: no such config file', 'did you mean configs/default.py']),
    'train missing config file and an unknown flag': (
        ['launch.train', '--config=configs/defualt.py', '--workdir={tmp}/w', '--bogus=1'],
        ['--config=configs/defualt.py: no such config file']),
    'train config syntax error with an override': (
        ['launch.train', '--config={tmp}/syntax.py', '--workdir={tmp}/w', '--config.train.num_steps=3'],
        ['--config={tmp}/syntax.py: the config file failed at {tmp}/syntax.py:2: SyntaxError: ']),
    'train config import fails': (
        ['launch.train', '--config={tmp}/bad_import.py', '--workdir={tmp}/w'],
        ['--config={tmp}/bad_import.py: the config file failed at {tmp}/bad_import.py:1: '
         "ModuleNotFoundError: No module named 'no_such_module_here'"]),
    'train get_config raises with an override': (
        ['launch.train', '--config={tmp}/bad_value.py', '--workdir={tmp}/w', '--config.train.num_steps=3'],
        ['--config={tmp}/bad_value.py: get_config() failed at {tmp}/bad_value.py:3: ValueError: '
         "invalid literal for int() with base 10: 'x'"]),
    'train get_config fails': (
        ['launch.train', '--config={tmp}/light.py:nope', '--workdir={tmp}/w'],
        ["get_config() failed: TypeError: get_config() takes 0 positional arguments"]),
    'train bad value': (
        ['launch.train', '--config={tmp}/light.py', '--workdir={tmp}/w',
         '--config.train.num_steps=abc'],
        ['--config.train.num_steps=abc', "invalid literal for int()"]),
    'train former config key distributed': (
        ['launch.train', '--config={tmp}/light.py', '--workdir={tmp}/w', '--config.distributed=True'],
        ['--config.distributed=True: multi-host start-up is the launcher flag --distributed now']),
    'train unknown flag': (
        ['launch.train', '--config={tmp}/light.py', '--workdir={tmp}/w', '--bogus=1'],
        ["Unknown command line flag 'bogus'", '--helpshort']),
    'train no workdir': (['launch.train', '--config={tmp}/light.py'],
                         ['--workdir must have a value']),
    'train extra argument': (['launch.train', '--config={tmp}/light.py', '--workdir={tmp}/w', 'x'],
                             ["unexpected arguments: ['x']"]),
    'train override the text loader lacks': (
        ['launch.train', '--config={tmp}/light.py', '--workdir={tmp}/w',
         '--text_classification_dir={tmp}/reviews', '--config.data.tokenizer=x'],
        ['unknown config key --config.data.tokenizer (the text_classification loader has no such key)']),
    'train empty text folder flag': (
        ['launch.train', '--config={tmp}/light.py', '--workdir={tmp}/w', '--text_classification_dir=',
         '--config.data.min_count=2'],
        ['--text_classification_dir is empty']),
    'train missing text folder': (
        ['launch.train', '--config={tmp}/light.py', '--workdir={tmp}/w',
         '--text_classification_dir={tmp}/nowhere'],
        ['--text_classification_dir={tmp}/nowhere is not a directory']),
    'train undecodable text': (
        # The data overrides in both spellings absl accepts (--key VALUE, --nokey): taken for the
        # text_classification section, which the synthetic demo config lacks.
        ['launch.train', '--config=configs/default.py', '--workdir={tmp}/w2',
         '--text_classification_dir={tmp}/reviews', '--config.data.data_dir', '{tmp}/tfds',
         '--noconfig.data.lowercase'],
        ['reviews/train.tsv:2: not valid utf-8 text (invalid start byte at byte 8); 2 lines are not '
         'valid utf-8 (lines 2, 4); if the files are in another encoding, set it with '
         'config.data.encoding']),
    'train traceback with --verbosity=1': (
        ['launch.train', '--config={tmp}/light.py', '--workdir={tmp}/w', '--config.train.nope=1',
         '--verbosity=1'],
        ['unknown config key config.train.nope']),
    'train workdir of another config': (
        ['launch.train', '--config={tmp}/light.py', '--workdir={tmp}/other'],
        ['workdir {tmp}/other holds a run of another config', 'seed: saved=5 current=0',
         'use a fresh --workdir or the same config']),
    'train compilation cache not a folder': (
        ['launch.train', '--config={tmp}/light.py', '--workdir={tmp}/w',
         '--compilation_cache_dir={tmp}/light.py/cache'],
        ["--compilation_cache_dir='{tmp}/light.py/cache': cannot use it as the compilation cache",
         'pass --compilation_cache_dir= to compile without a cache']),
    'evaluate damaged workdir': (['launch.evaluate', '--workdir={tmp}/damaged'],
                                 ['{tmp}/damaged/config.json is corrupted']),
    'evaluate missing workdir': (['launch.evaluate', '--workdir={tmp}/missing'],
                                 ['workdir {tmp}/missing does not exist']),
    'evaluate a file as workdir': (['launch.evaluate', '--workdir={tmp}/light.py'],
                                   ['workdir {tmp}/light.py is a file, not a directory: give '
                                    '--workdir the folder a training run wrote']),
    'evaluate bad checkpoint': (['launch.evaluate', '--workdir={tmp}/missing', '--checkpoint=bestt'],
                                ["--checkpoint=bestt: expected 'best', 'latest' or a step number"]),
    'induce_trees missing workdir': (['launch.induce_trees', '--workdir={tmp}/missing'],
                                     ['workdir {tmp}/missing has no config.json']),
    'show_attention missing workdir': (['launch.show_attention', '--workdir={tmp}/missing'],
                                       ['workdir {tmp}/missing has no config.json']),
    'parse missing input': (['launch.parse', '--workdir={tmp}/missing', '--input={tmp}/none.txt',
                             '--output={tmp}/out.conllu'],
                            ['input file not found: {tmp}/none.txt']),
    'benchmark unknown name': (['launch.benchmark', 'nope'], ["unknown benchmark 'nope'"]),
}


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """Runs every case at once; {name: (CompletedProcess, tmp folder)}."""
  tmp = tmp_path_factory.mktemp('cli')
  (tmp / 'reviews').mkdir()
  (tmp / 'reviews' / 'train.tsv').write_bytes(BAD_UTF8)
  (tmp / 'light.py').write_text(LIGHT_CONFIG)
  (tmp / 'syntax.py').write_text('import ml_collections\ndef get_config(:\n  pass\n')
  (tmp / 'bad_import.py').write_text('import no_such_module_here\n')
  (tmp / 'bad_value.py').write_text('import ml_collections\ndef get_config():\n  return int("x")\n')
  (tmp / 'other').mkdir()
  (tmp / 'other' / 'config.json').write_text('{"seed": 5, "model": {"dim": 3}}')
  (tmp / 'damaged').mkdir()
  (tmp / 'damaged' / 'config.json').write_text('{not json')
  env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS='cpu', OPENBLAS_NUM_THREADS='1')

  def launch(args):
    args = [a.format(tmp=tmp) for a in args]
    return subprocess.run([sys.executable, '-m', *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, check=False)

  with concurrent.futures.ThreadPoolExecutor(max_workers=6) as pool:
    futures = {name: pool.submit(launch, args) for name, (args, _) in CASES.items()}
    return {name: (future.result(), tmp) for name, future in futures.items()}


@pytest.mark.parametrize('name', sorted(CASES))
def test_each_mistake_is_one_error_message_and_exit_status_2(runs, name):
  out, tmp = runs[name]
  assert out.returncode == 2, out.stderr[-3000:]
  lines = [line for line in out.stderr.splitlines() if line.strip()]
  first = [i for i, line in enumerate(lines) if line.startswith('error: ')]
  assert first, out.stderr[-3000:]
  # The message is the end of stderr: one line, or a first line and the details a few carry (the
  # differing keys of a workdir of another config).
  message = '\n'.join(lines[first[0]:])
  assert len(lines) - first[0] == (5 if name == 'train workdir of another config' else 1), message
  for part in CASES[name][1]:
    assert part.format(tmp=tmp) in message, message
  if 'verbosity' in name:
    assert 'Traceback (most recent call last)' in out.stderr
  else:
    assert 'Traceback' not in out.stderr, out.stderr[-3000:]
  assert sum(line.startswith('error: ') for line in lines) == 1


def test_a_failed_build_leaves_nothing_and_no_workdir_is_made(runs):
  _, tmp = runs['train undecodable text']
  assert sorted(p.name for p in (tmp / 'tfds').iterdir()) == ['.text_classification.reviews.lock']
  for name in ('train unknown key', 'train missing config file', 'train bad value'):
    assert not (runs[name][1] / 'w').exists()


def test_every_launcher_runs_under_the_error_handler():
  # A launcher added later (the open issues add some) must use it too.
  launchers = [p for p in sorted(os.listdir(os.path.join(REPO, 'launch')))
               if p.endswith('.py') and not p.startswith('_')]
  assert {'train.py', 'evaluate.py', 'induce_trees.py', 'show_attention.py', 'parse.py',
          'benchmark.py'} <= set(launchers)
  for name in launchers:
    source = open(os.path.join(REPO, 'launch', name), encoding='utf-8').read()
    assert 'app.run(' not in source, f'launch/{name} calls absl app.run: use launch._errors.run'
    if name != 'benchmark.py':  # benchmark.run() dispatches to _errors.run
      assert "if __name__ == '__main__':\n  _errors.run(main" in source, name


def _raised(fn):
  try:
    fn()
  except Exception as e:  # pylint: disable=broad-except
    return e
  raise AssertionError('no exception')


def test_user_errors_and_bugs_are_told_apart(tmp_path):
  from jax_structured.training import checkpoints  # pylint: disable=g-import-not-at-top
  from jax_structured.training import assembly  # pylint: disable=g-import-not-at-top
  assert _errors.user_message(errors.UserError('do this')) == 'do this'
  assert _errors.user_message(assembly.DeviceMemoryError('out of memory at batch [64, 200]')) == (
      'out of memory at batch [64, 200]')
  assert _errors.user_message(MemoryError('host')) is None
  assert _errors.user_message(builders.FormatError('f.tsv', 3, 'bad')) == 'f.tsv:3: bad'
  assert _errors.user_message(checkpoints.CheckpointError('ckpt is corrupted')) == 'ckpt is corrupted'
  missing = _raised(lambda: open(tmp_path / 'none.txt'))
  assert _errors.user_message(missing) == f'{tmp_path / "none.txt"}: No such file or directory'
  assert _errors.user_message(ValueError("config.model.loss='x'; expected one of ('crf',)")) == (
      "config.model.loss='x'; expected one of ('crf',)")
  assert _errors.user_message(KeyError('config.data.name=x has no split dev')) == (
      'config.data.name=x has no split dev')
  # Bugs keep their traceback: messages that name no config key, other exception types.
  assert _errors.user_message(ValueError('operands could not be broadcast')) is None
  assert _errors.user_message(KeyError('logits')) is None
  assert _errors.user_message(RuntimeError('config.model.x went wrong')) is None
  # A key the running code reads and the config lacks (raised inside ml_collections).
  config = ml_collections.ConfigDict({'model': {'dim': 3}})
  for read in (lambda: config.model['depth'], lambda: config.model.depth):
    message = _errors.user_message(_raised(read))
    assert message.startswith("the config has no key 'depth' that tests/test_cli_errors.py:"), message


def test_checkpoint_flag():
  assert [_errors.checkpoint(v) for v in ('best', 'latest', '1200')] == ['best', 'latest', 1200]
  with pytest.raises(errors.UserError, match=r"--checkpoint=-3: expected 'best', 'latest' or a step"):
    _errors.checkpoint('-3')


def test_unknown_key_names_the_closest_and_the_valid_keys():
  config = ml_collections.ConfigDict({'train': {'num_steps': 1, 'num_epochs': 2, 'shuffle': True},
                                      'model': {'dim': 3}, 'seed': 0})
  assert errors.unknown_key(config, 'train.num_steps') is None
  error = errors.unknown_key(config, 'train.num_step')
  assert isinstance(error, KeyError) and isinstance(error, ValueError)
  assert str(error) == ('unknown config key config.train.num_step; did you mean config.train.num_steps '
                        'or config.train.num_epochs?; valid keys of config.train: num_epochs, '
                        'num_steps, shuffle')
  assert str(errors.unknown_key(config, 'trian.shuffle')).startswith(
      'unknown config key config.trian.shuffle; did you mean config.train.shuffle?')
  assert str(errors.unknown_key(config, 'seed.x')) == (
      'unknown config key config.seed.x (config.seed is a value, not a section)')
  assert str(errors.unknown_key({'a': 1}, 'zzz', where='--config.data')) == (
      'unknown config key --config.data.zzz; valid keys of --config.data: a')
