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
- `on_bad_lines='skip'` (`builders.builder(on_bad_lines=...)`, `config.data.on_bad_lines`): the
  builders that read through `ManualBuilder.parse_lines` leave malformed and undecodable lines out
  instead, counted per reason (`BadLine.reason`: 'empty_text', 'no_label', ...; 'undecodable';
  'malformed' for any other) in the same `dropped` counts, the first few named in
  `info.metadata['bad_lines'][split]` ('file:line: message').
- Examples keep the file order (`disable_shuffling=True`), keyed by their running index.
"""
from __future__ import annotations

import abc
import codecs
import collections
import gzip
import hashlib
import inspect
import io
import json
import logging
import os
import pathlib
from typing import Any, BinaryIO, Callable, ClassVar, Iterable, Iterator, Mapping, Sequence

from etils import epath
import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.core import utils as tfds_utils

from jax_structured import errors

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


class FormatError(errors.UserError, ValueError):
  """A malformed record in an upstream file; the message starts with `file:line:`."""

  def __init__(self, path: PathLike, lineno: int | None, message: str):
    location = f'{path}:{lineno}' if lineno is not None else str(path)
    super().__init__(f'{location}: {message}')
    self.path = str(path)
    self.lineno = lineno
    self.message = message


class BadLine(ValueError):
  """A malformed line (raised by a line parser, without location); `reason` is the short name its
  count is kept under when bad lines are skipped ('empty_text', 'no_label', ...)."""

  def __init__(self, reason: str, message: str):
    super().__init__(message)
    self.reason = reason


class Dropped(collections.Counter):
  """The records a builder dropped from one split, per reason; with `skip` (`on_bad_lines='skip'`)
  also the bad lines `parse_lines` left out, the first `FIRST_BAD_LINES` named in `first`."""

  def __init__(self, skip: bool = False):
    super().__init__()
    self.skip = skip
    self.first: list[str] = []

  def add_bad_line(self, path: PathLike, lineno: int, reason: str, message: str) -> None:
    self[reason] += 1
    if len(self.first) < FIRST_BAD_LINES:
      self.first.append(f'{pathlib.Path(path).name}:{lineno}: {message}')


# Byte-order marks, longest first (the UTF-32 LE mark starts with the UTF-16 LE one).
_BOMS = ((codecs.BOM_UTF32_LE, 'utf-32-le'), (codecs.BOM_UTF32_BE, 'utf-32-be'),
         (codecs.BOM_UTF8, 'utf-8'), (codecs.BOM_UTF16_LE, 'utf-16-le'),
         (codecs.BOM_UTF16_BE, 'utf-16-be'))
# How many bad line numbers an error lists.
FIRST_BAD_LINES = 5


def open_binary(path: PathLike) -> BinaryIO:
  """The file as bytes (`.gz` decompressed on the fly)."""
  path = pathlib.Path(path)
  return gzip.open(path, 'rb') if path.suffix == '.gz' else open(path, 'rb')


def detect_bom(head: bytes) -> tuple[str | None, int]:
  """`(encoding, BOM length)` of a byte-order mark at the start of `head`, or `(None, 0)`.

  UTF-8, UTF-16 and UTF-32 (either byte order) are recognised; the returned encoding is the one
  without a BOM (`utf-16-le`, ...), for decoding the bytes after the mark.
  """
  for bom, encoding in _BOMS:
    if head.startswith(bom):
      return encoding, len(bom)
  return None, 0


def _bad_lines_summary(count: int, first: Sequence[int], what: str) -> str:
  if count <= 1:
    return ''
  more = ', ...' if count > len(first) else ''
  return f'; {count} lines {what} (lines {", ".join(map(str, first))}{more})'


def read_lines(path: PathLike, encoding: str = 'utf-8', *, encoding_hint: str = '',
               skipped: Dropped | None = None) -> Iterator[tuple[int, str]]:
  """Yields `(line_number, line)` (1-based, line terminator `\\n` / `\\r\\n` removed).

  `.gz` files are decompressed on the fly. A byte-order mark (UTF-8, UTF-16, UTF-32) is removed and
  decides the encoding (a file saved "with BOM" by an editor or Excel reads the same as one without).
  An undecodable line raises `FormatError` naming it, after the rest of the file was scanned: the
  message also gives the number of undecodable lines and the first few.

  Args:
    path: the file.
    encoding: its text encoding when it has no byte-order mark (TREC is ISO-8859-1, everything
      else UTF-8 unless the user says otherwise).
    encoding_hint: appended to a decoding error's message (e.g. how to set another encoding).
    skipped: where undecodable lines are counted ('undecodable') and left out instead of raising
      (`on_bad_lines='skip'`); None raises.

  Yields:
    `(lineno, text)` pairs, in file order.
  """
  with open_binary(path) as f:
    bom_encoding, skip = detect_bom(f.read(4))
    f.seek(skip)
    if bom_encoding is not None and bom_encoding.startswith('utf-') and bom_encoding != 'utf-8':
      yield from _read_wide_lines(path, f, bom_encoding, encoding_hint)
      return
    encoding = bom_encoding or encoding
    for lineno, raw in enumerate(f, start=1):
      if raw.endswith(b'\n'):
        raw = raw[:-1]
        if raw.endswith(b'\r'):
          raw = raw[:-1]
      try:
        line = raw.decode(encoding)
      except UnicodeDecodeError as e:
        if skipped is not None:
          skipped.add_bad_line(path, lineno, 'undecodable', f'not valid {encoding} text ({e.reason} at '
                               f'byte {e.start})')
          continue
        first, count = [lineno], 1
        for later, rest in enumerate(f, start=lineno + 1):
          try:
            rest.decode(encoding)
          except UnicodeDecodeError:
            count += 1
            if len(first) < FIRST_BAD_LINES:
              first.append(later)
        marked = ' although the file starts with a utf-8 byte-order mark' if bom_encoding else ''
        raise FormatError(path, lineno, f'not valid {encoding} text ({e.reason} at byte {e.start})'
                          + marked + _bad_lines_summary(count, first, f'are not valid {encoding}')
                          + encoding_hint) from None
      yield lineno, line


def _read_wide_lines(path, f, encoding, encoding_hint) -> Iterator[tuple[int, str]]:
  """`read_lines` of a UTF-16 / UTF-32 file (a line ends at the decoded `\\n`, not at a byte)."""
  text = io.TextIOWrapper(f, encoding=encoding, newline='')
  lineno = 0
  try:
    for lineno, line in enumerate(text, start=1):
      yield lineno, line.removesuffix('\n').removesuffix('\r')
  except UnicodeDecodeError as e:
    raise FormatError(path, lineno + 1, f'not valid {encoding} text ({e.reason}) although the file '
                      f'starts with a {encoding} byte-order mark' + encoding_hint) from None


def parse_lines(path: PathLike, parse: Callable[[str], Any], encoding: str = 'utf-8', *,
                encoding_hint: str = '', skipped: Dropped | None = None) -> Iterator[tuple[int, Any]]:
  """Applies the pure line parser `parse` to every line, locating its ValueErrors.

  Args:
    path: the file.
    parse: `line -> value`; raises ValueError (without location) on a malformed line.
    encoding: text encoding of the file (see `read_lines`).
    encoding_hint: see `read_lines`.
    skipped: where malformed lines (reason: `BadLine.reason`, else 'malformed') and undecodable ones
      are counted and left out instead of raising (`on_bad_lines='skip'`); None raises.

  Yields:
    `(lineno, parse(line))`. The first ValueError of `parse` becomes `FormatError('path:lineno:
    ...')`, raised once the rest of the file was parsed too: its message also counts the malformed
    lines and lists the first few.
  """
  lines = read_lines(path, encoding, encoding_hint=encoding_hint, skipped=skipped)
  for lineno, line in lines:
    try:
      value = parse(line)
    except FormatError:
      raise
    except ValueError as e:
      if skipped is not None:
        skipped.add_bad_line(path, lineno, getattr(e, 'reason', 'malformed'), str(e))
        continue
      first, count = [lineno], 1
      try:
        for later, rest in lines:
          try:
            parse(rest)
          except ValueError:
            count += 1
            if len(first) < FIRST_BAD_LINES:
              first.append(later)
      except FormatError as undecodable:  # a later undecodable line ends the count, not this error
        count += 1
        if len(first) < FIRST_BAD_LINES:
          first.append(undecodable.lineno)
      raise FormatError(path, lineno, str(e) + _bad_lines_summary(count, first, 'are malformed')
                        ) from None
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


def split_files(name: str, manual_dir: PathLike, candidates: Mapping[str, Sequence[str]],
                instructions: str, expected: Iterable[str] | None = None
                ) -> dict[str, list[pathlib.Path]]:
  """{split: [its file]} for every split one of whose `candidates` is in `manual_dir` (`find_file`).

  Raises:
    FileNotFoundError: no split has a file (`missing_files_error`, listing `expected`, default every
      candidate).
    ValueError: several candidates of one split exist.
  """
  manual_dir = pathlib.Path(manual_dir)
  files = {}
  for split, names in candidates.items():
    path = find_file(manual_dir, names)
    if path is not None:
      files[split] = [path]
  if not files:
    if expected is None:
      expected = [n for names in candidates.values() for n in names]
    raise missing_files_error(name, manual_dir, expected, instructions)
  return files


def json_object(line: str) -> dict:
  """The JSON object of one line.

  Raises:
    ValueError: invalid JSON, or JSON that is not an object.
  """
  try:
    record = json.loads(line)
  except json.JSONDecodeError as e:
    raise ValueError(f'invalid JSON: {e}') from None
  if not isinstance(record, dict):
    raise ValueError(f'expected a JSON object, got {type(record).__name__}')
  return record


def missing_files_error(name: str, manual_dir: PathLike, expected: Iterable[str],
                        instructions: str) -> FileNotFoundError:
  """The error raised when no split file of a dataset is found in `manual_dir`."""
  expected = [str(pathlib.Path(manual_dir) / e) for e in expected]
  return FileNotFoundError(
      f'{name}: no split file found in manual_dir={manual_dir}; expected any of:\n  '
      + '\n  '.join(expected) + f'\nHow to get the files:\n{instructions.strip()}')


def fingerprint(files: Mapping[str, Sequence[PathLike]], encoding: str | None = None,
                on_bad_lines: str = 'error') -> str:
  """A content hash (BLAKE2b) of the source files of every split, to detect changed inputs.

  `encoding` (a user's choice of text encoding, None = the builder's own) is hashed too: the same
  bytes read in another encoding are another data set; so is `on_bad_lines='skip'` (a data set
  built skipping bad lines is rebuilt, and stops at the first one, when they are errors again).
  """
  h = hashlib.blake2b(digest_size=16)
  if encoding is not None:
    h.update(f'encoding\0{encoding}\0'.encode())
  if on_bad_lines != 'error':
    h.update(f'on_bad_lines\0{on_bad_lines}\0'.encode())
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
  # True: the user may say which text encoding the files are in (`builders.builder(encoding=...)`,
  # `config.data.encoding`); False: the upstream format fixes it.
  ENCODING_OPTION: ClassVar[bool] = False
  # Set by `builders.builder` when the user gave an encoding (None: UTF-8, or a BOM's).
  encoding: str | None = None
  # Set by `builders.builder`: 'error' or 'skip' (see the module docstring).
  on_bad_lines: str = 'error'

  @property
  def read_encoding(self) -> str:
    """The encoding the readers decode with (files with a byte-order mark follow their mark)."""
    return self.encoding or 'utf-8'

  @property
  def encoding_hint(self) -> str:
    """What a decoding error adds: how to give another encoding, where the builder allows it."""
    if not self.ENCODING_OPTION:
      return ''
    return ('; if the files are in another encoding, set it with config.data.encoding (e.g. '
            '--config.data.encoding=cp1252)')

  def parse_lines(self, path: PathLike, parse: Callable[[str], Any], dropped: Dropped,
                  encoding: str | None = None) -> Iterator[tuple[int, Any]]:
    """`parse_lines` of one source file in `encoding` (default `read_encoding`); bad lines counted
    in `dropped` and left out when it skips them (`on_bad_lines='skip'`)."""
    try:
      yield from parse_lines(path, parse, encoding or self.read_encoding,
                             encoding_hint=self.encoding_hint,
                             skipped=dropped if getattr(dropped, 'skip', False) else None)
    except FormatError as e:
      raise FormatError(e.path, e.lineno, f'{e.message}; to leave bad lines out and count them, set '
                        '--config.data.on_bad_lines=skip') from None

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

  def _log_download_bytes(self) -> None:
    # TFDS prints 'Downloading and preparing dataset Unknown size ...' here; nothing is downloaded.
    logging.info('%s: building %s from the files in manual_dir', self.name, self.data_dir)

  def _log_download_done(self) -> None:
    logging.info('%s: built %s', self.name, self.data_dir)

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
    self.info.metadata['source_fingerprint'] = fingerprint(files, self.encoding, self.on_bad_lines)
    self.info.metadata['bad_lines'] = {}
    return {split: self._generate_examples(split, paths) for split, paths in files.items()}

  def _generate_examples(self, split: str, files: Sequence[pathlib.Path]):
    dropped = Dropped(skip=self.on_bad_lines == 'skip')
    for key, example in enumerate(self._examples(split, files, dropped)):
      yield key, example
    self.info.metadata['dropped'][split] = dict(sorted(dropped.items()))
    if dropped.first:
      self.info.metadata['bad_lines'][split] = list(dropped.first)


class _LocalDatasetInfo(tfds.core.DatasetInfo):
  """DatasetInfo of a data set built only from local files.

  TFDS' `initialize_from_bucket` (called when a builder is made before its data set is prepared)
  creates a `tempfile.mkdtemp('tfds')` directory before it looks for gs://tfds-data metadata, and
  leaves it behind when there is none: one empty /tmp directory per unprepared builder. Our data sets
  are never on that bucket, so there is nothing to initialise from.
  """

  def initialize_from_bucket(self) -> None:
    return None

