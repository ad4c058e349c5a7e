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

The search for f_c, vectorised in O(N^2 log N) gathers plus one [N, N] x [N, N] product per sentence:
  * `d[x, u]` = depth of the lowest common T-ancestor of u and x (a product of the T-ancestor
    indicator matrix with itself). For c containing x, `dst_c` is a T-ancestor of x (the members of c
    form a subtree of T entered at `dst_c`), so u is outside the subtree of `dst_c` iff
    `d[x, u] < depth(dst_c)`;
  * per column x, the best key of its arcs (`_mst._column_keys`: within a column the key order is
    the order of g) bucketed by `d[x, u]` (the arc from x's T-parent left out: for the id entered at
    x it is e_c, for the others it lies inside c), then a running max over the buckets:
    `best[x, t]` = best key with `d[x, u] <= t`;
  * f_c = the lexicographic max of g over c's member columns x of `best[x, depth(dst_c) - 1]`, the
    key decoded back to its (penalty, weight) as `_mst._greedy_arcs` does.
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax

from jax_structured.trees import _mst

__all__ = ['best_and_next']


def _chains(parent, count, length):
  """int32 [B, count, length]: `chain[b, x, j]` = the j-th ancestor of x < count in the forest `parent`
  [B, M] (roots point to themselves, so a chain ends repeating its root). Doubling: the chains' next
  2^k entries are the 2^k-th ancestors of their first 2^k, so the gathers total B * count * length
  elements."""
  batch = parent.shape[0]
  chain = jnp.broadcast_to(jnp.arange(count, dtype=jnp.int32)[None, :, None], (batch, count, 1))
  up = parent
  while chain.shape[-1] < length:
    head = chain[..., :min(chain.shape[-1], length - chain.shape[-1])]
    step = _mst._take(up, head.reshape(batch, -1)).reshape(head.shape)
    chain = jnp.concatenate([chain, step], axis=-1)
    up = _mst._take(up, up)
  return chain


def _levels(parent):
  """int32 [B, M]: the number of proper ancestors of every id of the forest `parent` [B, M] (roots
  point to themselves), by pointer jumping."""
  width = parent.shape[-1]
  ids = jnp.arange(width, dtype=jnp.int32)
  level = (parent != ids).astype(jnp.int32)
  far = parent
  for _ in range(_mst._log2_ceil(width)):
    level = level + _mst._take(level, far)
    far = _mst._take(far, far)
  return level


def _prefix_max(x, reverse=False):
  """Inclusive running max of x [B, T, K] along T (from the end when `reverse`): T - 1 maxima of
  contiguous [B, K] slices (faster on the CPU than a scan along the minor axis)."""
  width = x.shape[1]
  order = range(width - 1, -1, -1) if reverse else range(width)
  out = {}
  running = None
  for t in order:
    running = x[:, t] if running is None else jnp.maximum(running, x[:, t])
    out[t] = running
  return jnp.stack([out[t] for t in range(width)], axis=1)


def _decode(key, levels, root_weights):
  """(negated penalty int32, weight) of column keys `key` [B, K, N] (`_mst._column_keys`; column on
  the last axis, levels [B, 3, N], root_weights [B, N]), as `_mst._greedy_arcs` reads them."""
  n_nodes = key.shape[-1]
  free = key > levels[:, None, 0]
  is_root = key == levels[:, None, 0]
  neg_penalty = jnp.where(free, 0, jnp.where(is_root, -1, jnp.where(key == levels[:, None, 1], -n_nodes,
                                                                   -n_nodes - 1)))
  weight = jnp.where(free, key, jnp.where(is_root, root_weights[:, None, :], jnp.zeros((), key.dtype)))
  return neg_penalty, weight


def _preorder(heads):
  """Depth-first preorder of the trees `heads` [B, N] (node 0 the root, a fixed point; children in
  id order).

  Returns:
    (depth, pre, size) int32 [B, N]: depth of every node, its preorder position, the size of its
    subtree, so that the subtree of y is the nodes at positions [pre[y], pre[y] + size[y]).
  """
  batch, n_nodes = heads.shape
  node = jnp.arange(n_nodes, dtype=jnp.int32)
  chain = _chains(heads, n_nodes, n_nodes)                                  # [B, N(x), N(j)]
  depth = jnp.sum(chain != 0, axis=-1).astype(jnp.int32)
  # ancestor[x, y]: y is an ancestor-or-self of x (the entry depth(x) - depth(y) of x's chain).
  up = depth[:, :, None] - depth[:, None, :]
  at = node[None, :, None] * n_nodes + jnp.maximum(up, 0)
  ancestor = (up >= 0) & (_mst._take(chain.reshape(batch, -1), at.reshape(batch, -1)).reshape(at.shape)
                          == node[None, None, :])
  size = jnp.sum(ancestor, axis=1).astype(jnp.int32)
  # Subtrees of the earlier siblings of every node, then the preorder: the sum over its ancestors.
  sibling = ((heads[:, None, :] == heads[:, :, None]) & (node[None, :] < node[:, None])[None]
             & (node != 0)[None, None, :])                                   # [B, N(a), N(b)]
  before = jnp.sum(jnp.where(sibling, size[:, None, :], 0), axis=-1)
  pre = jnp.sum(jnp.where(ancestor, before[:, None, :] + 1, 0), axis=-1).astype(jnp.int32) - 1
  return depth, pre, size


