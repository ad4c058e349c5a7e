"""Tests for jax_structured.data.embeddings: file formats, coverage, OOV rows, word2vec determinism."""
import gzip
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from jax_structured.data import core
from jax_structured.data import embeddings

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
  # The random rows have the scale of the found vectors.
  found = np.asarray([VECTORS[w] for w in ('the', 'cat', 'sat', 'paris')])
  big = embeddings.random_rows(20000, 3, seed=0, scale=float(np.std(found)))
  assert np.std(big) == pytest.approx(np.std(found), rel=0.02)


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
  with pytest.raises(ValueError, match='dimension 3 but config asks for 5'):
    embeddings.load_pretrained(path, VOCAB, expected_dim=5)
  with pytest.raises(FileNotFoundError, match='nope.txt'):
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
