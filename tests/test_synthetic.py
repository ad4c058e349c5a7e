"""Tests of the planted-tree synthetic data (`jax_structured.data.synthetic`, loader `synthetic_trees`)."""
import collections

import ml_collections
import numpy as np
import pytest
import scipy.optimize
import scipy.stats

from jax_structured import data
from jax_structured.data import synthetic

SIZES = dict(num_keys=8, num_colours=4, num_verbs=4, max_pairs=2, max_modifiers=4, min_length=5,
             max_length=14)


def _config(**overrides):
  config = synthetic.default_config()
  for key, value in overrides.items():
    config[key] = value
  return config


def _is_tree(heads):
  """Independent check: exactly one root and every word reaches ROOT without a cycle."""
  heads = [int(h) for h in heads]
  if sum(h == -1 for h in heads) != 1 or any(not -1 <= h < len(heads) or h == m
                                             for m, h in enumerate(heads)):
    return False
  for m in range(len(heads)):
    seen, x = set(), m
    while x != -1:
      if x in seen:
        return False
      seen.add(x)
      x = heads[x]
  return True


def _split_word(word):
  """Independent parse of a word by its spelling: ('verb'|'noun'|'modifier', stem, colour)."""
  stem, colour = word.rsplit('-', 1)
  if stem in ('sees', 'likes', 'finds', 'meets', 'feeds', 'hears', 'helps', 'calls'):
    return 'verb', stem, colour
  if stem.endswith("'s"):
    return 'modifier', stem[:-2], colour
  return 'noun', stem, colour


def _words(task, split):
  return [task.vocab.decode(e['tokens']) for e in task.splits[split].examples]


def _all_words(task):
  return {name: _words(task, name) for name in task.splits}


def _crossing(heads):
  arcs = [(min(m, int(x)), max(m, int(x))) for m, x in enumerate(heads) if x >= 0]
  return any(a < c < b < d for a, b in arcs for c, d in arcs)


def _tree_by_rule(words, nearest=True):
  """The planted tree re-derived from the grammar's rules, by sorting each word's candidates.

  nearest=False attaches every noun and modifier to its FARTHER candidate (the distractor).
  """
  parsed = [_split_word(w) for w in words]
  verbs = [i for i, p in enumerate(parsed) if p[0] == 'verb']
  heads = []
  for i, (kind, stem, _) in enumerate(parsed):
    if kind == 'verb':
      heads.append(-1 if i == verbs[0] else verbs[0])
      continue
    candidates = verbs if kind == 'noun' else [
        j for j, p in enumerate(parsed) if p[0] == 'noun' and p[1] == stem]
    assert len(candidates) == 2, (words, i)
    by_distance = sorted(candidates, key=lambda j: abs(j - i))
    assert abs(by_distance[0] - i) != abs(by_distance[1] - i), ('tie', words, i)
    heads.append(by_distance[0] if nearest else by_distance[1])
  return np.array(heads)


def _matches(words, heads):
  """Independent label rule: how many words have the colour of their head."""
  parsed = [_split_word(w) for w in words]
  return sum(h >= 0 and parsed[h][2] == p[2] for p, h in zip(parsed, heads))


@pytest.fixture(scope='module')
def task():
  return data.load(_config(num_train=3000, num_dev=50, num_test=1000, seed=3))


def test_registered_and_batched(task):
  assert 'synthetic_trees' in data.names()
  assert task.kind == 'sentence' and task.label_names == ['no_match', 'match']
  assert {k: len(v) for k, v in task.splits.items()} == {'train': 3000, 'validation': 50, 'test': 1000}
  assert len(task.vocab) == 2 + 4 * (4 + 2 * 8)  # pad, unk, coloured verbs, nouns, modifiers
  batch = next(task.splits['validation'].batches(16, shuffle=False))
  assert batch['tokens'].shape == batch['heads'].shape == (16, 14)
  assert batch['tokens'].dtype == np.int32 and batch['heads'].dtype == np.int32
  for row, length in zip(batch['heads'], batch['lengths']):
    assert _is_tree(row[:length]) and np.all(row[length:] == -1)


