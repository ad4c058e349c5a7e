"""Maximum spanning arborescences on device: Chu-Liu-Edmonds in fixed-shape JAX.

The algorithm is the classic Chu-Liu-Edmonds / Bock procedure (Chu & Liu 1965; Edmonds 1967; presented
for parsing by McDonald et al. 2005): every node greedily picks its best incoming arc, every cycle of the
greedy graph is contracted into a new node (arcs entering the cycle at `v` are re-weighted by subtracting
the weight of `v`'s cycle arc), and when no cycle is left the contractions are undone in reverse order.

Fixed shapes. A sentence of `n` words becomes a graph of `N = n + 1` nodes (node 0 = ROOT). Contracted
nodes get fresh ids `N, N + 1, ...` inside arrays of size `2N` (at most `N - 1` contractions happen); all
cycles of one greedy graph are contracted in the same iteration (they are disjoint and contracting one
leaves the others' best arcs unchanged). An iteration is O(N^2) and there are at most `N` of them, so the
worst case is O(N^3) per sentence (a batch runs until its slowest sentence is done). Everything runs
in `lax.while_loop` / `lax.fori_loop` with static shapes: no host callback, jit- and vmap-able.

Cost. The number of iterations is what it is: measured on N(0, 1) scores it is about n / 2 with
`single_root=True` (ROOT arcs lose every comparison until all words are one supernode; 512 x 32:
mean 17, max 24; 32 x 200: mean 101, max 111) and about n / 8 on average (but up to n / 2 for some
sentences) without. So each iteration is kept cheap: the re-weighting only subtracts a per-column
constant, so the best source of a column is the lexicographic argmax of its ORIGINAL (penalty, weight)
over the sources outside its supernode: three masked column reductions over [N, N] (`_best_incoming`)
plus O(N) gathers and segment reductions, with no [N, N] weight updates and no [2N, N] membership
table. (Sorting every column once and taking a min of ranks per round does less work per round, but
XLA's CPU sort costs more than all the rounds together: 512 x 32 took 3.4x longer that way.)

Exact constraints through lexicographic weights. Every arc weight is a pair `(penalty, score)`, compared
lexicographically (`-penalty` first, then `score`). Pairs form a totally ordered abelian group, and the
correctness proof of Chu-Liu-Edmonds only uses addition, subtraction and comparison in such a group, so
the algorithm returns the arborescence maximising `(-total_penalty, total_score)`. We use
`penalty = (n + 1) * [score == -inf] + [single_root and arc leaves ROOT]`:
  * `-inf` arcs are avoided whenever a spanning tree without them exists (their float part is 0, so no
    `inf - inf` ever appears);
  * with `single_root=True`, among those trees the ones with the fewest ROOT arcs win; the complete graph
    always has a one-root tree, so exactly one word hangs from ROOT, and among one-root trees the order is
    the score order. This is the reweighting of Stanojevic & Cohen (2021, "A Root of a Problem") with an
    infinitely large constant, kept in a separate integer so that no float precision is lost (a finite
    constant added to float32 scores is not exact). It finds the same optimum as the root-constrained
    algorithm of Gabow & Tarjan (1984) / Zmigrod, Vieira & Cotterell (2020, "Please Mind the Root").
Ties in the float part are broken deterministically (lowest index first).
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from jax_structured.trees import _inputs

__all__ = ['mst']

_INVALID = np.int32(-(2**30))  # Integer part of arcs that do not exist (self loops, into ROOT, padding).


def _log2_ceil(x):
  return max(1, int(np.ceil(np.log2(max(2, x)))))


def _best_incoming(neg_penalty, weights, usable):
  """Lexicographically best usable source of every column: max -penalty, then weight, then lowest u.

  Args:
    neg_penalty: int32 [N, N], `-penalty[u, v]`; weights: float [N, N]; usable: bool [N, N], the arcs
      that may be chosen (valid and leaving the column's current supernode).

  Returns:
    (key int32 [N], weight [N], source int32 [N]) per column v: the best arc's `-penalty` (or
    `_INVALID` if the column has no usable arc), its weight and its source node (clipped to N - 1
    when there is none).
  """
  n_nodes = weights.shape[0]
  key = jnp.where(usable, neg_penalty, _INVALID)
  best_key = jnp.max(key, axis=0)
  top = usable & (key == best_key[None, :])
  best_weight = jnp.max(jnp.where(top, weights, -jnp.inf), axis=0)
  top &= weights == best_weight[None, :]
  source = lax.broadcasted_iota(jnp.int32, (n_nodes, n_nodes), 0)
  best_source = jnp.min(jnp.where(top, source, n_nodes), axis=0)
  return best_key, best_weight, jnp.minimum(best_source, n_nodes - 1)


def _segment_best(key, score, segments, num_segments):
  """Lexicographic (key, score) argmax of `key`/`score` [N] per segment; ties -> lowest index.

  Returns:
    (best_key int32 [S], best_score [S], best_index int32 [S]); best_key <= `_INVALID` for
    segments without an entry whose key exceeds `_INVALID`.
  """
  n = key.shape[0]
  best_key = jax.ops.segment_max(key, segments, num_segments)
  top = key == best_key[segments]
  best_score = jax.ops.segment_max(jnp.where(top, score, -jnp.inf), segments, num_segments)
  top &= score == best_score[segments]
  best_index = jax.ops.segment_min(jnp.where(top, jnp.arange(n, dtype=jnp.int32), n), segments,
                                   num_segments)
  return best_key, best_score, jnp.minimum(best_index, n - 1)


def _mst_single(weights, penalty, valid):
  """Chu-Liu-Edmonds on one graph of N nodes with root 0.

  Args:
    weights: float [N, N], `weights[u, v]` = float part of the arc u -> v (finite).
    penalty: int32 [N, N], integer penalty of each arc (see module docstring).
    valid: bool [N, N], which arcs exist; every node v > 0 must have a valid arc from node 0.

  Returns:
    int32 [N] head node of every node (entry 0 is meaningless).
  """
  n_nodes = weights.shape[-1]
  n_ids = 2 * n_nodes
  ids = jnp.arange(n_ids, dtype=jnp.int32)
  nodes = jnp.arange(n_nodes, dtype=jnp.int32)
  jumps = _log2_ceil(n_ids)
  neg_penalty = jnp.where(valid, -penalty, _INVALID)

  state = dict(
      it=jnp.int32(0),
      done=jnp.bool_(False),
      rep=nodes,                                             # supernode id of every original node
      key_offset=jnp.zeros(n_nodes, jnp.int32),              # re-weighting of the arcs into each
      score_offset=jnp.zeros(n_nodes, weights.dtype),        #   original node (integer, float part)
      best_src=jnp.zeros(n_ids, jnp.int32),                  # best incoming arc (u, v) of each id,
      best_dst=jnp.zeros(n_ids, jnp.int32),                  #   as original nodes, at its last use
      parent=jnp.full(n_ids, -1, jnp.int32),                 # id of the cycle node that swallowed it
      next_id=jnp.int32(n_nodes),
  )

  def cond(st):
    return (~st['done']) & (st['it'] <= n_nodes)

  def body(st):
    rep = st['rep']
    # Best arc into every original node from outside its supernode.
    outside = valid & (rep[:, None] != rep[None, :])
    col_key, col_score, col_src = _best_incoming(neg_penalty, weights, outside)
    col_key = jnp.where(col_key > _INVALID, col_key - st['key_offset'], _INVALID)
    col_score = col_score - st['score_offset']
    # Then into every supernode (over its members).
    sup_key, sup_score, sup_dst = _segment_best(col_key, col_score, rep, n_ids)
    sup_src = col_src[sup_dst]
    active = (sup_key > _INVALID) & (ids != 0)
    pred = jnp.where(active, rep[sup_src], ids)             # self loop for ROOT and dead ids
    best_src = jnp.where(active, sup_src, st['best_src'])
    best_dst = jnp.where(active, sup_dst, st['best_dst'])

    # Cycles of the functional graph `pred`: pred^(2^jumps) lands every id on its terminal cycle, and the
    # ids on cycles are exactly the image of that map. The cycle label is its smallest id.
    far, label = pred, jnp.where(active, ids, n_ids)
    for _ in range(jumps):
      label = jnp.minimum(label, label[far])
      far = far[far]
    on_cycle = jnp.zeros(n_ids, bool).at[far].set(True) & (pred != ids)
    # After the doubling, label[x] is the minimum over the 2^jumps >= 2N ids ahead of x, which for an
    # id on a cycle is the minimum over its whole cycle.
    label = jnp.where(on_cycle, label, n_ids)
    leader = on_cycle & (label == ids)
    new_id_of_leader = st['next_id'] + jnp.cumsum(leader.astype(jnp.int32)) - 1
    new_id = jnp.where(on_cycle, new_id_of_leader[jnp.minimum(label, n_ids - 1)], -1)
    any_cycle = jnp.any(on_cycle)

    # Contract: re-weight arcs entering a cycle member (per column offsets), relabel.
    node_on_cycle = on_cycle[rep]
    return dict(
        it=st['it'] + 1,
        done=~any_cycle,
        rep=jnp.where(node_on_cycle, new_id[rep], rep),
        key_offset=st['key_offset'] + jnp.where(node_on_cycle, sup_key[rep], 0),
        score_offset=(st['score_offset'] + jnp.where(node_on_cycle, sup_score[rep], 0)).astype(
            weights.dtype),
        best_src=best_src,
        best_dst=best_dst,
        parent=jnp.where(on_cycle, new_id, st['parent']),
        next_id=st['next_id'] + jnp.sum(leader).astype(jnp.int32),
    )

  st = lax.while_loop(cond, body, _inputs.vary_like(state, weights, penalty, valid))

  # Expansion, newest cycle first: the member containing the target of the cycle's chosen arc takes that
  # arc, the other members keep their cycle arcs. Ids only grow towards the top of the contraction
  # forest, so that member is the highest ancestor of the target below the cycle (binary lifting).
  up = [jnp.where(st['parent'] >= 0, st['parent'], n_ids)]
  up[0] = jnp.concatenate([up[0], jnp.array([n_ids], jnp.int32)])   # n_ids: above every id
  for _ in range(jumps - 1):
    up.append(up[-1][up[-1]])

  def expand(i, assigned):
    src, dst = assigned
    c = n_ids - 1 - i
    member = dst[c]
    for k in reversed(range(jumps)):
      higher = up[k][member]
      member = jnp.where(higher < c, higher, member)
    take = (c < st['next_id']) & (ids == member) & (st['parent'] == c)
    return jnp.where(take, src[c], src), jnp.where(take, dst[c], dst)

  src, _ = lax.fori_loop(0, n_nodes, expand, (st['best_src'], st['best_dst']))
  return src[:n_nodes]


@functools.partial(jax.jit, static_argnames=('single_root',))
def _mst_batched(arc_scores, root_scores, lengths, single_root):
  n = arc_scores.shape[-1]
  n_nodes = n + 1
  dtype = arc_scores.dtype
  weights = jnp.zeros(arc_scores.shape[:-2] + (n_nodes, n_nodes), dtype)
  weights = weights.at[..., 1:, 1:].set(arc_scores).at[..., 0, 1:].set(root_scores)
  node = jnp.arange(n_nodes)
  real = node[None, :] <= lengths[:, None]                                     # [B, N], ROOT is real
  u, v = node[:, None], node[None, :]
  valid = ((u != v) & (v != 0))[None] & (
      (real[:, :, None] & real[:, None, :]) | ((u == 0) & (v != 0))[None])
  forbidden = weights == -jnp.inf
  root_arc = ((u == 0) & (v != 0))[None] & real[:, None, :]
  penalty = (forbidden.astype(jnp.int32) * n_nodes
             + (root_arc.astype(jnp.int32) if single_root else 0))
  penalty = jnp.where(real[:, None, :], penalty, 0)                             # padding: free ROOT arc
  weights = jnp.where(forbidden | ~valid, jnp.zeros((), dtype), weights)
  heads = jax.vmap(_mst_single)(weights, penalty.astype(jnp.int32), valid)[:, 1:] - 1
  return jnp.where(real[:, 1:], heads, -1).astype(jnp.int32)


def mst(arc_scores, root_scores, lengths=None, *, single_root=True):
  """Maximum spanning arborescence (Chu-Liu-Edmonds, on device), batched and length-masked.

  Returns the dependency tree with the highest total score `sum_m s(head(m) -> m)`, exactly, with the
  root constraint enforced exactly when `single_root` (see the module docstring for the method and its
  proof of exactness). Arcs scored `-inf` are never chosen when a tree without them exists. Scores must be
  finite or `-inf` (NaN / +inf give unspecified trees).

  Args:
    arc_scores: float [..., n, n]; `arc_scores[..., h, m]` scores the arc word h -> word m (the
      diagonal is ignored).
    root_scores: float [..., n]; `root_scores[..., m]` scores ROOT -> word m.
    lengths: optional int [...]; number of real words of each sentence (default n). Words at positions
      `>= lengths` are padding: they are ignored and their head is -1.
    single_root: if True exactly one word hangs from ROOT; otherwise any number may.

  Returns:
    heads: int32 [..., n]; `heads[..., m]` is the head word of m, or -1 for ROOT and for padding.
  """
  arc_scores, root_scores, lengths = _inputs.check_scores(arc_scores, root_scores, lengths)
  batch_shape, n = arc_scores.shape[:-2], arc_scores.shape[-1]
  if n == 0:
    return jnp.zeros(batch_shape + (0,), jnp.int32)
  flat = int(np.prod(batch_shape))
  heads = _mst_batched(arc_scores.reshape(flat, n, n), root_scores.reshape(flat, n),
                       jnp.clip(lengths, 0, n).reshape(flat),
                       bool(single_root))
  return heads.reshape(batch_shape + (n,))
