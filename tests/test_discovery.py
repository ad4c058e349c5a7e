"""Registries import every public module of their package: a new module registers by being there."""
import sys
import textwrap

import pytest

from jax_structured import discovery


@pytest.fixture
def plugin_package(tmp_path, monkeypatch):
  """A package `plugins_under_test` on sys.path with a registry and two registering modules."""
  package = tmp_path / 'plugins_under_test'
  package.mkdir()
  (package / '__init__.py').write_text('REGISTERED = []\n')
  (package / '_private.py').write_text('raise RuntimeError("private modules are not imported")\n')
  for name in ('beta', 'alpha'):
    (package / f'{name}.py').write_text(
        f'from plugins_under_test import REGISTERED\nREGISTERED.append({name!r})\n')
  monkeypatch.syspath_prepend(str(tmp_path))
  yield package
  for name in [m for m in sys.modules if m.startswith('plugins_under_test')]:
    del sys.modules[name]


def test_every_public_module_is_imported_in_name_order(plugin_package):
  modules = discovery.import_submodules('plugins_under_test', registry='test registry')
  assert [m.__name__ for m in modules] == ['plugins_under_test.alpha', 'plugins_under_test.beta']
  assert sys.modules['plugins_under_test'].REGISTERED == ['alpha', 'beta']


def test_a_module_that_fails_to_import_is_named(plugin_package):
  (plugin_package / 'gamma.py').write_text(textwrap.dedent('''
      import a_package_that_is_not_installed_anywhere
  '''))
  with pytest.raises(ImportError, match=r'test registry: cannot import plugins_under_test\.gamma '
                     r"\(ModuleNotFoundError: No module named 'a_package_that_is_not_installed"):
    discovery.import_submodules('plugins_under_test', registry='test registry')


def test_a_module_that_raises_while_registering_is_named(plugin_package):
  (plugin_package / 'delta.py').write_text('raise ValueError("encoder \'x\' registered twice")\n')
  with pytest.raises(ImportError, match=r'cannot import plugins_under_test\.delta \(ValueError: '):
    discovery.import_submodules('plugins_under_test', registry='test registry')


@pytest.mark.parametrize('package, lookup', [
    ('jax_structured.models', 'jax_structured.models.registry:names'),
    ('jax_structured.models', 'jax_structured.models.encoders:names'),
    ('jax_structured.data.loaders', 'jax_structured.data.registry:names'),
    ('jax_structured.data.builders', 'jax_structured.data.builders:names'),
])
def test_the_library_registries_import_every_module_of_their_package(package, lookup):
  module_name, function = lookup.split(':')
  __import__(module_name, fromlist=['_'])
  getattr(sys.modules[module_name], function)()
  names = discovery.submodule_names(package)
  assert len(names) >= 3
  assert [n for n in names if n not in sys.modules] == []


def test_every_builder_module_defines_a_registered_builder():
  from jax_structured.data import builders  # pylint: disable=g-import-not-at-top
  defining = {cls.__module__ for cls in builders.BUILDERS.values()}
  assert set(discovery.submodule_names('jax_structured.data.builders')) == defining
