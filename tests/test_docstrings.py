"""Every public name of the documented packages has a docstring (the API pages are built from them).

Public names follow the rule of the API pages (docs/api/): a module's `__all__` where it defines one,
else the names not starting with `_` that the module defines itself. A submodule that a package lists
among its public names is walked too (one level), and so are the public methods and properties of
every public class (an inherited docstring counts: autodoc shows it). Constants are not checked (they
carry no docstring of their own).
"""
import importlib
import inspect
import types

PACKAGES = (
    'jax_structured',
    'jax_structured.trees',
    'jax_structured.nn',
    'jax_structured.models',
    'jax_structured.models.encoders',  # the encoder registry and contract (docs/api/models.md)
    'jax_structured.models.heads',
    'jax_structured.data',
    'jax_structured.training',
    'jax_structured.analysis',
    'jax_structured.viz',
    'jax_structured.config',
    'jax_structured.errors',
)


def _public_names(module):
  names = getattr(module, '__all__', None)
  if names is not None:
    return list(names)
  return [name for name, value in vars(module).items()
          if not name.startswith('_') and
          (value.__name__.startswith(module.__name__ + '.') if isinstance(value, types.ModuleType)
           else getattr(value, '__module__', None) == module.__name__)]


def _has_own_class_doc(cls):
  doc = cls.__dict__.get('__doc__')
  if not doc or not doc.strip():
    return False
  # dataclasses (Flax modules too) fill in `Name(field: type, ...)` when the class has no docstring.
  return not doc.startswith(cls.__name__ + '(')


def _class_members(cls):
  for name, value in vars(cls).items():
    if name.startswith('_'):
      continue
    if isinstance(value, property):
      yield name, value.fget
    elif isinstance(value, (classmethod, staticmethod)):
      yield name, value.__func__
    elif inspect.isfunction(value):
      yield name, getattr(cls, name)


def _missing(module_name, depth=0):
  module = importlib.import_module(module_name)
  missing = []
  if not (module.__doc__ or '').strip():
    missing.append(module_name)
  for name in _public_names(module):
    value = getattr(module, name)
    where = f'{module_name}.{name}'
    if isinstance(value, types.ModuleType):
      if depth == 0 and value.__name__.startswith(module_name + '.'):
        missing += _missing(value.__name__, depth + 1)
      continue
    if inspect.isclass(value):
      if not _has_own_class_doc(value):
        missing.append(where)
      for member, function in _class_members(value):
        if not (inspect.getdoc(function) or '').strip():
          missing.append(f'{where}.{member}')
    elif inspect.isroutine(value):
      if not (inspect.getdoc(value) or '').strip():
        missing.append(where)
  return missing


def public_names_without_docstring():
  missing = []
  for package in PACKAGES:
    missing += _missing(package)
  return sorted(set(missing))


def test_every_public_name_has_a_docstring():
  missing = public_names_without_docstring()
  assert not missing, f'{len(missing)} public names without a docstring: ' + ', '.join(missing)
