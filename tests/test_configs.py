"""configs/: the shared option parser and `tiny` helper, and every config file read from the command line.

Every file under configs/ (but the family modules) is read through absl's `config_flags`, as
`python -m launch.train --config=FILE:OPTIONS` reads it, with no option, `tiny`, and each of its rows;
the result resolves (every key known, every value valid) and every variant's model builds. The slow test
trains each file's `tiny` option for two steps from the command line where its data is here.
"""
import os
import pathlib
import subprocess
import sys

from absl import flags
import ml_collections
from ml_collections import config_flags
import pytest

from configs import common
from jax_structured import config as config_lib
from jax_structured import models

REPO = pathlib.Path(__file__).resolve().parents[1]
CONFIG_FILES = sorted(str(p.relative_to(REPO)) for p in (REPO / 'configs').rglob('*.py')
                      if p.name not in ('__init__.py', 'common.py'))
# Files whose data only the user can fetch (TFDS manual folders): their tiny option is read and
# resolved here, and trained only where the upstream files are present.
UPSTREAM_ONLY = ('yelp13', 'yelp14', 'yelp15', 'yahoo', 'amazon', 'imdb', 'czech_movies', 'debates')


def _read(path: str, options: str = '') -> ml_collections.ConfigDict:
  """The config as `--config=path:options` gives it to a launcher (relative paths: the repository)."""
  values = flags.FlagValues()
  config_flags.DEFINE_config_file('config', flag_values=values)
  values(['prog', f'--config={path}:{options}' if options else f'--config={path}'])
  return values.config


def _takes_options(path: str) -> bool:
  return 'def get_config()' not in (REPO / path).read_text()


def test_every_config_file_is_found():
  assert 'configs/default.py' in CONFIG_FILES and 'configs/liu_lapata/snli.py' in CONFIG_FILES
  assert len(CONFIG_FILES) >= 25


@pytest.mark.parametrize('path', CONFIG_FILES)
def test_every_config_reads_resolves_and_builds_from_the_command_line(path, monkeypatch, tmp_path):
  monkeypatch.chdir(REPO)
  monkeypatch.setenv('JAX_STRUCTURED_CACHE', str(tmp_path))
  option_sets = ['', 'tiny'] if _takes_options(path) else ['']
  rows = list(_read(path).variants) if _takes_options(path) else []
  for options in option_sets + [f'{row},tiny' for row in rows]:
    try:
      config = _read(path, options)
    except flags.IllegalFlagValueError as error:
      # A variant that is not an option of its file, or a row that needs an input the user gives
      # (trees=PARSER_WORKDIR): the error names the file and the option.
      assert f'{path}: ' in str(error) and options.split(',')[0] in str(error), error
      continue
    resolved = config_lib.resolve(config)
    if options.startswith(tuple(rows)):
      assert not resolved.variants, f'{path}:{options} chose a row but kept variants'
    for name, child in (config_lib.variants(resolved) or {'': resolved}).items():
      assert models.build(child.model, vocab_size=11, num_classes=3) is not None, (path, options, name)
    if 'tiny' in options:
      assert 0 < resolved.train.num_steps <= 300 or resolved.train.num_epochs == 1, (path, options)


def test_options_are_parsed_once_with_the_file_named():
  opts = common.parse_options(' tiny, both ,glove=/a,glove=/b', 'x.py', choices={'row': ('none', 'both')},
                              paths=('glove',), flags=('phrases',))
  assert (opts.row, opts.glove, opts.tiny, opts.phrases) == ('both', '/b', True, False)
  empty = common.parse_options('', 'x.py', choices={'row': ('none',)}, paths=('glove',))
  assert (empty.row, empty.glove, empty.tiny) == (None, '', False)
  for bad in ('glove=', 'none,both', 'nonsense', 'tiny=1'):
    with pytest.raises(ValueError, match=r"x\.py: unknown or repeated option .*known: one of \['none', "
                                         r"'both'\], glove=VALUE, phrases, tiny"):
      common.parse_options(bad, 'x.py', choices={'row': ('none', 'both')}, paths=('glove',),
                           flags=('phrases',))


def test_shrink_caps_every_model_section_and_keeps_named_vectors():
  config = common.experiment('sentence', 'trec', data={'embeddings': 'glove-6b-50d', 'embedding_dim': 50},
                             model={'embedding_dim': 50, 'mlp_hidden': 0,
                                    'encoder': {'name': 'bilstm', 'hidden_size': 300}})
  common.add_variants(config, {'a': {'model': {'encoder': {'name': 'rn', 'hidden_size': 300,
                                                             'relation_size': 4}}}}, None)
  kept = common.shrink(ml_collections.ConfigDict(config.to_dict()),
                       {'hidden_size': 8, 'relation_size': 8, 'mlp_hidden': 8}, keep_embeddings=True)
  assert (kept.model.encoder.hidden_size, kept.variants.a.model.encoder.hidden_size) == (8, 8)
  assert kept.variants.a.model.encoder.relation_size == 4  # capped, never grown
  assert kept.model.mlp_hidden == 0
  assert (kept.data.embeddings, kept.data.embedding_dim, kept.model.embedding_dim) == ('glove-6b-50d', 50, 50)
  assert (kept.train.num_epochs, kept.train.num_steps, kept.data.batch_size) == (1, 30, 8)
  plain = common.shrink(config, {'hidden_size': 8})
  assert (plain.data.embeddings, plain.data.embedding_dim, plain.model.embedding_dim) == ('', 16, 16)


def test_experiment_rejects_a_data_key_the_loader_lacks():
  with pytest.raises(ValueError, match=r"\['no_such_key'\] are not keys of the 'trec' loader"):
    common.experiment('sentence', 'trec', data={'no_such_key': 1})


def test_dev_as_train_links_are_idempotent(tmp_path):
  shared = tmp_path / 'shared'
  shared.mkdir()
  links = {'train.txt': 'dev.txt', 'test.txt': 'test.txt'}
  assert common.dev_as_train_dir(shared, tmp_path / 'cache', links, 'q') is None  # nothing there
  for name in ('dev', 'test'):
    (shared / f'{name}.txt').write_text(name)
  folder = common.dev_as_train_dir(shared, tmp_path / 'cache', links, 'q')
  assert folder == common.dev_as_train_dir(shared, tmp_path / 'cache', links, 'q')
  assert (pathlib.Path(folder) / 'train.txt').read_text() == 'dev'


@pytest.mark.slow
@pytest.mark.parametrize('path', [p for p in CONFIG_FILES if _takes_options(p)])
def test_every_tiny_option_trains_from_the_command_line(path, tmp_path, shared_data):
  name = pathlib.Path(path).stem
  manual_dir = REPO / _read_in_repo(path).data.get('manual_dir', '')
  if name in UPSTREAM_ONLY and not manual_dir.is_dir():
    pytest.skip(f'{path}: the upstream files are not in {manual_dir} (see the file\'s docstring)')
  command = [sys.executable, '-m', 'launch.train', f'--config={path}:tiny', f'--workdir={tmp_path}/w',
             '--config.train.num_steps=2', '--config.train.log_every_steps=1']
  done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=600,
                        env={**os.environ, 'JAX_STRUCTURED_CACHE': str(tmp_path / 'cache')})
  assert done.returncode == 0, done.stderr[-3000:]
  assert (tmp_path / 'w').is_dir()


def _read_in_repo(path: str) -> ml_collections.ConfigDict:
  cwd = os.getcwd()
  os.chdir(REPO)
  try:
    return _read(path, 'tiny')
  finally:
    os.chdir(cwd)
