"""TFDS builders for the real datasets, reading their upstream formats, TensorFlow-free.

Each dataset is a `tfds.core.GeneratorBasedBuilder` over manually downloaded files (`manual_dir`),
written as ArrayRecord and read back with `tfds.data_source`. The data pipeline uses:

  load_examples(name, split, *, manual_dir, data_dir, config=None, encoding=None,
                on_bad_lines='error') -> list[dict]
  available_splits(name, *, manual_dir, config=None) -> list[str]
  report(name, *, manual_dir, data_dir, config=None, encoding=None, on_bad_lines='error') -> dict
      (sizes, dropped counts, the first skipped bad lines, build time)

Split names are `train`, `validation`, `test` (`dev` is accepted as an alias of `validation`).
Returned examples are plain Python: `str` for text, `int` for integers, lists for sequences.
A dataset is built once into `data_dir/<name>/<config>/<version>` and rebuilt only when the content
of its source files (or the encoding they are read in) changes (a BLAKE2b fingerprint is stored in
the dataset's metadata). A build that fails (a malformed line, an undecodable file) leaves nothing
behind in `data_dir`: the next launch builds from scratch.
"""
from __future__ import annotations

import codecs
import contextlib
import fcntl
import logging
import os
import pathlib
import shutil
import sys
import time
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from jax_structured import discovery
from jax_structured.data.builders import _base
from jax_structured.data.builders._base import FormatError


def _discover_builders() -> dict[str, type[_base.ManualBuilder]]:
  """{name: builder class} of every `ManualBuilder` subclass defined in a public module of this package.

  A new dataset registers by adding its builder module here (`discovery.import_submodules`).

  Raises:
    ValueError: two builder classes share a `name`.
  """
  found: dict[str, type[_base.ManualBuilder]] = {}
  for module in discovery.import_submodules(__name__, registry='dataset builder registry'):
    for value in vars(module).values():
      if (isinstance(value, type) and issubclass(value, _base.ManualBuilder)
          and value.__module__ == module.__name__):
        if value.name in found:
          raise ValueError(f'dataset builder name {value.name!r} defined twice: '
                           f'{found[value.name].__module__} and {module.__name__}')
        found[value.name] = value
  return dict(sorted(found.items()))


BUILDERS: dict[str, type[_base.ManualBuilder]] = _discover_builders()

_SPLIT_ALIASES = {'dev': 'validation', 'valid': 'validation'}

__all__ = ['BUILDERS', 'FormatError', 'available_splits', 'builder', 'load_examples', 'names', 'report']


def names() -> list[str]:
  """The dataset names `load_examples` accepts."""
  return sorted(BUILDERS)


def _builder_cls(name: str) -> type[_base.ManualBuilder]:
  if name not in BUILDERS:
    raise KeyError(f'unknown dataset {name!r}; known: {names()}')
  return BUILDERS[name]


def _config(cls: type[_base.ManualBuilder], config: str | None, manual_dir) -> str | None:
  """Resolves the config name (validated, or derived from the files for dynamic configs)."""
  if cls.DYNAMIC_CONFIGS:
    return cls.resolve_config(config, manual_dir)
  known = [c.name for c in cls.BUILDER_CONFIGS]
  if not known:
    if config is not None:
      raise ValueError(f'dataset {cls.name!r} has no configs, got config={config!r}')
    return None
  if config is None:
    if cls.REQUIRE_CONFIG:
      raise ValueError(f'dataset {cls.name!r} needs a config, one of {known}')
    return known[0]
  if config not in known:
    raise ValueError(f'unknown config {config!r} of dataset {cls.name!r}; known: {known}')
  return config


def available_splits(name: str, *, manual_dir: str | os.PathLike, config: str | None = None) -> list[str]:
  """The splits whose upstream files are present in `manual_dir` (nothing is built).

  Raises:
    FileNotFoundError: no split file at all (the message names the expected paths).
  """
  cls = _builder_cls(name)
  config = _config(cls, config, manual_dir)
  files = cls.source_files(pathlib.Path(manual_dir), config)
  return [s for s in _base.SPLITS if s in files]


def _encoding(cls: type[_base.ManualBuilder], encoding: str | None) -> str | None:
  """The user's encoding in Python's canonical spelling; None for UTF-8 (every builder's own)."""
  if encoding is None:
    return None
  try:
    canonical = codecs.lookup(encoding).name
  except LookupError:
    raise ValueError(f'{cls.name}: unknown text encoding {encoding!r} (e.g. utf-8, cp1252, '
                     'latin-1)') from None
  if canonical == 'utf-8':
    return None
  if not cls.ENCODING_OPTION:
    raise ValueError(f'{cls.name}: the upstream format fixes the text encoding; encoding='
                     f'{encoding!r} is only for the builders of users\' own files')
  return canonical