def test_trees_valid_and_recoverable_from_tokens(task):
  lengths = set()
  for w, example in zip(_words(task, 'train'), task.splits['train'].examples):
    heads = example['heads']
    assert _is_tree(heads), (w, heads)
    np.testing.assert_array_equal(_tree_by_rule(w), heads)
    np.testing.assert_array_equal(synthetic.planted_heads(w), heads)
    np.testing.assert_array_equal(task.vocab.encode(w), example['tokens'])
    # Two verbs of different colours; every animal a pair of nouns of different colours.
    parsed = [_split_word(x) for x in w]
    assert sum(p[0] == 'verb' for p in parsed) == 2 == len({p[2] for p in parsed if p[0] == 'verb'})
    nouns = collections.defaultdict(list)
    for p in parsed:
      if p[0] == 'noun':
        nouns[p[1]].append(p[2])
    assert all(len(v) == 2 and v[0] != v[1] for v in nouns.values()), w
    assert any(p[0] == 'modifier' for p in parsed)
    lengths.add(len(w))
  assert lengths == set(range(5, 15))
  # Non-projective trees are common (free word order), so the data exercises Chu-Liu-Edmonds.
  assert np.mean([_crossing(e['heads']) for e in task.splits['train'].examples]) > 0.3


def test_labels_balanced_and_read_off_the_gold_tree(task):
  labels = np.array([e['label'] for e in task.splits['train'].examples])
  assert 0.45 < labels.mean() < 0.55
  words = _words(task, 'train')
  for w, e in zip(words, task.splits['train'].examples):
    assert synthetic.label_from_tree(w, e['heads']) == e['label'] == int(_matches(w, e['heads']) > 0)
  # The rule needs the RIGHT heads. Read off other trees, the label is often wrong: the distractor
  # tree (every noun and modifier on its farther candidate) is below chance, and a neighbour
  # (left or right: the 'nearest word' heuristic) is little better than chance.
  def accuracy(tree):
    return np.mean([int(_matches(w, tree(w)) > 0) == y for w, y in zip(words, labels)])
  assert accuracy(lambda w: _tree_by_rule(w, nearest=False)) < 0.5
  assert accuracy(lambda w: np.arange(len(w)) - 1) < 0.65
  assert accuracy(lambda w: np.where(np.arange(1, len(w) + 1) < len(w), np.arange(1, len(w) + 1), -1)) < 0.65


def _logistic_regression(x, y, l2=1e-2):
  """Independent baseline: L2-regularised logistic regression fitted with L-BFGS (scipy)."""
  x = np.concatenate([x, np.ones((len(x), 1))], axis=1)

  def loss(w):
    z = x @ w
    nll = np.mean(np.logaddexp(0.0, z) - y * z)
    grad = x.T @ (1 / (1 + np.exp(-z)) - y) / len(y)
    return nll + l2 * w @ w, grad + 2 * l2 * w

  return scipy.optimize.minimize(loss, np.zeros(x.shape[1]), jac=True, method='L-BFGS-B').x


def _accuracy(w, x, y):
  return np.mean(((np.c_[x, np.ones(len(x))] @ w) > 0) == y)


def _bags(split, vocab_size, pairs=False):
  """Word counts, and with `pairs` also the products of every two counts (co-occurrences)."""
  counts = np.zeros((len(split.examples), vocab_size))
  for i, e in enumerate(split.examples):
    np.add.at(counts[i], e['tokens'], 1.0)
  if pairs:
    upper = np.triu_indices(vocab_size)
    counts = np.concatenate([counts, (counts[:, :, None] * counts[:, None, :])[:, upper[0], upper[1]]],
                            axis=1)
  return counts, np.array([e['label'] for e in split.examples], np.float64)


