"""The package's layers import downward only (ARCHITECTURE.md, "Layers and the encoder contract").

`trees` <- `nn` <- `models` <- `training` <- `analysis` (restoring and running trained workdirs)
<- `configs`, `launch`; `data` and `viz` stand apart and import no other layer (`training` and above
may use `data`: models never read files; `analysis` and above may draw with `viz`); top-level modules
such as `jax_structured.errors` are shared by every layer and import none. No module of the package
imports `configs` or `launch`. Every import statement counts, those inside functions too.
"""
import ast
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = 'jax_structured'
LAYERS = ('trees', 'nn', 'models', 'training', 'analysis')  # each may import the ones before it
SIDE = {'data': 'training', 'viz': 'analysis'}  # stands apart; usable from this layer upward
# Upward imports that exist today, each to be removed with its cause. The test fails when one
# disappears, so this list only shrinks (empty since the parser's task moved to training.parse_task and
# its workdir restoring to analysis.parsing).
KNOWN_UPWARD: set[tuple[str, str]] = set()


def imported_names(path: pathlib.Path, module: str) -> set[str]:
  """Dotted names of the jax_structured modules (or names) `path` imports, relative ones resolved."""
  out = set()
  package = module.split('.') if path.name == '__init__.py' else module.split('.')[:-1]
  for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'), str(path))):
    if isinstance(node, ast.Import):
      out.update(a.name for a in node.names)
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ''
      if node.level:
        base = '.'.join(package[:len(package) - node.level + 1] + ([base] if base else []))
      out.update(f'{base}.{a.name}' for a in node.names)
  return {name for name in out if name == PACKAGE or name.startswith(PACKAGE + '.')}


def modules(folder: str):
  for path in sorted((ROOT / folder).rglob('*.py')):
    yield path, '.'.join(path.relative_to(ROOT).with_suffix('').parts).removesuffix('.__init__')


def layer_of(name: str) -> str | None:
  """'trees', 'nn', ... for jax_structured.<layer>[...]; None for the package and its top modules."""
  parts = name.split('.')
  if len(parts) < 2 or parts[1] not in LAYERS + tuple(SIDE):
    return None
  return parts[1]


def allowed(importer: str | None, imported: str | None) -> bool:
  if imported is None or importer == imported:
    return True
  if importer is None:
    return False  # shared top-level modules import no layer
  if importer in SIDE:
    return False
  rank = LAYERS.index(importer)
  if imported in SIDE:
    return rank >= LAYERS.index(SIDE[imported])
  return LAYERS.index(imported) < rank


def upward_imports() -> set[tuple[str, str, str]]:
  """(module, imported name, imported layer) of every import that breaks the layering."""
  bad = set()
  for path, module in modules(PACKAGE):
    if module == PACKAGE:
      continue  # the package's __init__ only documents the layers
    for name in imported_names(path, module):
      if name.split('.')[-1] in LAYERS + tuple(SIDE) and name.count('.') == 1:
        imported = name.split('.')[1]  # `from jax_structured import training`
      else:
        imported = layer_of(name)
      if not allowed(layer_of(module), imported):
        bad.add((module, name, imported))
  return bad


def test_the_import_parser_sees_every_form(tmp_path):
  source = ('import jax_structured.trees\nfrom jax_structured import training\n'
            'from . import svg\nfrom ..training import steps\n'
            'def f():\n  from jax_structured.analysis import induce\n')
  path = tmp_path / 'x.py'
  path.write_text(source)
  assert imported_names(path, 'jax_structured.viz.x') == {
      'jax_structured.trees', 'jax_structured.training', 'jax_structured.viz.svg',
      'jax_structured.training.steps', 'jax_structured.analysis.induce'}


@pytest.mark.parametrize('importer, imported, ok', [
    ('nn', 'trees', True), ('trees', 'nn', False), ('training', 'models', True),
    ('models', 'training', False), ('training', 'analysis', False), ('analysis', 'training', True),
    ('viz', 'trees', False), ('training', 'viz', False), ('analysis', 'viz', True),
    ('data', 'trees', False), ('models', 'data', False), ('training', 'data', True), ('nn', 'data', False), (None, 'nn', False),
    ('viz', None, True)])
def test_rule(importer, imported, ok):
  assert allowed(importer, imported) == ok


def test_layers_import_downward_only():
  found = upward_imports()
  unexpected = sorted((m, n) for m, n, layer in found if (m, layer) not in KNOWN_UPWARD)
  assert not unexpected, ('upward imports (layers: ' + ' <- '.join(LAYERS) + '; data and viz stand '
                          'apart):\n  ' + '\n  '.join(f'{m} imports {n}' for m, n in unexpected))
  fixed = KNOWN_UPWARD - {(m, layer) for m, _, layer in found}
  assert not fixed, f'these upward imports are gone: remove them from KNOWN_UPWARD: {sorted(fixed)}'


def test_viz_draws_from_arrays_and_launch_is_the_top():
  for path, module in modules(f'{PACKAGE}/viz'):
    others = {n for n in imported_names(path, module) if not n.startswith(f'{PACKAGE}.viz')}
    assert not others, f'{module} imports {sorted(others)}: viz draws from plain arrays'
  for path, module in modules(PACKAGE):
    text = path.read_text(encoding='utf-8')
    for top in ('launch', 'configs'):
      assert not re.search(rf'^\s*(import|from) {top}\b', text, re.M), f'{module} imports {top}'


@pytest.mark.parametrize('module', ['jax_structured.analysis', 'jax_structured.training.restore',
                                    'jax_structured.training'])
def test_reading_a_checkpoint_does_not_import_the_training_loop(module):
  """`analysis` (and `training.restore`, and the `training` package itself) read checkpoints without
  loading `training.trainer`: `training.train_and_evaluate` imports it on first use (PEP 562)."""
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  code = (f'import sys, {module}\n'
          "assert 'jax_structured.training.trainer' not in sys.modules, 'trainer imported'\n"
          'from jax_structured import training\n'
          'assert callable(training.train_and_evaluate)\n'
          "assert 'jax_structured.training.trainer' in sys.modules\n")
  done = subprocess.run([sys.executable, '-c', code], cwd=ROOT, capture_output=True, text=True,
                        timeout=120, check=False)
  assert done.returncode == 0, done.stderr[-2000:]
