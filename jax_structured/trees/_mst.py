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

Cost. The number of iterations is what it is: on N(0, 1) scores about n / 2 with `single_root=True`
and about n / 8 on average (but up to n / 2 for some sentences) without. With a single root, ROOT arcs lose every
comparison until all words are one supernode: after a few rounds with several cycles, each round
absorbs one path of 1-3 nodes into one large supernode (Prim-like), so the rounds are many and each
changes little. So each round is kept cheap:
  * the re-weighting only subtracts a per-column constant, so the best source of a column is the
    argmax of its ORIGINAL (penalty, weight) over the sources outside its supernode, and that order
    is precomputed as one float key per arc (`_column_keys`); the chosen arc's penalty and weight are
    read off its key;
  * a column's best source only changes when that source joins the column's supernode, so after a
    round only those columns are searched again (`_refresh_columns`; the whole [N, N] pass when more
    than max(8, N / 8) columns of some sentence went stale);
  * from the second round on every cycle passes through an id the previous round created (a cycle of
    ids whose best arcs did not change would have been contracted a round earlier); while every
    sentence has at most one such id (the Prim-like rounds), its cycle is found by walking from that
    id (`_cycle_through`, 2-4 steps over [B] instead of passes over [B, 2N]); otherwise, and in the
    first round, by pointer doubling that stops when nothing changes (`_cycles`, 3-4 steps);
  * every lookup is one flat gather over the batch (vmapped per-sentence gathers cost more than the
    lookups themselves on the CPU), and no sort, argmax, top_k, integer reduction or cumsum runs in
    a round (XLA's CPU runs each of those slower than a float max / min; a triangular product
    replaces the cumsum).
