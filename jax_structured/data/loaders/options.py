"""The data section of a config: every loader's keys and defaults, their checks, command-line values.

`default_config(name)` lists every key of loader `name` with its default (`COMMON_DEFAULTS`, then the
loader's own entry of `LOADER_DEFAULTS`, which each loader module declares beside its code with
`register`); `validate_config` checks a section (unknown keys and wrongly typed values are errors
naming `config.data.<key>`); `parse_overrides` types command-line values of data keys;
`with_text_classification_data` rewrites a launch config to read the user's own folder
(`--text_classification_dir`).
"""
from __future__ import annotations

import ast
import codecs
import copy
import os
from typing import Any, Callable, Mapping

import numpy as np

from jax_structured import errors
from jax_structured.data import registry


# Keys every loader accepts, with their defaults.
COMMON_DEFAULTS: dict[str, Any] = {
    'name': '',
    'manual_dir': '',          # folder with the upstream files (required)
    'data_dir': '',            # TFDS data dir ('' = $TFDS_DATA_DIR or ~/tensorflow_datasets)
    'config': '',              # builder / task config ('' = the loader's default)
    'batch_size': 32,          # training batch size (read by the training loop)
    'eval_batch_size': 0,      # 0 = batch_size (read by the training loop)
    'bucket_boundaries': None,  # None = batching defaults; () = one bucket of the longest example
    'seed': 0,                 # dev / test hold-out and random embedding rows
    'min_count': 1,            # keep training words seen >= min_count times (papers' "> 5" = 6)
    'max_vocab_size': 0,       # 0 = no limit (most frequent words kept, <pad>/<unk> included)
    'lowercase': True,
    'max_length': 0,           # drop training examples longer than this many tokens (0 = keep all)
    'validation_fraction': 0.0,  # hold out this much of train as dev when there is no dev split
    'test_fraction': 0.0,      # and this much as test when there is neither dev nor test (seed: seed)
    'embeddings': '',          # '' = none, 'word2vec' = train on train+dev, else a registered name
                               # (embeddings.registered_names(), e.g. 'glove-6b-50d') or a vectors file
    'embedding_dim': 300,      # word2vec size; for files, the expected dimension (0 = any)
    'word2vec_window': 5,
    'word2vec_epochs': 5,
}

# Per loader: its extra keys and the defaults that differ from COMMON_DEFAULTS (filled by `register`
# as the loader modules are imported).
LOADER_DEFAULTS: dict[str, dict[str, Any]] = {}


# The key of the loaders whose files are read line by line (their builders' `_base.parse_lines`):
# 'error' = a malformed or undecodable line stops the build, naming file:line; 'skip' = such lines
# are left out and counted per reason (`TaskData.skipped`, '<split>/<reason>'), the first few named.
BAD_LINES_DEFAULTS: dict[str, Any] = {'on_bad_lines': 'error'}
ON_BAD_LINES = ('error', 'skip')


def register(name: str, defaults: Mapping[str, Any]) -> Callable:
  """Decorator: registers a loader `fn(config) -> TaskData` as `name` (`data.registry`) with its keys.

  Args:
    name: the loader's `config.data.name`.
    defaults: the loader's extra keys and the defaults that differ from `COMMON_DEFAULTS`.
  """
  def wrap(fn):
    fn = registry.register(name)(fn)
    LOADER_DEFAULTS[name] = dict(defaults)
    return fn
  return wrap


