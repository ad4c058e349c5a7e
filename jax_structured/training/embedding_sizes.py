"""The word vector size of a run, from the vectors it reads: `--config.data.embeddings=NAME` alone.

Two keys hold the size: `config.data.embedding_dim` (the vectors the data gives: the expected size of
pretrained ones, the size of word2vec ones) and `config.model.embedding_dim` (the model's embedding
table). Either may be 0, "follow": `resolve` fills it, before the data loads, with
* the size of the pretrained vectors `config.data.embeddings` names (`data.embeddings.vectors_size`:
  a registered name's size, or a file's header), else
* the other key's size, else
* `DEFAULT_SIZE` (random or word2vec vectors of a config that gives no size).
A size given (not 0) is kept; two that disagree (the vectors' and either key's, or the two keys'
while the data gives vectors) are an error naming both keys and both sizes. Configs that give every
size keep their meaning: only zeros change.
"""
from __future__ import annotations

from typing import Any

from jax_structured import config as config_lib
from jax_structured import errors
from jax_structured.data import embeddings as embeddings_lib

DEFAULT_SIZE = 300  # word vectors of Yu et al. (2018) and Kim (2014), when nothing gives a size


def resolve(config: config_lib.ResolvedConfig) -> config_lib.ResolvedConfig:
  """`config` with `data.embedding_dim` and `model.embedding_dim` of 0 filled (module docstring).

  Raises:
    errors.ConfigError naming both keys (or the vectors and a key) and both sizes when they disagree.
  """
  data, model = config.get('data') or {}, config.get('model') or {}
  data_dim, model_dim = data.get('embedding_dim'), model.get('embedding_dim')
  size = _size(data.get('embeddings') or '', data_dim, model_dim)  # checks the sizes given
  if data_dim != 0 and model_dim != 0:
    return config
  out = config_lib.to_dict(config)
  if data_dim == 0:
    out['data']['embedding_dim'] = size
  if model_dim == 0:
    out['model']['embedding_dim'] = size
  return config_lib.resolve(out)


def _size(spec: str, data_dim: Any, model_dim: Any) -> int:
  """The one size of the vectors `spec`, `config.data.embedding_dim` and `config.model.embedding_dim`."""
  given = []
  vectors = embeddings_lib.vectors_size(spec)
  if vectors:
    given.append((f'config.data.embeddings={spec!r} (its vectors)', vectors))
  if data_dim and spec:  # without vectors the data's size is unused
    given.append(('config.data.embedding_dim', data_dim))
  if model_dim:
    given.append(('config.model.embedding_dim', model_dim))
  for key, size in given[1:]:
    if size != given[0][1]:
      first, first_size = given[0]
      raise errors.ConfigError(
          f'{first} has size {first_size} but {key}={size}: set one of them (0 = follow the vectors), '
          f'e.g. --config.data.embedding_dim=0 --config.model.embedding_dim=0')
  if given:
    return int(given[0][1])
  return int(data_dim or DEFAULT_SIZE)