def builder(name: str, *, manual_dir: str | os.PathLike | None, data_dir: str | os.PathLike,
            config: str | None = None, encoding: str | None = None,
            on_bad_lines: str = 'error') -> _base.ManualBuilder:
  """Returns the builder of `name`, prepared in `data_dir` (built now if absent or stale).

  Args:
    name: a dataset of `names()`.
    manual_dir: folder with the upstream files; None reads an already prepared dataset only.
    data_dir: where TFDS datasets are written (`data_dir/<name>/<config>/<version>`).
    config: builder config (`sst`: fine/binary; `document_classification`: yelp13, ...;
      `universal_dependencies`: a treebank such as `en_ewt`; `text_classification`: a name).
    encoding: text encoding of the files without a byte-order mark (None = UTF-8); only builders
      with `ENCODING_OPTION` (text_classification, document_classification) take another.
    on_bad_lines: 'error' (a malformed or undecodable line stops the build) or 'skip' (left out and
      counted per reason; see `_base`).

  Returns:
    The prepared `tfds.core.GeneratorBasedBuilder`.

  Raises:
    FormatError: a malformed or undecodable line; nothing of the failed build is left in data_dir.
  """
  cls = _builder_cls(name)
  encoding = _encoding(cls, encoding)
  if on_bad_lines not in ('error', 'skip'):
    raise ValueError(f"{name}: on_bad_lines={on_bad_lines!r} must be 'error' or 'skip'")
  if manual_dir is None:
    if cls.DYNAMIC_CONFIGS and config is None:
      raise ValueError(f'{name}: without manual_dir the config must be given')
    config = _config(cls, config, None) if not cls.DYNAMIC_CONFIGS else config
    b = _instantiate(cls, config, data_dir, encoding, on_bad_lines)
    if not b.is_prepared():
      raise FileNotFoundError(f'{name}: no prepared dataset in {b.data_dir} and manual_dir=None')
    return b
  manual_dir = pathlib.Path(manual_dir)
  config = _config(cls, config, manual_dir)
  files = cls.source_files(manual_dir, config)  # FileNotFoundError naming the expected paths
  fingerprint = _base.fingerprint(files, encoding, on_bad_lines)
  b = _instantiate(cls, config, data_dir, encoding, on_bad_lines)
  if _is_current(b, fingerprint):
    return b
  with _build_lock(data_dir, name, config):
    # Another process (a second launch, a variant started beside this one) may have built it while
    # this one waited for the lock: look again before building.
    b = _instantiate(cls, config, data_dir, encoding, on_bad_lines)
    if _is_current(b, fingerprint):
      return b
    mode = (tfds.download.GenerateMode.FORCE_REDOWNLOAD if b.is_prepared()
            else tfds.download.GenerateMode.REUSE_DATASET_IF_EXISTS)
    if b.is_prepared():
      logging.info('%s: source files changed, rebuilding %s', name, b.data_dir)
    start = time.perf_counter()
    tfds.display_progress_bar(sys.stderr.isatty())  # no terminal control codes in log files
    with _removed_on_failure(data_dir, name, config):
      b.download_and_prepare(download_config=tfds.download.DownloadConfig(
          manual_dir=str(manual_dir), download_mode=mode))
    b.info.metadata['build_seconds'] = round(time.perf_counter() - start, 3)
    b.info.write_to_directory(b.data_dir)
  _log_dropped(name, config, b.info.metadata.get('dropped', {}))
  return b


def _is_current(b, fingerprint) -> bool:
  return b.is_prepared() and b.info.metadata.get('source_fingerprint') == fingerprint


@contextlib.contextmanager
def _build_lock(data_dir, name, config):
  """Holds an exclusive `flock` on `data_dir/.<name>.<config>.lock` while a dataset is built.

  Without it, two launches that find the same dataset unbuilt both build it, and the slower one dies
  renaming its `incomplete.*` directory onto the finished one (FileExistsError). Remote data_dirs
  (`gs://...`) get no lock: build those once before starting parallel launches.
  """
  path = os.fspath(data_dir)
  if '://' in path:
    yield
    return
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, f'.{name}.{config or "default"}.lock'), 'a') as lock:
    try:
      fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
      logging.info('%s: another process is building it in %s; waiting', name, path)
      fcntl.flock(lock, fcntl.LOCK_EX)
    try:
      yield
    finally:
      fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def _removed_on_failure(data_dir, name, config):
  """Removes what a failed build of `name`/`config` created under `data_dir`.

  TFDS writes into `<data_dir>/<name>/<config>/<version>.incomplete*` and renames it when done; a
  failure leaves that folder (and the empty `<name>/<config>` above it) behind. What the build lock
  covers (`<name>/<config>`) is cleaned of every new entry; the folders above it only when they are
  new and empty (another config of `name` may be building beside this one).
  """
  if '://' in os.fspath(data_dir):
    yield
    return
  root = pathlib.Path(os.fspath(data_dir))
  dataset = root / name / config if config else root / name
  parents = [p for p in (root / name, root / 'downloads') if p != dataset and not p.exists()]
  before = set(os.listdir(dataset)) if dataset.is_dir() else None
  try:
    yield
  except BaseException:
    if before is None:
      shutil.rmtree(dataset, ignore_errors=True)
    elif dataset.is_dir():
      for entry in set(os.listdir(dataset)) - before:
        target = dataset / entry
        if target.is_dir() and not target.is_symlink():
          shutil.rmtree(target, ignore_errors=True)
        else:
          target.unlink(missing_ok=True)
    for parent in parents:
      for folder in sorted((p for p in parent.rglob('*') if p.is_dir()), reverse=True) if parent.is_dir() else ():
        with contextlib.suppress(OSError):
          folder.rmdir()  # empty folders only
      with contextlib.suppress(OSError):
        parent.rmdir()
    raise


