"""Tests of the planted-tree synthetic data (`jax_structured.data.synthetic`, loader `synthetic_trees`)."""
import collections

import ml_collections
import numpy as np
import pytest
import scipy.optimize
import scipy.stats

from jax_structured import data
from jax_structured.data import synthetic

SIZES = dict(num_keys=8, num_colours=4, num_verbs=4, max_pairs=2, max_modifiers=4, min_length=4,
             max_length=13)


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
  """Independent parse of a word by its spelling: ('verb'|'noun'|'modifier', animal, colour)."""
  if '-' not in word:
    return 'verb', word, None
  animal, colour = word.rsplit('-', 1)
  if animal.endswith("'s"):
    return 'modifier', animal[:-2], colour
  return 'noun', animal, colour


def _words(task, split):
  return [task.vocab.decode(e['tokens']) for e in task.splits[split].examples]


def _all_words(task):
  return {name: _words(task, name) for name in task.splits}


def _crossing(heads):
  arcs = [(min(m, int(x)), max(m, int(x))) for m, x in enumerate(heads) if x >= 0]
  return any(a < c < b < d for a, b in arcs for c, d in arcs)


def _tree_by_rule(words, same_side=True):
  """The planted tree re-derived from the grammar's rules (same_side=False: the distractor noun)."""
  parsed = [_split_word(w) for w in words]
  verb = [i for i, p in enumerate(parsed) if p[0] == 'verb'][0]
  heads = []
  for i, (kind, animal, _) in enumerate(parsed):
    if kind == 'verb':
      heads.append(-1)
    elif kind == 'noun':
      heads.append(verb)
    else:
      nouns = [j for j, p in enumerate(parsed) if p[0] == 'noun' and p[1] == animal]
      if len(nouns) == 2:  # a pair: the noun on the rule's side of the verb
        nouns = [j for j in nouns if ((j < verb) == (i < verb)) == same_side]
      assert len(nouns) == 1, (words, i)
      heads.append(nouns[0])
  return np.array(heads)


def _matches(words, heads):
  """Independent label rule: how many modifiers have the colour of their head noun."""
  parsed = [_split_word(w) for w in words]
  return sum(p[0] == 'modifier' and parsed[h][0] == 'noun' and parsed[h][2] == p[2]
             for p, h in zip(parsed, heads))


@pytest.fixture(scope='module')
def task():
  return data.load(_config(num_train=3000, num_dev=50, num_test=1000, seed=3))


def test_registered_and_batched(task):
  assert 'synthetic_trees' in data.names()
  assert task.kind == 'sentence' and task.label_names == ['no_match', 'match']
  assert {k: len(v) for k, v in task.splits.items()} == {'train': 3000, 'validation': 50, 'test': 1000}
  assert len(task.vocab) == 2 + 4 + 2 * 8 * 4  # pad, unk, verbs, nouns, modifiers
  batch = next(task.splits['validation'].batches(16, shuffle=False))
  assert batch['tokens'].shape == batch['heads'].shape == (16, 13)
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
    # Every animal is a pair of nouns of different colours, one on each side of the verb.
    parsed = [_split_word(x) for x in w]
    verb = [i for i, p in enumerate(parsed) if p[0] == 'verb'][0]
    nouns = collections.defaultdict(list)
    for i, p in enumerate(parsed):
      if p[0] == 'noun':
        nouns[p[1]].append((i < verb, p[2]))
    assert all(len(v) == 2 and v[0][0] != v[1][0] and v[0][1] != v[1][1] for v in nouns.values()), w
    lengths.add(len(w))
  assert lengths == set(range(4, 14))
  # Non-projective trees are common (free word order), so the data exercises Chu-Liu-Edmonds.
  assert np.mean([_crossing(e['heads']) for e in task.splits['train'].examples]) > 0.3


