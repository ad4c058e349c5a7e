"""Max-marginals (`trees.max_marginals`, `trees.projective_max_marginals`) against brute-force enumeration."""
import brute_force
import jax
import numpy as np
import pytest

from jax_structured import trees

N = 5


def reference(arc, root, single_root, projective):
  """Brute-force max-marginals (arc [n, n], root [n]): the best score of a tree containing each arc."""
  n = len(root)
  all_trees = brute_force.all_trees(n, single_root, projective)
  scores = brute_force.tree_scores(arc, root, all_trees)
  arc_mm, root_mm = np.full((n, n), -np.inf), np.full(n, -np.inf)
  words = np.arange(n)
  for heads, score in zip(all_trees, scores):
    is_root = heads == -1
    root_mm[is_root] = np.maximum(root_mm[is_root], score)
    arc_mm[heads[~is_root], words[~is_root]] = np.maximum(arc_mm[heads[~is_root], words[~is_root]], score)
  return arc_mm, root_mm


def _batch(seed, n=N, batch=8):
  """Scores with padding garbage, forbidden arcs (one word whose every word-head is forbidden, one single
  arc) and lengths 0, 1, 2 and n."""
  arc, root, lengths = brute_force.padded_batch(seed, [n, n, n - 1, 3, 2, 1, 0, n][:batch], n)
  if batch > 7:
    root[7, :] = -np.inf           # sentence 7: no tree at all
  return arc, root, lengths


def check(arc, root, lengths, arc_mm, root_mm, single_root, projective):
  arc_mm, root_mm = np.asarray(arc_mm), np.asarray(root_mm)
  for b, length in enumerate(lengths):
    assert np.all(arc_mm[b, length:] == -np.inf) and np.all(arc_mm[b, :, length:] == -np.inf)
    assert np.all(root_mm[b, length:] == -np.inf)
    if length == 0:
      continue
    ref_arc, ref_root = reference(arc[b, :length, :length], root[b, :length], single_root, projective)
    np.testing.assert_allclose(arc_mm[b, :length, :length], ref_arc, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(root_mm[b, :length], ref_root, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('single_root', [True, False])
def test_projective_against_brute_force(single_root):
  arc, root, lengths = _batch(0)
  arc_mm, root_mm = trees.projective_max_marginals(arc, root, lengths, single_root=single_root)
  check(arc, root, lengths, arc_mm, root_mm, single_root, projective=True)


def test_non_projective_single_root_against_brute_force():
  arc, root, lengths = _batch(1)
  arc_mm, root_mm = trees.max_marginals(arc, root, lengths)
  check(arc, root, lengths, arc_mm, root_mm, single_root=True, projective=False)


@pytest.mark.slow
@pytest.mark.parametrize('projective', [True, False])
@pytest.mark.parametrize('single_root', [True, False])
@pytest.mark.parametrize('seed', range(3))
def test_sweep_against_brute_force(projective, single_root, seed):
  arc, root, lengths = _batch(10 + seed, n=6)
  if seed == 2:                                       # ties: many trees share the best score
    arc, root = np.round(arc / 2), np.round(root / 2)
    arc[1, :, 2] = -np.inf
    root[7, :] = -np.inf
  fn = trees.projective_max_marginals if projective else trees.max_marginals
  arc_mm, root_mm = fn(arc, root, lengths, single_root=single_root)
  check(arc, root, lengths, arc_mm, root_mm, single_root, projective)


def test_column_maxima_are_the_best_tree_score_float32():
  """Every real column's max is the best tree's score, reached at the best tree's heads (float32)."""
  rng = np.random.default_rng(3)
  arc, root = rng.normal(size=(3, 7, 7)).astype(np.float32), rng.normal(size=(3, 7)).astype(np.float32)
  lengths = np.array([7, 4, 6])
  heads = np.asarray(trees.projective_mst(arc, root, lengths))
  arc_mm, root_mm = trees.projective_max_marginals(arc, root, lengths)
  assert arc_mm.dtype == np.float32
  full = np.concatenate([np.asarray(root_mm)[:, None], np.asarray(arc_mm)], axis=1)   # [B, n + 1, n]
  best = np.asarray(trees.score(arc, root, heads, lengths))
  for b, length in enumerate(lengths):
    np.testing.assert_allclose(full[b, :, :length].max(0), best[b], rtol=1e-5)
    np.testing.assert_allclose(full[b, heads[b, :length] + 1, np.arange(length)], best[b], rtol=1e-5)


def test_batch_shapes_jit_and_vmap():
  arc, root, lengths = _batch(4, batch=6)
  arc, root = arc.reshape(2, 3, N, N), root.reshape(2, 3, N)
  lengths = lengths.reshape(2, 3)
  fn = trees.projective_max_marginals
  direct = fn(arc, root, lengths)
  jitted = jax.jit(fn)(arc, root, lengths)
  mapped = jax.vmap(fn)(arc, root, lengths)
  for got in (jitted, mapped):
    for x, y in zip(direct, got):
      np.testing.assert_array_equal(x, y)
  assert direct[0].shape == (2, 3, N, N) and direct[1].shape == (2, 3, N)
  nested = trees.max_marginals(arc, root, lengths)
  flat = trees.max_marginals(arc.reshape(6, N, N), root.reshape(6, N), lengths.reshape(6))
  for x, y in zip(nested, flat):
    np.testing.assert_array_equal(np.asarray(x).reshape(y.shape), y)


def test_empty_and_bad_input():
  arc_mm, root_mm = trees.max_marginals(np.zeros((2, 0, 0)), np.zeros((2, 0)))
  assert arc_mm.shape == (2, 0, 0) and root_mm.shape == (2, 0)
  with pytest.raises(ValueError, match='root_scores must have shape'):
    trees.projective_max_marginals(np.zeros((3, 3)), np.zeros(4))


def test_many_chunks(monkeypatch):
  """Problems split over several chunks (`lax.map`, the last one padded) give the same max-marginals and
  k-best trees."""
  from jax_structured.trees import _max_marginals  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(_max_marginals, '_CHUNK_ELEMENTS', {'cpu': 7 * 20, 'default': 7 * 20})  # 7 problems
  arc, root, lengths = _batch(5, n=4, batch=3)
  arc_mm, root_mm = trees.max_marginals(arc, root, lengths)     # 3 x 20 problems, 9 chunks
  check(arc, root, lengths, arc_mm, root_mm, single_root=True, projective=False)
  heads, scores = trees.k_best(arc, root, lengths, k=7)        # 3 x 4 children a round, 2 chunks
  for b, length in enumerate(lengths):
    trees_ = brute_force.all_trees(length, True, False)
    expected = np.sort(brute_force.tree_scores(arc[b, :length, :length], root[b, :length], trees_))[::-1][:7]
    np.testing.assert_allclose(np.asarray(scores[b])[:len(expected)], expected, rtol=1e-12)
