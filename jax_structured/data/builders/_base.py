"""Shared machinery of the manual-download TFDS builders (TensorFlow-free, ArrayRecord output).

Every builder reads files the user downloaded by hand (`manual_dir`), in the dataset's *upstream*
format, and writes ArrayRecord shards that `tfds.data_source` reads back without TensorFlow.

Conventions shared by all builders:
- `source_files(manual_dir, config_name) -> {split: [paths]}` resolves the upstream files of every
  split present (a split whose file is absent is not offered); no split at all -> FileNotFoundError
  naming the expected paths.
- A malformed line raises `FormatError` (a ValueError) whose message starts with `path:line:`.
- Lines the paper's protocol drops (SNLI '-' gold label, SST neutral roots in the binary task, ...)
  are dropped *and counted*: the counts land in `info.metadata['dropped'][split][reason]`, saved
  with the dataset.
- Examples keep the file order (`disable_shuffling=True`), keyed by their running index.
"""
from __future__ import annotations

import abc
import collections
import gzip
import hashlib
import inspect
import os
import pathlib
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping, Sequence

from etils import epath
import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.core import utils as tfds_utils

PathLike = str | os.PathLike
SPLITS = ('train', 'validation', 'test')


def string_list() -> tfds.features.Tensor:
  """A variable-length list of strings (decoded to `list[str]` by `load_examples`).

  A 1-D string tensor rather than `Sequence(Text())`: same content, ~5x faster to serialise.
  """
  return tfds.features.Tensor(shape=(None,), dtype=np.str_)


def int_list() -> tfds.features.Tensor:
  """A variable-length list of int32 (decoded to `list[int]` by `load_examples`)."""
  return tfds.features.Tensor(shape=(None,), dtype=np.int32)


class FormatError(ValueError):
  """A malformed record in an upstream file; the message starts with `file:line:`."""

  def __init__(self, path: PathLike, lineno: int | None, message: str):
    location = f'{path}:{lineno}' if lineno is not None else str(path)
    super().__init__(f'{location}: {message}')
    self.path = str(path)
    self.lineno = lineno


def read_lines(path: PathLike, encoding: str = 'utf-8') -> Iterator[tuple[int, str]]:
  """Yields `(line_number, line)` (1-based, line terminator `\\n` / `\\r\\n` removed).

  `.gz` files are decompressed on the fly. Undecodable bytes raise `FormatError` naming the line.

  Args:
    path: the file.
    encoding: its text encoding (TREC is ISO-8859-1, everything else UTF-8).

  Yields:
    `(lineno, text)` pairs, in file order.
  """
  path = pathlib.Path(path)
  opener = gzip.open if path.suffix == '.gz' else open
  with opener(path, 'rb') as f:
    for lineno, raw in enumerate(f, start=1):
      if raw.endswith(b'\n'):
        raw = raw[:-1]
        if raw.endswith(b'\r'):
          raw = raw[:-1]
      try:
        line = raw.decode(encoding)
      except UnicodeDecodeError as e:
        raise FormatError(path, lineno, f'not valid {encoding} text ({e.reason} at byte {e.start})') from None
      yield lineno, line


def parse_lines(path: PathLike, parse: Callable[[str], Any],
                encoding: str = 'utf-8') -> Iterator[tuple[int, Any]]:
  """Applies the pure line parser `parse` to every line, locating its ValueErrors.

  Args:
    path: the file.
    parse: `line -> value`; raises ValueError (without location) on a malformed line.
    encoding: text encoding of the file.

  Yields:
    `(lineno, parse(line))`; a ValueError of `parse` becomes `FormatError('path:lineno: ...')`.
  """
  for lineno, line in read_lines(path, encoding):
    try:
      value = parse(line)
    except FormatError:
      raise
    except ValueError as e:
      raise FormatError(path, lineno, str(e)) from None
    yield lineno, value


def find_file(directory: pathlib.Path, candidates: Sequence[str]) -> pathlib.Path | None:
  """The single existing file among `candidates` (names or glob patterns) in `directory`, or None.

  Raises:
    ValueError: when several candidates exist (ambiguous input is never resolved silently).
  """
  found = []
  for pattern in candidates:
    if any(ch in pattern for ch in '*?['):
      found.extend(sorted(p for p in directory.glob(pattern) if p.is_file()))
    elif (directory / pattern).is_file():
      found.append(directory / pattern)
  found = list(dict.fromkeys(found))
  if len(found) > 1:
    raise ValueError(f'ambiguous input in {directory}: {[p.name for p in found]} all match one split; '
                     'keep only one of them')
  return found[0] if found else None


def missing_files_error(name: str, manual_dir: PathLike, expected: Iterable[str],
                        instructions: str) -> FileNotFoundError:
  """The error raised when no split file of a dataset is found in `manual_dir`."""
  expected = [str(pathlib.Path(manual_dir) / e) for e in expected]
  return FileNotFoundError(
      f'{name}: no split file found in manual_dir={manual_dir}; expected any of:\n  '
      + '\n  '.join(expected) + f'\nHow to get the files:\n{instructions.strip()}')


