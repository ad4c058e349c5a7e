"""Tests of the tree statistics, scores and layout conversions in trees._utils."""
import itertools

import brute_force
import jax
import numpy as np
import pytest

from jax_structured.trees import _utils as tu


def _py_depths(heads):
  out = []
  for m in range(len(heads)):
    d, node = 0, m
    while node != -1:
      d, node = d + 1, heads[node]
    out.append(d)
  return out


def test_hand_checked_tree_statistics_with_padding():
  #          words: 0   1  2  3  4 | pad
  heads = np.array([[-1, 0, 1, 0, 3, -1],      # 0 <- ROOT; 1, 3 <- 0; 2 <- 1; 4 <- 3
                    [2, -1, 1, 7, 7, 7]])      # length 3: 1 <- ROOT, 2 <- 1, 0 <- 2 (garbage after)
  lengths = np.array([5, 3])
  np.testing.assert_array_equal(tu.tree_depths(heads, lengths), [[1, 2, 3, 2, 3, 0], [3, 1, 2, 0, 0, 0]])
  np.testing.assert_array_equal(tu.tree_height(heads, lengths), [3, 3])
  np.testing.assert_array_equal(tu.depth_histogram(heads, lengths, max_depth=4),
                                [[1, 2, 2, 0], [1, 1, 1, 0]])
  np.testing.assert_array_equal(tu.depth_histogram(heads, lengths, max_depth=2), [[1, 2], [1, 1]])
  np.testing.assert_array_equal(tu.is_tree(heads, lengths, single_root=True), [True, True])
  # Second tree: word 1 lies between 2 and 0 but is 2's head, not its descendant: not projective.
  np.testing.assert_array_equal(tu.is_projective(heads, lengths), [True, False])
  np.testing.assert_array_equal(tu.tree_height(np.zeros((2, 0), int)), [0, 0])
  # A cycle is not a tree; the statistics still terminate.
  assert not tu.is_tree(np.array([1, 2, 0]))
  assert tu.is_projective(np.array([1, 2, 0])).shape == ()


def test_depths_and_projectivity_against_brute_force_for_all_trees():
  for n in range(1, 6):
    trees = brute_force.all_trees(n, single_root=False)
    projective = np.array([brute_force._is_projective(tuple(t)) for t in trees])
    got = jax.jit(tu.is_projective)(trees)
    np.testing.assert_array_equal(got, projective)
    depths = np.asarray(jax.jit(tu.tree_depths)(trees))
    for tree, d in zip(trees[::7], depths[::7]):
      np.testing.assert_array_equal(d, _py_depths(list(tree)))
    np.testing.assert_array_equal(tu.tree_height(trees), depths.max(-1))
  # Projective trees are exactly brute_force's projective filter (single-root too).
  single = brute_force.all_trees(5, single_root=True)
  proj = {tuple(t) for t in brute_force.all_trees(5, single_root=True, projective=True)}
  np.testing.assert_array_equal(tu.is_projective(single), [tuple(t) in proj for t in single])


def test_is_tree_against_brute_force_on_all_head_assignments():
  n = 4
  assignments = np.array(list(itertools.product(range(-1, n), repeat=n)))
  expected = np.array([brute_force._is_tree(tuple(h)) and all(h[m] != m for m in range(n))
                       for h in assignments])
  np.testing.assert_array_equal(tu.is_tree(assignments), expected)
  single = expected & ((assignments == -1).sum(-1) == 1)
  np.testing.assert_array_equal(tu.is_tree(assignments, single_root=True), single)
  # Heads pointing into the padding or out of range are not trees.
  np.testing.assert_array_equal(tu.is_tree(np.array([[-1, 3, 0, -1], [-1, 0, 5, 0]]), np.array([3, 4])),
                                [False, False])


def test_attachment_score_and_same_edge_rate():
  gold = np.array([[-1, 0, 1, 0, 3], [1, -1, 1, 0, 0]])
  pred = np.array([[-1, 0, 0, 0, 2], [1, 0, -1, 9, 9]])
  lengths = np.array([5, 3])
  correct, total = tu.attachment_counts(pred, gold, lengths)
  np.testing.assert_array_equal(correct, [3, 1])
  np.testing.assert_array_equal(total, [5, 3])
  assert tu.attachment_score(pred, gold, lengths) == pytest.approx(4 / 8)
  assert tu.same_edge_rate(pred, gold, lengths) == pytest.approx(4 / 8)
  # Word-to-word predicted edges: 0->1 ok, 0->2 no, 0->3 ok, 2->4 no | 1->0 ok, 0->1 no.
  assert tu.same_edge_rate(pred, gold, lengths, include_root=False) == pytest.approx(3 / 6)
  assert tu.attachment_score(pred[:, :0], gold[:, :0]) == 0.0
  # Edges are directed: reversing an arc is not the same edge.
  assert tu.same_edge_rate(np.array([1, -1]), np.array([-1, 0]), include_root=False) == 0.0


