"""Name -> model builder registry behind `models.build(config.model, ...)`.

A builder is `fn(config, *, vocab_size, num_classes, embeddings=None) -> flax.linen.Module`, where
`config` is the `config.model` ConfigDict (its `name` selects the builder). Families register theirs
with `@register('family.model')`; a Linen Module class may be registered directly, in which case its
dataclass fields are the valid config keys (see `build_module`). Every public module of
`jax_structured.models` is imported on first use (`discovery.import_submodules`): a new family
registers by adding its module.
"""
import dataclasses
from typing import Any, Callable, Iterable, Mapping, Optional

import flax.linen as nn

from jax_structured import discovery

# Filled in by `build`, never read from the config.
INJECTED = ('vocab_size', 'num_classes', 'embedding_init')

_BUILDERS: dict[str, Callable[..., nn.Module]] = {}
_REGISTERED: dict[str, Any] = {}  # name -> the decorated function or class


def register(name: str):
  """Decorator registering a builder function or a Linen Module class under `name`."""

  def wrap(fn):
    old = _REGISTERED.get(name)
    if old is not None and (old.__module__, old.__qualname__) != (fn.__module__, fn.__qualname__):
      raise ValueError(f'model {name!r} registered twice: {old.__module__}.{old.__qualname__} and '
                       f'{fn.__module__}.{fn.__qualname__}')
    _REGISTERED[name] = fn
    if isinstance(fn, type) and issubclass(fn, nn.Module):
      module_cls = fn
      builder = lambda config, **kwargs: build_module(module_cls, config, model_name=name, **kwargs)
      _BUILDERS[name] = builder
    else:
      _BUILDERS[name] = fn
    return fn

  return wrap


def names() -> list[str]:
  """Registered model names."""
  _import_families()
  return sorted(_BUILDERS)


def build(config, *, vocab_size: int, num_classes: int, embeddings: Optional[Any] = None) -> nn.Module:
  """Builds the model named `config.name` (e.g. 'liu_lapata.document_classifier').

  Args:
    config: the `config.model` ConfigDict (or mapping) with `name` and the model's hyperparameters.
    vocab_size: number of token ids (`len(task_data.vocab)`).
    num_classes: number of labels.
    embeddings: optional float [vocab_size, embedding_dim] initial word vectors.

  Returns:
    An unbound Linen module, called as `model.apply(variables, batch, train=..., rngs=...)`.

  Raises:
    KeyError: unknown model name (the message lists the registered ones) or unknown config keys.
  """
  _import_families()
  name = config.get('name') if hasattr(config, 'get') else None
  if name not in _BUILDERS:
    raise KeyError(f'unknown model config.model.name={name!r}; known: {sorted(_BUILDERS)}')
  return _BUILDERS[name](config, vocab_size=vocab_size, num_classes=num_classes,
                        embeddings=embeddings)


def config_fields(module_cls: type) -> dict[str, Any]:
  """{config key: default} of a Module dataclass, without Flax's and the injected fields."""
  out = {}
  for field in dataclasses.fields(module_cls):
    if field.name in ('parent', 'name') or field.name in INJECTED or not field.init:
      continue
    out[field.name] = field.default if field.default is not dataclasses.MISSING else None
  return out


def check_keys(config: Mapping[str, Any], valid: Iterable[str], model_name: str) -> None:
  """Raises KeyError naming unknown `config.model` keys and listing the valid ones."""
  valid = set(valid) | {'name'}
  unknown = sorted(set(config.keys()) - valid)
  if unknown:
    raise KeyError(f'unknown config.model key(s) {unknown} for {model_name!r}; valid: {sorted(valid)}')


def build_module(module_cls: type, config, *, model_name: str, vocab_size: int, num_classes: int,
                 embeddings: Optional[Any] = None) -> nn.Module:
  """Instantiates `module_cls` from config keys matching its dataclass fields.

  `embeddings` (if given) becomes `embedding_init`, after checking its shape against `vocab_size` and
  `config.embedding_dim` (when the model has that field).
  """
  fields = config_fields(module_cls)
  check_keys(config, fields, model_name)
  kwargs = {k: config[k] for k in config.keys() if k != 'name'}
  for key, value in kwargs.items():  # ConfigDict tuples/lists come back as lists
    if isinstance(value, list):
      kwargs[key] = tuple(value)
  kwargs['vocab_size'] = vocab_size
  kwargs['num_classes'] = num_classes
  if embeddings is not None:
    kwargs['embedding_init'] = embedding_initializer(
        embeddings, vocab_size=vocab_size,
        dim=kwargs.get('embedding_dim', fields.get('embedding_dim')), model_name=model_name)
  return module_cls(**kwargs)


def embedding_initializer(embeddings: Any, *, vocab_size: int, dim: Optional[int], model_name: str):
  """`nn.pretrained_init(embeddings)` after checking its shape [vocab_size, dim].

  Raises:
    ValueError naming the model, the shape and config.model.embedding_dim.
  """
  from jax_structured.nn import embedding as embedding_lib  # pylint: disable=g-import-not-at-top
  shape = getattr(embeddings, 'shape', None)
  if shape is None or len(shape) != 2 or shape[0] != vocab_size or (dim and shape[1] != dim):
    raise ValueError(f'{model_name}: embeddings of shape {shape} do not match vocab_size={vocab_size} '
                     f'and config.model.embedding_dim={dim}')
  return embedding_lib.pretrained_init(embeddings)


def _import_families():
  discovery.import_submodules('jax_structured.models', registry='model registry')
