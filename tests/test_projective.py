"""Tests of the projective inside-outside / Eisner functions against brute-force enumeration."""
import brute_force
from stages import MULTI_ROOT_QUICK, SINGLE_ROOT_QUICK
import jax
import jax.numpy as jnp
from jax.test_util import check_grads
import numpy as np
import pytest

from jax_structured.trees._mst import mst
from jax_structured.trees._projective import projective_log_partition
from jax_structured.trees._projective import projective_marginals
from jax_structured.trees._projective import projective_mst

N, BATCH = 6, 12


def _batch(seed, ties=False):
  rng = np.random.default_rng(seed)
  arc = rng.normal(size=(BATCH, N, N))
  root = rng.normal(size=(BATCH, N))
  if ties:
    arc, root = np.round(arc), np.round(root)
  lengths = rng.integers(1, N + 1, size=BATCH)
  lengths[:3] = N
  lengths[3] = 0
  # Garbage in the padding must not matter.
  for b in range(BATCH):
    arc[b, lengths[b]:, :] = 1e3
    arc[b, :, lengths[b]:] = -1e3
    root[b, lengths[b]:] = 1e3
  return arc, root, lengths


@pytest.mark.parametrize('single_root', SINGLE_ROOT_QUICK)
def test_against_brute_force_with_padding_under_jit_and_vmap(single_root):
  arc, root, lengths = _batch(0 if single_root else 1)
  kw = dict(single_root=single_root)
  log_z = jax.jit(lambda a, r, l: projective_log_partition(a, r, l, **kw))(arc, root, lengths)
  arc_m, root_m = jax.jit(lambda a, r, l: projective_marginals(a, r, l, **kw))(arc, root, lengths)
  heads = jax.vmap(lambda a, r, l: projective_mst(a, r, l, **kw))(arc, root, lengths)
  np.testing.assert_allclose(
      jax.vmap(lambda a, r, l: projective_log_partition(a, r, l, **kw))(arc, root, lengths), log_z,
      rtol=1e-12)
  heads = np.asarray(heads)
  assert heads.dtype == np.int32
  for b in range(BATCH):
    k = lengths[b]
    assert np.all(heads[b, k:] == -1)
    assert np.all(np.asarray(arc_m)[b, k:, :] == 0) and np.all(np.asarray(arc_m)[b, :, k:] == 0)
    assert np.all(np.asarray(root_m)[b, k:] == 0)
    if k == 0:
      assert log_z[b] == 0.0
      continue
    ref_z, ref_arc, ref_root, ref_heads, _ = brute_force.reference(
        arc[b, :k, :k], root[b, :k], single_root=single_root, projective=True)
    np.testing.assert_allclose(log_z[b], ref_z, rtol=1e-10)
    np.testing.assert_allclose(arc_m[b, :k, :k], ref_arc, atol=1e-10)
    np.testing.assert_allclose(root_m[b, :k], ref_root, atol=1e-10)
    np.testing.assert_array_equal(heads[b, :k], ref_heads)  # continuous scores: the argmax is unique
    np.testing.assert_allclose(np.asarray(arc_m)[b].sum(0)[:k] + np.asarray(root_m)[b, :k], 1.0,
                               atol=1e-10)


@pytest.mark.parametrize('single_root', [True, False])
def test_argmax_with_ties_is_a_best_projective_tree(single_root):
  arc, root, lengths = _batch(2, ties=True)
  heads = np.asarray(projective_mst(arc, root, lengths, single_root=single_root))
  np.testing.assert_array_equal(heads, projective_mst(arc, root, lengths, single_root=single_root))
  for b in range(BATCH):
    k = lengths[b]
    if k == 0:
      continue
    tree = tuple(int(h) for h in heads[b, :k])
    assert brute_force._is_tree(tree) and brute_force._is_projective(tree)
    assert (not single_root) or tree.count(-1) == 1
    best = brute_force.reference(arc[b, :k, :k], root[b, :k], single_root, projective=True)[-1]
    got = brute_force.tree_scores(arc[b, :k, :k], root[b, :k], heads[b, None, :k])[0]
    assert got == best


