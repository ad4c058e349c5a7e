"""Tests of the planted-tree synthetic data (`jax_structured.data.synthetic`, loader `synthetic_trees`)."""
import ml_collections
import numpy as np
import pytest
import scipy.optimize

from jax_structured import data
from jax_structured.data import synthetic


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


def _words(task, split):
  return [task.vocab.decode(e['tokens']) for e in task.splits[split].examples]


def _all_words(task):
  return {name: _words(task, name) for name in task.splits}


@pytest.fixture(scope='module')
def task():
  return data.load(_config(num_train=3000, num_dev=50, num_test=1000, seed=3))


def test_registered_and_batched(task):
  assert 'synthetic_trees' in data.names()
  assert task.kind == 'sentence' and task.label_names == ['objects', 'subjects']
  assert {k: len(v) for k, v in task.splits.items()} == {'train': 3000, 'validation': 50, 'test': 1000}
  batch = next(task.splits['validation'].batches(16, shuffle=False))
  assert batch['tokens'].shape == batch['heads'].shape == (16, 13)
  assert batch['tokens'].dtype == np.int32 and batch['heads'].dtype == np.int32
  for row, length in zip(batch['heads'], batch['lengths']):
    assert _is_tree(row[:length]) and np.all(row[length:] == -1)


def test_trees_valid_and_recoverable_from_tokens(task):
  words = _words(task, 'train')
  lengths = set()
  for w, example in zip(words, task.splits['train'].examples):
    heads = example['heads']
    assert _is_tree(heads), (w, heads)
    np.testing.assert_array_equal(synthetic.planted_heads(w), heads)
    np.testing.assert_array_equal(task.vocab.encode(w), example['tokens'])
    lengths.add(len(w))
  assert lengths == {4, 6, 8, 10, 12}  # verb + even nouns + odd modifiers
  # Non-projective trees occur (free word order), so the data exercises Chu-Liu-Edmonds.
  def crossing(h):
    arcs = [(min(m, int(x)), max(m, int(x))) for m, x in enumerate(h) if x >= 0]
    return any(a < c < b < d for a, b in arcs for c, d in arcs)
  assert np.mean([crossing(e['heads']) for e in task.splits['train'].examples]) > 0.2


def test_labels_balanced_and_read_off_the_gold_tree(task):
  labels = np.array([e['label'] for e in task.splits['train'].examples])
  assert 0.45 < labels.mean() < 0.55
  for w, e in zip(_words(task, 'train'), task.splits['train'].examples):
    assert synthetic.label_from_tree(w, e['heads']) == e['label']
  # The rule needs the RIGHT tree: on the tree "every modifier hangs from the nearest noun to its
  # left" (same word classes, local attachments) it is far from perfect.
  def nearest_left_noun_tree(w):
    heads = synthetic.planted_heads(w).copy()
    last = -1
    for i, x in enumerate(w):
      kind = synthetic.parse_word(x)[0]
      if kind == 'noun':
        last = i
      elif kind == 'modifier' and last >= 0:
        heads[i] = last
    return heads
  wrong = [synthetic.label_from_tree(w, nearest_left_noun_tree(w)) for w in _words(task, 'train')]
  assert np.mean(np.array(wrong) == labels) < 0.8


def _logistic_regression(x, y, l2=1e-2):
  """Independent baseline: L2-regularised logistic regression fitted with L-BFGS (scipy)."""
  x = np.concatenate([x, np.ones((len(x), 1))], axis=1)

  def loss(w):
    z = x @ w
    nll = np.mean(np.logaddexp(0.0, z) - y * z)
    grad = x.T @ (1 / (1 + np.exp(-z)) - y) / len(y)
    return nll + l2 * w @ w, grad + 2 * l2 * w

  return scipy.optimize.minimize(loss, np.zeros(x.shape[1]), jac=True, method='L-BFGS-B').x


def _bags(split, vocab_size):
  counts = np.zeros((len(split.examples), vocab_size))
  for i, e in enumerate(split.examples):
    np.add.at(counts[i], e['tokens'], 1.0)
  return counts, np.array([e['label'] for e in split.examples], np.float64)


def test_bag_of_words_classifier_is_near_chance(task):
  x_train, y_train = _bags(task.splits['train'], len(task.vocab))
  x_test, y_test = _bags(task.splits['test'], len(task.vocab))
  w = _logistic_regression(x_train, y_train)
  test_acc = np.mean(((np.c_[x_test, np.ones(len(x_test))] @ w) > 0) == y_test)
  train_acc = np.mean(((np.c_[x_train, np.ones(len(x_train))] @ w) > 0) == y_train)
  assert 0.42 < test_acc < 0.58, test_acc  # 1000 test examples: chance +- 2.5 standard errors
  assert train_acc < 0.6, train_acc
  # The same regression on two counts read off the gold TREE (dependents of the nouns before / after
  # the verb) separates the classes perfectly: the information is in the tree, not in the bag.
  def tree_counts(split, words):
    rows = []
    for w, e in zip(words, split.examples):
      verb = [i for i, x in enumerate(w) if synthetic.parse_word(x)[0] == 'verb'][0]
      noun_heads = [int(h) for h in e['heads'] if h >= 0 and synthetic.parse_word(w[h])[0] == 'noun']
      rows.append([sum(h < verb for h in noun_heads), sum(h > verb for h in noun_heads)])
    return np.array(rows, np.float64)
  w_tree = _logistic_regression(tree_counts(task.splits['train'], _words(task, 'train')), y_train,
                                l2=1e-5)
  f_test = tree_counts(task.splits['test'], _words(task, 'test'))
  assert np.mean(((np.c_[f_test, np.ones(len(f_test))] @ w_tree) > 0) == y_test) == 1.0


def test_same_bag_different_order_different_label():
  sizes = dict(num_keys=8, num_verbs=4, max_nouns=4, max_modifiers=3, min_length=4, max_length=13)
  for seed in range(20):
    positive, heads1 = synthetic.generate_sentence(np.random.default_rng(seed), label=1, **sizes)
    negative, heads0 = synthetic.generate_sentence(np.random.default_rng(seed), label=0, **sizes)
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
  with pytest.raises(ValueError, match='config.data.max_nouns'):
    synthetic.validate_config(_config(max_nouns=3))
  with pytest.raises(ValueError, match='config.data.num_keys'):
    synthetic.validate_config(_config(num_keys=3, max_nouns=4))
  with pytest.raises(ValueError, match='config.data.max_length'):
    synthetic.validate_config(_config(min_length=11, max_length=9))
  with pytest.raises(ValueError, match='config.data.min_length'):
    synthetic.validate_config(_config(min_length=30, max_length=40))
  with pytest.raises(ValueError, match='not a word'):
    synthetic.planted_heads(['cat', 'sees', 'purple'])
  with pytest.raises(ValueError, match='exactly one verb'):
    synthetic.planted_heads(['cat', 'sees', 'dog', 'likes'])
  with pytest.raises(ValueError, match="no noun 'dog'"):
    synthetic.planted_heads(['cat', "dog's", 'sees', 'fox'])
  with pytest.raises(ValueError, match='occurs twice'):
    synthetic.planted_heads(['cat', 'sees', 'cat'])
  # Names past the built-in lists are still parseable (larger vocabularies).
  words = synthetic.word_list(num_keys=20, num_verbs=9)
  assert len(set(words)) == len(words) == 49
  assert [synthetic.parse_word(w) for w in ('k19', "k19's", 'v8', "cat's")] == [
      ('noun', 19), ('modifier', 19), ('verb', 8), ('modifier', 0)]
