"""configs/yu: every option's keys are accepted, and the tiny configs train from the config files
(heads of the real TREC and Quora files copied into tmp_path, a few steps each)."""
import importlib.util
import itertools
import math
import pathlib

import pytest

from configs import common
from configs import yu
from jax_structured import models
from jax_structured import training
from jax_structured.data import loaders
from jax_structured import config as training_config

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / 'configs' / 'yu'


def _config_module(name):
  spec = importlib.util.spec_from_file_location(f'yu_{name}', CONFIGS / f'{name}.py')
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.mark.parametrize('name', ['trec', 'snli', 'quora'])
def test_every_row_builds_and_the_paper_settings(name, monkeypatch, tmp_path):
  monkeypatch.setenv('JAX_STRUCTURED_CACHE', str(tmp_path))
  module = _config_module(name)
  for options in ('', 'tiny', 'rn_latent,adagrad'):
    config = module.get_config(options)
    loaders.validate_config(config.data, config.data.name)
    training_config.resolve(config)
    variants = config.variants.to_dict() or {'': {}}
    for overrides in variants.values():
      child = training_config.with_overrides(config, training_config.flatten(overrides))
      models.build(child.model, vocab_size=11, num_classes=3)
  config = module.get_config('')
  assert sorted(config.variants) == sorted(set(yu.ROWS) - set(yu.SUPERVISED_ROWS))
  assert set(yu.PAPER_TEST_ACCURACY[name]) == set(yu.ROWS)
  assert (config.optimizer.name, config.optimizer.learning_rate) == ('adam', 1e-3)
  assert (config.data.embeddings, config.data.embedding_dim, config.model.embedding_dim) == (
      'glove-6b-50d', 50, 50)
  paper = module.get_config('paper_adam,glove=/data/glove.840B.300d.txt')
  assert (paper.optimizer.name, paper.optimizer.learning_rate) == ('adam', 1e-4)
  assert (paper.data.embeddings, paper.data.embedding_dim, paper.model.embedding_dim) == (
      '/data/glove.840B.300d.txt', 300, 300)
  assert (module.get_config('adagrad').optimizer.name,
          module.get_config('adagrad').optimizer.learning_rate) == ('adagrad', 0.01)
  word2vec = module.get_config('word2vec')
  assert (word2vec.data.embeddings, word2vec.data.embedding_dim) == ('word2vec', 300)
  assert module.get_config('glove=glove.6B.100d').model.embedding_dim == 100
  assert config.model.encoder.hidden_size == 300 and config.model.embedding_dropout == 0.5
  assert config.model.name == ('classifier.sentence' if name == 'trec' else 'classifier.pair')
  if name == 'trec':
    assert config.data.validation_fraction == pytest.approx(500 / 5452)


def test_bad_options_are_errors():
  trec = _config_module('trec')
  with pytest.raises(ValueError, match=r"configs/yu/trec.py: row 'rn_supervised' uses supervised trees: add "
                                       r'trees=PARSER_WORKDIR'):
    trec.get_config('rn_supervised')
  with pytest.raises(ValueError, match=r"configs/yu/trec.py: unknown or repeated option 'rnn'"):
    trec.get_config('rnn')
  with pytest.raises(ValueError, match='unknown or repeated option'):
    trec.get_config('bow,rn_none')
  with pytest.raises(ValueError, match='adagrad and paper_adam exclude each other'):
    trec.get_config('adagrad,paper_adam')
  with pytest.raises(ValueError, match='word2vec and glove= exclude each other'):
    trec.get_config('word2vec,glove=glove-6b-50d')


def _head(src, dst, lines):
  with open(src, 'rb') as f:
    text = b''.join(itertools.islice(f, lines))
  with open(dst, 'wb') as f:
    f.write(text)


def _tiny_run(config, tmp_path, steps):
  config.data.data_dir = str(tmp_path / 'tfds')
  config.data.bucket_boundaries = ()  # one padded shape per split: few compilations
  config.parallel = 'none'
  config.train.num_steps = steps
  config.train.eval_every_steps = steps
  config.train.log_every_steps = steps
  config.train.eval_batch_size = 64
  return training.train_and_evaluate(config, str(tmp_path / 'workdir'))


def test_trec_rn_latent_trains(shared_data, tmp_path):
  manual = tmp_path / 'trec'
  manual.mkdir()
  _head(shared_data / 'trec' / 'train_5500.label', manual / 'train_5500.label', 150)
  _head(shared_data / 'trec' / 'TREC_10.label', manual / 'TREC_10.label', 30)
  config = _config_module('trec').get_config('tiny,rn_latent')
  config.data.manual_dir = str(manual)
  results = _tiny_run(config, tmp_path, steps=4)
  assert results['steps'] == 4
  assert all(math.isfinite(v) for v in (*results['validation'].values(), *results['test'].values()))


@pytest.mark.slow  # the pair task's run; test_trec_rn_latent_trains is the quick one
def test_quora_rn_intra_attention_trains_on_dev(shared_data, tmp_path, monkeypatch):
  monkeypatch.setenv('JAX_STRUCTURED_CACHE', str(tmp_path / 'cache'))
  shared = tmp_path / 'quora_shared'
  shared.mkdir()
  for split in ('dev', 'test'):
    _head(shared_data / 'quora_qqp_wang2017_partition' / f'{split}.txt', shared / f'{split}.txt', 60)
  config = _config_module('quora').get_config('tiny,rn_intra_attn_none')
  config.data.manual_dir = common.dev_as_train_dir(shared, tmp_path / 'cache',
                                               {'train.txt': 'dev.txt', 'test.txt': 'test.txt'}, 'q')
  results = _tiny_run(config, tmp_path, steps=3)
  assert results['steps'] == 3
  assert all(math.isfinite(v) for v in (*results['validation'].values(), *results['test'].values()))