def test_marginals_are_the_gradient_of_log_partition_and_check_grads():
  rng = np.random.default_rng(3)
  arc = rng.normal(size=(2, 4, 4))
  root = rng.normal(size=(2, 4))
  lengths = np.array([4, 3])
  for single_root in (True, False):
    def total(a, r, single_root=single_root):
      return jnp.sum(projective_log_partition(a, r, lengths, single_root=single_root))
    g_arc, g_root = jax.grad(total, argnums=(0, 1))(arc, root)
    m_arc, m_root = projective_marginals(arc, root, lengths, single_root=single_root)
    np.testing.assert_allclose(g_arc, m_arc, atol=1e-12)
    np.testing.assert_allclose(g_root, m_root, atol=1e-12)
    check_grads(total, (arc, root), order=1, modes=['fwd', 'rev'], atol=1e-6, rtol=1e-6)


def test_neg_inf_scores_give_no_nans_and_respect_the_constraint():
  rng = np.random.default_rng(4)
  arc = rng.normal(size=(BATCH, N, N))
  root = rng.normal(size=(BATCH, N))
  keep = arc.copy()
  arc[rng.random(arc.shape) < 0.4] = -np.inf
  root[:, 0] = -np.inf
  # A chain 1 -> 0, 1 -> 2 -> ... -> n-1 under ROOT -> 1 keeps one finite projective tree.
  chain = [(1, 0)] + [(i, i + 1) for i in range(1, N - 1)]
  for h, m in chain:
    arc[:, h, m] = keep[:, h, m]
  lengths = np.full(BATCH, N)
  with jax.debug_nans(True):
    log_z = np.asarray(projective_log_partition(arc, root, lengths))
    arc_m, root_m = projective_marginals(arc, root, lengths)
    heads = np.asarray(projective_mst(arc, root, lengths))
  for b in range(BATCH):
    ref_z, ref_arc, ref_root, _, best = brute_force.reference(arc[b], root[b], True, projective=True)
    np.testing.assert_allclose(log_z[b], ref_z, rtol=1e-10)
    np.testing.assert_allclose(arc_m[b], ref_arc, atol=1e-10)
    np.testing.assert_allclose(root_m[b], ref_root, atol=1e-10)
    assert heads[b, 0] != -1
    np.testing.assert_allclose(brute_force.tree_scores(arc[b], root[b], heads[b, None])[0], best)


def test_agrees_with_mst_on_projective_optimum_and_float32_batch_shape():
  rng = np.random.default_rng(5)
  arc = rng.normal(size=(2, 3, 5, 5)).astype(np.float32)
  root = rng.normal(size=(2, 3, 5)).astype(np.float32)
  log_z = projective_log_partition(arc, root)
  arc_m, root_m = projective_marginals(arc, root)
  heads = np.asarray(projective_mst(arc, root))
  assert log_z.shape == (2, 3) and log_z.dtype == jnp.float32
  assert arc_m.shape == (2, 3, 5, 5) and arc_m.dtype == jnp.float32 and root_m.shape == (2, 3, 5)
  ref = np.array([[brute_force.reference(arc[i, j], root[i, j], projective=True)[0] for j in range(3)]
                  for i in range(2)])
  np.testing.assert_allclose(log_z, ref, rtol=1e-5)
  non_projective = np.asarray(mst(arc, root))
  for i in range(2):
    for j in range(3):
      proj = brute_force.tree_scores(arc[i, j], root[i, j], heads[i, j, None])[0]
      best = brute_force.tree_scores(arc[i, j], root[i, j], non_projective[i, j, None])[0]
      assert proj <= best + 1e-5
      if brute_force._is_projective(tuple(int(h) for h in non_projective[i, j])):
        np.testing.assert_array_equal(heads[i, j], non_projective[i, j])


def test_empty_shapes():
  assert projective_log_partition(np.zeros((2, 0, 0)), np.zeros((2, 0))).shape == (2,)
  arc_m, root_m = projective_marginals(np.zeros((2, 0, 0)), np.zeros((2, 0)))
  assert arc_m.shape == (2, 0, 0) and root_m.shape == (2, 0)
  assert projective_mst(np.zeros((2, 0, 0)), np.zeros((2, 0))).shape == (2, 0)


def test_bad_shapes_raise():
  with pytest.raises(ValueError, match='root_scores'):
    projective_log_partition(np.zeros((2, 3, 3)), np.zeros((3,)))
  with pytest.raises(ValueError, match='lengths'):
    projective_marginals(np.zeros((2, 3, 3)), np.zeros((2, 3)), np.zeros((2, 1), int))
  with pytest.raises(ValueError, match='arc_scores'):
    projective_mst(np.zeros((3, 2)), np.zeros((3,)))
  with pytest.raises(ValueError, match=r'lengths must lie in \[0, 3\]'):
    projective_marginals(np.zeros((2, 3, 3)), np.zeros((2, 3)), np.array([-1, 2]))


