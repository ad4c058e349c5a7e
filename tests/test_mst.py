"""Tests of trees.mst (on-device Chu-Liu-Edmonds) against brute force and networkx's Edmonds."""
import brute_force
from stages import SINGLE_ROOT_QUICK
import jax
import jax.numpy as jnp
import networkx as nx
import numpy as np
import pytest

from jax_structured.trees._mst import mst


def _is_tree(heads, single_root):
  heads = tuple(int(h) for h in heads)
  if not brute_force._is_tree(heads) or any(h == m for m, h in enumerate(heads)):
    return False
  return (not single_root) or sum(h == -1 for h in heads) == 1


def _scores(rng, shape, n, ties=False, many_roots=False):
  arc = rng.normal(size=shape + (n, n))
  root = rng.normal(size=shape + (n,)) + (3.0 if many_roots else 0.0)
  if ties:
    arc, root = np.round(arc), np.round(root)
  return arc, root


def _second_best_gap(arc, root, single_root):
  trees = brute_force.all_trees(len(root), single_root)
  s = np.sort(brute_force.tree_scores(arc, root, trees))[::-1]
  return np.inf if len(s) < 2 else s[0] - s[1]


@pytest.mark.parametrize('single_root', [True, False])
def test_brute_force_with_padding_jit_and_vmap(single_root):
  rng = np.random.default_rng(0 if single_root else 1)
  n, batch = 6, 48
  arc, root = _scores(rng, (batch,), n)
  arc[: batch // 3], root[: batch // 3] = np.round(arc[: batch // 3]), np.round(root[: batch // 3])
  root[batch // 3: 2 * batch // 3] += 3.0  # unconstrained optimum has several root children
  lengths = rng.integers(1, n + 1, size=batch)
  lengths[:4] = n
  jitted = jax.jit(mst, static_argnames='single_root')(arc, root, lengths, single_root=single_root)
  mapped = jax.vmap(lambda a, r, l: mst(a, r, l, single_root=single_root))(arc, root, lengths)
  np.testing.assert_array_equal(jitted, mapped)
  heads = np.asarray(jitted)
  assert heads.dtype == np.int32
  checked_heads = 0
  for b in range(batch):
    k = lengths[b]
    a, r = arc[b, :k, :k], root[b, :k]
    assert np.all(heads[b, k:] == -1)
    assert _is_tree(heads[b, :k], single_root), heads[b]
    _, _, _, best_heads, best = brute_force.reference(a, r, single_root=single_root)
    got = brute_force.tree_scores(a, r, heads[b, None, :k])[0]
    np.testing.assert_allclose(got, best, rtol=0, atol=1e-9)
    if _second_best_gap(a, r, single_root) > 1e-6:
      np.testing.assert_array_equal(heads[b, :k], best_heads)
      checked_heads += 1
  assert checked_heads >= batch // 2


def test_single_root_differs_from_multi_root_when_it_should():
  # Two words that both prefer ROOT strongly: multi-root keeps both, single-root must pick one and
  # hang the other from it, choosing the better of the two options (0 -> 1 costs 1, 1 -> 0 costs 2).
  arc = np.array([[0., -1.], [-2., 0.]])
  root = np.array([5., 5.])
  np.testing.assert_array_equal(mst(arc, root, single_root=False), [-1, -1])
  np.testing.assert_array_equal(mst(arc, root, single_root=True), [-1, 0])


@pytest.mark.parametrize('single_root', [True, False])
def test_neg_inf_arcs_never_chosen_when_a_tree_exists(single_root):
  rng = np.random.default_rng(2)
  n, batch = 5, 40
  arc, root = _scores(rng, (batch,), n)
  arc[rng.random(arc.shape) < 0.5] = -np.inf
  root[rng.random(root.shape) < 0.5] = -np.inf
  with jax.debug_nans(True):
    heads = np.asarray(mst(arc, root, single_root=single_root))
  found = 0
  for b in range(batch):
    assert _is_tree(heads[b], single_root)
    trees = brute_force.all_trees(n, single_root)
    s = brute_force.tree_scores(np.where(np.isinf(arc[b]), 0, arc[b]), np.where(np.isinf(root[b]), 0,
                                                                                root[b]), trees)
    finite = np.isfinite(brute_force.tree_scores(arc[b], root[b], trees))
    got = brute_force.tree_scores(arc[b], root[b], heads[b, None])[0]
    if finite.any():
      found += 1
      np.testing.assert_allclose(got, s[finite].max(), atol=1e-9)
  assert found >= 5


def test_padding_is_exact_and_batch_shape_is_kept():
  rng = np.random.default_rng(3)
  arc, root = _scores(rng, (2, 3), 9)
  lengths = np.array([[9, 4, 1], [0, 4, 9]])
  heads = np.asarray(mst(arc, root, lengths))
  assert heads.shape == (2, 3, 9)
  for i in range(2):
    for j in range(3):
      k = lengths[i, j]
      alone = np.asarray(mst(arc[i, j, :k, :k], root[i, j, :k]))
      np.testing.assert_array_equal(heads[i, j, :k], alone)
      assert np.all(heads[i, j, k:] == -1)


def _nx_best(arc, root, single_root):
  """Best tree score by networkx (Edmonds); single-root by enumerating the root child."""
  n = len(root)

  def edmonds(nodes, arcs):
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    g.add_weighted_edges_from(arcs)
    t = nx.maximum_spanning_arborescence(g, attr='weight', preserve_attrs=True)
    return sum(d['weight'] for _, _, d in t.edges(data=True))

  words = [(h, m, arc[h, m]) for h in range(n) for m in range(n) if h != m]
  if not single_root:
    return edmonds(range(-1, n), words + [(-1, m, root[m]) for m in range(n)])
  return max(root[r] + edmonds(range(n), [e for e in words if e[1] != r]) for r in range(n))


@pytest.mark.parametrize('n,single_root', [(30, True), (45, False), (100, False)])
def test_networkx_edmonds_large(n, single_root):
  rng = np.random.default_rng(n)
  arc, root = _scores(rng, (), n)
  # Make cycles likely: a random cyclic permutation of strong arcs, and strong ROOT arcs.
  perm = rng.permutation(n)
  arc[perm, np.roll(perm, 1)] += 3.0
  root += 1.0
  heads = np.asarray(jax.jit(mst, static_argnames='single_root')(arc, root, single_root=single_root))
  assert _is_tree(heads, single_root)
  got = brute_force.tree_scores(arc, root, heads[None])[0]
  np.testing.assert_allclose(got, _nx_best(arc, root, single_root), rtol=0, atol=1e-9)


def test_single_root_exact_with_integer_scores_against_networkx_reweighting():
  # Integer scores make float64 sums exact, so networkx with a finite penalty C on ROOT arcs
  # (Stanojevic & Cohen 2021) is provably exact when C exceeds any difference of tree scores.
  rng = np.random.default_rng(7)
  n = 60
  arc = rng.integers(-50, 50, size=(n, n)).astype(np.float64)
  root = rng.integers(0, 100, size=n).astype(np.float64)
  big = 4.0 * n * 100
  g = nx.DiGraph()
  g.add_weighted_edges_from([(h, m, arc[h, m]) for h in range(n) for m in range(n) if h != m]
                            + [(-1, m, root[m] - big) for m in range(n)])
  t = nx.maximum_spanning_arborescence(g)
  expected = sum(root[m] if h == -1 else arc[h, m] for h, m in t.edges())
  heads = np.asarray(mst(arc, root, single_root=True))
  assert _is_tree(heads, True)
  assert brute_force.tree_scores(arc, root, heads[None])[0] == expected


def test_float32_and_deterministic_ties():
  rng = np.random.default_rng(4)
  arc = jnp.asarray(np.round(rng.normal(size=(4, 6, 6))), jnp.float32)
  root = jnp.asarray(np.round(rng.normal(size=(4, 6))), jnp.float32)
  first = np.asarray(mst(arc, root))
  np.testing.assert_array_equal(first, mst(arc, root))
  for b in range(4):
    best = brute_force.reference(np.asarray(arc[b], np.float64), np.asarray(root[b], np.float64))[-1]
    got = brute_force.tree_scores(np.asarray(arc[b], np.float64), np.asarray(root[b], np.float64),
                                  first[b, None])[0]
    np.testing.assert_allclose(got, best, atol=1e-6)


def test_bad_shapes_raise():
  with pytest.raises(ValueError, match='root_scores'):
    mst(np.zeros((2, 3, 3)), np.zeros((2, 4)))
  with pytest.raises(ValueError, match='arc_scores'):
    mst(np.zeros((3, 4)), np.zeros(3))
  with pytest.raises(ValueError, match='lengths'):
    mst(np.zeros((2, 3, 3)), np.zeros((2, 3)), np.zeros(3, int))
  with pytest.raises(ValueError, match=r'lengths must lie in \[0, 3\]'):
    mst(np.zeros((2, 3, 3)), np.zeros((2, 3)), np.array([1, 4]))


def test_best_incoming_matches_numpy_lexsort():
  # Every round of the on-device CLE takes each column's best source outside its supernode from one
  # precomputed float key per arc; its order must be the lexicographic (penalty, -weight, source) one.
  from jax_structured.trees import _mst
  rng = np.random.default_rng(11)
  n = 7
  for trial in range(8):
    weights = np.round(rng.normal(size=(n, n))).astype(np.float32)   # many float ties
    if trial == 7:
      weights[2:4] = np.finfo(np.float32).min                          # at the bottom of the range
    penalty = np.where(rng.random((n, n)) < 0.3, n, 0).astype(np.int32)   # -inf arcs
    penalty[0] += (rng.random(n) < 0.7).astype(np.int32)                # ROOT arcs (single root)
    valid = rng.random((n, n)) < 0.8
    rep = rng.integers(0, 3, size=n).astype(np.int32)
    keys, levels = _mst._column_keys(jnp.asarray(weights), jnp.asarray(penalty), jnp.asarray(valid))
    best_key, source = jax.jit(_mst._best_incoming)(jnp.swapaxes(keys, 0, 1)[None], jnp.asarray(rep)[None])
    found = best_key > -np.inf
    usable = valid & (rep[:, None] != rep[None, :])
    for v in range(n):
      rows = np.flatnonzero(usable[:, v])
      assert bool(found[0, v]) == (rows.size > 0)
      if rows.size == 0:
        continue
      best = rows[np.lexsort((rows, -weights[rows, v], penalty[rows, v]))[0]]
      if trial == 7 and penalty[best, v] == 0 and weights[best, v] == np.finfo(np.float32).min:
        # Weights within 3 ulps of the lowest float are one key (documented): any of them may win.
        assert weights[int(source[0, v]), v] == weights[best, v] and penalty[int(source[0, v]), v] == 0
        continue
      assert int(source[0, v]) == best, (trial, v)
      # The chosen arc's class is readable from its key alone (the round relies on it).
      level = {0: best_key[0, v] > levels[0, v], 1: best_key[0, v] == levels[0, v],
               n: best_key[0, v] == levels[1, v], n + 1: best_key[0, v] == levels[2, v]}
      assert level[int(penalty[best, v])], (trial, v)
      if penalty[best, v] == 0 and trial != 7:
        assert float(best_key[0, v]) == weights[best, v]


@pytest.mark.parametrize('stale_share', [0.1, 0.9])   # the chunked search and the whole-pass branch
def test_refresh_of_stale_columns_matches_a_full_search(stale_share):
  from jax_structured.trees import _mst
  rng = np.random.default_rng(3)
  batch, n = 5, 40
  keys = np.round(rng.normal(size=(batch, n, n))).astype(np.float32)
  keys[rng.random(keys.shape) < 0.2] = -np.inf
  rep = jnp.asarray(rng.integers(0, 6, size=(batch, n)), jnp.int32)
  best, source = _mst._best_incoming(jnp.asarray(keys), rep)
  stale = jnp.asarray(rng.random((batch, n)) < stale_share)
  # Stale columns hold garbage that the refresh must replace; the others must be kept as they are.
  wrong_best = jnp.where(stale, 123.0, best)
  wrong_source = jnp.where(stale, 7, source)
  got_best, got_source = jax.jit(_mst._refresh_columns, static_argnums=5)(
      jnp.asarray(keys), rep, wrong_best, wrong_source, stale, 8)
  np.testing.assert_array_equal(got_best, best)
  np.testing.assert_array_equal(got_source, source)


def test_cycle_walk_from_the_one_new_id_matches_numpy():
  # The Prim-like rounds find their one cycle by walking from the id the previous round created.
  from jax_structured.trees import _mst
  rng = np.random.default_rng(5)
  batch, width = 64, 20
  pred = np.zeros((batch, width), np.int32)
  start = np.zeros(batch, np.int32)
  want = np.zeros((batch, width), bool)
  for b in range(batch):
    order = rng.permutation(np.arange(1, width))
    parent = {int(order[0]): 0}                       # a random forest hanging from ROOT (0)
    for i, node in enumerate(order[1:], 1):
      parent[int(node)] = int(order[rng.integers(0, i)])
    pred[b] = [0] + [parent[i] for i in range(1, width)]
    start[b] = order[rng.integers(0, width - 1)]
    if b % 3:                                          # close a cycle through start (length 1-8)
      ancestors = [int(start[b])]
      while pred[b, ancestors[-1]] != 0 and len(ancestors) < 8:
        ancestors.append(int(pred[b, ancestors[-1]]))
      top = ancestors[rng.integers(0, len(ancestors))]
      if top != start[b] or b % 2:                     # length 1 would be a self loop: skip those
        if top != start[b]:
          pred[b, top] = start[b]
          want[b, ancestors[:ancestors.index(top) + 1]] = True
  on_cycle, label, resolved = jax.jit(_mst._cycle_through, static_argnums=2)(
      jnp.asarray(pred), jnp.asarray(start), 2 * width)
  assert bool(resolved)
  np.testing.assert_array_equal(on_cycle, want)
  for b in range(batch):
    if want[b].any():
      assert (np.asarray(label[b])[want[b]] == np.flatnonzero(want[b]).min()).all()
  # A walk that needs more steps than allowed says so (the round then falls back to doubling).
  chain = np.array([[0, 0] + list(range(1, width - 1))], np.int32)   # width - 1 -> ... -> 1 -> 0
  _, _, resolved = _mst._cycle_through(jnp.asarray(chain), jnp.asarray([width - 1]), 4)
  assert not bool(resolved)


@pytest.mark.parametrize('single_root', SINGLE_ROOT_QUICK)
def test_straight_rounds_of_accelerators_match_the_incremental_ones(single_root):
  # GPUs and TPUs run a round as a straight line (all columns searched, fixed-step doubling); the CPU
  # skips work with conds. Both must give the same heads, on ties, -inf arcs and padding too.
  from jax_structured.trees import _mst
  rng = np.random.default_rng(21 if single_root else 22)
  for n, batch in [(6, 48), (40, 12)]:
    arc, root = _scores(rng, (batch,), n, ties=n == 6)
    arc[rng.random(arc.shape) < 0.1] = -np.inf
    root[: batch // 4] += 3.0
    lengths = rng.integers(1, n + 1, size=batch)
    args = (jnp.asarray(arc, jnp.float32), jnp.asarray(root, jnp.float32), jnp.asarray(lengths))
    straight = np.asarray(_mst._mst_batched(*args, single_root, incremental=False))
    incremental = np.asarray(_mst._mst_batched(*args, single_root, incremental=True))
    np.testing.assert_array_equal(straight, incremental)
    if n == 6:   # and brute force, where it is cheap
      for b in range(batch):
        k = lengths[b]
        a, r = np.asarray(args[0][b, :k, :k], np.float64), np.asarray(args[1][b, :k], np.float64)
        assert _is_tree(straight[b, :k], single_root)
        best = brute_force.tree_scores(
            np.where(np.isinf(a), -1e9, a), np.where(np.isinf(r), -1e9, r),
            brute_force.all_trees(k, single_root)).max()
        got = brute_force.tree_scores(np.where(np.isinf(a), -1e9, a), np.where(np.isinf(r), -1e9, r),
                                      straight[b, None, :k])[0]
        np.testing.assert_allclose(got, best, rtol=0, atol=1e-4)


def test_rounds_on_accelerators_have_no_loop_or_branch_inside():
  # On a GPU every conditional or loop predicate is a device-to-host copy and a wait: the incremental
  # rounds made mst 5x slower on an H200. Lowered for CUDA / TPU, the program keeps two loops (the
  # rounds and the expansion), nothing inside; lowered for the CPU it keeps the incremental ones.
  arc = jnp.zeros((4, 9, 9))
  root = jnp.zeros((4, 9))
  traced = jax.jit(mst).trace(arc, root)
  for platform in ('cuda', 'tpu'):
    text = traced.lower(lowering_platforms=(platform,)).as_text()
    assert text.count('stablehlo.while') == 2, platform
  assert traced.lower(lowering_platforms=('cpu',)).as_text().count('stablehlo.while') > 2


@pytest.mark.parametrize('single_root', SINGLE_ROOT_QUICK)
def test_several_straight_rounds_per_predicate_match_one(single_root):
  # GPUs and TPUs run R rounds per iteration of the rounds loop (one host read of its predicate per R
  # rounds); rounds after the predicate turns false keep the carry, so every R gives the carry of
  # R = 1: heads, contraction forest, re-weighting and the round count `it` alike.
  from jax_structured.trees import _mst
  rng = np.random.default_rng(31 if single_root else 32)

  def contract(rounds):
    @jax.jit
    def run(arc, root, lengths):
      weights, penalty, valid, real = _mst._graph(arc, root, lengths, single_root)
      st, levels = _mst._contract(weights, penalty, valid, False, rounds)
      heads = _mst._expand(st, weights.shape[-1])[:, 1:] - 1
      return st, levels, jnp.where(real[:, 1:], heads, -1)
    return run

  for n, batch in [(6, 40), (23, 16)]:
    arc, root = _scores(rng, (batch,), n, ties=n == 6)
    arc[rng.random(arc.shape) < 0.1] = -np.inf
    root[rng.random(root.shape) < 0.1] = -np.inf
    root[: batch // 4] += 3.0
    lengths = rng.integers(0, n + 1, size=batch)
    lengths[:2] = n
    args = (jnp.asarray(arc, jnp.float32), jnp.asarray(root, jnp.float32), jnp.asarray(lengths))
    want = contract(1)(*args)
    assert int(want[0]['it']) >= 3         # rounds enough for R = 2, 3 and 8 to differ from R = 1
    np.testing.assert_array_equal(
        want[2], _mst._mst_batched(*args, single_root, incremental=True))
    for rounds in (2, 3, 8):
      got = contract(rounds)(*args)
      jax.tree.map(np.testing.assert_array_equal, got, want)


def test_fixed_doubling_steps_suffice_for_n_live_ids():
  # The straight rounds double log2(N - 1) times over 2N ids: at most N ids are live (every other id
  # points to itself, ROOT too), so paths into cycles and cycles have at most N - 1 steps. Worst cases
  # (a chain through every live id into ROOT, one cycle through all of them) and random graphs.
  from jax_structured.trees import _mst
  rng = np.random.default_rng(7)
  n_nodes = 33
  width = 2 * n_nodes
  steps = _mst._log2_ceil(n_nodes - 1)
  graphs = []
  for kind in ('chain', 'cycle', 'random', 'random', 'random', 'random'):
    live = np.concatenate([[0], rng.choice(np.arange(1, width), n_nodes - 1, replace=False)])
    order = rng.permutation(live[1:])
    pred = np.arange(width, dtype=np.int32)
    if kind == 'chain':
      pred[order] = np.concatenate([order[1:], [0]])
    elif kind == 'cycle':
      pred[order] = np.roll(order, -1)
    else:
      pred[order] = rng.choice(live, n_nodes - 1)
    active = np.zeros(width, bool)
    active[live[1:]] = True
    graphs.append((pred, active))
  pred = jnp.asarray(np.stack([g[0] for g in graphs]))
  active = jnp.asarray(np.stack([g[1] for g in graphs]))
  ids = jnp.arange(width)
  on_cycle, label = _mst._cycles(pred, active, steps=steps)
  want_on_cycle, want_label = _mst._cycles(pred, active)
  np.testing.assert_array_equal(on_cycle & (pred != ids), want_on_cycle & (pred != ids))
  np.testing.assert_array_equal(jnp.where(want_on_cycle, label, -1), jnp.where(want_on_cycle, want_label, -1))
  assert bool(jnp.any(want_on_cycle[1] & (pred[1] != ids)))     # the long cycle is found


def test_dense_segment_best_of_straight_rounds_matches_the_scatters():
  # The straight rounds take each supernode's best arc by masked reductions instead of scatters: the
  # same (key, score, index) per segment, ties to the lowest index, empty segments included.
  from jax_structured.trees import _mst
  rng = np.random.default_rng(13)
  batch, k, segments = 6, 30, 60
  key = rng.integers(-3, 2, size=(batch, k)).astype(np.int32)
  key[rng.random(key.shape) < 0.2] = _mst._INVALID
  score = np.round(rng.normal(size=(batch, k))).astype(np.float32)   # many ties
  seg = rng.integers(0, segments // 3, size=(batch, k)).astype(np.int32)   # most segments empty
  args = (jnp.asarray(key), jnp.asarray(score), jnp.asarray(seg), segments)
  want = jax.jit(_mst._segment_best, static_argnums=3)(*args)
  got = jax.jit(_mst._segment_best_dense, static_argnums=3)(*args)
  for g, w in zip(got, want):
    np.testing.assert_array_equal(g, w)
