"""k-best trees (`trees.k_best`, `trees.projective_k_best`) against brute-force enumeration."""
import brute_force
import jax
import numpy as np
import pytest

from jax_structured import trees

N, K = 5, 12


def check_k_best(heads, scores, arc, root, single_root, projective, k):
  """Asserts that (heads [k, n], scores [k]) are the k best trees of one unpadded sentence, in order.

  Every returned tree must be a tree of the family (one root, projective when asked), scored as said,
  none twice; the scores must be the k largest finite tree scores by enumeration, in order (so a missing
  tree, a wrong order or a duplicate fails); missing trees are padded with score -inf and heads -1.
  """
  heads, scores = np.asarray(heads), np.asarray(scores)
  n = len(root)
  all_trees = brute_force.all_trees(n, single_root, projective)
  all_scores = brute_force.tree_scores(arc, root, all_trees)
  expected = np.sort(all_scores[np.isfinite(all_scores)])[::-1][:k]
  found = np.isfinite(scores)
  assert found.sum() == len(expected), (scores, expected)
  assert np.all(found[:len(expected)]), scores
  np.testing.assert_allclose(scores[:len(expected)], expected, rtol=1e-12, atol=1e-12)
  assert np.all(heads[~found] == -1)
  by_tree = {tuple(t): s for t, s in zip(all_trees, all_scores)}
  returned = [tuple(h) for h in heads[found]]
  assert len(set(returned)) == len(returned), f'a tree comes twice: {returned}'
  for tree, score in zip(returned, scores[found]):
    assert tree in by_tree, f'{tree} is not a tree of the family'
    np.testing.assert_allclose(score, by_tree[tree], rtol=1e-12, atol=1e-12)


def _batch(seed, n=N, batch=6):
  return brute_force.padded_batch(seed, [n, n, n - 1, 2, 1, 0][:batch], n)


def check_batch(arc, root, lengths, heads, scores, single_root, projective, k):
  heads, scores = np.asarray(heads), np.asarray(scores)
  assert heads.dtype == np.int32 and heads.shape == arc.shape[:-2] + (k, arc.shape[-1])
  for b, length in enumerate(lengths):
    assert np.all(heads[b, :, length:] == -1)
    if length == 0:          # one tree, the empty one
      assert scores[b, 0] == 0 and np.all(scores[b, 1:] == -np.inf)
      continue
    check_k_best(heads[b, :, :length], scores[b], arc[b, :length, :length], root[b, :length],
                 single_root, projective, k)


def test_non_projective_single_root_against_brute_force():
  arc, root, lengths = _batch(0)
  heads, scores = trees.k_best(arc, root, lengths, k=K)
  check_batch(arc, root, lengths, heads, scores, True, False, K)


def test_projective_multi_root_against_brute_force():
  arc, root, lengths = _batch(1)
  heads, scores = trees.projective_k_best(arc, root, lengths, k=K, single_root=False)
  check_batch(arc, root, lengths, heads, scores, False, True, K)


@pytest.mark.slow
@pytest.mark.parametrize('projective', [True, False])
@pytest.mark.parametrize('single_root', [True, False])
@pytest.mark.parametrize('seed', range(3))
def test_sweep_against_brute_force(projective, single_root, seed):
  arc, root, lengths = _batch(10 + seed, n=6)
  if seed == 2:                    # ties: integer scores
    arc, root = np.round(arc), np.round(root)
    arc[1, :, 2] = -np.inf
  k = 30
  fn = trees.projective_k_best if projective else trees.k_best
  heads, scores = fn(arc, root, lengths, k=k, single_root=single_root)
  check_batch(arc, root, lengths, heads, scores, single_root, projective, k)


def test_check_fails_on_a_missing_swapped_or_repeated_tree():
  """The check above catches each defect it is meant to catch."""
  arc, root, lengths = _batch(0)
  heads, scores = (np.asarray(x)[0] for x in trees.k_best(arc, root, lengths, k=K))
  check_k_best(heads, scores, arc[0], root[0], True, False, K)
  defects = {
      'missing': (np.delete(heads, 3, 0), np.delete(scores, 3, 0)),
      'swapped': (heads[[0, 2, 1] + list(range(3, K))], scores[[0, 2, 1] + list(range(3, K))]),
      'repeated': (np.concatenate([heads[:1], heads[:-1]]), np.concatenate([scores[:1], scores[:-1]])),
  }
  for name, (bad_heads, bad_scores) in defects.items():
    with pytest.raises(AssertionError):
      check_k_best(bad_heads, bad_scores, arc[0], root[0], True, False, K)
      print(name, 'not caught')


