"""The next-best pass of Camerini et al. (`trees._camerini.best_and_next`) against brute-force enumeration."""
import brute_force
from stages import MULTI_ROOT_QUICK
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_structured.trees import _camerini
from jax_structured.trees import _mst
from jax_structured.trees._camerini import best_and_next
from jax_structured.trees._max_marginals import best_trees


def _random_batch(seed, n, batch, ties=False):
  """Scores full [B, n + 1, n] (row 0 = ROOT) with some -inf arcs and padding, and lengths [B].

  A quarter of the sentences are full length; ~10% of arcs are -inf, one ROOT arc in ten sentences
  too; word 0 of sentence 1 can only hang from ROOT (conftest enables float64)."""
  rng = np.random.default_rng(seed)
  full = rng.normal(size=(batch, n + 1, n))
  if ties:
    full = np.round(full)
  full[rng.random(full.shape) < 0.1] = -np.inf
  full[rng.random(batch) < 0.1, 0, rng.integers(n)] = -np.inf
  full[1, 1:, 0] = -np.inf
  lengths = rng.integers(0, n + 1, size=batch)
  lengths[: batch // 4] = n
  for b in range(batch):                                 # garbage on padding
    full[b, lengths[b] + 1:, :] = 1e3
    full[b, :, lengths[b]:] = -1e3
  return full, lengths


def _tree_table(full, length, single_root):
  """(trees [T, length], scores [T]) of one sentence by enumeration (-inf: a forbidden arc)."""
  trees = brute_force.all_trees(int(length), single_root)
  arc, root = full[1:length + 1, :length], full[0, :length]
  return trees, brute_force.tree_scores(arc, root, trees)


def check_batch(full, lengths, out, single_root, atol=1e-9):
  """Asserts `out` (best_and_next's dict) is right for every sentence of the batch; returns the
  number of sentences with a finite next score."""
  out = {k: np.asarray(v) for k, v in out.items()}
  batch, n = lengths.shape[0], full.shape[-1]
  assert out['heads'].shape == (batch, n) and out['heads'].dtype == np.int32
  assert out['split_head'].dtype == np.int32 and out['split_dep'].dtype == np.int32
  with_next = 0
  for b, length in enumerate(lengths):
    heads = out['heads'][b]
    assert np.all(heads[length:] == -1)
    if length == 0:
      assert out['score'][b] == 0 and out['next_score'][b] == -np.inf
      continue
    trees, scores = _tree_table(full[b], length, single_root)
    ranked = np.sort(scores[np.isfinite(scores)])[::-1]
    best = ranked[0] if len(ranked) else -np.inf
    second = ranked[1] if len(ranked) > 1 else -np.inf
    np.testing.assert_allclose(out['score'][b], best, rtol=0, atol=atol)
    np.testing.assert_allclose(out['next_score'][b], second, rtol=0, atol=atol)
    if best > -np.inf:                                  # heads: an optimal tree of the family
      found = np.flatnonzero(np.all(trees == heads[None, :length], axis=1))
      assert len(found) == 1, heads
      np.testing.assert_allclose(scores[found[0]], best, rtol=0, atol=atol)
    head, dep = out['split_head'][b], out['split_dep'][b]
    if second == -np.inf:
      assert head == -1 and dep == -1
      continue
    with_next += 1
    assert 0 <= dep < length and heads[dep] == head, (head, dep, heads)
    without = trees[:, dep] != head                    # the best tree without the split arc
    np.testing.assert_allclose(np.max(np.where(without, scores, -np.inf)), second, rtol=0, atol=atol)
  return with_next


def _run(full, lengths, single_root):
  return best_and_next(jnp.asarray(full, jnp.float64), jnp.asarray(lengths), single_root)


@pytest.mark.parametrize('ties', [False, True])
@pytest.mark.parametrize('single_root', [True, False])
def test_against_brute_force(single_root, ties):
  full, lengths = _random_batch(int(single_root) + 2 * int(ties), 6, 96, ties)
  with_next = check_batch(full, lengths, _run(full, lengths, single_root), single_root)
  assert with_next >= 48


def test_nested_contractions_are_covered():
  """The random batches of the tests above contract cycles inside contracted cycles (where the
  per-level re-weighting and the descendant condition matter) and pick a split arc that is not the
  best arc of its column."""
  full, lengths = _random_batch(1, 6, 96)
  weights, penalty, valid, _ = _mst._graph(jnp.asarray(full[:, 1:]), jnp.asarray(full[:, 0]),
                                           jnp.asarray(lengths), True)
  st, _ = _mst._contract(weights, penalty, valid, incremental=True)
  parent = np.asarray(st['parent'])
  n_nodes = full.shape[-1] + 1
  nested = np.any(parent[:, n_nodes:] >= n_nodes, axis=1)
  assert nested.sum() >= 10, nested.sum()
  out = _run(full, lengths, True)
  assert check_batch(full[nested], lengths[nested], {k: np.asarray(v)[nested] for k, v in out.items()},
                     True) >= 5


def test_float32_and_jit_vmap():
  full, lengths = _random_batch(5, 5, 24)
  exact = _run(full, lengths, True)
  single = best_and_next(jnp.asarray(full, jnp.float32), jnp.asarray(lengths), True)
  for name in exact:
    np.testing.assert_allclose(np.asarray(single[name], np.float64), np.asarray(exact[name]),
                               rtol=1e-5, atol=1e-4)
  assert single['score'].dtype == jnp.float32 and single['next_score'].dtype == jnp.float32
  full32 = jnp.asarray(full.reshape(4, 6, 6, 5), jnp.float32)
  mapped = jax.vmap(lambda f, l: best_and_next(f, l, True))(full32, jnp.asarray(lengths.reshape(4, 6)))
  for name in exact:
    np.testing.assert_array_equal(np.asarray(mapped[name]).reshape(single[name].shape), single[name])


def test_single_trees_and_no_trees():
  """One word: one tree, no second one; every tree forbidden: -inf scores; empty sentences."""
  full = np.zeros((4, 4, 3))
  full[1, 0, :] = -np.inf                       # no ROOT arc: no tree at all
  full[2, 1:, :] = -np.inf                      # only ROOT arcs: one tree with many roots, none with one
  lengths = np.array([1, 3, 3, 0])
  for single_root in (True, False):
    out = _run(full, lengths, single_root)
    check_batch(full, lengths, out, single_root)
  np.testing.assert_array_equal(np.asarray(out['score']), [0, -np.inf, 0, 0])


@pytest.mark.parametrize('single_root', MULTI_ROOT_QUICK)
def test_longer_sentences_against_constrained_trees(single_root):
  """n = 16 (deeper contraction forests than brute force reaches): the second-best tree is the best
  tree without one arc of the best tree (Lawler), so next_score = the max over the arcs e of T of the
  best tree without e (each by `mst`), reached at the split arc."""
  full, lengths = _random_batch(11, 16, 24, ties=False)
  full[: 6, 1:] = np.round(full[: 6, 1:])                # ties in a quarter of them
  lengths = np.maximum(lengths, 8)                       # (some padding garbage becomes real words)
  batch, n = lengths.shape[0], full.shape[-1]
  out = {k: np.asarray(v) for k, v in _run(full, lengths, single_root).items()}
  without = np.repeat(full[:, None], n, axis=1)           # [B, n (word whose T-arc goes), n + 1, n]
  word = np.arange(n)
  without[np.arange(batch)[:, None], word[None], out['heads'] + 1, word[None]] = -np.inf
  _, scores = best_trees(jnp.asarray(without.reshape(batch * n, n + 1, n)), jnp.asarray(np.repeat(lengths, n)),
                         single_root, projective=False)
  scores = np.where(word[None] < lengths[:, None], np.asarray(scores).reshape(batch, n), -np.inf)
  _, best = best_trees(jnp.asarray(full), jnp.asarray(lengths), single_root, projective=False)
  np.testing.assert_allclose(out['score'], best, rtol=0, atol=1e-9)
  np.testing.assert_allclose(out['next_score'], scores.max(axis=1), rtol=0, atol=1e-9)
  found = out['next_score'] > -np.inf
  assert found.sum() >= batch // 2
  np.testing.assert_allclose(scores[found, out['split_dep'][found]], out['next_score'][found], rtol=0, atol=1e-9)
  np.testing.assert_array_equal(out['heads'][found, out['split_dep'][found]], out['split_head'][found])


def test_straight_round_body_gives_the_same_results():
  """The round body of GPUs and TPUs (`incremental=False`), run here on the CPU, agrees."""
  full, lengths = _random_batch(7, 6, 48, ties=True)
  for single_root in (True, False):
    fast = _run(full, lengths, single_root)
    straight = best_and_next(jnp.asarray(full), jnp.asarray(lengths), single_root, incremental=False)
    for name in fast:
      np.testing.assert_array_equal(np.asarray(straight[name]), np.asarray(fast[name]))


def _dfs(parent, counted):
  """(first, last) of `_camerini._tour` for one forest, by a recursive depth-first search."""
  width = len(parent)
  children = [[c for c in range(width) if parent[c] == p and c != p] for p in range(width)]
  first, last, seen = np.zeros(width, int), np.zeros(width, int), [0]

  def visit(x):
    first[x] = seen[0]
    seen[0] += int(counted[x])
    for c in children[x]:
      visit(c)
    last[x] = seen[0]

  for root in (x for x in range(width) if parent[x] == x):
    visit(root)
  return first, last


def test_tour_against_depth_first_search():
  rng = np.random.default_rng(0)
  width, batch = 9, 64
  parent = np.zeros((batch, width), np.int32)
  for b in range(batch):                         # random forests: parents among earlier nodes or self
    rank = rng.permutation(width)
    for i, x in enumerate(rank):
      parent[b, x] = x if i == 0 or rng.random() < 0.2 else rank[rng.integers(i)]
  counted = rng.random((batch, width)) < 0.7
  first, last = _camerini._tour(jnp.asarray(parent), jnp.asarray(counted))
  for b in range(batch):
    want_first, want_last = _dfs(parent[b], counted[b])
    np.testing.assert_array_equal(first[b], want_first)
    np.testing.assert_array_equal(last[b], want_last)


def test_every_word_has_one_owner():
  """`_owners`: every node but ROOT is the target of exactly one in-tree greedy arc (module docstring),
  and the members of its id form a subtree of T rooted at it."""
  full, lengths = _random_batch(3, 6, 96, ties=True)
  for single_root in (True, False):
    weights, penalty, valid, _ = _mst._graph(jnp.asarray(full[:, 1:]), jnp.asarray(full[:, 0]),
                                             jnp.asarray(lengths), single_root)
    st, _ = _mst._contract(weights, penalty, valid, incremental=True)
    nodes = _mst._expand(st, weights.shape[-1])
    heads = jnp.where(jnp.arange(weights.shape[-1]) == 0, 0, nodes)
    owner = np.asarray(_camerini._owners(heads, st))
    assert owner[:, 0].max() == -1 and owner[:, 1:].min() >= 1
    src, dst = np.asarray(st['best_src']), np.asarray(st['best_dst'])
    rows = np.arange(len(owner))[:, None]
    np.testing.assert_array_equal(dst[rows, owner[:, 1:]], np.arange(1, weights.shape[-1])[None].repeat(
        len(owner), 0))
    np.testing.assert_array_equal(src[rows, owner[:, 1:]], np.asarray(heads)[:, 1:])
    ids = np.arange(src.shape[1])[None]                 # no other id's arc is in T: one owner each
    in_tree = ((ids >= 1) & (ids < np.asarray(st['next_id'])[:, None]) & (dst >= 1)
               & (np.take_along_axis(np.asarray(heads), dst, 1) == src))
    assert in_tree.sum() == (weights.shape[-1] - 1) * len(owner)


@pytest.mark.slow
@pytest.mark.parametrize('seed', range(6))
@pytest.mark.parametrize('single_root', [True, False])
def test_sweep_against_brute_force(single_root, seed):
  full, lengths = _random_batch(100 + seed, 6, 400, ties=seed % 2 == 1)
  check_batch(full, lengths, _run(full, lengths, single_root), single_root)