def test_bag_of_words_classifiers_are_near_chance(task):
  for pairs in (False, True):  # linear in the bag, and quadratic (which word co-occurs with which)
    x_train, y_train = _bags(task.splits['train'], len(task.vocab), pairs)
    x_test, y_test = _bags(task.splits['test'], len(task.vocab), pairs)
    w = _logistic_regression(x_train, y_train)
    # 1000 test examples: chance +- 2.5 standard errors.
    assert 0.42 < _accuracy(w, x_test, y_test) < 0.58, (pairs, _accuracy(w, x_test, y_test))
  # The same regression on one number read off the gold TREE (modifiers with their head's colour)
  # separates the classes perfectly: the information is in the tree, not in the bag.
  def tree_feature(split_name):
    return np.array([[_matches(w, e['heads'])] for w, e in zip(
        _words(task, split_name), task.splits[split_name].examples)], np.float64)
  w_tree = _logistic_regression(tree_feature('train'), y_train, l2=1e-5)
  assert _accuracy(w_tree, tree_feature('test'), y_test) == 1.0


def test_label_independent_of_the_bag_exactly():
  """A small grammar where bags repeat: per bag, the label is a fair coin (chi-square test)."""
  sizes = dict(num_keys=2, num_colours=3, num_verbs=1, max_pairs=1, max_modifiers=2, min_length=5,
               max_length=6)
  rng = np.random.default_rng(0)
  table = collections.defaultdict(lambda: [0, 0])
  for _ in range(3000):
    label = int(rng.integers(2))
    words, _ = synthetic.generate_sentence(rng, label=label, **sizes)
    table[tuple(sorted(words))][label] += 1
  counts = np.array([v for v in table.values() if sum(v) >= 10])
  assert len(counts) >= 20 and counts.sum() > 2500
  assert scipy.stats.chi2_contingency(counts)[1] > 1e-3
  # The bag does not determine the label, but the order does: both labels occur for every bag.
  assert np.all(counts > 0)


def test_same_bag_different_order_different_label():
  for seed in range(20):
    positive, heads1 = synthetic.generate_sentence(np.random.default_rng(seed), label=1, **SIZES)
    negative, heads0 = synthetic.generate_sentence(np.random.default_rng(seed), label=0, **SIZES)
    assert sorted(positive) == sorted(negative) and positive != negative
    assert synthetic.label_from_tree(positive, heads1) == 1
    assert synthetic.label_from_tree(negative, heads0) == 0


def test_deterministic_per_seed():
  a = data.load(_config(num_train=20, num_dev=5, num_test=5, seed=7))
  b = data.load(_config(num_train=20, num_dev=5, num_test=5, seed=7))
  c = data.load(_config(num_train=20, num_dev=5, num_test=5, seed=8))
  assert _all_words(a) == _all_words(b)
  for x, y in zip(a.splits['train'].examples, b.splits['train'].examples):
    np.testing.assert_array_equal(x['heads'], y['heads'])
    assert x['label'] == y['label']
  assert _all_words(a)['train'] != _all_words(c)['train']
  assert _all_words(a)['train'] != _all_words(a)['test']


def test_parse_kind_is_the_same_sentences_as_a_treebank():
  """kind 'parse' (the default job's supervised-parser variant): the same words and planted heads as
  kind 'sentence' for the same seed, tags = word kinds, relation 'root' exactly at the root, batched
  as the universal_dependencies loader's parse examples are."""
  sentences = data.load(_config(num_train=40, num_dev=5, num_test=5, seed=4))
  treebank = data.load(_config(num_train=40, num_dev=5, num_test=5, seed=4, kind='parse'))
  assert treebank.kind == 'parse' and treebank.label_names == []
  tags, relations = treebank.extras['tag_vocab'], treebank.extras['relation_vocab']
  assert treebank.extras['relation_names'] == list(relations.tokens)
  for split in ('train', 'validation', 'test'):
    for s, t in zip(sentences.splits[split].examples, treebank.splits[split].examples):
      np.testing.assert_array_equal(s['tokens'], t['tokens'])
      np.testing.assert_array_equal(s['heads'], t['heads'])
      words = sentences.vocab.decode(s['tokens'])
      assert tags.decode(t['tags']) == [_split_word(w)[0] for w in words]
      assert relations.decode(t['relations']) == ['root' if h < 0 else 'dep' for h in s['heads']]
      assert 'label' not in t
  batch = next(treebank.splits['validation'].batches(4, shuffle=False))
  assert {'tokens', 'tags', 'heads', 'relations', 'lengths'} <= set(batch)
  with pytest.raises(ValueError, match="config.data.kind='pair'"):
    synthetic.validate_config(_config(kind='pair'))


