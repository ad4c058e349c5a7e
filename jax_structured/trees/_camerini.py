"""The best tree, the next-best tree's score and the arc to split on, in one Chu-Liu-Edmonds pass.

Camerini, Fratta & Maffioli (1980, "The k best spanning arborescences of a network"); the form used
here is that of Zmigrod, Vieira & Cotterell (2021, "On Finding the K-best Non-projective Dependency
Trees"). Run Chu-Liu-Edmonds (`_mst._contract`, `_mst._expand`) to get the best tree T. Every id c of
the contraction forest (an original node or a contracted cycle) received a greedy arc
`e_c = (best_src[c] -> best_dst[c])` while it was alive. For the ids whose arc is in T, let f_c be
the best arc entering one of c's members from a source that is not a T-descendant (or self) of
`dst_c = best_dst[c]`, other than e_c itself, both compared by their re-weighted values while c was
alive; `delta_c = value(e_c) - value(f_c)`. The second-best tree (second in the order the algorithm
maximises) has the value `value(T) - min_c delta_c` and is the best tree of the graph without
`e_{c*}`, `c* = argmin_c delta_c`.

All values are the lexicographic `(-penalty, score)` pairs of `_mst` (module docstring there), so the
second tree of that order is the second-best VALID tree when its penalty equals T's (a valid tree's
penalty is 1 with a single root, 0 without), and no second valid tree exists otherwise.

The per-level re-weighting is not kept by the rounds, but it need not be: while c is alive, the
re-weighting of column x (a member of c) is the final one (`st['key_offset']`, `st['score_offset']`)
minus a constant of c (the cycle arcs of c and of the ids above it), so with
`g(u, x) = (-penalty(u, x) - key_offset[x], weight(u, x) - score_offset[x])`,
`delta_c = g(e_c) - max g(f)` over the allowed arcs (the constant cancels).

Only the ids whose arc is in T count, and there is exactly one per node y > 0, c(y), the one whose
arc is T's arc into y (`_owners`); its members form a subtree of T entered at y. So for every node
y: f(y) = the best arc (u -> x) with x a member of c(y), u outside the T-subtree of y, other than
T's arc into y. Vectorised in O(N^2) work per sentence plus O(N log N) gathers, no [B, N, N, N] or
[B, 2N, 2N] array:
  * a depth-first traversal of T (`_tour`: Euler tour and list ranking) numbers the nodes so that
    the subtree of y is the range [pre[y], end[y]);
  * the column keys of `_mst._column_keys` (within a column their order is the order of g; the arc
    from x's T-parent left out) with the sources permuted into that order, and their running
    maxima from both ends (`_running_max`): the best key of column x from outside the subtree of y
    is the max of two entries;
  * x is a member of c(y) iff c(y) contains c(x): y is an ancestor-or-self of x in the forest of the
    owner ids (`_owner_forest`), whose traversal, run in the same batch as T's, numbers the members
    of c(y) as a range;
  * f(y) = the lexicographic max of g over the members' candidates, each key decoded back to its
    (penalty, weight) as `_mst._greedy_arcs` does.

Cost (CPU, float32, N(0, 1) scores, single root, one core): about 0.2-0.25 of one `trees.mst` on
top of it (the pass takes ~1.25x `trees.mst` at 512x32, ~1.2x at 64x64). On the CPU every [B, N, N]-sized gather
is a gather of whole rows (`_rows`): XLA's CPU fuses an element gather with its operand's producers
and its index computation and then runs several times slower.
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax

from jax_structured.trees import _mst

__all__ = ['best_and_next']


def _smallest(mask, values):
  """int32 [B, K]: the smallest of `values` int [B, M] where `mask` [B, K, M] (M + 1 where none), as
  a float32 reduction (exact below 2^24; XLA's CPU runs integer reductions several times slower)."""
  width = mask.shape[-1]
  least = jnp.min(jnp.where(mask, values.astype(jnp.float32)[:, None, :], width + 1), axis=-1)
  return least.astype(jnp.int32)


def _tour(parent, counted):
  """Positions in a depth-first traversal of the forest `parent` int32 [B, M] (roots point to
  themselves; the roots, and every node's children, visited in id order), counting only the
  `counted` nodes (bool [B, M]).

  The Euler tour (an entry and an exit event per node, the roots hung under a virtual node M) is a
  linked list whose successors follow from each node's first child (a segment min) and next sibling
  (a [B, M, M] reduction); the counts come from list ranking by pointer jumping (ceil(log2(2M + 2)) gathers over
  [B, 2M + 2]).

  Returns:
    (first, last) int32 [B, M]: the number of counted nodes entered before x, and that number plus
    the counted nodes of x's subtree (x included): the counted nodes of the subtree of x take the
    positions [first[x], last[x]).
  """
  batch, width = parent.shape
  node = jnp.arange(width, dtype=jnp.int32)
  above = jnp.where(parent == node, width, parent)                         # roots under node M
  with_top = jnp.arange(width + 1, dtype=jnp.int32)
  first_child = jax.ops.segment_min(jnp.broadcast_to(node, parent.shape).reshape(-1),
                                    _mst._flat_segments(above, width + 1), batch * (width + 1))
  first_child = jnp.minimum(first_child.reshape(batch, width + 1), width + 1)    # [B, M + 1]
  next_sibling = _smallest((above[:, None, :] == above[:, :, None]) & (node[None, :] > node[:, None])[None],
                           node[None, :])                                   # [B, M]
  # Events: entry of x at x, exit of x at M + 1 + x (x <= M); the exit of M ends the list.
  exit_of = lambda x: width + 1 + x
  after_entry = jnp.where(first_child <= width, first_child, exit_of(with_top))
  after_exit = jnp.where(next_sibling <= width, next_sibling, exit_of(above))
  last_event = exit_of(width)
  succ = jnp.concatenate([after_entry, after_exit, jnp.full((batch, 1), last_event, jnp.int32)], axis=1)
  count = jnp.concatenate([jnp.broadcast_to(counted, parent.shape).astype(jnp.int32),
                           jnp.zeros((batch, width + 2), jnp.int32)], axis=1)
  jump = lambda _, c: (c[0] + _mst._take(c[0], c[1]), _mst._take(c[1], c[1]))
  count, succ = lax.fori_loop(0, _mst._log2_ceil(2 * width + 2), jump, (count, succ))
  total = count[:, width:width + 1]
  return total - count[:, :width], total - count[:, width + 1:2 * width + 1]


def _running_max(x, reversed_x):
  """Running maxima of x [B, T, K] along T, from the start and from the end, as [B, T, 2K]: entry
  [b, t, k] = max(x[b, :t + 1, k]), entry [b, t, K + k] = max(x[b, T - 1 - t:, k]) (`reversed_x` is
  x[:, ::-1]). One chain of T - 1 maxima of contiguous [B, 2K] slices for both directions (faster on
  the CPU than a scan along the minor axis, and half the operations of two chains)."""
  width = x.shape[1]
  both = jnp.concatenate([x, reversed_x], axis=2)
  out = [both[:, 0]]
  for t in range(1, width):
    out.append(jnp.maximum(out[-1], both[:, t]))
  return jnp.stack(out, axis=1)


def _rows(x, index):
  """`x[b, index[b, i], :]` for x [B, T, K], index int [B, I] in [0, T) -> [B, I, K]: one gather of
  whole rows of the flattened [B T, K] array (on the CPU several times faster than element gathers
  along axis 1, whose indices XLA builds and checks element by element)."""
  batch, width, k = x.shape
  flat = _mst._flat_segments(index, width)
  return x.reshape(batch * width, k)[flat].reshape(index.shape + (k,))


def _decode(key, levels, root_weights):
  """(negated penalty float32, weight) of column keys `key` [B, K, N] (`_mst._column_keys`; column on
  the last axis, levels [B, 3, N], root_weights [B, N]), as `_mst._greedy_arcs` reads them."""
  n_nodes = key.shape[-1]
  free = key > levels[:, None, 0]
  is_root = key == levels[:, None, 0]
  neg_penalty = jnp.where(free, 0., jnp.where(is_root, -1., jnp.where(key == levels[:, None, 1], -n_nodes,
                                                                     -n_nodes - 1.))).astype(jnp.float32)
  weight = jnp.where(free, key, jnp.where(is_root, root_weights[:, None, :], jnp.zeros((), key.dtype)))
  return neg_penalty, weight


def _owners(heads, st):
  """int32 [B, N]: c(y), the id whose greedy arc is T's arc into y (-1 for ROOT).

  Exactly one id per node y > 0: along the ids containing y (bottom up) y is the entry of a first
  stretch of them (the arc of T into y enters each); the highest of these, c(y), is either a top id
  or a member of a cycle that contains T's parent of y, so its greedy arc (the one it had when it
  was alive) is T's arc into y; those below it were the entry members of their cycles, whose cycle
  arcs T does not keep."""
  batch, n_nodes = heads.shape
  ids = jnp.arange(2 * n_nodes, dtype=jnp.int32)
  src, dst = st['best_src'], st['best_dst']
  in_tree = (ids >= 1) & (ids < st['next_id'][:, None]) & (dst >= 1) & (_mst._take(heads, dst) == src)
  owner = jax.ops.segment_max(jnp.where(in_tree, ids, -1).reshape(-1), _mst._flat_segments(dst, n_nodes),
                              batch * n_nodes)
  return jnp.maximum(owner.reshape(batch, n_nodes), -1)


def _owner_forest(owner, st):
  """int32 [B, N]: for every node y > 0, the node y' whose id c(y') is the smallest owner id that
  strictly contains c(y) (0 = ROOT when none does; ROOT points to itself).

  The first owner id above c(y) in the contraction forest, by pointer jumping: a pointer stays on an
  owner id (or a top) and otherwise jumps to where its target points."""
  batch, n_nodes = owner.shape
  n_ids = 2 * n_nodes
  ids = jnp.arange(n_ids, dtype=jnp.int32)
  has = owner >= 0
  marked = jnp.zeros(batch * n_ids, bool).at[_mst._flat_segments(jnp.maximum(owner, 0), n_ids, keep=has)].set(
      True, mode='drop').reshape(batch, n_ids)
  forest = jnp.where(st['parent'] >= 0, st['parent'], ids)

  def jump(_, above):
    stop = _mst._take(marked, above) | (_mst._take(forest, above) == above)
    return jnp.where(stop, above, _mst._take(above, above))

  above = lax.fori_loop(0, _mst._log2_ceil(n_ids), jump, forest)
  found = _mst._take(above, jnp.maximum(owner, 0))
  parent = jnp.where(has & _mst._take(marked, found), _mst._take(st['best_dst'], found), 0)
  return jnp.where(has, parent, 0)


def _best_swaps(weights, penalty, valid, nodes, st, levels):
  """For every node y, the swap of the id c(y) whose greedy arc is T's arc into y (module docstring).

  Args:
    weights, penalty, valid: [B, N, N] as `_mst._contract` takes them; nodes: int32 [B, N], T's head
    node of every node (`_mst._expand`); st, levels: `_mst._contract`'s results.

  Returns:
    (usable bool [B, N]: some allowed arc enters c(y); delta_key float32 [B, N] (an integer);
    delta_score [B, N]).
  """
  batch, n_nodes = nodes.shape
  node = jnp.arange(n_nodes, dtype=jnp.int32)
  heads = jnp.where(node == 0, 0, nodes)                                  # ROOT: a fixed point
  # c(y): the id whose greedy arc is T's arc into y (one per node but ROOT). x is a member of c(y)
  # iff c(y) contains c(x): iff y is an ancestor of x in the forest of the ids c(y) (`_owner_forest`).
  owner = _owners(heads, st)
  owner_parent = _owner_forest(owner, st)
  # One traversal of T (the sources outside the subtree of y: positions outside [pre[y], end[y])) and
  # one of the owners' forest (the members of c(y): positions in [first[y], last[y])), as one batch.
  first, last = _tour(jnp.concatenate([heads, owner_parent]), jnp.ones((2 * batch, n_nodes), bool))
  pre, end = first[:batch], last[:batch]
  position, low, high = first[batch:, None, :], first[batch:, :, None], last[batch:, :, None]
  member = (position >= low) & (position < high)                           # [B, N(y), N(x)]
  # Column keys with the sources in preorder (T-parent arcs left out), running maxima both ways.
  order = jnp.zeros(batch * n_nodes, jnp.int32).at[_mst._flat_segments(pre, n_nodes)].set(
      jnp.broadcast_to(node, (batch, n_nodes)).reshape(-1)).reshape(batch, n_nodes)
  keys = _mst._column_keys(weights, penalty, valid)[0]                     # as `_contract`'s: shared
  keys = jnp.where(node[None, :, None] == heads[:, None, :], -jnp.inf, keys)  # [B, N(u), N(x)]
  by_position = _rows(keys, order)
  running = _running_max(by_position, by_position[:, ::-1])                 # [B, N(p), 2 N(x)]
  # The best key of column x from outside the subtree of y: [B, N(y), N(x)], positions [0, pre[y])
  # (the first half of `running`, row pre[y] - 1) and [end[y], N) (the second, row N - 1 - end[y]).
  start = _rows(running, jnp.maximum(pre - 1, 0))[..., :n_nodes]
  rest = _rows(running, jnp.maximum(n_nodes - 1 - end, 0))[..., n_nodes:]
  outside = jnp.maximum(jnp.where((pre > 0)[:, :, None], start, -jnp.inf),
                        jnp.where((end < n_nodes)[:, :, None], rest, -jnp.inf))
  # f: the lexicographic max of g over the members' candidates.
  neg_penalty, weight = _decode(outside, levels, weights[:, 0, :])
  usable = member & (outside > -jnp.inf)
  g_key = jnp.where(usable, neg_penalty - st['key_offset'][:, None, :].astype(jnp.float32), -jnp.inf)
  f_key = jnp.max(g_key, axis=-1)                                          # [B, N(y)]
  g_score = jnp.where(usable & (g_key == f_key[..., None]), weight - st['score_offset'][:, None, :],
                      -jnp.inf)
  f_score = jnp.max(g_score, axis=-1)
  # g(e): T's arc into y.
  arc = heads * n_nodes + node
  e_key = (-_mst._take(penalty.reshape(batch, -1), arc) - st['key_offset']).astype(jnp.float32)
  e_score = _mst._take(weights.reshape(batch, -1), arc) - st['score_offset']
  usable = (node >= 1) & (f_key > -jnp.inf)
  return usable, e_key - f_key, e_score - f_score


def _pass(weights, penalty, valid, real, single_root, incremental):
  """The whole pass on one platform's round body: (heads int32 [B, N] nodes, score, next_score,
  split_src, split_dst [B], original nodes)."""
  batch, n_nodes = real.shape
  st, levels = _mst._contract(weights, penalty, valid, incremental)
  nodes = _mst._expand(st, n_nodes)
  usable, delta_key, delta_score = _best_swaps(weights, penalty, valid, nodes, st, levels)
  # T's value (real words only: padding hangs from ROOT by a free arc of any weight).
  arc = nodes * n_nodes + jnp.arange(n_nodes, dtype=jnp.int32)
  word = real & (jnp.arange(n_nodes) > 0)[None, :]
  tree_penalty = jnp.sum(jnp.where(word, _mst._take(penalty.reshape(batch, -1), arc), 0), axis=-1)
  tree_score = jnp.sum(jnp.where(word, _mst._take(weights.reshape(batch, -1), arc), 0), axis=-1)
  want = (jnp.sum(word, axis=-1) > 0).astype(jnp.int32) if single_root else 0
  valid_tree = tree_penalty == want
  # The cheapest swap: the lexicographic min of delta over the usable nodes (ties: lowest node).
  node = jnp.arange(n_nodes, dtype=jnp.int32)
  min_key = jnp.min(jnp.where(usable, delta_key, jnp.inf), axis=-1)
  usable &= delta_key == min_key[:, None]
  min_score = jnp.min(jnp.where(usable, delta_score, jnp.inf), axis=-1)
  chosen = jnp.min(jnp.where(usable & (delta_score == min_score[:, None]), node, n_nodes), axis=-1)
  has_next = valid_tree & (chosen < n_nodes) & (min_key == 0)
  split_dst = jnp.where(has_next, chosen, 0)
  split_src = jnp.where(has_next, _mst._take(nodes, split_dst[:, None])[:, 0], 0)
  minus_inf = jnp.asarray(-jnp.inf, weights.dtype)
  score = jnp.where(valid_tree, tree_score, minus_inf)
  next_score = jnp.where(has_next, tree_score - min_score, minus_inf)
  return nodes, score, next_score, split_src, split_dst


@functools.partial(jax.jit, static_argnames=('single_root', 'incremental'))
def best_and_next(full, lengths, single_root, incremental=None):
  """The best tree, the second-best tree's score and the arc that separates them (module docstring).

  Args:
    full: float [C, n + 1, n] scores, row 0 = ROOT, row h + 1 = word h; `-inf` forbids an arc.
    lengths: int [C], the number of real words (padding words get head -1).
    single_root: static; if True exactly one word hangs from ROOT.
    incremental: static round body of `_mst._contract`; None = by the platform compiled for (as
      `trees.mst`).

  Returns:
    dict(heads int32 [C, n] (-1 = ROOT and padding), score [C] (the best tree's score, -inf if there
    is no valid tree), next_score [C] (the second-best valid tree's score, -inf if none),
    split_head int32 [C], split_dep int32 [C]: the arc e_{c*} of the best tree (word coordinates, head
    -1 = ROOT) whose exclusion leaves a graph whose best tree scores next_score; both -1 when
    next_score is -inf). Ties are broken deterministically (lowest index first; among equal swaps the
    lowest split_dep). In float32 the
    next score is `score - delta`, rounded differently from the sum of the second tree's arcs.
  """
  count, n = full.shape[0], full.shape[-1]
  lengths = jnp.clip(lengths, 0, n)
  if n == 0:
    minus_one = jnp.full((count,), -1, jnp.int32)
    return dict(heads=jnp.zeros((count, 0), jnp.int32), score=jnp.zeros((count,), full.dtype),
                next_score=jnp.full((count,), -jnp.inf, full.dtype), split_head=minus_one,
                split_dep=minus_one)
  weights, penalty, valid, real = _mst._graph(full[:, 1:], full[:, 0], lengths, single_root)
  args = (weights, penalty, valid, real)
  run = functools.partial(_pass, single_root=single_root)
  if incremental is None:
    out = lax.platform_dependent(*args, cpu=functools.partial(run, incremental=True),
                                 default=functools.partial(run, incremental=False))
  else:
    out = run(*args, incremental=incremental)
  nodes, score, next_score, split_src, split_dst = out
  heads = jnp.where(real[:, 1:], nodes[:, 1:] - 1, -1).astype(jnp.int32)
  has_next = next_score > -jnp.inf
  return dict(heads=heads, score=score, next_score=next_score,
              split_head=jnp.where(has_next, split_src - 1, -1).astype(jnp.int32),
              split_dep=jnp.where(has_next, split_dst - 1, -1).astype(jnp.int32))
