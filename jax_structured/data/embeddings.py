"""Initial word embeddings: word2vec trained with gensim, or pre-trained GloVe / word2vec files.

The result is always a float32 matrix `[len(vocab), dim]` aligned with a `core.Vocabulary`: row
`PAD_ID` (0) is zero, rows of words without a vector (and `<unk>`) are drawn from a normal distribution
with a fixed seed, scaled like the found vectors.
"""
from __future__ import annotations

import dataclasses
import gzip
import io
import os
import zlib
from typing import Iterable, Sequence

from absl import logging
import numpy as np

from jax_structured.data import core


@dataclasses.dataclass(frozen=True)
class Coverage:
  """How many vocabulary words got a vector.

  Attributes:
    found: vocabulary words (excluding `<pad>`, `<unk>`) with a vector.
    found_lowercase: of those, found only through their lower-cased form.
    vocab_size: number of vocabulary words excluding `<pad>` and `<unk>`.
    source: where the vectors came from.
  """
  found: int
  found_lowercase: int
  vocab_size: int
  source: str

  @property
  def fraction(self) -> float:
    return self.found / max(self.vocab_size, 1)

  def __str__(self) -> str:
    return (f'embeddings from {self.source}: {self.found}/{self.vocab_size} vocabulary words covered '
            f'({100 * self.fraction:.1f}%, {self.found_lowercase} via lower-casing)')


def _stable_hash(text: str) -> int:
  """A hash independent of PYTHONHASHSEED (gensim's default `hash` is salted per process)."""
  return zlib.crc32(text.encode('utf-8'))


def random_rows(num_rows: int, dim: int, *, seed: int, scale: float) -> np.ndarray:
  """float32[num_rows, dim] ~ Normal(0, scale^2), reproducible from `seed`."""
  return (np.random.default_rng(seed).standard_normal((num_rows, dim)) * scale).astype(np.float32)


def _assemble(vocab: core.Vocabulary, vectors: dict[int, np.ndarray], dim: int, *, seed: int,
              scale: float | None) -> np.ndarray:
  """Matrix with the given rows, random rows elsewhere, zero PAD row."""
  if scale is None:
    scale = float(np.std(np.stack(list(vectors.values())))) if vectors else 0.1
    scale = scale or 0.1
  matrix = random_rows(len(vocab), dim, seed=seed, scale=scale)
  for i, v in vectors.items():
    matrix[i] = v
  matrix[core.PAD_ID] = 0.0
  return matrix


def train_word2vec(sentences: Sequence[Sequence[str]], vocab: core.Vocabulary, *, dim: int = 200,
                   window: int = 5, epochs: int = 5, seed: int = 0, min_count: int = 1,
                   sg: int = 0, negative: int = 5, workers: int = 1) -> tuple[np.ndarray, Coverage]:
  """Trains word2vec (Mikolov et al. 2013) with gensim and aligns it with `vocab`.

  Liu & Lapata (2018) train 200-d word2vec on the training and development documents; pass those
  (tokenised) sentences here. With `workers=1` (the default) the result is deterministic for a seed:
  gensim's per-process salted `hash` is replaced by a stable CRC32.

  Args:
    sentences: token lists (e.g. train + dev sentences).
    vocab: the task vocabulary (rows of the result).
    dim: embedding size.
    window: context window.
    epochs: passes over `sentences`.
    seed: gensim seed, also seeds the random rows.
    min_count: gensim's min count (1: a vector for every word seen).
    sg: 1 skip-gram, 0 CBOW (gensim's default).
    negative: negative samples.
    workers: gensim threads; more than 1 is faster but not reproducible.

  Returns:
    (float32[len(vocab), dim], Coverage).
  """
  from gensim.models import word2vec  # pylint: disable=g-import-not-at-top
  sentences = [list(s) for s in sentences if len(s)]
  if not sentences:
    raise ValueError('train_word2vec got no non-empty sentences')
  model = word2vec.Word2Vec(sentences=sentences, vector_size=dim, window=window, min_count=min_count,
                            workers=workers, seed=seed, sg=sg, negative=negative, epochs=epochs,
                            hashfxn=_stable_hash)
  vectors = {}
  for i, token in enumerate(vocab.tokens):
    if i in (core.PAD_ID, core.UNK_ID):
      continue
    if token in model.wv.key_to_index:
      vectors[i] = np.asarray(model.wv[token], np.float32)
  coverage = Coverage(len(vectors), 0, len(vocab) - 2, f'word2vec trained on {len(sentences)} '
                      'sentences')
  _report(coverage)
  return _assemble(vocab, vectors, dim, seed=seed, scale=None), coverage


def _report(coverage: Coverage) -> None:
  print(coverage, flush=True)
  logging.info('%s', coverage)


def _open_text(path: str):
  if path.endswith('.gz'):
    return io.TextIOWrapper(gzip.open(path, 'rb'), encoding='utf-8', errors='strict')
  return open(path, encoding='utf-8', errors='strict')


def _parse_float_fields(fields: Sequence[str], where: str) -> np.ndarray:
  try:
    vector = np.asarray([float(x) for x in fields], np.float32)
  except ValueError:
    bad = next(x for x in fields if not _is_float(x))
    raise ValueError(f'{where}: malformed vector value {bad!r}') from None
  if not np.all(np.isfinite(vector)):
    raise ValueError(f'{where}: non-finite vector values')
  return vector


def _is_float(x: str) -> bool:
  try:
    float(x)
    return True
  except ValueError:
    return False


