"""StructuredAttention (Liu & Lapata 2018, eqs. 7-18) against a float64 numpy implementation.

The numpy reference computes the matrix-tree marginals with eqs. 12-15 literally (an explicit inverse
of the root-replaced Laplacian of the UNPADDED sentence), itself checked against brute-force enumeration
of all trees (tests/brute_force.py); projective marginals come from brute force over projective trees.
The module under test calls `trees.marginals` / `trees.projective_marginals` on the padded batch.
"""
import brute_force
import jax
import jax.test_util  # noqa: F401  (check_grads)
import jax.numpy as jnp
import numpy as np
import pytest

from jax_structured import nn as jsnn


# ----------------------------------------------------------------------------- float64 references
def np_matrix_tree(arc_scores, root_scores):
  """Eqs. 12-15 of Liu & Lapata (Koo et al. 2007), single root, one unpadded sentence, float64."""
  f = np.asarray(arc_scores, np.float64)
  n = f.shape[0]
  if n == 0:
    return np.zeros((0, 0)), np.zeros((0,))
  a = np.where(np.eye(n, dtype=bool), 0.0, np.exp(f))  # eq. 12
  lap = -a.copy()  # eq. 13
  lap[np.diag_indices(n)] = a.sum(0)
  lap_bar = lap.copy()  # eq. 14
  lap_bar[0, :] = np.exp(np.asarray(root_scores, np.float64))
  inv = np.linalg.inv(lap_bar)
  not_first = np.arange(n) != 0
  arc_m = (not_first[None, :] * a * np.diag(inv)[None, :]
           - not_first[:, None] * a * inv.T)  # eq. 15: [h, m] uses inv[m, m] and inv[m, h]
  root_m = np.exp(root_scores) * inv[:, 0]
  return arc_m, root_m


def np_local_heads(arc_scores, root_scores):
  """Softmax over candidate heads (ROOT + other words) of each word, float64."""
  n = len(root_scores)
  scores = np.concatenate([np.asarray(root_scores)[None, :], np.where(np.eye(n, dtype=bool), -np.inf,
                                                                      arc_scores)], 0)
  scores = scores - scores.max(0, keepdims=True)
  w = np.exp(scores) / np.exp(scores).sum(0, keepdims=True)
  return w[1:], w[0]


def np_projective(arc_scores, root_scores):
  if len(root_scores) == 0:
    return np.zeros((0, 0)), np.zeros((0,))
  _, arc_m, root_m, _, _ = brute_force.reference(arc_scores, root_scores, single_root=True,
                                                 projective=True)
  return arc_m, root_m


NP_NORMALIZERS = {'matrix_tree': np_matrix_tree, 'softmax': np_local_heads, 'projective': np_projective}


def np_structured_attention(params, hidden, length, semantic_size, normalizer):
  """Eqs. 7-18 in float64 numpy for one sentence: returns (r, f, f_root, a, a_root) of the real words."""
  p = jax.tree.map(lambda x: np.asarray(x, np.float64), params)
  h = np.asarray(hidden, np.float64)[:length]
  half = h.shape[-1] // 2
  fw, bw = h[:, :half], h[:, half:]
  e = np.concatenate([fw[:, :semantic_size], bw[:, :semantic_size]], -1)  # eq. 7
  d = np.concatenate([fw[:, semantic_size:], bw[:, semantic_size:]], -1)
  t_p = np.tanh(d @ p['parent']['kernel'] + p['parent']['bias'])  # eq. 8
  t_c = np.tanh(d @ p['child']['kernel'] + p['child']['bias'])  # eq. 9
  f = t_p @ p['bilinear'] @ t_c.T  # eq. 10
  f_root = d @ p['root']['kernel'][:, 0]  # eq. 11
  a, a_root = NP_NORMALIZERS[normalizer](f, f_root)  # eqs. 12-15
  parents = a.T @ e + a_root[:, None] * p['root_embedding'][None, :]  # eq. 16
  children = a @ e  # eq. 17 (sum_k a_ik e_k)
  r = np.tanh(np.concatenate([e, parents, children], -1) @ p['output']['kernel']
              + p['output']['bias'])  # eq. 18
  return r, f, f_root, a, a_root