def _raw_value(arc, root, lengths, single_root, semiring):
  """Inside value by the chunked loop alone (no custom rule), for plain autodiff as a reference."""
  from jax_structured.trees import _projective
  arc_r, arc_l, r = _projective._span_arcs(arc, root, lengths)
  tables = _projective._inside_tables(arc_r, arc_l, semiring)
  return _projective._readout(tables['cr_s'], tables['cl_s'], r, lengths, single_root, semiring)


@pytest.mark.parametrize('single_root', MULTI_ROOT_QUICK)
def test_width_chunks_against_brute_force(monkeypatch, single_root):
  # N = 7 nodes in 3 chunks of 2 widths with their own window shapes: chunk boundaries are crossed.
  from jax_structured.trees import _projective
  monkeypatch.setattr(_projective, '_CHUNK_WIDTHS', 2)
  assert len(_projective._width_chunks(N + 1)) == 3
  arc, root, lengths = _batch(6)
  log_z, (arc_m, root_m) = jax.jit(
      lambda a, r, l: _projective._value_and_gradients(a, r, l, single_root, 'log'))(arc, root, lengths)
  _, (arc_g, root_g) = jax.jit(
      lambda a, r, l: _projective._value_and_gradients(a, r, l, single_root, 'max'))(arc, root, lengths)
  for b in range(BATCH):
    k = lengths[b]
    if k == 0:
      continue
    ref_z, ref_arc, ref_root, ref_heads, _ = brute_force.reference(
        arc[b, :k, :k], root[b, :k], single_root=single_root, projective=True)
    np.testing.assert_allclose(log_z[b], ref_z, rtol=1e-10)
    np.testing.assert_allclose(arc_m[b, :k, :k], ref_arc, atol=1e-10)
    np.testing.assert_allclose(root_m[b, :k], ref_root, atol=1e-10)
    chosen = np.concatenate([root_g[b, None, :k], arc_g[b, :k, :k]], axis=0)
    np.testing.assert_array_equal(chosen.argmax(0) - 1, ref_heads)
    np.testing.assert_array_equal(chosen.sum(0), 1.0)   # exactly one head per word


@pytest.mark.parametrize('semiring,single_root', [('log', True), ('max', False)])
def test_outside_pass_equals_autodiff_of_the_inside_loop_at_length_20(semiring, single_root):
  # Too long for enumeration: the hand-written outside pass against jax.grad through the inside loop
  # (two width chunks, padding, float32 inputs kept float32).
  from jax_structured.trees import _projective
  rng = np.random.default_rng(8)
  n = 20
  arc = jnp.asarray(rng.normal(size=(3, n, n)), jnp.float32)
  root = jnp.asarray(rng.normal(size=(3, n)), jnp.float32)
  lengths = jnp.array([n, 13, 1])
  assert len(_projective._width_chunks(n + 1)) == 2
  value, (arc_m, root_m) = jax.jit(
      lambda a, r: _projective._value_and_gradients(a, r, lengths, single_root, semiring))(arc, root)
  ref = jax.jit(jax.value_and_grad(
      lambda a, r: _raw_value(a, r, lengths, single_root, semiring).sum(), (0, 1)))
  ref_value, (ref_arc, ref_root) = ref(arc, root)
  assert arc_m.dtype == jnp.float32
  np.testing.assert_allclose(value.sum(), ref_value, rtol=1e-5)
  np.testing.assert_allclose(arc_m, ref_arc, atol=1e-5)
  np.testing.assert_allclose(root_m, ref_root, atol=1e-5)
  if semiring == 'log':
    col = np.asarray(arc_m).sum(1) + np.asarray(root_m)
    np.testing.assert_allclose(col, np.arange(n)[None, :] < np.asarray(lengths)[:, None], atol=1e-4)


def test_grad_through_marginals_matches_finite_differences():
  # Structured attention trains through the marginals: second derivatives of log Z.
  rng = np.random.default_rng(9)
  arc = rng.normal(size=(2, 5, 5))
  root = rng.normal(size=(2, 5))
  weights = rng.normal(size=(2, 5, 5))
  lengths = np.array([5, 3])

  def loss(a, r):
    arc_m, root_m = projective_marginals(a, r, lengths)
    return jnp.sum(weights * arc_m) + jnp.sum(root_m ** 2)
  check_grads(loss, (arc, root), order=1, modes=['rev'], atol=1e-6, rtol=1e-6)
