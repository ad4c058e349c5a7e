"""Tests for jax_structured.data.batching: bucketing, padding, shuffling, stream batches."""
import collections

import numpy as np
import pytest

from jax_structured.data import batching
from jax_structured.data import core


def _sentences(n, seed=0, max_len=40, heads=False):
  rng = np.random.default_rng(seed)
  out = []
  for i in range(n):
    length = int(rng.integers(1, max_len + 1))
    e = {'tokens': rng.integers(2, 50, size=length).astype(np.int32), 'label': i % 3}
    if heads:
      e['heads'] = rng.integers(-1, length, size=length).astype(np.int32)
    out.append(e)
  return out


def _documents(n, seed=0):
  rng = np.random.default_rng(seed)
  out = []
  for i in range(n):
    num = int(rng.integers(1, 12))
    out.append({'sentences': [rng.integers(2, 50, size=int(rng.integers(1, 20))).astype(np.int32)
                              for _ in range(num)], 'label': i % 5})
  return out


def _pairs(n, seed=0):
  rng = np.random.default_rng(seed)
  return [{'premise': rng.integers(2, 50, size=int(rng.integers(1, 30))).astype(np.int32),
           'hypothesis': rng.integers(2, 50, size=int(rng.integers(1, 12))).astype(np.int32),
           'label': i % 3} for i in range(n)]


def _parses(n, seed=0):
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(n):
    length = int(rng.integers(1, 25))
    out.append({'tokens': rng.integers(2, 50, size=length).astype(np.int32),
                'tags': rng.integers(1, 17, size=length).astype(np.int32),
                'heads': rng.integers(-1, length, size=length).astype(np.int32),
                'relations': rng.integers(1, 30, size=length).astype(np.int32),
                'chars': rng.integers(1, 259, size=(length, 6)).astype(np.int32)})
  return out


def test_bucket_length():
  assert batching.bucket_length(1, (8, 16)) == 8
  assert batching.bucket_length(8, (8, 16)) == 8
  assert batching.bucket_length(9, (8, 16)) == 16
  assert batching.bucket_length(17, (8, 16)) == 32
  assert batching.bucket_length(33, (8, 16)) == 64
  assert batching.bucket_length(64, (8, 16)) == 64


def _real_rows(batches, key):
  """{example index: the unpadded row} over all real rows."""
  seen = collections.Counter()
  for b in batches:
    for row in range(len(b['example_mask'])):
      if b['example_mask'][row] == 1:
        seen[int(b['example_index'][row])] += 1
  return seen


@pytest.mark.parametrize('kind,make', [('sentence', _sentences), ('document', _documents),
                                       ('pair', _pairs), ('parse', _parses)])
@pytest.mark.parametrize('shuffle', [False, True])
def test_every_example_exactly_once_and_padding(kind, make, shuffle):
  examples = make(53)
  batches = list(batching.make_batches(examples, kind, 8, shuffle=shuffle, seed=3, epoch=1))
  seen = _real_rows(batches, kind)
  assert sorted(seen) == list(range(len(examples)))
  assert set(seen.values()) == {1}
  assert len(batches) == batching.num_batches(examples, kind, 8)
  for b in batches:
    mask = b['example_mask']
    assert mask.dtype == np.float32 and mask.shape == (8,)
    # Real rows first, then padding rows; padding rows have index -1.
    real = int(mask.sum())
    assert np.all(mask[:real] == 1) and np.all(mask[real:] == 0)
    assert np.all(b['example_index'][real:] == -1)
    for row in range(real):
      e = examples[int(b['example_index'][row])]
      _check_row(kind, b, row, e)


def _check_row(kind, b, row, e):
  """Checks one padded row against its example: content, lengths, padding values, dtypes."""
  for v in b.values():
    assert v.dtype in (np.int32, np.float32)
  if kind in ('sentence', 'parse'):
    n = len(e['tokens'])
    assert b['lengths'][row] == n
    np.testing.assert_array_equal(b['tokens'][row, :n], e['tokens'])
    assert np.all(b['tokens'][row, n:] == 0)
    if kind == 'parse':
      for key in ('tags', 'heads', 'relations'):
        np.testing.assert_array_equal(b[key][row, :n], e[key])
      assert np.all(b['heads'][row, n:] == -1)
      assert np.all(b['tags'][row, n:] == 0) and np.all(b['relations'][row, n:] == 0)
      assert b['chars'].shape[1:] == (b['tokens'].shape[1], 6)
      np.testing.assert_array_equal(b['chars'][row, :n], e['chars'])
      assert np.all(b['chars'][row, n:] == 0)
  elif kind == 'pair':
    for key in ('premise', 'hypothesis'):
      n = len(e[key])
      assert b[f'{key}_lengths'][row] == n
      np.testing.assert_array_equal(b[key][row, :n], e[key])
      assert np.all(b[key][row, n:] == 0)
  elif kind == 'document':
    s = len(e['sentences'])
    assert b['num_sentences'][row] == s
    assert np.all(b['sentence_lengths'][row, s:] == 0)
    assert np.all(b['tokens'][row, s:] == 0)
    for j, sentence in enumerate(e['sentences']):
      assert b['sentence_lengths'][row, j] == len(sentence)
      np.testing.assert_array_equal(b['tokens'][row, j, :len(sentence)], sentence)
      assert np.all(b['tokens'][row, j, len(sentence):] == 0)
  if 'label' in e:
    assert b['label'][row] == e['label']