# ----------------------------------------------------------------------------------------- tests
@pytest.mark.parametrize('n', [1, 2, 3, 4])
def test_numpy_matrix_tree_matches_brute_force(n):
  rng = np.random.default_rng(n)
  f, r = rng.normal(size=(n, n)), rng.normal(size=n)
  _, arc_m, root_m, _, _ = brute_force.reference(f, r, single_root=True)
  ours_arc, ours_root = np_matrix_tree(f, r)
  np.testing.assert_allclose(ours_arc, arc_m, atol=1e-12)
  np.testing.assert_allclose(ours_root, root_m, atol=1e-12)


HIDDEN, SEMANTIC, T = 5, 3, 5  # per direction: 3 semantic + 2 structure features
LENGTHS = np.array([4, 1, 5, 0, 2], np.int32)


def _setup(normalizer, dtype=jnp.float64, seed=0):
  module = jsnn.StructuredAttention(semantic_size=SEMANTIC, normalizer=normalizer)
  hidden = jax.random.normal(jax.random.key(seed), (len(LENGTHS), T, 2 * HIDDEN), dtype)
  variables = jax.jit(module.init)(jax.random.key(1), hidden, LENGTHS)
  variables = jax.tree.map(lambda x: x.astype(dtype), variables)
  return module, variables, hidden


@pytest.mark.parametrize('normalizer', ['matrix_tree', 'softmax', 'projective'])
def test_matches_float64_reference_under_jit(normalizer):
  module, variables, hidden = _setup(normalizer)
  apply = jax.jit(lambda v, h, l: module.apply(v, h, l, mutable=['intermediates']))
  out, state = apply(variables, hidden, LENGTHS)
  sown = jsnn.find_intermediates(state)
  assert out.shape == (len(LENGTHS), T, 2 * SEMANTIC) and out.dtype == jnp.float64
  for b, length in enumerate(LENGTHS):
    r, f, f_root, a, a_root = np_structured_attention(variables['params'], hidden[b], length, SEMANTIC,
                                                      normalizer)
    np.testing.assert_allclose(out[b, :length], r, atol=1e-10)
    np.testing.assert_array_equal(out[b, length:], 0.0)  # padding rows are zero
    np.testing.assert_allclose(sown['arc_scores'][b, :length, :length], f, atol=1e-12)
    np.testing.assert_allclose(sown['root_scores'][b, :length], f_root, atol=1e-12)
    np.testing.assert_allclose(sown['arc_marginals'][b, :length, :length], a, atol=1e-10)
    np.testing.assert_allclose(sown['root_marginals'][b, :length], a_root, atol=1e-10)
  np.testing.assert_array_equal(sown['lengths'], LENGTHS)


@pytest.mark.parametrize('normalizer', ['matrix_tree', 'softmax', 'projective'])
def test_marginals_are_distributions_over_heads(normalizer):
  module, variables, hidden = _setup(normalizer, jnp.float32, seed=3)
  _, state = jax.jit(lambda v, h: module.apply(v, h, LENGTHS, mutable=['intermediates']))(
      variables, hidden)
  sown = jsnn.find_intermediates(state)
  arc_m, root_m = np.asarray(sown['arc_marginals']), np.asarray(sown['root_marginals'])
  real = np.arange(T)[None, :] < LENGTHS[:, None]
  totals = arc_m.sum(-2) + root_m
  np.testing.assert_allclose(totals[real], 1.0, atol=1e-5)
  assert np.all(arc_m >= -1e-6) and np.all(root_m >= -1e-6)
  np.testing.assert_allclose(np.diagonal(arc_m, axis1=-2, axis2=-1), 0.0, atol=1e-6)
  pair = real[:, :, None] & real[:, None, :]
  np.testing.assert_array_equal(arc_m[~pair], 0.0)
  np.testing.assert_array_equal(root_m[~real], 0.0)
  if normalizer != 'softmax':  # single root: the root marginals of a real sentence sum to one
    np.testing.assert_allclose(root_m.sum(-1)[LENGTHS > 0], 1.0, atol=1e-5)


