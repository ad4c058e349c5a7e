"""Config handling: frozen schema on the command line and in files, overrides, launchers end to end."""
import json
import os
import subprocess
import sys
import textwrap

import ml_collections
import pytest

import test_training_support as support
from jax_structured import errors
from jax_structured import training
from jax_structured import config as config_lib
from jax_structured.data import loaders

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(REPO, 'tests')


def _launch(module, *args, timeout=240):
  env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''),
             JAX_PLATFORMS='cpu')
  return subprocess.run([sys.executable, '-m', module, *args], cwd=REPO, env=env, capture_output=True,
                        text=True, timeout=timeout)


@pytest.fixture
def light_config(tmp_path):
  path = tmp_path / 'light.py'
  path.write_text(textwrap.dedent('''
      import ml_collections
      def get_config():
        return ml_collections.ConfigDict({'seed': 0, 'train': {'num_epochs': 2},
                                          'model': {'dim': 3}})
  '''))
  return str(path)


@pytest.mark.parametrize('flag, key', [('--config.train.num_epochz=3', 'num_epochz'),
                                       ('--config.modle.dim=3', 'modle'),
                                       ('--config.model.dim.x=3', 'x'),
                                       ('--config.sed=1', 'sed')])
def test_unknown_command_line_keys_are_errors(light_config, tmp_path, flag, key):
  out = _launch('launch.train', f'--config={light_config}', f'--workdir={tmp_path / "w"}', flag)
  assert out.returncode != 0
  assert key in out.stderr
  assert not os.path.exists(tmp_path / 'w')


def test_unknown_or_mistyped_keys_in_config_sections_are_errors():
  config = support.make_config()
  with config.unlocked():
    config.optimizer.learnin_rate = 0.1
  with pytest.raises(ValueError, match=r'config\.optimizer\.learnin_rate'):
    config_lib.resolve(config)
  config = support.make_config()
  with config.unlocked():
    config.train = ml_collections.ConfigDict({'num_epochs': 'three'})
  with pytest.raises(TypeError, match=r'config\.train\.num_epochs must be a int'):
    config_lib.resolve(config)
  with pytest.raises(ValueError, match=r"config\.optimizer\.name='rmsprop'"):
    config_lib.resolve(support.make_config(**{'optimizer.name': 'rmsprop'}))
  with pytest.raises(ValueError, match=r"config\.parallel='dp'"):
    config_lib.resolve(support.make_config(**{'parallel': 'dp'}))
  config = support.make_config()
  with config.unlocked():
    config.sed = 1
  with pytest.raises(KeyError, match=r'unknown config key config\.sed; did you mean config\.seed'):
    config_lib.resolve(config)
  with pytest.raises(ValueError, match=r"config\.variants: bad variant name '\.hidden'"):
    config_lib.resolve(config_lib.to_dict(support.make_config()) | {'variants': {'.hidden': {}}})
  # Missing keys take their defaults; the config itself is never modified.
  config = ml_collections.ConfigDict({'optimizer': {'name': 'sgd', 'learning_rate': 1}})
  resolved = config_lib.resolve(config)
  opt = resolved.optimizer
  assert opt.learning_rate == 1.0 and isinstance(opt.learning_rate, float)
  assert opt.initial_accumulator == config_lib.OPTIMIZER_DEFAULTS['initial_accumulator']
  assert resolved.train.to_dict() == config_lib.TRAIN_DEFAULTS | {'comparison_metrics': ()}
  assert (resolved.seed, resolved.task, resolved.parallel) == (0, '', 'shard_map')
  assert set(config.optimizer) == {'name', 'learning_rate'}
  assert set(config) == {'optimizer'}