def default_config(name: str):
  """A `ml_collections.ConfigDict` with every key of loader `name` at its default."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  if name not in LOADER_DEFAULTS:
    raise KeyError(f'unknown loader {name!r}; known: {sorted(LOADER_DEFAULTS)}')
  config = ml_collections.ConfigDict(loader_defaults(name))
  if config.bucket_boundaries is None:
    # A typed placeholder, so that `--config.data.bucket_boundaries='((6, 20), (20, 50))'` works from
    # the command line (ml_collections cannot override a plain None field).
    config.bucket_boundaries = ml_collections.config_dict.placeholder(tuple)
  return config


def loader_defaults(name: str) -> dict[str, Any]:
  """Every key of loader `name` with its default, as a plain dict."""
  return {**COMMON_DEFAULTS, **LOADER_DEFAULTS[name], 'name': name}


def validate_config(config, name: str) -> dict[str, Any]:
  """Checks `config.data` for loader `name`; returns a plain dict with the defaults filled in.

  Raises:
    errors.ConfigError (a ValueError): an unknown key or a value of the wrong type, naming
      `config.data.<key>`.
  """
  defaults = loader_defaults(name)
  given = dict(config.to_dict() if hasattr(config, 'to_dict') else config)
  unknown = sorted(set(given) - set(defaults))
  if unknown:
    raise errors.ConfigError(f'unknown key(s) for the {name} loader: ' +
                             ', '.join(f'config.data.{k}' for k in unknown) +
                             f'; valid keys: {sorted(defaults)}')
  cfg = dict(defaults, **given)
  for key, default in defaults.items():
    value = cfg[key]
    if default is None or value is None and key == 'bucket_boundaries':
      continue
    if isinstance(default, bool):
      ok = isinstance(value, (bool, np.bool_))
    elif isinstance(default, int):
      ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    elif isinstance(default, float):
      ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
    else:
      ok = isinstance(value, type(default))
    if not ok:
      raise errors.ConfigError(f'config.data.{key}={value!r} must be of type {type(default).__name__}')
  if cfg['name'] != name:
    raise errors.ConfigError(f'config.data.name={cfg["name"]!r}, expected {name!r}')
  for key in ('min_count', 'batch_size'):
    if cfg[key] < 1:
      raise errors.ConfigError(f'config.data.{key}={cfg[key]} must be >= 1')
  for key in ('max_vocab_size', 'max_length', 'eval_batch_size', 'embedding_dim'):
    if cfg[key] < 0:
      raise errors.ConfigError(f'config.data.{key}={cfg[key]} must be >= 0')
  _check_fractions(cfg)
  if cfg.get('on_bad_lines', 'error') not in ON_BAD_LINES:
    raise errors.ConfigError(f'config.data.on_bad_lines={cfg["on_bad_lines"]!r} must be one of '
                             f'{ON_BAD_LINES}')
  if not cfg['manual_dir']:
    raise errors.ConfigError(f'config.data.manual_dir is empty: set it to the folder with the upstream '
                             f'{name} files (e.g. ../shared/data/<dataset>)')
  if 'encoding' in cfg:
    try:
      codecs.lookup(cfg['encoding'])
    except LookupError:
      raise errors.ConfigError(f'config.data.encoding={cfg["encoding"]!r} is not a text encoding '
                               'Python knows (e.g. utf-8, cp1252, latin-1)') from None
  if cfg['bucket_boundaries'] is not None:
    cfg['bucket_boundaries'] = _tuple(cfg['bucket_boundaries'])
  return cfg


def _check_fractions(cfg: Mapping[str, Any]) -> None:
  """`validation_fraction` and `test_fraction` in [0, 1), together below 1."""
  for key in ('validation_fraction', 'test_fraction'):
    if not 0.0 <= cfg[key] < 1.0:
      raise errors.ConfigError(f'config.data.{key}={cfg[key]} must be in [0, 1)')
  if cfg['validation_fraction'] + cfg['test_fraction'] >= 1.0:
    raise errors.ConfigError(f'config.data.validation_fraction={cfg["validation_fraction"]} + '
                             f'config.data.test_fraction={cfg["test_fraction"]} must be below 1 '
                             '(both are held out of train)')


_TRUE, _FALSE = ('true', '1', 'yes', 'on'), ('false', '0', 'no', 'off')


def parse_overrides(name: str, overrides: Mapping[str, Any], *,
                    where: str = '--config.data') -> dict[str, Any]:
  """Command-line values of loader `name`'s keys, typed like the key's default.

  Args:
    name: a loader of `LOADER_DEFAULTS`.
    overrides: `{key: value}`; a `str` value is parsed as written on the command line (`'20'` -> 20
      for an int key; `true`/`false`/`1`/`0` for a bool key; a Python literal such as
      `'((6, 20), (20, 50))'` for `bucket_boundaries`); other values are checked as they are.
    where: how the user wrote the section, for messages (`--config.data`).

  Returns:
    `{key: typed value}`.

  Raises:
    errors.ConfigKeyError: a key loader `name` does not have (with the closest keys and every key).
    errors.ConfigError: a value that does not parse as the key's type.
  """
  defaults = loader_defaults(name)
  out = {}
  for key, value in overrides.items():
    if key not in defaults:
      raise errors.unknown_key(defaults, key, where=where, note=f'(the {name} loader has no such key)')
    default = defaults[key]
    if isinstance(value, str) and not isinstance(default, str):
      text = value.strip()
      try:
        if isinstance(default, bool):
          if text.lower() not in _TRUE + _FALSE:
            raise ValueError(text)
          value = text.lower() in _TRUE
        elif isinstance(default, int):
          value = int(text)
        elif isinstance(default, float):
          value = float(text)
        else:  # bucket_boundaries: a literal
          value = ast.literal_eval(text)
      except (ValueError, SyntaxError):
        kind = 'a bool (true/false)' if isinstance(default, bool) else (
            f'a {type(default).__name__}' if default is not None else 'a Python literal')
        raise errors.ConfigError(f'{where}.{key}={value!r} is not {kind}') from None
    out[key] = value
  return out


def _tuple(value):
  if isinstance(value, (list, tuple)):
    return tuple(_tuple(v) for v in value)
  return int(value)


# --- --text_classification_dir: the same launch config on the user's own files ---------------------

# Loaders whose examples are documents (sentence-split); the others give single texts.
_DOCUMENT_LOADERS = ('document_classification',)
# Data keys that describe the config's own data set, which the flag replaces: its source, and the
# fractions held out of its train split (TREC's 500 of 5452 questions mean nothing for another folder).
_SOURCE_KEYS = ('name', 'manual_dir', 'config', 'validation_fraction', 'test_fraction')


def with_text_classification_data(config: ml_collections.ConfigDict, manual_dir: str,
                                   overrides: Mapping[str, Any] | None = None
                                   ) -> ml_collections.ConfigDict:
  """The same launch on the user's own directory of `train`/`dev`/`test` TSV or JSONL files.

  Changes the source of the data, nothing else: `config.data` becomes the `text_classification`
  loader's section where
  - every key the config's data loader shares with `text_classification` keeps the config's value
    (`min_count`, `max_sentences`, `max_sentence_length`, `embeddings`, `lowercase`, `batch_size`,
    `data_dir`, ...), except the keys that describe the config's own data set: its source (`name`,
    `manual_dir`, `config`: the dataset is named after the folder) and the fractions held out of its
    train split (`validation_fraction`, `test_fraction`: the loader's defaults, 0.1 each, used only
    when the folder has no dev / test file; the loader prints what it held out). A config whose
    data is not one of the real loaders (the synthetic demo, whose keys mean other things, e.g. the
    generated `max_length`) keeps only `batch_size` and `eval_batch_size`;
  - `split_sentences` is on when the config's data was document level;
  - `overrides` (the command line's `--config.data.<key>=<value>`) are applied last.
  The rest of the config (model, optimizer, train, variants) is unchanged, except that a variant
  whose overrides set data keys the text_classification loader does not have is left out, and a line
  names it (the default job's `parser` variant, which trains on the planted trees of
  `config.data.kind='parse'`: a folder of labelled texts has no trees).

  Args:
    config: a launch config (not modified).
    manual_dir: directory with the user's files (see `data/builders/text_classification.py`).
    overrides: `{key: value}` of data keys; `str` values are parsed as on the command line
      (`parse_overrides`).

  Returns:
    A new ConfigDict.

  Raises:
    errors.ConfigKeyError: an override the text_classification loader does not have (named, with
      the closest keys).
    errors.ConfigError: an override value of the wrong type.
    errors.UserError: `manual_dir` is not a directory.
  """
  typed = parse_overrides('text_classification', dict(overrides or {}))
  if not os.path.isdir(os.path.expanduser(manual_dir)):
    raise errors.UserError(f'--text_classification_dir={manual_dir} is not a directory (it should '
                           'hold train.tsv / dev.tsv / test.tsv or the same names with .jsonl)')
  old = config.data
  old_name = old.get('name', '')
  data = default_config('text_classification')
  shared = (set(data) & set(old) - set(_SOURCE_KEYS) if old_name in LOADER_DEFAULTS
            else {'batch_size', 'eval_batch_size'} & set(old))
  for key in sorted(shared):
    if key == 'bucket_boundaries' and old[key] is None:
      continue  # keep the loader's typed placeholder (overridable from the command line)
    data[key] = old[key]
  data.manual_dir = manual_dir
  data.split_sentences = bool(old.get('split_sentences', False)) or old_name in _DOCUMENT_LOADERS
  for key, value in typed.items():
    data[key] = value
  validate_config(data, 'text_classification')
  out = copy.deepcopy(config)
  with out.unlocked():
    out.data = data
    variants = out.get('variants')
    if variants:
      for name in list(variants.keys()):
        keys = _data_keys_of(variants[name])
        foreign = sorted(k for k in keys if k not in data)
        if foreign:
          print(f'--text_classification_dir: variant {name!r} left out: it sets config.data.'
                f'{foreign[0]}, which the text_classification loader does not have', flush=True)
          del variants[name]
  return out


def _data_keys_of(overrides) -> set[str]:
  """The `data` keys a variant's overrides set: nested ({'data': {'kind': ...}}) or dotted."""
  overrides = overrides.to_dict() if hasattr(overrides, 'to_dict') else dict(overrides or {})
  keys = set()
  for key, value in overrides.items():
    if key == 'data' and isinstance(value, Mapping):
      keys |= set(value)
    elif key.startswith('data.'):
      keys.add(key.split('.')[1])
  return keys