def _read_text_vectors(path: str, wanted: set[str]) -> tuple[dict[str, np.ndarray], int]:
  """Reads a GloVe (no header) or word2vec text (`count dim` header) file, keeping `wanted` words.

  Values are parsed only for wanted words (and checked on the first 1000 lines).

  Words that contain spaces (they occur in GloVe 840B) are handled: the last `dim` fields are the
  vector, the rest the word.
  """
  vectors: dict[str, np.ndarray] = {}
  dim = None
  with _open_text(path) as f:
    line_no = 0
    while True:
      try:
        line = f.readline()
      except UnicodeDecodeError as e:
        raise ValueError(f'{path}:{line_no + 1}: not valid UTF-8 ({e.reason})') from None
      if not line:
        break
      line_no += 1
      where = f'{path}:{line_no}'
      fields = line.rstrip('\n').rstrip('\r').rstrip(' ').split(' ')
      if line_no == 1 and len(fields) == 2 and all(x.isdigit() for x in fields):
        dim = int(fields[1])  # word2vec text header "count dim"
        if dim <= 0:
          raise ValueError(f'{where}: header declares dimension {dim}')
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
      if len(fields) < dim + 1:
        raise ValueError(f'{where}: expected a word and {dim} values, got {len(fields) - 1} '
                         f'field(s) after {fields[0]!r}')
      if len(fields) > dim + 1 and _is_float(fields[len(fields) - dim - 1]):
        raise ValueError(f'{where}: expected a word and {dim} values, got {len(fields) - 1} '
                         f'values after {fields[0]!r}')
      word = ' '.join(fields[:len(fields) - dim])
      if not word:
        raise ValueError(f'{where}: missing word before the vector')
      values = fields[len(fields) - dim:]
      if word in wanted or _needs_check(line_no):
        vector = _parse_float_fields(values, where)
        if word in wanted:
          vectors.setdefault(word, vector)
  if dim is None:
    raise ValueError(f'{path}: no vectors found')
  return vectors, dim


def _needs_check(line_no: int) -> bool:
  # Values of words we skip are still validated on the first lines, so a file in the wrong format
  # fails early and clearly even when few vocabulary words occur in it.
  return line_no <= 1000


def _read_binary_vectors(path: str, wanted: set[str]) -> tuple[dict[str, np.ndarray], int]:
  """Reads the word2vec C binary format: `count dim\\n`, then per word `word<space>` + dim float32."""
  opener = gzip.open if path.endswith('.gz') else open
  vectors: dict[str, np.ndarray] = {}
  with opener(path, 'rb') as f:
    header = f.readline()
    try:
      count, dim = (int(x) for x in header.split())
    except ValueError:
      raise ValueError(f'{path}: word2vec binary header must be "count dim", got {header[:80]!r}'
                       ) from None
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


def load_pretrained(path: str, vocab: core.Vocabulary, *, binary: bool | None = None,
                    seed: int = 0, scale: float | None = None,
                    expected_dim: int | None = None) -> tuple[np.ndarray, Coverage]:
  """Loads GloVe / word2vec vectors for the words of `vocab`.

  Formats: GloVe text (`word v1 ... vd` per line), word2vec text (the same with a `count dim` first
  line), word2vec binary (`binary=True`, or a `.bin`/`.bin.gz` name when `binary` is None); `.gz`
  files are read compressed. A word is looked up as is, then in lower case (the first vector of a
  word wins). Words without a vector and `<unk>` get Normal(0, scale^2) rows (scale
  defaults to the std of the found vectors) from `seed`; `<pad>` gets zeros. Coverage is printed,
  logged and returned.

  Args:
    path: the vector file.
    vocab: the task vocabulary.
    binary: the file is word2vec binary (None: guess from the name).
    seed: seed of the random rows.
    scale: std of the random rows (None: std of the loaded vectors).
    expected_dim: if given, the file's dimension must equal it.

  Returns:
    (float32[len(vocab), dim], Coverage).

  Raises:
    FileNotFoundError: `path` does not exist.
    ValueError: malformed lines/entries, naming `path:line` (text) or the entry number (binary).
  """
  if not os.path.exists(path):
    raise FileNotFoundError(f'embedding file not found: {path}')
  if binary is None:
    binary = path.endswith('.bin') or path.endswith('.bin.gz')
  words = [t for i, t in enumerate(vocab.tokens) if i not in (core.PAD_ID, core.UNK_ID)]
  wanted = set(words) | {t.lower() for t in words}
  reader = _read_binary_vectors if binary else _read_text_vectors
  raw, dim = reader(path, wanted)
  if expected_dim is not None and dim != expected_dim:
    raise ValueError(f'{path}: vectors have dimension {dim} but config asks for {expected_dim} '
                     '(data.embedding_dim)')
  vectors, lowercase = {}, 0
  for i, token in enumerate(vocab.tokens):
    if i in (core.PAD_ID, core.UNK_ID):
      continue
    if token in raw:
      vectors[i] = raw[token]
    elif token.lower() in raw:
      vectors[i] = raw[token.lower()]
      lowercase += 1
  coverage = Coverage(len(vectors), lowercase, len(vocab) - 2, path)
  _report(coverage)
  return _assemble(vocab, vectors, dim, seed=seed, scale=scale), coverage


def sentences_for_word2vec(token_lists: Iterable[Sequence[str]]) -> list[list[str]]:
  """Materialises non-empty token lists (gensim iterates its corpus several times)."""
  return [list(t) for t in token_lists if len(t)]