def test_shapes_static_per_bucket_and_from_boundaries():
  examples = _sentences(200, max_len=70)
  boundaries = (10, 20, 40)
  shapes = collections.defaultdict(set)
  for b in batching.make_batches(examples, 'sentence', 16, shuffle=True, seed=0, epoch=0,
                                 bucket_boundaries=boundaries):
    t = b['tokens'].shape[1]
    assert t in (10, 20, 40, 80)
    # The bucket is the smallest allowed size that fits the longest real row.
    longest = int(b['lengths'][b['example_mask'] == 1].max())
    assert t == batching.bucket_length(longest, boundaries)
    # Every real row belongs to this bucket (not merely fits it).
    assert all(batching.bucket_length(int(n), boundaries) == t
               for n in b['lengths'][b['example_mask'] == 1])
    shapes[t].add(tuple(v.shape for v in b.values()))
  assert all(len(s) == 1 for s in shapes.values())


def test_documents_bucketed_by_sentence_count_and_length():
  examples = _documents(120)
  outer, inner = (2, 4, 8), (4, 8, 16)
  for b in batching.make_batches(examples, 'document', 8, shuffle=False,
                                 bucket_boundaries=(outer, inner)):
    s, t = b['tokens'].shape[1:]
    real = b['example_mask'] == 1
    for n, lens in zip(b['num_sentences'][real], b['sentence_lengths'][real]):
      assert batching.bucket_length(int(n), outer) == s
      assert batching.bucket_length(int(lens.max()), inner) == t
    assert b['sentence_lengths'].shape == (8, s) and b['num_sentences'].shape == (8,)


def test_determinism_and_epochs_differ():
  examples = _sentences(100)
  def order(seed, epoch):
    return [tuple(b['example_index']) for b in batching.make_batches(
        examples, 'sentence', 4, shuffle=True, seed=seed, epoch=epoch)]
  assert order(0, 0) == order(0, 0)
  assert order(0, 0) != order(0, 1)
  assert order(0, 0) != order(1, 0)
  unshuffled = [tuple(b['example_index']) for b in batching.make_batches(
      examples, 'sentence', 4, shuffle=False, seed=0, epoch=5)]
  assert unshuffled == [tuple(b['example_index']) for b in batching.make_batches(
      examples, 'sentence', 4, shuffle=False, seed=9, epoch=0)]


def test_padding_rows_are_masked_copies_not_empty():
  examples = _sentences(5)
  (b,) = list(batching.make_batches(examples, 'sentence', 8, shuffle=False,
                                    bucket_boundaries=(64,)))
  np.testing.assert_array_equal(b['example_mask'], [1] * 5 + [0] * 3)
  assert np.all(b['lengths'] >= 1)


def test_heads_padded_with_minus_one():
  examples = _sentences(10, heads=True)
  for b in batching.make_batches(examples, 'sentence', 4, shuffle=False):
    for row in range(4):
      n = b['lengths'][row]
      assert np.all(b['heads'][row, n:] == -1)
      np.testing.assert_array_equal(b['heads'][row, :n],
                                    examples[b['example_index'][row]]['heads']
                                    if b['example_index'][row] >= 0 else b['heads'][row, :n])


def test_num_shards_and_bad_input():
  examples = _sentences(10)
  with pytest.raises(ValueError, match='divisible by num_shards=8'):
    next(batching.make_batches(examples, 'sentence', 12, shuffle=False, num_shards=8))
  assert all(b['tokens'].shape[0] == 16 for b in batching.make_batches(
      examples, 'sentence', 16, shuffle=False, num_shards=8))
  with pytest.raises(ValueError, match='example #1 has an empty'):
    next(batching.make_batches([examples[0], {'tokens': np.zeros(0, np.int32), 'label': 0}],
                               'sentence', 2, shuffle=False))
  with pytest.raises(ValueError, match='unknown kind'):
    next(batching.make_batches(examples, 'sentences', 2, shuffle=False))
  with pytest.raises(ValueError, match='strictly increasing'):
    next(batching.make_batches(examples, 'sentence', 2, shuffle=False, bucket_boundaries=(8, 4)))


