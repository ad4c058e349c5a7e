"""Name -> loader registry behind `data.load(config.data)`.

A loader is `fn(config: ml_collections.ConfigDict) -> core.TaskData`; modules register themselves with
`@register('name')` and are imported by `jax_structured/data/__init__.py`.
"""
from typing import Callable

_LOADERS: dict[str, Callable] = {}


def register(name: str):
  def wrap(fn):
    if name in _LOADERS:
      raise ValueError(f'data loader {name!r} registered twice')
    _LOADERS[name] = fn
    return fn
  return wrap


def load(config):
  """Loads the task data described by `config` (a ConfigDict with at least `name`)."""
  name = config.name
  if name not in _LOADERS:
    raise KeyError(f'unknown dataset config.data.name={name!r}; known: {sorted(_LOADERS)}')
  return _LOADERS[name](config)


def names() -> list[str]:
  return sorted(_LOADERS)