def test_labels_balanced_and_read_off_the_gold_tree(task):
  labels = np.array([e['label'] for e in task.splits['train'].examples])
  assert 0.45 < labels.mean() < 0.55
  for w, e in zip(_words(task, 'train'), task.splits['train'].examples):
    assert synthetic.label_from_tree(w, e['heads']) == e['label'] == int(_matches(w, e['heads']) > 0)
  # The rule needs the RIGHT head: on the tree that attaches every modifier to the other noun of its
  # class (the distractor across the verb) it is wrong on most sentences.
  distractor = [int(_matches(w, _tree_by_rule(w, same_side=False)) > 0) for w in _words(task, 'train')]
  assert np.mean(np.array(distractor) == labels) < 0.5


def test_head_side_across():
  task = data.load(_config(num_train=400, num_dev=5, num_test=5, head_side='across'))
  crossing = []
  for w, e in zip(_words(task, 'train'), task.splits['train'].examples):
    np.testing.assert_array_equal(_tree_by_rule(w, same_side=False), e['heads'])
    np.testing.assert_array_equal(synthetic.planted_heads(w, 'across'), e['heads'])
    assert _is_tree(e['heads']) and e['label'] == int(_matches(w, e['heads']) > 0)
    crossing.append(_crossing(e['heads']))
  assert 0.4 < np.mean([e['label'] for e in task.splits['train'].examples]) < 0.6
  assert np.mean(crossing) > 0.5  # every modifier's arc spans the verb


def test_single_nouns_with_pair_rate():
  task = data.load(_config(num_train=600, num_dev=5, num_test=5, pair_rate=0.5))
  singles = 0
  for w, e in zip(_words(task, 'train'), task.splits['train'].examples):
    np.testing.assert_array_equal(_tree_by_rule(w), e['heads'])
    assert _is_tree(e['heads']) and e['label'] == int(_matches(w, e['heads']) > 0)
    animals = collections.Counter(p[1] for p in map(_split_word, w) if p[0] == 'noun')
    assert set(animals.values()) <= {1, 2}
    singles += sum(v == 1 for v in animals.values())
    if e['label'] == 0:  # a modifier of a single noun never has its colour then
      assert synthetic.label_from_tree(w, e['heads']) == 0
  assert singles > 200
  assert 0.4 < np.mean([e['label'] for e in task.splits['train'].examples]) < 0.6


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
  sizes = dict(num_keys=2, num_colours=3, num_verbs=1, max_pairs=1, max_modifiers=2, min_length=4,
               max_length=5)
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
  for rate in (0.0, 1.5):
    with pytest.raises(ValueError, match='config.data.pair_rate'):
      synthetic.validate_config(_config(pair_rate=rate))
  with pytest.raises(ValueError, match='config.data.head_side'):
    synthetic.validate_config(_config(head_side='left'))
  with pytest.raises(ValueError, match='head_side'):
    synthetic.planted_heads(['cat-red', 'sees', 'cat-blue'], 'left')
  # A single noun of its class is the head of a modifier wherever it stands.
  np.testing.assert_array_equal(synthetic.planted_heads(["cat's-red", 'cat-red', 'sees'], 'across'),
                                [1, 2, -1])
  with pytest.raises(ValueError, match='label'):
    synthetic.generate_sentence(np.random.default_rng(0), label=2, **SIZES)
  with pytest.raises(ValueError, match='not a word'):
    synthetic.planted_heads(['cat-red', 'sees', 'purple'])
  with pytest.raises(ValueError, match='exactly one verb'):
    synthetic.planted_heads(['cat-red', 'sees', 'cat-blue', 'likes'])
  with pytest.raises(ValueError, match="no noun 'dog'"):
    synthetic.planted_heads(['cat-red', "dog's-red", 'sees', 'cat-blue'])
  with pytest.raises(ValueError, match='same side'):
    synthetic.planted_heads(['cat-red', 'cat-blue', 'sees'])
  # Names past the built-in lists are still parseable (larger vocabularies).
  words = synthetic.word_list(num_keys=20, num_colours=9, num_verbs=9)
  assert len(set(words)) == len(words) == 9 + 2 * 20 * 9
  assert [synthetic.parse_word(w) for w in ('k19-c8', "k19's-red", 'v8', "cat's-blue")] == [
      ('noun', 19, 8), ('modifier', 19, 0), ('verb', 8, -1), ('modifier', 0, 1)]
