"""Registries fill themselves by importing every module of a package.

A dataset builder, a data loader, a model family or an encoder is added by adding its module to its
package (`data/builders/`, `data/loaders/`, `models/`): the registry that serves it imports every
public module of the package (names not starting with `_`) on first lookup, in name order, so there is
no list of modules to keep and no import order that matters. A module that cannot be imported stops
the lookup with an `ImportError` naming it (the original error is chained, with its traceback), instead
of a later "unknown name" that hides why. This module imports nothing of the package (a leaf, as
`config.py` and `errors.py`).
"""
from __future__ import annotations

import importlib
import pkgutil
import types


def submodule_names(package: str) -> tuple[str, ...]:
  """The dotted names of `package`'s public modules and subpackages, sorted (none is imported).

  Args:
    package: a dotted package name, e.g. 'jax_structured.models'.
  """
  pkg = importlib.import_module(package)
  found = [info.name for info in pkgutil.iter_modules(pkg.__path__) if not info.name.startswith('_')]
  return tuple(f'{package}.{name}' for name in sorted(found))


def import_submodules(package: str, *, registry: str) -> tuple[types.ModuleType, ...]:
  """Imports every public module of `package` (see `submodule_names`) and returns them in name order.

  Args:
    package: a dotted package name.
    registry: what the modules register into, for the error message (e.g. 'model registry').

  Raises:
    ImportError: a module fails to import; the message names the module and the registry, the
      original exception is chained.
  """
  modules = []
  for name in submodule_names(package):
    try:
      modules.append(importlib.import_module(name))
    except Exception as e:  # any failure while executing the module, not only ImportError
      raise ImportError(f'{registry}: cannot import {name} ({type(e).__name__}: {e}); every public '
                        f'module of {package} is imported to fill the {registry}: fix the module, '
                        'or prefix its file name with "_" if it registers nothing', name=name) from e
  return tuple(modules)