def test_resolve_is_frozen_idempotent_and_gives_one_config_per_variant():
  config = support.make_config(**{'parallel': ''})
  with config.unlocked():
    config.variants = ml_collections.ConfigDict({'small': {'model.dim': 4}, 'sgd': {'optimizer': {'name': 'sgd'}}},
                                                allow_dotted_keys=True)
  resolved = config_lib.resolve(config)
  assert isinstance(resolved, ml_collections.FrozenConfigDict)
  assert config_lib.resolve(resolved) is resolved
  assert resolved.parallel == 'shard_map'  # '' is the default
  with pytest.raises(AttributeError):
    resolved.train.num_epochs = 3
  assert resolved.variants.to_dict() == {'small': {'model': {'dim': 4}}, 'sgd': {'optimizer': {'name': 'sgd'}}}
  variants = config_lib.variants(resolved)
  assert list(variants) == ['sgd', 'small']  # in name order, as ConfigDict keys are
  assert variants['small'].model.dim == 4 and variants['small'].optimizer.name == 'adam'
  assert variants['sgd'].optimizer.name == 'sgd' and variants['sgd'].model.dim == 8
  assert all(isinstance(v, config_lib.ResolvedConfig) and not v.variants for v in variants.values())
  # A resolved config read back from its JSON (a workdir's config.json) is the same config.
  assert config_lib.resolve(json.loads(json.dumps(config_lib.to_dict(resolved)))) == resolved
  bad = ml_collections.ConfigDict(config_lib.to_dict(resolved))
  bad.variants.small = ml_collections.ConfigDict({'model': {'dimm': 4}})
  with pytest.raises(KeyError, match=r'config\.variants\.small: unknown config key config\.model\.dimm'):
    config_lib.variants(config_lib.resolve(bad))


def test_overrides_and_incompatible_keys():
  config = support.make_config()
  child = config_lib.with_overrides(config, {'model.dim': 4, 'optimizer.name': 'sgd'})
  assert child.model.dim == 4 and config.model.dim == 8
  with pytest.raises(KeyError, match=r'overrides: unknown config key config\.model\.dimm; did you mean '
                     r'config\.model\.dim\?; valid keys of config\.model: '):
    config_lib.with_overrides(config, {'model.dimm': 4})
  with pytest.raises(KeyError, match=r'unknown config key config\.modle\.dim; did you mean config\.model\.dim'):
    config_lib.with_overrides(config, {'modle.dim': 4})
  saved = config_lib.to_dict(config)
  current = config_lib.to_dict(config_lib.with_overrides(
      config, {'model.dim': 4, 'train.num_epochs': 9, 'parallel': 'pmap'}))
  assert config_lib.incompatible_keys(saved, current) == ['model.dim: saved=8 current=4']
  del current['data']['seed']
  assert "data.seed: saved=0 current='<absent>'" in config_lib.incompatible_keys(saved, current)


def test_saved_config_py_rebuilds_the_config(tmp_path):
  config = config_lib.resolve(support.make_config())
  training.checkpoints.write_config(str(tmp_path), config)
  namespace = {}
  exec(compile((tmp_path / 'config.py').read_text(), 'config.py', 'exec'), namespace)  # pylint: disable=exec-used
  rebuilt = namespace['get_config']()
  assert config_lib.to_dict(rebuilt) == config_lib.to_dict(config)
  assert training.checkpoints.read_config(str(tmp_path)) == config  # resolved when read


def test_a_saved_config_that_no_longer_resolves_names_the_file_and_the_key(tmp_path):
  saved = config_lib.to_dict(config_lib.resolve(support.make_config()))
  saved['train']['num_epocs'] = 3  # e.g. a key an older version had
  (tmp_path / 'config.json').write_text(json.dumps(saved))
  with pytest.raises(training.CheckpointError, match=r'config\.json is not a valid config for this version '
                     r'.*unknown config key config\.train\.num_epocs'):
    training.checkpoints.read_config(str(tmp_path))