def fingerprint(files: Mapping[str, Sequence[PathLike]]) -> str:
  """A content hash (BLAKE2b) of the source files of every split, to detect changed inputs."""
  h = hashlib.blake2b(digest_size=16)
  for split in sorted(files):
    for path in files[split]:
      h.update(f'{split}\0{pathlib.Path(path).name}\0'.encode())
      with open(path, 'rb') as f:
        for chunk in iter(lambda: f.read(1 << 20), b''):
          h.update(chunk)
  return h.hexdigest()


class ManualBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
  """Base of our builders: manual files in upstream format -> ordered ArrayRecord examples.

  Builders are not entered in TFDS's global registry (`skip_registration=True`): several of our
  names (`snli`, `universal_dependencies`) exist in the TFDS catalogue with other formats, and
  `jax_structured.data.builders.BUILDERS` is our registry. Prepared data is read back with
  `tfds.data_source`, which needs only the files.

  Subclasses define `FEATURES`, `DESCRIPTION`, `HOMEPAGE`, `CITATION`,
  `MANUAL_DOWNLOAD_INSTRUCTIONS`, `source_files` and `_examples`.
  """

  VERSION = tfds.core.Version('1.0.0')
  RELEASE_NOTES = {'1.0.0': 'Initial release.'}
  DESCRIPTION: ClassVar[str] = ''
  HOMEPAGE: ClassVar[str] = ''
  CITATION: ClassVar[str] = ''
  # Configs whose name is free (a treebank, a user's dataset) rather than one of BUILDER_CONFIGS.
  DYNAMIC_CONFIGS: ClassVar[bool] = False
  # True: `load_examples(config=None)` is an error rather than the first of BUILDER_CONFIGS.
  REQUIRE_CONFIG: ClassVar[bool] = False

  @classmethod
  def resolve_config(cls, config: str | None, manual_dir: PathLike | None) -> str:
    """The config name of a DYNAMIC_CONFIGS builder (given, or derived from `manual_dir`)."""
    raise NotImplementedError(f'{cls.name} has fixed BUILDER_CONFIGS')

  @classmethod
  @abc.abstractmethod
  def features(cls) -> dict[str, Any]:
    """The TFDS feature dict of one example (the contract with the data pipeline)."""

  @classmethod
  @abc.abstractmethod
  def source_files(cls, manual_dir: PathLike, config_name: str | None) -> dict[str, list[pathlib.Path]]:
    """`{split: [files]}` for the splits present in `manual_dir`; FileNotFoundError when none."""

  @abc.abstractmethod
  def _examples(self, split: str, files: Sequence[pathlib.Path],
                dropped: collections.Counter) -> Iterator[dict[str, Any]]:
    """Yields the examples of `split` from its `files`, counting dropped records in `dropped`."""

  @tfds_utils.classproperty
  @classmethod
  def code_path(cls) -> epath.Path:
    # TFDS' own lookup goes through `importlib_resources`, which is not installed here.
    return epath.Path(inspect.getfile(cls))

  def _info(self) -> tfds.core.DatasetInfo:
    return _LocalDatasetInfo(
        builder=self,
        description=self.DESCRIPTION,
        features=tfds.features.FeaturesDict(self.features()),
        homepage=self.HOMEPAGE or None,
        citation=self.CITATION or None,
        metadata=tfds.core.MetadataDict(),
        disable_shuffling=True,
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    manual_dir = pathlib.Path(dl_manager.manual_dir)
    config_name = self.builder_config.name if self.builder_config else None
    files = self.source_files(manual_dir, config_name)
    self.info.metadata['dropped'] = {split: {} for split in files}
    self.info.metadata['source_files'] = {split: [p.name for p in paths] for split, paths in files.items()}
    self.info.metadata['source_fingerprint'] = fingerprint(files)
    return {split: self._generate_examples(split, paths) for split, paths in files.items()}

  def _generate_examples(self, split: str, files: Sequence[pathlib.Path]):
    dropped = collections.Counter()
    for key, example in enumerate(self._examples(split, files, dropped)):
      yield key, example
    self.info.metadata['dropped'][split] = dict(sorted(dropped.items()))


class _LocalDatasetInfo(tfds.core.DatasetInfo):
  """DatasetInfo of a data set built only from local files.

  TFDS' `initialize_from_bucket` (called when a builder is made before its data set is prepared)
  creates a `tempfile.mkdtemp('tfds')` directory before it looks for gs://tfds-data metadata, and
  leaves it behind when there is none: one empty /tmp directory per unprepared builder. Our data sets
  are never on that bucket, so there is nothing to initialise from.
  """

  def initialize_from_bucket(self) -> None:
    return None