def test_lm_per_sentence_batches():
  rng = np.random.default_rng(0)
  examples = [{'tokens': rng.integers(2, 30, size=int(rng.integers(2, 20))).astype(np.int32)}
              for _ in range(11)]
  total = 0
  for b in batching.make_batches(examples, 'lm', 4, shuffle=True, seed=1, epoch=0):
    for row in np.nonzero(b['example_mask'])[0]:
      tokens = examples[b['example_index'][row]]['tokens']
      n = len(tokens) - 1
      assert b['lengths'][row] == n
      np.testing.assert_array_equal(b['inputs'][row, :n], tokens[:-1])
      np.testing.assert_array_equal(b['targets'][row, :n], tokens[1:])
      np.testing.assert_array_equal(b['mask'][row], np.arange(b['mask'].shape[1]) < n)
      total += n
  assert total == sum(len(e['tokens']) - 1 for e in examples)


def _reference_ptb_iterator(raw, batch_size, num_steps):
  """Zaremba et al.'s reader (tensorflow/models ptb reader), which drops the tail."""
  raw = np.asarray(raw)
  batch_len = len(raw) // batch_size
  data = raw[:batch_size * batch_len].reshape(batch_size, batch_len)
  for i in range((batch_len - 1) // num_steps):
    yield (data[:, i * num_steps:(i + 1) * num_steps],
           data[:, i * num_steps + 1:(i + 1) * num_steps + 1])


@pytest.mark.parametrize('length', [60, 67])
def test_lm_stream_batches(length):
  stream = np.arange(100, 100 + length)
  b, t = 4, 5
  batches = list(batching.lm_stream_batches(stream, b, t))
  assert all(x['inputs'].shape == (b, t) for x in batches)
  # Every token but the first of each row is a target exactly once; targets follow inputs.
  targets = np.concatenate([x['targets'][x['mask'] == 1] for x in batches])
  rows = np.array_split(stream, b)
  expected = np.concatenate([r[1:] for r in rows])
  np.testing.assert_array_equal(np.sort(targets), np.sort(expected))
  for x in batches:
    m = x['mask'] == 1
    np.testing.assert_array_equal(x['targets'][m], x['inputs'][m] + 1)
    np.testing.assert_array_equal(x['lengths'], m.sum(1))
  # Rows continue across steps (state carrying).
  for x, y in zip(batches, batches[1:]):
    np.testing.assert_array_equal(y['inputs'][:, 0][y['mask'][:, 0] == 1],
                                  x['targets'][:, -1][y['mask'][:, 0] == 1])
  if length % b == 0:  # equals the reference reader on the full steps it produces
    for x, (ref_in, ref_tg) in zip(batches, _reference_ptb_iterator(stream, b, t)):
      np.testing.assert_array_equal(x['inputs'], ref_in)
      np.testing.assert_array_equal(x['targets'], ref_tg)


def test_split_routes_lm_stream():
  stream = np.arange(2, 42, dtype=np.int32)
  split = core.Split('train', 'lm', [{'tokens': stream}], num_steps=3)
  batches = list(split.batches(2, shuffle=True, seed=0, epoch=0))
  assert all(x['inputs'].shape == (2, 3) for x in batches)
  assert sum(int(x['mask'].sum()) for x in batches) == len(stream) - 2
  with pytest.raises(ValueError, match='too short'):
    list(batching.lm_stream_batches(np.arange(3), 2, 3))


def test_empty_boundaries_give_one_bucket_of_the_longest():
  examples = _sentences(30, max_len=13)
  batches = list(batching.make_batches(examples, 'sentence', 8, shuffle=True, seed=0,
                                       bucket_boundaries=()))
  longest = max(len(e['tokens']) for e in examples)
  assert {b['tokens'].shape for b in batches} == {(8, longest)}
  assert len(batches) == 4
  docs = _documents(20)
  shapes = {b['tokens'].shape for b in batching.make_batches(docs, 'document', 4, shuffle=False,
                                                             bucket_boundaries=())}
  assert shapes == {(4, max(len(d['sentences']) for d in docs),
                     max(len(s) for d in docs for s in d['sentences']))}


def test_translation_batches():
  rng = np.random.default_rng(0)
  examples = [{'source': rng.integers(2, 9, size=int(rng.integers(1, 20))).astype(np.int32),
               'target': rng.integers(2, 9, size=int(rng.integers(1, 30))).astype(np.int32)}
              for _ in range(17)]
  seen = 0
  for b in batching.make_batches(examples, 'translation', 4, shuffle=True, seed=2):
    for row in np.nonzero(b['example_mask'])[0]:
      e = examples[b['example_index'][row]]
      for key in ('source', 'target'):
        n = len(e[key])
        assert b[f'{key}_lengths'][row] == n
        np.testing.assert_array_equal(b[key][row, :n], e[key])
        assert np.all(b[key][row, n:] == 0)
      seen += 1
  assert seen == len(examples)