def test_bad_config_is_an_error():
  with pytest.raises(ValueError, match='config.data.num_sentences'):
    synthetic.validate_config(ml_collections.ConfigDict(dict(synthetic.DEFAULTS, num_sentences=3)))
  with pytest.raises(ValueError, match='config.data.max_pairs'):
    synthetic.validate_config(_config(max_pairs=0))
  with pytest.raises(ValueError, match='config.data.num_keys'):
    synthetic.validate_config(_config(num_keys=2, max_pairs=3))
  with pytest.raises(ValueError, match='config.data.num_colours'):
    synthetic.validate_config(_config(num_colours=2))
  with pytest.raises(ValueError, match='config.data.max_length'):
    synthetic.validate_config(_config(min_length=11, max_length=9))
  with pytest.raises(ValueError, match='config.data.min_length'):
    synthetic.validate_config(_config(min_length=30, max_length=40))
  with pytest.raises(ValueError, match='config.data.bucket_boundaries'):
    synthetic.validate_config(_config(bucket_boundaries=(8, 4)))
  with pytest.raises(ValueError, match='label'):
    synthetic.generate_sentence(np.random.default_rng(0), label=2, **SIZES)
  with pytest.raises(ValueError, match="'purple' is not a word"):
    synthetic.planted_heads(['cat-red', 'sees-blue', 'purple'])
  with pytest.raises(ValueError, match='no verb'):
    synthetic.planted_heads(['cat-red', "cat's-blue"])
  with pytest.raises(ValueError, match='no noun of its animal'):
    synthetic.planted_heads(['cat-red', "dog's-red", 'sees-blue', 'cat-blue'])
  with pytest.raises(ValueError, match='equally near'):  # the noun between the two verbs
    synthetic.planted_heads(['sees-red', 'cat-red', 'likes-blue', "cat's-red"])
  with pytest.raises(ValueError, match='heads of shape'):
    synthetic.label_from_tree(['sees-red', 'cat-red'], [-1])
  # A hand-made sentence: nouns on the nearest verb, the modifier on the nearest noun of its animal.
  words = ['cat-red', 'sees-red', "cat's-blue", 'dog-gold', 'likes-blue', 'cat-blue']
  np.testing.assert_array_equal(synthetic.planted_heads(words), [1, -1, 0, 4, 1, 4])
  assert synthetic.label_from_tree(words, [1, -1, 0, 4, 1, 4]) == 1  # cat-red on sees-red
  assert synthetic.label_from_tree(words, [4, -1, 5, 4, 1, 1]) == 1  # cat's-blue on cat-blue
  assert synthetic.label_from_tree(words, [4, -1, 0, 1, 1, 1]) == 0
  # Names past the built-in lists are still parseable (larger vocabularies).
  words = synthetic.word_list(num_keys=20, num_colours=9, num_verbs=9)
  assert len(set(words)) == len(words) == 9 * (9 + 2 * 20)
  assert [synthetic.parse_word(w) for w in ('k19-c8', "k19's-red", 'v8-blue', "cat's-blue")] == [
      ('noun', 19, 8), ('modifier', 19, 0), ('verb', 8, 1), ('modifier', 0, 1)]