@pytest.mark.slow  # end to end from the command line: runs after the suite (.ci/run)
def test_launchers_end_to_end(tmp_path):
  config_file = tmp_path / 'tiny.py'
  config_file.write_text(textwrap.dedent(f'''
      import sys
      sys.path.insert(0, {TESTS!r})
      import test_training_support
      def get_config():
        return test_training_support.make_config(**{{'train.num_steps': 2, 'train.eval_every_steps': 2,
                                                     'parallel': 'none'}})
  '''))
  workdir = tmp_path / 'run'
  out = _launch('launch.train', f'--config={config_file}', f'--workdir={workdir}',
                '--config.optimizer.learning_rate=0.02', '--config.model.dim=6')
  assert out.returncode == 0, out.stderr[-3000:]
  printed = json.loads(out.stdout[out.stdout.index('{'):])
  saved = json.load(open(workdir / 'config.json'))
  assert saved['optimizer']['learning_rate'] == 0.02 and saved['model']['dim'] == 6
  assert printed['test'] == json.load(open(workdir / 'metrics.json'))['test']
  # evaluate needs only the workdir and the evaluated split. The tiny loader and model live in the
  # test support module (the config file registered them above), so a wrapper imports it first.
  wrapper = tmp_path / 'eval_tiny.py'
  wrapper.write_text(textwrap.dedent(f'''
      import runpy, sys
      sys.path.insert(0, {TESTS!r})
      import test_training_support
      sys.argv = ['launch.evaluate'] + sys.argv[1:]
      runpy.run_module('launch.evaluate', run_name='__main__')
  '''))
  env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS='cpu')
  out = subprocess.run([sys.executable, str(wrapper), f'--workdir={workdir}', '--split=validation'],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
  assert out.returncode == 0, out.stderr[-3000:]
  result = json.loads(out.stdout[out.stdout.index('{'):])
  assert result == json.load(open(workdir / 'eval_validation.json'))
  assert result['accuracy'] == printed['validation']['accuracy']
  out = _launch('launch.evaluate', f'--workdir={tmp_path / "missing"}')
  assert out.returncode != 0 and f'workdir {tmp_path / "missing"} does not exist' in out.stderr


def _config_file(path, options=None):
  import importlib.util  # pylint: disable=g-import-not-at-top
  repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  spec = importlib.util.spec_from_file_location('cfg', os.path.join(repo, path))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(options) if options is not None else module.get_config()


def test_text_classification_dir_swaps_the_data_section(shared_data, tmp_path):
  from jax_structured import data  # pylint: disable=g-import-not-at-top
  default = _config_file('configs/default.py')
  config = loaders.with_text_classification_data(default, str(shared_data / 'debian_descriptions'))
  assert default.data.name == 'synthetic_trees'  # the input config is not modified
  assert config.data.name == 'text_classification' and not config.data.split_sentences
  assert config.data.batch_size == default.data.batch_size and config.model == default.model
  config.data.data_dir = str(tmp_path / 'tfds')  # not the user's ~/tensorflow_datasets
  task = data.load(config.data)
  assert task.kind == 'sentence' and task.num_classes == 16 and len(task.splits['train']) == 9761
  documents = loaders.with_text_classification_data(_config_file('configs/liu_lapata/yelp13.py', 'tiny'),
                                                       str(tmp_path))
  assert documents.data.split_sentences and documents.data.manual_dir == str(tmp_path)


def test_text_classification_dir_keeps_the_configs_data_keys(tmp_path):
  # Before: the data section was reset to the loader's defaults (debian lost word2vec and its
  # truncation, sst went from min_count 1 to 6).
  debian = _config_file('configs/liu_lapata/debian.py')
  swapped = loaders.with_text_classification_data(debian, str(tmp_path)).data
  for key in ('embeddings', 'embedding_dim', 'max_sentences', 'max_sentence_length', 'min_count',
              'batch_size', 'split_sentences'):
    assert swapped[key] == debian.data[key], key
  assert debian.data.embeddings == 'word2vec' and debian.data.max_sentence_length == 200
  assert swapped.manual_dir == str(tmp_path) and swapped.config == ''  # named after the folder
  sst = _config_file('configs/liu_lapata/sst_fine.py')
  swapped = loaders.with_text_classification_data(sst, str(tmp_path)).data
  assert sst.data.min_count == 1 and swapped.min_count == 1 and not swapped.split_sentences
  # sst has its own dev split (validation_fraction 0): a folder without a dev file still gets one.
  assert swapped.validation_fraction == 0.1 and swapped.config == ''
  # The synthetic demo's keys mean other things (its max_length is the generated length).
  default = _config_file('configs/default.py')
  swapped_config = loaders.with_text_classification_data(default, str(tmp_path))
  swapped = swapped_config.data
  assert swapped.max_length == 0 and swapped.batch_size == default.data.batch_size
  # Its parser variant trains on the planted trees (data.kind='parse'): left out on a folder of
  # texts, the attention variants stay; the input config keeps all four.
  assert sorted(swapped_config.variants) == ['none', 'simple', 'structured']
  assert sorted(default.variants) == ['none', 'parser', 'simple', 'structured']


def test_text_classification_dir_applies_every_override(tmp_path):
  # The command line of the issue: the logged hyperparameters showed 0 / 0 / 6 / ''.
  overrides = {'max_sentence_length': '50', 'max_sentences': '20', 'min_count': '2',
               'embeddings': 'word2vec', 'lowercase': 'false', 'validation_fraction': '0.2',
               'bucket_boundaries': '((6, 20), (20, 50))', 'encoding': 'cp1252'}
  for path in ('configs/default.py', 'configs/liu_lapata/sst_fine.py', 'configs/liu_lapata/debian.py'):
    data = loaders.with_text_classification_data(_config_file(path), str(tmp_path), overrides).data
    assert (data.max_sentence_length, data.max_sentences, data.min_count, data.embeddings) == (
        50, 20, 2, 'word2vec'), path
    assert data.lowercase is False and data.validation_fraction == 0.2 and data.encoding == 'cp1252'
    assert tuple(map(tuple, data.bucket_boundaries)) == ((6, 20), (20, 50))
  # An override the text_classification loader does not have is an error naming it.
  yelp = _config_file('configs/liu_lapata/yelp13.py', 'tiny')
  with pytest.raises(errors.ConfigKeyError, match=r'--config\.data\.tokenizer .*text_classification '
                     r'loader has no such key'):
    loaders.with_text_classification_data(yelp, str(tmp_path), {'tokenizer': 'whitespace'})
  with pytest.raises(errors.ConfigKeyError, match=r'did you mean --config\.data\.max_sentences '):
    loaders.with_text_classification_data(yelp, str(tmp_path), {'max_sentence': '3'})
  with pytest.raises(errors.ConfigError, match=r"--config\.data\.min_count='two' is not a int"):
    loaders.with_text_classification_data(yelp, str(tmp_path), {'min_count': 'two'})
  with pytest.raises(errors.ConfigError, match=r'config\.data\.min_count=0 must be >= 1'):
    loaders.with_text_classification_data(yelp, str(tmp_path), {'min_count': 0})
  with pytest.raises(errors.ConfigError, match=r"config\.data\.encoding='klingon' is not a text encoding"):
    loaders.with_text_classification_data(yelp, str(tmp_path), {'encoding': 'klingon'})
  with pytest.raises(errors.UserError, match=r'--text_classification_dir=.*missing is not a directory'):
    loaders.with_text_classification_data(yelp, str(tmp_path / 'missing'))


def test_bucket_boundaries_can_be_set_from_the_command_line(tmp_path):
  script = tmp_path / 'show.py'
  script.write_text(textwrap.dedent('''
      from absl import app
      from ml_collections import config_flags
      from jax_structured.data import loaders
      CONFIG = config_flags.DEFINE_config_file('config', None)
      def main(argv):
        print('BUCKETS', loaders.validate_config(CONFIG.value.data, 'text_classification')['bucket_boundaries'])
      app.run(main)
  '''))
  env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS='cpu')
  config = os.path.join(REPO, 'configs', 'liu_lapata', 'debian.py') + ':tiny'
  for flag, expected in (([], 'None'), (['--config.data.bucket_boundaries=((6, 20), (20, 50))'],
                                         '((6, 20), (20, 50))')):
    out = subprocess.run([sys.executable, str(script), f'--config={config}', *flag], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert f'BUCKETS {expected}' in out.stdout


def test_the_former_key_distributed_is_dropped_when_false_and_named_when_true():
  """`distributed` moved to launch.train's flag --distributed: False (older config files, saved
  config.json) is dropped, True is an error naming the replacement, never a request silently lost."""
  given = config_lib.to_dict(support.make_config())
  assert 'distributed' not in config_lib.resolve(given | {'distributed': False})
  with pytest.raises(ValueError, match=r'config\.distributed=True: .*launch\.train --distributed'):
    config_lib.resolve(given | {'distributed': True})
