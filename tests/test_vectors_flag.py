"""Word vectors by name with one flag: the embedding sizes follow the vectors (training/embedding_sizes.py).

`data.embedding_dim` / `model.embedding_dim` of 0 take the size of the vectors `data.embeddings` names
(a registered name's, or a file's header), else the other key's, else 300; a size given that
disagrees is an error naming both keys and both sizes; configs that give every size are unchanged.
"""
import json
import pathlib

import pytest

from configs.encoders import compare
from jax_structured import config as config_lib
from jax_structured import errors
from jax_structured.data import embeddings
from jax_structured.training import embedding_sizes
from jax_structured.training import trainer

REPO = pathlib.Path(__file__).resolve().parents[1]
TREC = REPO.parent / 'shared' / 'data' / 'trec'


def _compare(**data):
  config = compare.get_config('cnn')
  config.data.update(data)
  return config_lib.resolve(config)


def _sizes(config):
  resolved = embedding_sizes.resolve(config)
  return resolved.data.embedding_dim, resolved.model.embedding_dim


def test_sizes_follow_the_named_vectors():
  assert _sizes(_compare(embeddings='glove-6b-50d')) == (50, 50)
  assert _sizes(_compare(embeddings='glove.840B.300d')) == (300, 300)  # registered: no file read
  assert _sizes(_compare()) == (300, 300)  # random vectors: the default size
  assert _sizes(_compare(embeddings='word2vec')) == (300, 300)
  assert _sizes(_compare(embeddings='word2vec', embedding_dim=100)) == (100, 100)


def test_a_conflicting_size_names_both_keys_and_both_sizes():
  config = compare.get_config('cnn')
  config.data.embeddings = 'glove-6b-50d'
  config.model.embedding_dim = 300
  with pytest.raises(errors.ConfigError, match=r"config.data.embeddings='glove-6b-50d' \(its vectors\) has "
                                               r'size 50 but config.model.embedding_dim=300'):
    embedding_sizes.resolve(config_lib.resolve(config))
  with pytest.raises(errors.ConfigError, match=r'size 50 but config.data.embedding_dim=100'):
    _sizes(_compare(embeddings='glove-6b-50d', embedding_dim=100))


def test_configs_that_give_every_size_are_unchanged():
  from configs.cheng import sst  # word2vec 300 / 300
  config = config_lib.resolve(sst.get_config(''))
  assert embedding_sizes.resolve(config) is config


def test_file_sizes_are_read_from_the_header(tmp_path):
  glove = tmp_path / 'vectors.txt'
  glove.write_text('the 0.1 0.2 0.3\ncat 0.4 0.5 0.6\n')
  word2vec = tmp_path / 'vectors.vec'
  word2vec.write_text('2 4\nthe 1 2 3 4\ncat 1 2 3 4\n')
  assert embeddings.vectors_size(str(glove)) == 3
  assert embeddings.vectors_size(str(word2vec)) == 4
  assert embeddings.vectors_size(str(tmp_path / 'missing.txt')) is None
  assert embeddings.vectors_size('') is None and embeddings.vectors_size('word2vec') is None
  assert _sizes(_compare(embeddings=str(glove))) == (3, 3)


@pytest.mark.skipif(not (TREC / 'train_5500.label').exists(), reason=f'no TREC files in {TREC}')
def test_one_flag_trains_with_glove(tmp_path, monkeypatch):
  pytest.importorskip('pyarrow')
  try:
    embeddings.vectors_size('glove-6b-50d')
    embeddings._locate('glove-6b-50d', None)  # pylint: disable=protected-access
  except FileNotFoundError as e:
    pytest.skip(str(e))
  monkeypatch.chdir(REPO)
  config = compare.get_config('bow')
  config.data.embeddings = 'glove-6b-50d'
  config.train.update({'num_steps': 5, 'linear_baseline': False})
  results = trainer.train_and_evaluate(config, str(tmp_path))
  saved = json.load(open(tmp_path / 'config.json'))
  assert saved['data']['embedding_dim'] == saved['model']['embedding_dim'] == 50
  assert json.load(open(tmp_path / 'run.json'))['embeddings_shape'][1] == 50
  assert results['steps'] == 5
  # The same command resumes: the saved sizes agree with the resolved ones.
  assert trainer.train_and_evaluate(config, str(tmp_path))['steps'] == 5