def test_conllu_round_trip_and_errors():
  heads = np.array([[-1, 0, 1, 0, 3], [2, -1, 1, -1, -1]])
  lengths = np.array([5, 3])
  conllu = tu.heads_to_conllu(heads, lengths)
  np.testing.assert_array_equal(conllu, [[0, 1, 2, 1, 4], [3, 0, 2, -1, -1]])
  np.testing.assert_array_equal(tu.heads_from_conllu(conllu, lengths), heads)
  np.testing.assert_array_equal(tu.heads_from_conllu(['2', '0', ' 2 ']), [1, -1, 1])
  with pytest.raises(ValueError, match=r"dev.conllu:7: HEAD '_' of word 2"):
    tu.heads_from_conllu(['0', '_'], source='dev.conllu:7')
  with pytest.raises(ValueError, match='HEAD 4 of word 3'):
    tu.heads_from_conllu([2, 0, 4])
  with pytest.raises(ValueError, match='HEAD 2 of word 2'):
    tu.heads_from_conllu([0, 2])
  with pytest.raises(ValueError, match=r'head 3 at position \(0, 1\)'):
    tu.heads_to_conllu(np.array([[-1, 3, 0]]))


def test_arcs_round_trip():
  heads = np.array([[-1, 0, 1, 0, 3], [2, -1, 1, -1, -1]])
  lengths = np.array([5, 3])
  arcs, roots = tu.heads_to_arcs(heads, lengths)
  assert arcs[0, 3, 4] == 1 and arcs[1, 2, 0] == 1 and roots[1, 1] == 1 and roots[1, 3] == 0
  np.testing.assert_array_equal(arcs.sum((-1, -2)) + roots.sum(-1), lengths)
  np.testing.assert_array_equal(tu.heads_from_arcs(arcs, roots, lengths), heads)


def _koo_log_z(lap):
  return np.linalg.slogdet(lap)[1]


@pytest.mark.parametrize('single_root', [True, False])
def test_synjax_layout_gives_the_brute_force_partition(single_root):
  """SynJax's Laplacian-hat construction (written here in numpy) on our layout gives log Z."""
  rng = np.random.default_rng(0)
  n = 4
  arc, root = rng.normal(size=(n, n)), rng.normal(size=n)
  lp, lengths = tu.to_synjax(arc, root, np.array(n))
  lp = np.asarray(lp)
  assert lp.shape == (n + 1, n + 1) and int(lengths) == n + 1
  assert lp[0, 3] == root[2] and lp[2, 4] == arc[1, 3] and np.isneginf(lp[3, 0]) and np.isneginf(lp[2, 2])
  pot = np.exp(lp) * (1 - np.eye(n + 1))
  laplacian = lambda x: x.sum(-2, keepdims=True) * np.eye(x.shape[-1]) - x
  if single_root:
    lap = laplacian(pot[1:, 1:])
    lap[0, :] = pot[0, 1:]
  else:
    lap = laplacian(pot)[1:, 1:]
  ref = brute_force.reference(arc, root, single_root=single_root)[0]
  np.testing.assert_allclose(_koo_log_z(lap), ref, rtol=1e-10)
  back_arc, back_root, back_len = tu.from_synjax(lp, lengths)
  np.testing.assert_array_equal(back_root, root)
  np.testing.assert_array_equal(np.where(np.eye(n, dtype=bool), 0, back_arc), arc * (1 - np.eye(n)))
  assert int(back_len) == n


def test_torch_struct_layout_gives_the_brute_force_partition():
  """torch-struct's single-root Laplacian (root scores on the diagonal) on our layout gives log Z."""
  rng = np.random.default_rng(1)
  n = 4
  arc, root = rng.normal(size=(2, n, n)), rng.normal(size=(2, n))
  ts = np.asarray(tu.to_torch_struct(arc, root))
  assert ts[1, 2, 2] == root[1, 2] and ts[0, 1, 3] == arc[0, 1, 3]
  for b in range(2):
    pot = np.exp(ts[b]) * (1 - np.eye(n))
    lap = np.diag(pot.sum(0)) - pot
    lap[0] = np.exp(np.diagonal(ts[b]))
    ref = brute_force.reference(arc[b], root[b], single_root=True)[0]
    np.testing.assert_allclose(_koo_log_z(lap), ref, rtol=1e-10)
  back_arc, back_root = tu.from_torch_struct(ts)
  np.testing.assert_array_equal(back_root, root)
  np.testing.assert_array_equal(tu.to_torch_struct(back_arc, back_root), ts)


def test_bad_lengths_shape_raises():
  with pytest.raises(ValueError, match='lengths must have shape'):
    tu.tree_depths(np.zeros((2, 3), int), np.array([1, 2, 3]))