def _best_swaps(weights, penalty, valid, nodes, st, levels):
  """For every node y, the swap of the id c(y) whose greedy arc is T's arc into y (module docstring).

  Args:
    weights, penalty, valid: [B, N, N] as `_mst._contract` takes them; nodes: int32 [B, N], T's head
    node of every node (`_mst._expand`); st, levels: `_mst._contract`'s results.

  Returns:
    (usable bool [B, N]: some allowed arc enters c(y); delta_key int32 [B, N]; delta_score [B, N]).
  """
  batch, n_nodes = nodes.shape
  n_ids = 2 * n_nodes
  node = jnp.arange(n_nodes, dtype=jnp.int32)
  ids = jnp.arange(n_ids, dtype=jnp.int32)
  heads = jnp.where(node == 0, 0, nodes)                                  # ROOT: a fixed point
  _, pre, size = _preorder(heads)
  # Column keys (sources in preorder, T-parent arcs left out) and their running maxima both ways.
  keys, _ = _mst._column_keys(weights, penalty, valid)                     # [B, N(u), N(x)]
  keys = jnp.where(node[None, :, None] == heads[:, None, :], -jnp.inf, keys)
  order = jnp.zeros(batch * n_nodes, jnp.int32).at[_mst._flat_segments(pre, n_nodes)].set(
      jnp.broadcast_to(node, (batch, n_nodes)).reshape(-1)).reshape(batch, n_nodes)
  at = order[:, :, None] * n_nodes + node[None, None, :]
  by_position = _mst._take(keys.reshape(batch, -1), at.reshape(batch, -1)).reshape(at.shape)
  before = _prefix_max(by_position)                                        # [B, N(p), N(x)]
  after = _prefix_max(by_position, reverse=True)
  after = jnp.concatenate([after, jnp.full((batch, 1, n_nodes), -jnp.inf, after.dtype)], axis=1)
  # The best key of column x from outside the subtree of y: [B, N(y), N(x)].
  low = (jnp.maximum(pre - 1, 0)[:, :, None] * n_nodes + node).reshape(batch, -1)
  high = ((pre + size)[:, :, None] * n_nodes + node).reshape(batch, -1)
  outside = jnp.maximum(
      jnp.where((pre > 0)[:, :, None], _mst._take(before.reshape(batch, -1), low).reshape(
          batch, n_nodes, n_nodes), -jnp.inf),
      _mst._take(after.reshape(batch, -1), high).reshape(batch, n_nodes, n_nodes))
  # c(y): the id whose greedy arc is T's arc into y; x is its member iff c(y) is on x's forest chain.
  src, dst = st['best_src'], st['best_dst']
  in_tree = (ids >= 1) & (ids < st['next_id'][:, None]) & (dst >= 1) & (_mst._take(heads, dst) == src)
  owner = jax.ops.segment_max(jnp.where(in_tree, ids, -1).reshape(-1),
                              _mst._flat_segments(dst, n_nodes), batch * n_nodes).reshape(batch, n_nodes)
  forest = jnp.where(st['parent'] >= 0, st['parent'], ids)
  level = _levels(forest)
  chain = _chains(forest, n_nodes, n_nodes)                                 # [B, N(x), N(j)]
  owner_at = jnp.maximum(owner, 0)
  up = level[:, None, :n_nodes] - _mst._take(level, owner_at)[:, :, None]   # [B, N(y), N(x)]
  at = node[None, None, :] * n_nodes + jnp.clip(up, 0, n_nodes - 1)
  member = (up >= 0) & (_mst._take(chain.reshape(batch, -1), at.reshape(batch, -1)).reshape(at.shape)
                        == owner_at[:, :, None])
  # f: the lexicographic max of g over the members' candidates.
  neg_penalty, weight = _decode(outside, levels, weights[:, 0, :])
  usable = member & (outside > -jnp.inf)
  g_key = jnp.where(usable, neg_penalty - st['key_offset'][:, None, :], _mst._INVALID)
  f_key = jnp.max(g_key, axis=-1)                                          # [B, N(y)]
  g_score = jnp.where(usable & (g_key == f_key[..., None]), weight - st['score_offset'][:, None, :],
                      -jnp.inf)
  f_score = jnp.max(g_score, axis=-1)
  # g(e): T's arc into y.
  arc = heads * n_nodes + node
  e_key = -_mst._take(penalty.reshape(batch, -1), arc) - st['key_offset']
  e_score = _mst._take(weights.reshape(batch, -1), arc) - st['score_offset']
  usable = (node >= 1) & (owner >= 0) & (f_key > _mst._INVALID)
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
  min_key = jnp.min(jnp.where(usable, delta_key, jnp.iinfo(jnp.int32).max), axis=-1)
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
    next_score is -inf). Ties are broken deterministically (lowest index / id first). In float32 the
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
