"""Sphinx configuration of the jax-structured documentation site.

Build (warnings are errors):  python -m sphinx -W --keep-going -b html docs docs/_build/html
Needs the `docs` extra: pip install -e '.[docs]'.

Pages are MyST Markdown; the API pages are autodoc from the Google-style docstrings (napoleon); the
notebooks of `examples/` are executed during every build (myst-nb) through the git-ignored link
`docs/examples` -> `../examples` that this file creates (the notebooks then run in `examples/`, as they
do from a checkout).
"""
import inspect
import os
import pathlib
import re
import shutil
import sys

from sphinx.util import logging

DOCS = pathlib.Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

project = 'jax-structured'
author = 'jax-structured authors'
copyright = '2026, jax-structured authors'  # pylint: disable=redefined-builtin
release = version = '0.1.0'

extensions = [
    'myst_nb',
    'sphinx.ext.autodoc',
    'sphinx.ext.intersphinx',
    'sphinx.ext.napoleon',
    'sphinx.ext.viewcode',
]

# Links to JAX, Flax and Optax from local inventories: the build machines have no internet (PyPI only),
# so each project's objects.inv is not downloaded. docs/_inventories/*.inv list the names our pages and
# docstrings use, with their URLs on each project's site; docs/scripts/make_inventories.py wrote them
# (`pip install sphobjinv && python docs/scripts/make_inventories.py`; add a name there and rerun).
intersphinx_mapping = {
    name: (url, str(DOCS / '_inventories' / f'{name}.inv'))
    for name, url in (('jax', 'https://docs.jax.dev/en/latest/'),
                      ('flax', 'https://flax.readthedocs.io/en/latest/'),
                      ('optax', 'https://optax.readthedocs.io/en/latest/'))
}

# Only pages: the decision records' scripts, the plot script, report JSON and build output are not.
exclude_patterns = [
    '_build',
    'decisions/*-scripts/**',
    'scripts/**',
    'benchmarks/**',
    'results/**',
    '_inventories/**',
    '**/.ipynb_checkpoints',
    'Thumbs.db',
    '.DS_Store',
]
source_suffix = {'.md': 'myst-nb', '.ipynb': 'myst-nb'}
root_doc = 'index'

html_theme = 'furo'
html_title = 'jax-structured'
html_static_path = ['_static'] if (DOCS / '_static').is_dir() else []

# Single backquotes in docstrings (`x`, as in Markdown) render as inline code.
default_role = 'literal'

myst_enable_extensions = ['dollarmath', 'colon_fence', 'deflist']
myst_heading_anchors = 3

# Notebooks: executed on every build; a failing cell fails the build.
nb_execution_mode = 'force'
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_in_temp = False
nb_merge_streams = True

autodoc_default_options = {
    'members': True,
    'undoc-members': True,  # so that a public name without docstring is shown and warned about below
    'show-inheritance': True,
}
autodoc_member_order = 'bysource'
autodoc_typehints = 'signature'
autodoc_inherit_docstrings = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True  # `Attributes:` as fields (no second description beside undoc-members')
napoleon_use_rtype = False


def _link_examples():
  """Makes `docs/examples` show the repository's `examples/*.ipynb` (a symlink, else a copy)."""
  source, target = ROOT / 'examples', DOCS / 'examples'
  if not source.is_dir():
    return
  if target.is_symlink() or target.exists():
    if target.is_symlink() and target.resolve() == source.resolve():
      return
    if target.is_symlink() or target.is_file():
      target.unlink()
    else:
      shutil.rmtree(target)
  try:
    target.symlink_to(os.path.relpath(source, DOCS), target_is_directory=True)
  except OSError:  # no symlinks (e.g. Windows without the privilege): copy the notebooks
    target.mkdir()
    for notebook in source.glob('*.ipynb'):
      shutil.copy2(notebook, target / notebook.name)


_link_examples()
if not list((DOCS / 'examples').glob('*.ipynb')):
  exclude_patterns.append('examples/**')

_logger = logging.getLogger(__name__)
_DOCUMENTED = ('module', 'class', 'exception', 'function', 'method', 'property')


def _warn_missing_docstring(app, what, name, obj, options, lines):
  """Warns (an error under -W) for a rendered public module, class or function without a docstring."""
  del app, options
  if what not in _DOCUMENTED or name.rsplit('.', 1)[-1].startswith('_'):
    return
  text = '\n'.join(lines).strip()
  generated = inspect.isclass(obj) and text.startswith(obj.__name__ + '(')  # a dataclass's own
  if not text or generated:
    _logger.warning('public %s %s has no docstring', what, name, type='jax_structured',
                    subtype='docstring')


_FLAX_FIELDS = re.compile(r'(, )?parent: .*, name: str \| None = None\)$')


def _drop_flax_fields(app, what, name, obj, options, signature, return_annotation):
  """Leaves Flax's own `parent` and `name` fields out of the signatures of Linen modules."""
  del app, name, options
  if what == 'class' and signature and _FLAX_FIELDS.search(signature):
    signature = _FLAX_FIELDS.sub(')', signature)
  return signature, return_annotation


def _skip_class_fields(app, what, name, obj, skip, options):
  """Leaves class fields out (their `Attributes:` section documents them); methods stay."""
  del app, name, options
  if what in ('class', 'exception') and not (
      inspect.isroutine(obj) or inspect.isclass(obj) or isinstance(obj, (property, classmethod,
                                                                          staticmethod))):
    return True
  return None if not skip else skip


def setup(app):
  app.connect('autodoc-process-docstring', _warn_missing_docstring)
  app.connect('autodoc-skip-member', _skip_class_fields)
  app.connect('autodoc-process-signature', _drop_flax_fields)