@pytest.mark.parametrize('normalizer', ['matrix_tree', 'softmax'])
def test_padding_and_leading_batch_shape_invariance(normalizer):
  module, variables, hidden = _setup(normalizer)
  apply = jax.jit(lambda h, l: module.apply(variables, h, l))
  out = apply(hidden, LENGTHS)
  # More padding, garbage in the padded positions: real outputs unchanged.
  garbage = jax.random.normal(jax.random.key(7), (len(LENGTHS), 3, 2 * HIDDEN), jnp.float64) * 50
  longer = apply(jnp.concatenate([hidden, garbage], 1), LENGTHS)
  real = np.arange(T)[None, :] < LENGTHS[:, None]
  np.testing.assert_allclose(longer[:, :T][real], out[real], atol=1e-10)
  np.testing.assert_array_equal(longer[:, T:], 0.0)
  # Leading batch shape [1, B] and vmap give the same as [B].
  nested = apply(hidden[None], LENGTHS[None])
  np.testing.assert_allclose(nested[0], out, atol=1e-12)
  mapped = jax.jit(jax.vmap(apply))(hidden, LENGTHS)
  np.testing.assert_allclose(mapped, out, atol=1e-10)


@pytest.mark.parametrize('normalizer', ['matrix_tree', 'softmax'])
def test_gradients_finite_with_empty_sequences(normalizer):
  module, variables, hidden = _setup(normalizer, jnp.float32)

  def loss(params, h):
    return jnp.sum(module.apply({'params': params}, h, LENGTHS) ** 2)

  with jax.debug_nans(True):
    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(variables['params'], hidden)
  leaves = jax.tree.leaves(grads)
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
  assert any(float(jnp.abs(g).max()) > 0 for g in jax.tree.leaves(grads[0]['bilinear']))
  # Inputs at padded positions get no gradient.
  real = np.arange(T)[None, :] < LENGTHS[:, None]
  np.testing.assert_array_equal(np.asarray(grads[1])[~real], 0.0)


def test_gradient_matches_finite_differences_float64():
  module, variables, hidden = _setup('matrix_tree')
  lengths = np.array([4, 3], np.int32)
  hidden = hidden[:2]

  @jax.jit
  def loss(h):
    return jnp.sum(jnp.sin(module.apply(variables, h, lengths)))

  jax.test_util.check_grads(loss, (hidden,), order=1, modes=['rev'], atol=1e-5, rtol=1e-5)


def test_sow_prefix_and_none_passthrough():
  module, variables, hidden = _setup('matrix_tree')
  _, state = jax.jit(lambda v, h: module.apply(v, h, LENGTHS, sow_prefix='sentence_',
                                               mutable=['intermediates']))(variables, hidden)
  names = set(jsnn.find_intermediates(state))
  assert names == {'sentence_arc_scores', 'sentence_root_scores', 'sentence_lengths',
                   'sentence_arc_marginals', 'sentence_root_marginals'}
  assert jsnn.find_intermediates(state)['sentence_arc_scores'].shape == (len(LENGTHS), T, T)
  # Stacked texts sown under one prefix per block of rows.
  _, split = jax.jit(lambda v, h: module.apply(v, h, LENGTHS, sow_splits=(('a_', 2), ('b_', 3)),
                                               mutable=['intermediates']))(variables, hidden)
  split, whole = jsnn.find_intermediates(split), jsnn.find_intermediates(state)
  np.testing.assert_array_equal(split['a_arc_marginals'], whole['sentence_arc_marginals'][:2])
  np.testing.assert_array_equal(split['b_root_scores'], whole['sentence_root_scores'][2:])
  np.testing.assert_array_equal(split['b_lengths'], LENGTHS[2:])
  with pytest.raises(ValueError, match='do not add up'):
    module.apply(variables, hidden, LENGTHS, sow_splits=(('a_', 2),))
  none = jsnn.StructuredAttention(semantic_size=SEMANTIC, normalizer='none')
  assert none.init(jax.random.key(0), hidden, LENGTHS) == {}
  np.testing.assert_array_equal(none.apply({}, hidden, LENGTHS), hidden)


def test_bad_configuration_errors():
  hidden = jnp.zeros((1, 3, 2 * HIDDEN))
  with pytest.raises(ValueError, match='unknown normalizer .*valid'):
    jsnn.StructuredAttention(semantic_size=2, normalizer='inverse').init(jax.random.key(0), hidden,
                                                                         jnp.array([3]))
  with pytest.raises(ValueError, match='cannot split'):
    jsnn.StructuredAttention(semantic_size=HIDDEN + 1).init(jax.random.key(0), hidden, jnp.array([3]))
  with pytest.raises(ValueError, match='no structure features'):
    jsnn.StructuredAttention(semantic_size=HIDDEN).init(jax.random.key(0), hidden, jnp.array([3]))