The skipping (the conds and the walk's loops) is for the CPU only. On a GPU every `lax.cond` and
loop predicate is a device-to-host copy and a wait (docs/decisions/2026-11-27-mst-round-bodies-per-platform.md,
docs/decisions/2026-12-04-matrix-tree-and-mst-measurements.md). So the program picks
its round body by the platform it is compiled for (`lax.platform_dependent`): on GPUs and TPUs a
round is a straight line of kernels (every column searched, `_cycles` with a fixed number of steps,
each supernode's best arc by masked reductions instead of scatters: `_segment_best_dense`), and one
iteration of the rounds loop runs `ROUNDS_PER_PREDICATE` of them, the loop's own predicate
being the one host read per iteration (`incremental` in `_contract`; a round after the predicate turns
false leaves the carry as it is, so the results are those of one round per iteration).

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

# Straight rounds (GPUs, TPUs) per iteration of the rounds loop, i.e. per host read of its predicate.
# A batch needs K rounds (its slowest sentence's contractions plus one; with a single root on N(0, 1)
# scores K = 24 / 40 / 111 at 512x32 / 64x64 / 32x200) and runs ceil(K / R) * R of them, the extra
# ones no-ops. With a round's kernels costing c and a predicate (copy, wait, relaunch) p, the time is
# about K c + K p / R + (R - 1) c / 2 on average, least at R = sqrt(2 K p / c). An H200 took 77-121 us
# per round (whole `mst` / K: 2.03 / 3.07 / 13.41 ms); a round is ~50 fused kernels (XLA's CPU fusions
# of this body) and a predicate perhaps 10-30 us (a guess, not measured), so p / c ~ 0.1-0.4 and R* =
# 2.8-5.7 at K = 40 (3.5-7.5 at K = 111, 2.2-4.4 at K = 24). R = 4 is near all of them, and the curve
# is flat there: at p / c = 0.25 R = 4 is within 2% of R* at each K; it adds at most 3 rounds to a
# batch. The program grows with R: compiled for a CPU at 64x64, 1.4 / 2.2 / 5.7 s at R = 1 / 4 / 8.
# Read when `_contract` is traced: to try another R, set it and call `jax.clear_caches()`, or pass
# `rounds_per_predicate` (launch/benchmarks/gpu_session.sh, step 4, times R = 1, 2, 4, 8 on a GPU).
ROUNDS_PER_PREDICATE = 4


def _log2_ceil(x):
  return max(1, int(np.ceil(np.log2(max(2, x)))))


def _flat_segments(segments, num_segments, keep=None):
  """Per-sentence indices [B, K] with values in [0, S) -> indices into the flattened [B * S] rows.

  With `keep` (bool [B, K]), the entries not kept get B * S, out of range, for a scatter with
  `mode='drop'` to skip.
  """
  batch = segments.shape[0]
  flat = segments + (jnp.arange(batch, dtype=segments.dtype) * num_segments)[:, None]
  if keep is not None:
    flat = jnp.where(keep, flat, batch * num_segments)
  return flat.reshape(-1)


def _take(x, index):
  """`x[b, index[b, k]]` for x [B, M], index int [B, K] with values in [0, M): one flat gather.

  Every per-sentence lookup of the algorithm goes through here. A row-wise gather written per sentence
  and vmapped becomes a batched gather that builds (batch, index) pairs on every call; on the CPU that
  cost more than the lookups themselves.
  """
  flat = _flat_segments(index, x.shape[1])
  return x.reshape(-1).at[flat].get(mode='promise_in_bounds').reshape(index.shape)


def _running_count(mask):
  """Inclusive running count of `mask` [B, M] along M: a product with a triangular matrix, which XLA's
  CPU runs far faster than its reduce-window cumsum. Exact below 2^24 at HIGHEST precision (the
  default on GPUs rounds float32 products through TF32, exact only below 2^11; on TPUs through
  bfloat16, below 2^8, i.e. sentences of ~127 words)."""
  width = mask.shape[-1]
  inclusive = jnp.triu(jnp.ones((width, width), jnp.float32))
  return jnp.dot(mask.astype(jnp.float32), inclusive, precision=lax.Precision.HIGHEST).astype(jnp.int32)


def _column_keys(weights, penalty, valid):
  """One float key per arc whose order within every column is the lexicographic (-penalty, weight) order.

  Within a column, Chu-Liu-Edmonds only ever compares arcs by their ORIGINAL (penalty, weight) (the
  re-weighting subtracts a per-column constant), so each round's search for the best source of a
  column runs over one precomputed key instead of two arrays. Arcs without a penalty keep their weight.
  The penalised classes are few and fixed (`penalty` is 1 for a ROOT arc with `single_root`, N for an
  arc scored -inf, N + 1 for both); they take the next representable values below the column's
  smallest unpenalised weight, in penalty order (normal numbers only). A column has at most one
  ROOT arc, and its -inf arcs all carry weight 0, so their ties fall to the lowest source, as in the
  lexicographic order.

  Args:
    weights: float [..., N, N]; penalty: int32 [..., N, N] (values 0, 1, N, N + 1); valid: bool
      [..., N, N]. The last two axes are (source, column).

  Returns:
    (keys float [..., N, N], -inf where the arc does not exist; levels float [..., 3, N], the keys of
    penalty 1, N and N + 1 in each column). A best key above `levels[..., 0, v]` is an unpenalised
    arc whose key is its weight, so the round needs no lookup of the chosen arc. Unpenalised weights
    within 3 ulps of the dtype's lowest value are raised to it so that the penalised keys stay finite
    (ties among such weights fall to the lowest source; scores that low overflow in the re-weighting
    anyway).
  """
  dtype = weights.dtype
  n_nodes = weights.shape[-1]
  floor = jnp.asarray(jnp.finfo(dtype).min, dtype)
  for _ in range(3):
    floor = jnp.nextafter(floor, jnp.asarray(jnp.inf, dtype))
  plain = jnp.maximum(weights, floor)
  free = valid & (penalty == 0)
  column_min = jnp.min(jnp.where(free, plain, jnp.inf), axis=-2, keepdims=True)
  tiny = jnp.asarray(jnp.finfo(dtype).tiny, dtype)
  below = [jnp.minimum(column_min, jnp.finfo(dtype).max)]
  below[0] = jnp.where(jnp.abs(below[0]) < tiny, jnp.zeros((), dtype), below[0])
  for _ in range(3):
    # The next value down, skipping subnormals: XLA's CPU flushes them to zero, so a key one
    # subnormal below 0 would tie with 0.
    x = below[-1]
    step = jnp.nextafter(x, jnp.asarray(-jnp.inf, dtype))
    below.append(jnp.where(x == 0, -tiny, jnp.where(x == tiny, jnp.zeros((), dtype), step)))
  penalised = jnp.where(penalty == 1, below[1], jnp.where(penalty == n_nodes, below[2], below[3]))
  keys = jnp.where(valid, jnp.where(penalty == 0, plain, penalised), -jnp.inf).astype(dtype)
  return keys, jnp.concatenate(below[1:], axis=-2)


def _best_incoming(keys_by_column, rep, column_rep=None):
  """Best source of every column among the sources outside its supernode (ties: lowest source).

  Args:
    keys_by_column: float [B, K, N], `keys_by_column[b, v, u]` = `_column_keys(...)[b, u, v]` for K
      columns (sources on the last axis, so each column's reduction runs over contiguous memory).
    rep: int32 [B, N], supernode id of every node.
    column_rep: int32 [B, K], the supernode of each of the K columns (default `rep`: all N columns).

  Returns:
    (best float [B, K], source int32 [B, K]): each column's best usable key (-inf when it has no
    usable arc) and its source (0 when there is none).
  """
  n_nodes = rep.shape[-1]
  column_rep = rep if column_rep is None else column_rep
  usable_keys = jnp.where(rep[:, None, :] != column_rep[:, :, None], keys_by_column, -jnp.inf)
  best = jnp.max(usable_keys, axis=-1)
  # The lowest source reaching the maximum, as a float reduction (XLA's CPU runs those through its
  # fast reduction kernels; an integer min, an argmax or top_k is slower).
  source = lax.broadcasted_iota(jnp.float32, usable_keys.shape, 2)
  source = jnp.min(jnp.where(usable_keys == best[..., None], source, n_nodes), axis=-1)
  return best, jnp.minimum(source.astype(jnp.int32), n_nodes - 1)


def _refresh_columns(keys_by_column, rep, best, source, stale, chunk):
  """`_best_incoming` for the `stale` columns only when no sentence has more than `chunk` of them,
  else for all columns (one `lax.cond` for the batch).

  A column's best source can only change when that source joins the column's supernode (the usable
  sources of a column only ever shrink), so after a contraction only those columns are searched
  again. Once a few small cycles have formed, a round absorbs one path into one large supernode
  (single root: ~n / 2 such rounds), and only a few columns go stale in each: searching them alone
  replaces the round's [B, N, N] pass by one over [B, chunk, N].

  Args:
    keys_by_column: float [B, N, N] as in `_best_incoming`; rep: int32 [B, N] supernode ids;
    best, source: [B, N], the columns' best keys and sources so far; stale: bool [B, N];
    chunk: static number of columns searched per sentence on the stale-only branch.

  Returns:
    (best, source) with every stale column searched again.
  """
  batch, n_nodes = rep.shape
  columns = jnp.arange(n_nodes, dtype=jnp.int32)

  def search_stale(carry):
    best, source, stale = carry
    rank = _running_count(stale)
    pick = stale & (rank <= chunk)
    picked = jnp.zeros(batch * chunk, jnp.int32).at[_flat_segments(rank - 1, chunk, keep=pick)].set(
        jnp.broadcast_to(columns, (batch, n_nodes)).reshape(-1), mode='drop')
    picked = picked.reshape(batch, chunk)                                  # [B, chunk] column ids
    in_use = jnp.arange(chunk)[None, :] < jnp.sum(pick, axis=1, keepdims=True)
    keys = jnp.take_along_axis(keys_by_column, picked[:, :, None], axis=1)  # [B, chunk, N]
    chunk_best, chunk_source = _best_incoming(keys, rep, _take(rep, picked))
    target = _flat_segments(picked, n_nodes, keep=in_use)
    best = best.reshape(-1).at[target].set(chunk_best.reshape(-1), mode='drop').reshape(batch, n_nodes)
    source = source.reshape(-1).at[target].set(chunk_source.reshape(-1), mode='drop').reshape(
        batch, n_nodes)
    return best, source

  def search_all(carry):
    return _best_incoming(keys_by_column, rep)

  few = jnp.max(jnp.sum(stale, axis=1)) <= chunk
  return lax.cond(few, search_stale, search_all, (best, source, stale))


def _segment_best(key, score, segments, num_segments):
  """Lexicographic (key, score) argmax per segment, per sentence; ties -> lowest index.

  Args:
    key: int32 [B, K]; score: float [B, K]; segments: int32 [B, K] in [0, num_segments).

  Returns:
    (best_key int32 [B, S], best_score [B, S], best_index int32 [B, S]); best_key <= `_INVALID` for
    segments without an entry whose key exceeds `_INVALID`.
  """
  batch, k = key.shape
  flat = _flat_segments(segments, num_segments)
  total = batch * num_segments
  best_key = jax.ops.segment_max(key.reshape(-1), flat, total).reshape(batch, num_segments)
  top = key == _take(best_key, segments)
  best_score = jax.ops.segment_max(jnp.where(top, score, -jnp.inf).reshape(-1), flat, total)
  best_score = best_score.reshape(batch, num_segments)
  top &= score == _take(best_score, segments)
  index = jnp.broadcast_to(jnp.arange(k, dtype=jnp.int32), key.shape)
  best_index = jax.ops.segment_min(jnp.where(top, index, k).reshape(-1), flat, total)
  return best_key, best_score, jnp.minimum(best_index.reshape(batch, num_segments), k - 1)


def _segment_best_dense(key, score, segments, num_segments):
  """`_segment_best` by masked reductions over [B, S, K] instead of scatters (the same values).

  For the straight rounds of GPUs and TPUs: each of the three passes is one reduction kernel with its
  mask computed inline, where the scatters take a buffer fill, the scatter and a gather between them
  (about 11 kernels of a ~50-kernel round, by XLA's CPU fusions). [B, 2N, N] elements a pass: 1.1M at
  512x32, 2.6M at 32x200.
  """
  k = key.shape[-1]
  member = segments[:, None, :] == jnp.arange(num_segments, dtype=segments.dtype)[None, :, None]
  low = jnp.iinfo(key.dtype).min                                  # segment_max's value for no entry
  best_key = jnp.max(jnp.where(member, key[:, None, :], low), axis=-1)
  top = member & (key[:, None, :] == best_key[:, :, None])
  best_score = jnp.max(jnp.where(top, score[:, None, :], -jnp.inf), axis=-1)
  top &= score[:, None, :] == best_score[:, :, None]
  index = lax.broadcasted_iota(jnp.int32, top.shape, 2)
  best_index = jnp.min(jnp.where(top, index, k), axis=-1)
  return best_key, best_score, jnp.minimum(best_index, k - 1)


def _cycles(pred, active, steps=None):
  """The cycles of the functional graphs `pred` [B, M] (one per sentence; inactive ids point to themselves).

  Pointer doubling: after k steps `far` = pred^(2^k) and `label[x]` = the smallest active id among the
  2^k ids from x on. With `steps` (static; exact when 2^steps is at least every id's distance to its
  cycle and every cycle's length, e.g. 2^steps >= M) it runs exactly that many steps, a straight
  line of kernels; without, it stops once a step changes neither `label` nor the image of `far` (at
  most ceil(log2 M) + 1 steps; on N(0, 1) scores 3-4 instead of that bound): an unchanged image is
  mapped onto itself by a power of `pred`, so it is exactly the set of ids on cycles, and an unchanged
  `label` never changes again (label[far[x]] >= label[x] for all x is kept by doubling), so on a
  cycle it is the cycle's smallest id. (With `steps` the image of pred^(2^steps) is the cycle set
  too: every id has reached its cycle.)

  Returns:
    (on_cycle bool [B, M], label int32 [B, M]): whether each id lies on a cycle of length >= 1 of
    `pred`, and the smallest active id of the cycle (meaningful on cycles only).
  """
  batch, width = pred.shape
  ids = jnp.arange(width, dtype=jnp.int32)

  def image_of(far):
    return jnp.zeros(batch * width, bool).at[_flat_segments(far, width)].set(True).reshape(batch, width)

  label = jnp.where(active, ids, width)
  if steps is not None:
    far = pred
    for _ in range(steps):
      label = jnp.minimum(label, _take(label, far))
      far = _take(far, far)
    return image_of(far), label

  def step(carry):
    far, label, image, _ = carry
    new_label = jnp.minimum(label, _take(label, far))
    far = _take(far, far)
    new_image = image_of(far)
    return far, new_label, new_image, jnp.any(new_image != image) | jnp.any(new_label != label)

  start = (pred, label, image_of(pred), jnp.bool_(True))
  _, label, image, _ = lax.while_loop(lambda carry: carry[3], step, _inputs.vary_like(start, pred))
  return image, label


def _cycle_through(pred, start, limit):
  """The cycle of `pred` [B, M] through the id `start` [B], by walking from it (at most `limit` steps).

  Used when each sentence has at most one id that the previous round created: every cycle of a
  round's greedy graph passes through such an id (a cycle of ids whose best arcs did not change would
  have been contracted a round earlier), so there is at most one cycle, and the walk from `start`
  either returns to it or ends on a fixed point (ROOT or a dead id). In the Prim-like rounds that
  dominate the single-root case this takes 2-4 steps, where the doubling in `_cycles` takes 3-4 passes
  over all 2N ids.

  Args:
    pred: int32 [B, M]; start: int32 [B] (a fixed point of `pred` for a sentence without a new id).

  Returns:
    (on_cycle bool [B, M], label int32 [B, M], resolved bool []): the cycle's ids and its smallest id
    (on the cycle; M elsewhere), and whether every walk ended within `limit` steps (if not, the
    results are meaningless and the caller falls back to `_cycles`).
  """
  batch, width = pred.shape
  lookup = lambda x, at: _take(x, at[:, None])[:, 0]

  def step(carry):
    pos, length, smallest, returned, ended, count = carry
    after = lookup(pred, pos)
    returned |= ~ended & (pos == start)
    ended |= (pos == start) | (after == pos)
    nxt = jnp.where(ended, pos, after)
    smallest = jnp.where(ended, smallest, jnp.minimum(smallest, nxt))
    return nxt, length + (~ended).astype(jnp.int32), smallest, returned, ended, count + 1

  first = lookup(pred, start)
  carry = (first, jnp.ones_like(start), jnp.minimum(start, first), jnp.zeros(batch, bool),
           jnp.zeros(batch, bool), jnp.int32(0))
  _, length, smallest, returned, ended, _ = lax.while_loop(
      lambda c: jnp.any(~c[4]) & (c[5] < limit), step, _inputs.vary_like(carry, pred))

  def mark(i, carry):
    on_cycle, pos = carry
    inside = returned & (i < length)
    flat = _flat_segments(pos[:, None], width, keep=inside[:, None])
    on_cycle = on_cycle.reshape(-1).at[flat].set(True, mode='drop').reshape(batch, width)
    return on_cycle, jnp.where(inside, lookup(pred, pos), pos)

  on_cycle, _ = lax.fori_loop(0, jnp.max(jnp.where(returned, length, 0)), mark,
                              _inputs.vary_like((jnp.zeros((batch, width), bool), start), pred))
  label = jnp.where(on_cycle, smallest[:, None], width)
  return on_cycle, label, jnp.all(ended)


def _initial_state(keys_by_column, batch, n_nodes, dtype):
  """The rounds' carry before the first round: every node its own supernode, nothing re-weighted."""
  nodes = jnp.arange(n_nodes, dtype=jnp.int32)
  n_ids = 2 * n_nodes
  state = dict(
      it=jnp.int32(0),
      done=jnp.bool_(False),
      rep=jnp.broadcast_to(nodes, (batch, n_nodes)),        # supernode id of every original node
      key_offset=jnp.zeros((batch, n_nodes), jnp.int32),     # re-weighting of the arcs into each
      score_offset=jnp.zeros((batch, n_nodes), dtype),       # original node (integer, float part)
      best_src=jnp.zeros((batch, n_ids), jnp.int32),         # best incoming arc (u, v) of each id,
      best_dst=jnp.zeros((batch, n_ids), jnp.int32),         #   as original nodes, at its last use
      parent=jnp.full((batch, n_ids), -1, jnp.int32),        # id of the cycle node that swallowed it
      next_id=jnp.full((batch,), n_nodes, jnp.int32),
      first_new=jnp.full((batch,), n_nodes, jnp.int32),      # ids made by the previous round: from here
  )
  # Best arc into every original node from outside its supernode (kept up to date by the rounds).
  state['col_best'], state['col_src'] = _best_incoming(keys_by_column, state['rep'])
  return state


def _greedy_arcs(st, levels, root_weights, dense=False):
  """The best arc into every supernode of the round's carry `st`, re-weighted (over its members by
  `_segment_best`, or with `dense` by `_segment_best_dense`: the same values).

  Returns:
    (sup_key, sup_score [B, 2N]: the arc's re-weighted key and score, pred [B, 2N]: the id its source
    belongs to (a self loop for ROOT and dead ids), active [B, 2N] bool, best_src, best_dst [B, 2N]).
  """
  rep, best, col_src = st['rep'], st['col_best'], st['col_src']
  n_nodes = rep.shape[-1]
  ids = jnp.arange(2 * n_nodes, dtype=jnp.int32)
  # The chosen arc's (penalty, weight) follow from its key (see `_column_keys`): no lookup.
  free = best > levels[:, 0]
  is_root = best == levels[:, 0]
  neg_penalty = jnp.where(free, 0, jnp.where(is_root, -1, jnp.where(best == levels[:, 1], -n_nodes,
                                                                  -n_nodes - 1)))
  col_key = jnp.where(best > -jnp.inf, neg_penalty - st['key_offset'], _INVALID)
  col_score = jnp.where(free, best, jnp.where(is_root, root_weights, 0)) - st['score_offset']
  # Then into every supernode (over its members).
  segment_best = _segment_best_dense if dense else _segment_best
  sup_key, sup_score, sup_dst = segment_best(col_key, col_score, rep, 2 * n_nodes)
  sup_src = _take(col_src, sup_dst)
  active = (sup_key > _INVALID) & (ids != 0)
  pred = jnp.where(active, _take(rep, sup_src), ids)
  best_src = jnp.where(active, sup_src, st['best_src'])
  best_dst = jnp.where(active, sup_dst, st['best_dst'])
  return sup_key, sup_score, pred, active, best_src, best_dst


def _greedy_cycles(st, pred, active, incremental, walk_limit=16):
  """(on_cycle [B, 2N] bool, label [B, 2N]): the cycles of the greedy graph `pred`, each labelled by
  its smallest id (2N off cycles). Incremental: by a walk from the previous round's one new id when
  every sentence has at most one (`_cycle_through`, `walk_limit` steps), else by doubling that stops
  when nothing changes; otherwise doubling with a fixed number of steps (`_mst_nodes`)."""
  n_ids = pred.shape[-1]
  ids = jnp.arange(n_ids, dtype=jnp.int32)
  if incremental:
    new_count = st['next_id'] - st['first_new']
    start = jnp.where(new_count == 1, st['first_new'], 0)          # ROOT: a fixed point

    def by_doubling(_):
      return _cycles(pred, active)

    def by_walk(_):
      on_cycle, label, resolved = _cycle_through(pred, start, walk_limit)
      return lax.cond(resolved, lambda _: (on_cycle, label), by_doubling, None)

    on_cycle, label = lax.cond((st['it'] > 0) & jnp.all(new_count <= 1), by_walk, by_doubling, None)
  else:
    # At most N ids are live (the supernodes; every other id is inactive, a fixed point) and `pred`
    # maps live ids to live ids, so a path reaches its cycle within N - 1 steps and a cycle has at most
    # N - 1 ids (ROOT is on none): 2^steps >= N - 1 suffices (2 steps fewer than 2^steps >= 2N at
    # N = 33 and 65, 1 at N = 201).
    on_cycle, label = _cycles(pred, active, steps=_log2_ceil(st['rep'].shape[-1] - 1))
  on_cycle &= pred != ids
  return on_cycle, jnp.where(on_cycle, label, n_ids)


def _contraction_round(st, keys_by_column, levels, root_weights, incremental):
  """One round of Chu-Liu-Edmonds on the carry `st` (`_initial_state`): greedy arcs, their cycles,
  each cycle contracted into a new id with its arcs re-weighted (per column offsets). A sentence
  without a cycle is a fixed point of this round."""
  rep = st['rep']
  n_nodes = rep.shape[-1]
  n_ids = 2 * n_nodes
  ids = jnp.arange(n_ids, dtype=jnp.int32)
  sup_key, sup_score, pred, active, best_src, best_dst = _greedy_arcs(st, levels, root_weights,
                                                                      dense=not incremental)
  on_cycle, label = _greedy_cycles(st, pred, active, incremental)
  leader = on_cycle & (label == ids)
  new_id_of_leader = st['next_id'][:, None] + _running_count(leader) - 1
  new_id = jnp.where(on_cycle, _take(new_id_of_leader, jnp.minimum(label, n_ids - 1)), -1)

  node_on_cycle = _take(on_cycle, rep)
  new_rep = jnp.where(node_on_cycle, _take(new_id, rep), rep)
  best, col_src = st['col_best'], st['col_src']
  if incremental:
    stale = (best > -jnp.inf) & (_take(new_rep, col_src) == new_rep)
    chunk = max(8, -(-n_nodes // 8))                      # columns per refresh of the stale ones
    best, col_src = _refresh_columns(keys_by_column, new_rep, best, col_src, stale, chunk)
  else:
    best, col_src = _best_incoming(keys_by_column, new_rep)
  return dict(
      it=st['it'] + 1,
      done=~jnp.any(on_cycle),
      rep=new_rep,
      col_best=best,
      col_src=col_src,
      key_offset=st['key_offset'] + jnp.where(node_on_cycle, _take(sup_key, rep), 0),
      score_offset=(st['score_offset'] + jnp.where(node_on_cycle, _take(sup_score, rep), 0)).astype(
          st['score_offset'].dtype),
      best_src=best_src,
      best_dst=best_dst,
      parent=jnp.where(on_cycle, new_id, st['parent']),
      next_id=st['next_id'] + jnp.sum(leader, axis=1).astype(jnp.int32),
      first_new=st['next_id'],
  )


def _expand(st, n_nodes):
  """int32 [B, N] head node of every node from the rounds' final carry `st`.

  Expansion, newest cycle first: the member containing the target of the cycle's chosen arc takes that
  arc, the other members keep their cycle arcs. Ids only grow towards the top of the contraction
  forest, so that member is the highest ancestor of the target below the cycle (binary lifting).
  """
  batch, n_ids = st['parent'].shape
  ids = jnp.arange(n_ids, dtype=jnp.int32)
  jumps = _log2_ceil(n_ids)
  up = [jnp.where(st['parent'] >= 0, st['parent'], n_ids)]
  up[0] = jnp.concatenate([up[0], jnp.full((batch, 1), n_ids, jnp.int32)], axis=1)  # above every id
  for _ in range(jumps - 1):
    up.append(_take(up[-1], up[-1]))

  def expand(i, assigned):
    src, dst = assigned
    c = n_ids - 1 - i
    member = lax.dynamic_index_in_dim(dst, c, axis=1)                 # [B, 1]
    for k in reversed(range(jumps)):
      higher = _take(up[k], member)
      member = jnp.where(higher < c, higher, member)
    take = (c < st['next_id'])[:, None] & (ids == member) & (st['parent'] == c)
    return (jnp.where(take, lax.dynamic_index_in_dim(src, c, axis=1), src),
            jnp.where(take, lax.dynamic_index_in_dim(dst, c, axis=1), dst))

  src, _ = lax.fori_loop(0, n_nodes, expand, (st['best_src'], st['best_dst']))
  return src[:, :n_nodes]


def _guarded(round_fn, keep_going):
  """`round_fn` on the carry while `keep_going(carry)`, the carry unchanged after: a select on every
  array of the carry instead of a branch, so that R of them in one loop iteration give exactly the
  carries of R iterations of `round_fn` under the predicate `keep_going`."""
  def guarded(st):
    go = keep_going(st)
    return jax.tree.map(lambda new, old: jnp.where(go, new, old), round_fn(st), st)
  return guarded


def _contract(weights, penalty, valid, incremental, rounds_per_predicate=None):
  """The contraction phase of Chu-Liu-Edmonds on B graphs of N nodes with root 0, batched explicitly:
  contraction rounds (`_contraction_round`) until no sentence has a cycle.

  Args:
    weights: float [B, N, N], `weights[b, u, v]` = float part of the arc u -> v (finite).
    penalty: int32 [B, N, N], integer penalty of each arc (see module docstring).
    valid: bool [B, N, N], which arcs exist; every node v > 0 must have a valid arc from node 0.
    incremental: static. True (the CPU): a round searches only the stale columns and walks its cycle
      when it can (`_refresh_columns`, `_cycle_through`), each choice a `lax.cond` / `lax.while_loop`.
      False (GPUs, TPUs): a round is a straight line of kernels, all columns searched and fixed-step
      doubling, because there every conditional and loop predicate is a device-to-host copy and a
      wait, while the [B, N, N] passes they save are cheap on a parallel device.
    rounds_per_predicate: static, rounds per iteration of the rounds loop when not `incremental`
      (default `ROUNDS_PER_PREDICATE`; the incremental rounds take one). Rounds after the predicate
      turns false leave the carry as it is (`_guarded`), so every value is that of one round per
      iteration, `it` included.

  Returns:
    (st, levels): the rounds' final carry (`_initial_state`: the contraction forest `parent` over ids
    [B, 2N], every id's greedy arc `best_src` / `best_dst` as original nodes, the final re-weighting
    `key_offset` / `score_offset` of the arcs into every original node, `next_id`) and the column key
    levels of `_column_keys` [B, 3, N].
  """
  batch, n_nodes = weights.shape[0], weights.shape[-1]
  keys, levels = _column_keys(weights, penalty, valid)
  keys_by_column = jnp.swapaxes(keys, -1, -2)
  root_weights = weights[:, 0, :]
  state = _initial_state(keys_by_column, batch, n_nodes, weights.dtype)
  cond = lambda st: (~st['done']) & (st['it'] <= n_nodes)
  one_round = functools.partial(_contraction_round, keys_by_column=keys_by_column, levels=levels,
                                root_weights=root_weights, incremental=incremental)
  if rounds_per_predicate is None:
    rounds_per_predicate = ROUNDS_PER_PREDICATE
  rounds = 1 if incremental else rounds_per_predicate
  body = one_round if rounds == 1 else _rounds(_guarded(one_round, cond), rounds)
  st = lax.while_loop(cond, body, _inputs.vary_like(state, weights, penalty, valid))
  return st, levels


def _rounds(round_fn, count):
  """`count` calls of `round_fn` in a straight line (static `count`: no loop, no predicate)."""
  def body(st):
    for _ in range(count):
      st = round_fn(st)
    return st
  return body


def _mst_nodes(weights, penalty, valid, incremental):
  """Chu-Liu-Edmonds on B graphs of N nodes with root 0: `_contract` (arguments there), then the
  expansion (`_expand`).

  Returns:
    int32 [B, N] head node of every node (entry 0 is meaningless).
  """
  st, _ = _contract(weights, penalty, valid, incremental)
  return _expand(st, weights.shape[-1])


def _graph(arc_scores, root_scores, lengths, single_root):
  """The N = n + 1 node graphs of [B, n, n] scores: (weights float [B, N, N], penalty int32 [B, N, N],
  valid bool [B, N, N], real bool [B, N]) as `_contract` takes them (module docstring: a `-inf` arc
  has penalty N and float part 0, a ROOT arc penalty 1 with `single_root`; a padding word hangs from
  ROOT by a free arc, its only one)."""
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
  return weights, penalty.astype(jnp.int32), valid, real


@functools.partial(jax.jit, static_argnames=('single_root', 'incremental'))
def _mst_batched(arc_scores, root_scores, lengths, single_root, incremental=None):
  """`mst` on [B, n, n] scores; `incremental` (see `_contract`): None = by the platform the
  program is compiled for (`lax.platform_dependent`: True on the CPU, False elsewhere)."""
  weights, penalty, valid, real = _graph(arc_scores, root_scores, lengths, single_root)
  args = (weights, penalty, valid)
  if incremental is None:
    nodes = lax.platform_dependent(*args, cpu=functools.partial(_mst_nodes, incremental=True),
                                   default=functools.partial(_mst_nodes, incremental=False))
  else:
    nodes = _mst_nodes(*args, incremental=incremental)
  heads = nodes[:, 1:] - 1
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