def test_ties_are_broken_deterministically():
  """All trees tie (zero scores): k distinct trees, every score 0, the same on every call and whatever
  else is in the batch."""
  arc, root = np.zeros((6, N, N)), np.zeros((6, N))
  heads, scores = trees.k_best(arc, root, k=K)
  np.testing.assert_array_equal(scores, 0)
  check_k_best(heads[0], scores[0], arc[0], root[0], True, False, K)
  np.testing.assert_array_equal(heads, np.broadcast_to(heads[:1], heads.shape))
  rng = np.random.default_rng(0)
  arc[:5], root[:5] = rng.normal(size=(5, N, N)), rng.normal(size=(5, N))
  np.testing.assert_array_equal(trees.k_best(arc, root, k=K)[0][5], heads[0])


def test_fewer_trees_than_k_pad_with_minus_inf_and_minus_one():
  arc, root = np.zeros((6, N, N)), np.zeros((6, N))
  arc[0, :2, :2], root[0, :2] = [[0.0, 1.0], [2.0, 0.0]], [0.5, -1.0]
  lengths = np.array([2, 0, 1, 1, 1, 1])
  pad = [-1] * (N - 2)
  heads, scores = trees.k_best(arc, root, lengths, k=K)      # the two one-root trees of two words
  np.testing.assert_array_equal(heads[0, :3], [[-1, 0] + pad, [1, -1] + pad, [-1] * N])
  np.testing.assert_array_equal(heads[0, 2:], -1)
  np.testing.assert_allclose(scores[0], [1.5, 1.0] + [-np.inf] * (K - 2))
  heads, scores = trees.projective_k_best(arc, root, lengths, k=K, single_root=False)  # and two roots
  np.testing.assert_array_equal(heads[0, :3], [[-1, 0] + pad, [1, -1] + pad, [-1] * N])
  np.testing.assert_array_equal(heads[0, 3:], -1)
  np.testing.assert_allclose(scores[0], [1.5, 1.0, -0.5] + [-np.inf] * (K - 3))


def test_batch_shapes_jit_and_vmap():
  arc, root, lengths = _batch(4)
  arc, root, lengths = arc.reshape(2, 3, N, N), root.reshape(2, 3, N), lengths.reshape(2, 3)
  fn = lambda a, r, l: trees.projective_k_best(a, r, l, k=K, single_root=False)
  direct = fn(arc, root, lengths)
  assert direct[0].shape == (2, 3, K, N) and direct[1].shape == (2, 3, K)
  for got in (jax.jit(fn)(arc, root, lengths), jax.vmap(fn)(arc, root, lengths)):
    for x, y in zip(direct, got):
      np.testing.assert_array_equal(x, y)


def test_bad_k():
  with pytest.raises(ValueError, match='k must be a positive integer'):
    trees.k_best(np.zeros((3, 3)), np.zeros(3), k=0)


def test_benchmark_columns_and_their_work_limits():
  """launch/benchmarks/trees.py times k-best and max-marginals where their work fits (the rest noted)."""
  from launch.benchmarks import trees as trees_benchmark  # pylint: disable=g-import-not-at-top
  programs = type('Programs', (), {'structured': {name: (lambda a, r: None) for name in (
      'k-best 5', 'k-best 16', 'proj k-best 5', 'proj k-best 16', 'max-marg', 'proj max-marg')}})()
  timed = {}
  for batch, length in ((512, 32), (64, 64), (32, 200), (3, 1)):
    row = {}
    calls = trees_benchmark.structured_calls(programs, np.zeros((batch, length, length)), None, row)
    timed[batch, length] = sorted(calls)
    assert all(row[c].startswith('not timed (work ') for c in programs.structured if c not in calls
               and length > 1)
  assert timed[64, 64] == timed[512, 32] == sorted(programs.structured)
  assert timed[32, 200] == ['k-best 16', 'k-best 5', 'proj k-best 5', 'proj max-marg']
  assert timed[3, 1] == []
  assert trees_benchmark.structured_work(64, 64, 'k-best 16') == (64 * 30 * 64**2, 'mst')   # 2k - 2 passes
