"""What every experiment config shares: the sections' skeleton, the option string after the file name,
the `tiny` option, and where data lives (the copies in ../shared/data, TFDS's manual folders, the
dev-as-train links for corpora whose training file we do not hold).

A config file is `get_config(options)` returning a plain `ml_collections.ConfigDict`; the launcher
resolves it (`jax_structured.config.resolve`). Family modules (configs/liu_lapata/__init__.py, ...) hold a
paper's table of data sets, rows and published figures; a task file holds only its differences.
"""
from __future__ import annotations

import os
import pathlib
import types
from typing import Any, Iterable, Mapping, Optional, Sequence

import ml_collections

from jax_structured import config as config_lib
from jax_structured.data import loaders

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = '../shared/data'  # the shared copies, relative to the repository root (the launch folder)
CACHE_ENV = 'JAX_STRUCTURED_CACHE'  # where dev-as-train links are made (default ~/.cache/jax_structured)


# --- The option string -------------------------------------------------------------------------------

def parse_options(options: Optional[str], file: str, *, choices: Mapping[str, Iterable[str]] = (),
                  paths: Sequence[str] = (), flags: Sequence[str] = ()) -> types.SimpleNamespace:
  """Parses the option string of a config file (`--config=FILE:OPTIONS`).

  Options are comma-separated; blank entries are skipped. `tiny` (a CPU smoke run) is always known.

  Args:
    options: the string after the file name; '' or None for none.
    file: the config file, named in every error.
    choices: {group: names}: at most one name of each group may be given (e.g. {'row': ROWS}).
    paths: keys given as `KEY=VALUE` with a non-empty VALUE (a repeated key keeps its last value).
    flags: names that switch something on (`tiny` is added).

  Returns:
    A namespace with one attribute per group (the name given, or None), per path key (the value, or
    '') and per flag (bool).

  Raises:
    ValueError naming `file`, the option and every known option, for an unknown option, a second name
    of one group or an empty VALUE.
  """
  groups = {group: tuple(names) for group, names in dict(choices).items()}
  all_flags = tuple(dict.fromkeys((*flags, 'tiny')))
  out = types.SimpleNamespace(**{g: None for g in groups}, **{p: '' for p in paths},
                              **{f: False for f in all_flags})
  for option in [o.strip() for o in (options or '').split(',') if o.strip()]:
    key, equals, value = option.partition('=')
    group = next((g for g, names in groups.items() if option in names), None)
    if group is not None and getattr(out, group) is None:
      setattr(out, group, option)
    elif equals and key in paths and value:
      setattr(out, key, value)
    elif option in all_flags:
      setattr(out, option, True)
    else:
      known = [f'one of {list(names)}' for names in groups.values()]
      known += [f'{p}=VALUE' for p in paths] + list(all_flags)
      raise ValueError(f'{file}: unknown or repeated option {option!r}; known: {", ".join(known)}')
  return out


# --- The sections ------------------------------------------------------------------------------------

def experiment(task: str, loader: str, *, data: Mapping[str, Any] = (), model: Mapping[str, Any] = (),
               optimizer: Mapping[str, Any] = (), train: Mapping[str, Any] = (),
               parallel: str = 'shard_map') -> ml_collections.ConfigDict:
  """A config with every section: `data` over the loader's defaults, `optimizer` / `train` over theirs.

  Every key of the data, optimizer and train sections is present, so every one is overridable from
  the command line; `variants` starts empty.

  Raises:
    ValueError naming the keys of `data` that the loader does not have.
  """
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = task
  config.parallel = parallel
  config.data = loaders.default_config(loader)
  unknown = sorted(set(dict(data)) - set(config.data))
  if unknown:
    raise ValueError(f'data key(s) {unknown} are not keys of the {loader!r} loader: {sorted(config.data)}')
  config.data.update(dict(data))
  config.model = ml_collections.ConfigDict(dict(model))
  config.optimizer = config_lib.optimizer_defaults()
  config.optimizer.update(dict(optimizer))
  config.train = config_lib.train_defaults()
  config.train.update(dict(train))
  config.variants = ml_collections.ConfigDict()
  return config


def add_variants(config: ml_collections.ConfigDict, rows: Mapping[str, Mapping[str, Any]],
                 chosen: Optional[str]) -> ml_collections.ConfigDict:
  """Every row as `config.variants` when none was `chosen`; else the chosen row applied to `config`.

  Args:
    rows: {row name: {section: {key: value}}}, e.g. {'none': {'model': {'attention': 'none'}}}.
  """
  if chosen is None:
    for name, row in rows.items():
      config.variants[name] = _plain(row)
  else:
    for section, values in rows[chosen].items():
      config[section].update(_plain(values))
  return config


