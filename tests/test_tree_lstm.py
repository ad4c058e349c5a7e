"""Batched Tree-LSTMs (Tai et al. 2015; Chen et al. 2017 eqs. 4-9) against a recursive float64 numpy
transcription of the equations, one tree at a time; padding exactness; the SST tree arrays."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_structured.data import tree_batching
from jax_structured.nn import tree_lstm

TREES = ['(3 (2 (2 The) (2 film)) (4 (3 (2 is) (4 great)) (2 .)))',
         '(1 Bad)',
         '(2 (2 a) (2 b))',
         '(0 (0 (0 (1 w) (1 x)) (2 y)) (3 z))']


def _sigmoid(v):
  return 1.0 / (1.0 + np.exp(-v))


def _parse(line):
  """Independent recursive reader: a leaf is a word string, an internal node a (left, right) pair."""
  parts = line.replace('(', ' ( ').replace(')', ' ) ').split()
  pos = 0

  def node():
    nonlocal pos
    assert parts[pos] == '('
    pos += 2  # '(' label
    if parts[pos] != '(':
      word = parts[pos]
      pos += 2  # word ')'
      return word
    left = node()
    right = node()
    pos += 1  # ')'
    return (left, right)

  return node()


def _np_binary(params, tree, x, words):
  """Tai et al. eqs. 9-14 recursively: returns (h, c) of `tree`; appends (h) of internal nodes in
  post-order to words['nodes'] and leaf h to words['leaves']."""
  w, u, b = params['w'], params['u'], params['b']
  hidden = u.shape[0] // 2
  if isinstance(tree, str):
    z = x[len(words['leaves'])] @ w + b
    i, _, _, o, g = np.split(z, 5)
    c = _sigmoid(i) * np.tanh(g)
    h = _sigmoid(o) * np.tanh(c)
    words['leaves'].append(h)
    return h, c
  (hl, cl), (hr, cr) = _np_binary(params, tree[0], x, words), _np_binary(params, tree[1], x, words)
  z = b + hl @ u[:hidden] + hr @ u[hidden:]  # an internal constituency node reads no word
  i, fl, fr, o, g = np.split(z, 5)
  c = _sigmoid(i) * np.tanh(g) + _sigmoid(fl) * cl + _sigmoid(fr) * cr
  h = _sigmoid(o) * np.tanh(c)
  words['nodes'].append(h)
  return h, c


def _batch(lines, steps):
  examples = [tree_batching.binary_tree_arrays(line) for line in lines]
  lengths = np.array([len(e['tree_heights']) + 1 for e in examples])
  return lengths, tree_batching.collate_trees(examples, steps)


def _params(rng, shapes):
  return {k: rng.standard_normal(s) * 0.5 for k, s in shapes.items()}


def test_binary_tree_lstm_matches_recursive_numpy():
  rng = np.random.default_rng(0)
  dim, hidden, steps = 3, 4, 7
  params = _params(rng, {'w': (dim, 5 * hidden), 'u': (2 * hidden, 5 * hidden), 'b': (5 * hidden,)})
  lengths, arrays = _batch(TREES, steps)
  x = rng.standard_normal((len(TREES), steps, dim))
  leaf_h, node_h, root_h = jax.jit(tree_lstm.binary_tree_lstm)(
      params, x, lengths, arrays['tree_children'], arrays['tree_heights'])
  for b, line in enumerate(TREES):
    s = lengths[b]
    seen = {'leaves': [], 'nodes': []}
    h, _ = _np_binary(params, _parse(line), x[b, :s], seen)
    np.testing.assert_allclose(root_h[b], h, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(leaf_h[b, :s], np.stack(seen['leaves']), rtol=1e-12, atol=1e-14)
    if s > 1:
      np.testing.assert_allclose(node_h[b, :s - 1], np.stack(seen['nodes']), rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(leaf_h[b, s:], 0.0)
    np.testing.assert_array_equal(node_h[b, s - 1:], 0.0)


def test_binary_tree_lstm_padding_and_batching_are_exact():
  rng = np.random.default_rng(1)
  dim, hidden = 2, 3
  params = _params(rng, {'w': (dim, 5 * hidden), 'u': (2 * hidden, 5 * hidden), 'b': (5 * hidden,)})
  lengths, short = _batch(TREES, 7)
  _, long = _batch(TREES, 12)
  x = rng.standard_normal((len(TREES), 12, dim))
  run = jax.jit(tree_lstm.binary_tree_lstm)
  a = run(params, x[:, :7], lengths, short['tree_children'], short['tree_heights'])
  b = run(params, x, lengths, long['tree_children'], long['tree_heights'])  # x past lengths: garbage
  np.testing.assert_array_equal(a[2], b[2])
  np.testing.assert_array_equal(a[0], b[0][:, :7])
  np.testing.assert_array_equal(a[1], b[1][:, :6])
  for i in range(len(TREES)):  # one tree at a time gives the batch's numbers
    one = run(params, x[i:i + 1, :7], lengths[i:i + 1], short['tree_children'][i:i + 1],
              short['tree_heights'][i:i + 1])
    np.testing.assert_allclose(one[2][0], a[2][i], rtol=1e-13, atol=1e-15)


def _np_child_sum(params, heads, x):
  """Tai et al. eqs. 2-8 recursively over the dependents of each word; returns h [s, H]."""
  w, u, u_f, b = params['w'], params['u'], params['u_f'], params['b']
  hidden = u_f.shape[0]
  s = len(heads)
  memo = {}

  def node(j):
    kids = [k for k in range(s) if heads[k] == j]
    states = [node(k) for k in kids]
    pre = x[j] @ w + b
    h_sum = sum((hk for hk, _ in states), np.zeros(hidden))
    i = _sigmoid(pre[:hidden] + h_sum @ u[:, :hidden])
    o = _sigmoid(pre[hidden:2 * hidden] + h_sum @ u[:, hidden:2 * hidden])
    g = np.tanh(pre[2 * hidden:3 * hidden] + h_sum @ u[:, 2 * hidden:])
    c = i * g + sum((_sigmoid(pre[3 * hidden:] + hk @ u_f) * ck for hk, ck in states), np.zeros(hidden))
    h = o * np.tanh(c)
    memo[j] = h
    return h, c

  for r in [j for j in range(s) if heads[j] < 0]:
    node(r)
  return np.stack([memo[j] for j in range(s)])


HEADS = [[1, -1, 1, 4, 2], [-1], [2, 0, -1, 2], [-1, 0, 1, 2, 3, 4]]


def test_child_sum_tree_lstm_matches_recursive_numpy_and_padding():
  rng = np.random.default_rng(2)
  dim, hidden, steps = 3, 4, 6
  params = _params(rng, {'w': (dim, 4 * hidden), 'u': (hidden, 3 * hidden), 'u_f': (hidden, hidden),
                         'b': (4 * hidden,)})
  lengths = np.array([len(h) for h in HEADS])
  heads = np.full((len(HEADS), steps + 3), -1)
  for i, h in enumerate(HEADS):
    heads[i, :len(h)] = h
  heads[0, 5:] = 0  # garbage past the length is ignored
  x = rng.standard_normal((len(HEADS), steps + 3, dim))
  run = jax.jit(tree_lstm.child_sum_tree_lstm)
  h, root = run(params, x[:, :steps], lengths, heads[:, :steps])
  h_long, root_long = run(params, x, lengths, heads)
  for b, hb in enumerate(HEADS):
    want = _np_child_sum(params, hb, x[b])
    np.testing.assert_allclose(h[b, :len(hb)], want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(root[b], want[hb.index(-1)], rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(h[b, len(hb):], 0.0)
  np.testing.assert_array_equal(h, h_long[:, :steps])
  np.testing.assert_array_equal(root, root_long)


def test_dependency_depths_and_cycles():
  heads = jnp.array([[1, -1, 1, 2, 3], [1, 0, -1, 0, 0]])
  depths = tree_lstm.dependency_depths(heads, jnp.array([5, 3]))
  np.testing.assert_array_equal(depths, [[1, 0, 1, 2, 3], [-1, -1, 0, -1, -1]])  # 0 <-> 1 is a cycle


def test_tree_lstm_gradients_match_finite_differences():
  rng = np.random.default_rng(3)
  params = _params(rng, {'w': (2, 10), 'u': (4, 10), 'b': (10,)})
  lengths, arrays = _batch(TREES[:1], 5)
  x = rng.standard_normal((1, 5, 2))

  def loss(p):
    return jnp.sum(tree_lstm.binary_tree_lstm(p, x, lengths, arrays['tree_children'],
                                              arrays['tree_heights'])[2] ** 2)

  grads = jax.jit(jax.grad(loss))(params)
  loss = jax.jit(loss)
  direction = {k: rng.standard_normal(v.shape) for k, v in params.items()}
  eps = 1e-6
  plus = loss({k: params[k] + eps * direction[k] for k in params})
  minus = loss({k: params[k] - eps * direction[k] for k in params})
  analytic = sum(float(jnp.vdot(grads[k], direction[k])) for k in params)
  np.testing.assert_allclose((plus - minus) / (2 * eps), analytic, rtol=1e-6)


def test_tree_arrays_post_order_ids():
  arrays = tree_batching.binary_tree_arrays(TREES[0])
  # leaves 0-4: The film is great . ; internal: 5=(The film), 6=(is great), 7=(6 .), 8=root
  np.testing.assert_array_equal(arrays['tree_children'], [[0, 1], [2, 3], [6, 4], [5, 7]])
  np.testing.assert_array_equal(arrays['tree_heights'], [1, 1, 2, 3])
  np.testing.assert_array_equal(arrays['tree_labels'], [2, 2, 2, 4, 2, 2, 3, 4, 3])
  one = tree_batching.binary_tree_arrays('(1 Bad)', ['bad'], lowercase=True)
  assert one['tree_children'].shape == (0, 2) and one['tree_labels'].tolist() == [1]


@pytest.mark.parametrize('line,message', [
    ('(3 (2 The) (4 film)', 'unbalanced tree'),
    ('(3 (2 The) (4 film)))', 'unbalanced ")"'),
    ('(3 (2 a) (2 b) (2 c))', 'has 3 children'),
    ('(3 (2 (2 a)))', 'has 1 children'),
    ('(x (2 a) (2 b))', 'not an integer'),
    ('(3 (2 a) b)', 'outside a preterminal'),
    ('(3 (2 a) (2 b)) (2 c)', 'text after the end'),
    ('', 'empty line'),
])
def test_bad_tree_lines(line, message):
  with pytest.raises(tree_batching.TreeError, match=message.replace('(', r'\(').replace(')', r'\)')):
    tree_batching.binary_tree_arrays(line)


def test_tree_leaves_must_match_tokens():
  with pytest.raises(tree_batching.TreeError, match="word 2: leaf 'film', token 'movie'"):
    tree_batching.binary_tree_arrays('(3 (2 The) (4 film))', ['The', 'movie'])
  with pytest.raises(tree_batching.TreeError, match='2 leaves but the sentence has 3 tokens'):
    tree_batching.binary_tree_arrays('(3 (2 The) (4 film))', ['The', 'film', '.'])
