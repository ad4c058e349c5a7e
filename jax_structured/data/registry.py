"""Name -> loader registry behind `data.load(config.data)`.

A loader is `fn(config: ml_collections.ConfigDict) -> core.TaskData`; modules register themselves with
`@register('name')`. On first use every public module of `jax_structured.data.loaders` is imported
(`discovery.import_submodules`: a new loader registers by adding its module there), and the default
job's `jax_structured.data.synthetic`.
"""
import importlib
from typing import Callable

from jax_structured import discovery

_LOADERS: dict[str, Callable] = {}


def register(name: str):
  """Decorator registering a data loader `fn(config) -> TaskData` under `name` for `data.load`.

  Raises:
    ValueError: when `name` is already registered.
  """
  def wrap(fn):
    if name in _LOADERS:
      raise ValueError(f'data loader {name!r} registered twice')
    _LOADERS[name] = fn
    return fn
  return wrap


def load(config):
  """Loads the task data described by `config` (a ConfigDict with at least `name`)."""
  _import_loaders()
  name = config.name
  if name not in _LOADERS:
    raise KeyError(f'unknown dataset config.data.name={name!r}; known: {sorted(_LOADERS)}')
  return _LOADERS[name](config)


def names() -> list[str]:
  """The registered dataset names (the values `config.data.name` accepts), sorted."""
  _import_loaders()
  return sorted(_LOADERS)


def _import_loaders():
  discovery.import_submodules('jax_structured.data.loaders', registry='data loader registry')
  importlib.import_module('jax_structured.data.synthetic')