def _plain(value):
  return {k: _plain(v) for k, v in value.items()} if isinstance(value, Mapping) else value


# --- The `tiny` option -------------------------------------------------------------------------------

def model_sections(config: ml_collections.ConfigDict) -> list[ml_collections.ConfigDict]:
  """`config.model`, its `encoder` and those of every variant (the sections `shrink` sizes down)."""
  models = [config.model] + [v.model for v in config.variants.values() if 'model' in v]
  return models + [m.encoder for m in models if isinstance(m.get('encoder'), ml_collections.ConfigDict)]


def shrink(config: ml_collections.ConfigDict, sizes: Mapping[str, int], *, embedding_dim: int = 16,
           batch_size: int = 8, num_steps: int = 30, keep_embeddings: bool = False,
           log_every_steps: int = 10) -> ml_collections.ConfigDict:
  """The `tiny` option, in place: a CPU smoke run of `num_steps` steps in one epoch.

  Every key of `sizes` found in a model section (`model_sections`) is capped at its size; word vectors
  become `embedding_dim`-d random ones unless `keep_embeddings` (a vector file the user named: its
  vectors and their size stay); batches of `batch_size`; no mid-epoch evaluation or checkpoint.
  """
  for section in model_sections(config):
    for key, size in sizes.items():
      if key in section:
        section[key] = min(section[key], size)
  if not keep_embeddings:
    config.data.embeddings = ''
    config.data.embedding_dim = embedding_dim
    config.model.embedding_dim = embedding_dim
  config.data.batch_size = batch_size
  config.train.update({'num_epochs': 1, 'num_steps': num_steps, 'eval_every_steps': 0,
                       'checkpoint_every_steps': 0, 'log_every_steps': log_every_steps})
  return config


# --- Where data lives --------------------------------------------------------------------------------

def shared(name: str) -> str:
  """The shared copy of data set `name` (a folder of ../shared/data), relative to the repository."""
  return f'{SHARED_DATA}/{name}'


def manual_dir(name: str) -> str:
  """TFDS's usual manual folder for `name`'s upstream files (override with --config.data.manual_dir)."""
  return os.path.expanduser(f'~/tensorflow_datasets/downloads/manual/{name}')


def dev_as_train_dir(shared_dir: Any, cache_dir: Any, links: Mapping[str, str], name: str,
                     ) -> Optional[str]:
  """Creates (idempotently) `cache_dir/<name>` holding symbolic links {link name: file in shared_dir}.

  E.g. SNLI's `snli_1.0_train.jsonl.gz` -> `snli_1.0_dev.jsonl.gz`: a loader that builds its vocabulary
  on `train` then trains on the development set we hold.

  Returns:
    The folder, or None when a target file is missing.
  """
  shared_dir = pathlib.Path(shared_dir).resolve()
  targets = {link: shared_dir / target for link, target in links.items()}
  if not all(t.is_file() for t in targets.values()):
    return None
  folder = pathlib.Path(cache_dir).expanduser() / name
  folder.mkdir(parents=True, exist_ok=True)
  for link, target in targets.items():
    path = folder / link
    if path.is_symlink() and pathlib.Path(os.readlink(path)) == target:
      continue
    if path.exists() or path.is_symlink():
      path.unlink()
    path.symlink_to(target)
  return str(folder)


SNLI = shared('snli_1.0')
SNLI_DEV_AS_TRAIN = {'snli_1.0_train.jsonl.gz': 'snli_1.0_dev.jsonl.gz',
                     'snli_1.0_test.jsonl.gz': 'snli_1.0_test.jsonl.gz'}
QUORA = shared('quora_qqp_wang2017_partition')
QUORA_DEV_AS_TRAIN = {'train.txt': 'dev.txt', 'test.txt': 'test.txt'}


def dev_as_train(shared_name: str, links: Mapping[str, str], name: str) -> str:
  """`data.manual_dir` for training on a shared development set: the links of `dev_as_train_dir` in
  `$JAX_STRUCTURED_CACHE` (default ~/.cache/jax_structured), or the shared folder itself when the copy
  is absent (the loader then names the missing files)."""
  cache = os.environ.get(CACHE_ENV, '~/.cache/jax_structured')
  return dev_as_train_dir(REPO / shared_name, cache, links, name) or shared_name


def snli_dev_as_train() -> str:
  """`data.manual_dir` training on SNLI dev (hold out `validation_fraction` of it), testing on SNLI test."""
  return dev_as_train(SNLI, SNLI_DEV_AS_TRAIN, 'snli_dev_as_train')


def quora_dev_as_train() -> str:
  """`data.manual_dir` training on the Quora dev set of Wang et al.'s partition, testing on its test."""
  return dev_as_train(QUORA, QUORA_DEV_AS_TRAIN, 'quora_dev_as_train')