def _instantiate(cls, config, data_dir, encoding=None, on_bad_lines='error'):
  kwargs = dict(data_dir=os.fspath(data_dir), file_format='array_record')
  if config is not None:
    kwargs['config'] = (tfds.core.BuilderConfig(name=config) if cls.DYNAMIC_CONFIGS else config)
  b = cls(**kwargs)
  b.encoding = encoding
  b.on_bad_lines = on_bad_lines
  return b


def _log_dropped(name, config, dropped):
  for split, counts in dropped.items():
    for reason, count in counts.items():
      logging.info('%s/%s %s: dropped %d records (%s)', name, config, split, count, reason)


def _split_name(split: str) -> str:
  return _SPLIT_ALIASES.get(split, split)


def load_examples(name: str, split: str, *, manual_dir: str | os.PathLike | None,
                  data_dir: str | os.PathLike, config: str | None = None,
                  encoding: str | None = None, on_bad_lines: str = 'error') -> list[dict[str, Any]]:
  """Builds `name` once into `data_dir` if needed, then reads `split` with `tfds.data_source`.

  Args:
    name: a dataset of `names()`.
    split: `train`, `validation` (alias `dev`) or `test`.
    manual_dir: folder with the upstream files (see each builder's MANUAL_DOWNLOAD_INSTRUCTIONS).
    data_dir: TFDS data directory.
    config: builder config, see `builder`.
    encoding: text encoding of the files, see `builder`.
    on_bad_lines: 'error' or 'skip', see `builder`.

  Returns:
    The examples in file order, as dicts of Python values (text decoded to `str`).

  Raises:
    FileNotFoundError: missing upstream files (names the expected paths).
    FormatError: a malformed line (names file and line).
    KeyError: `split` is not offered (its file is absent).
  """
  b = builder(name, manual_dir=manual_dir, data_dir=data_dir, config=config, encoding=encoding,
              on_bad_lines=on_bad_lines)
  split = _split_name(split)
  if split not in b.info.splits:
    raise KeyError(f'{name}: split {split!r} not available (its file is absent); available: '
                   f'{sorted(b.info.splits.keys())}')
  full_name = f'{b.name}/{b.builder_config.name}:{b.version}' if b.builder_config else f'{b.name}:{b.version}'
  source = tfds.data_source(full_name, split=split, data_dir=os.fspath(data_dir))
  records = source.__getitems__(list(range(len(source))))
  return [{k: _to_python(v) for k, v in r.items()} for r in records]


def report(name: str, *, manual_dir: str | os.PathLike | None, data_dir: str | os.PathLike,
           config: str | None = None, encoding: str | None = None,
           on_bad_lines: str = 'error') -> dict[str, Any]:
  """Sizes and dropped-record counts of a (built) dataset, for the pipeline's data report.

  Returns:
    `{'name', 'config', 'num_examples': {split: n}, 'dropped': {split: {reason: n}},
      'bad_lines': {split: ['file:line: message' of the first skipped bad lines]},
      'source_files': {split: [file names]}, 'build_seconds': float | None, 'data_dir': str}`.
  """
  b = builder(name, manual_dir=manual_dir, data_dir=data_dir, config=config, encoding=encoding,
              on_bad_lines=on_bad_lines)
  meta = b.info.metadata
  return {
      'name': name,
      'config': b.builder_config.name if b.builder_config else None,
      'num_examples': {s: b.info.splits[s].num_examples for s in _base.SPLITS if s in b.info.splits},
      'dropped': dict(meta.get('dropped', {})),
      'bad_lines': dict(meta.get('bad_lines', {})),
      'source_files': dict(meta.get('source_files', {})),
      'build_seconds': meta.get('build_seconds'),
      'data_dir': os.fspath(b.data_dir),
  }


def _to_python(value):
  if isinstance(value, bytes):
    return value.decode('utf-8')
  if isinstance(value, np.ndarray):
    return [_to_python(v) for v in value.tolist()]
  if isinstance(value, (list, tuple)):
    return [_to_python(v) for v in value]
  if isinstance(value, np.generic):
    return value.item()
  return value
