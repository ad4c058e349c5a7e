"""The k best dependency trees, in order, exactly: Lawler's partition scheme over constrained MSTs.

Lawler (1972) / Murty (1968): the trees of a sentence are split into disjoint partitions, each given by
arcs it must contain (a forced head for some words) and arcs it must not; each partition's best tree
comes from one constrained decoding (`mst` or `projective_mst` on scores where the excluded arcs and the
other heads of forced words are `-inf`). Round i pops the partition whose best tree scores highest, emits
that tree T, and replaces the partition by one child per free word `m` (word order, `m_1 < m_2 < ...`):
child j forces the T-heads of `m_1 .. m_{j-1}` and excludes the arc `T[m_j] -> m_j`. The children are
disjoint, cover every tree of the partition but T, and so the pops come out in score order, each tree
once. This is the scheme of Camerini, Fratta & Maffioli (1980, "The k best spanning arborescences of a
network") and of Zmigrod, Vieira & Cotterell (2021, "On Finding the K-best Non-projective Dependency
Trees") with the best tree of every child computed by a full constrained MST instead of their
incremental "next best" computation; with `single_root` the one-root constraint is kept by the decoder
(a decoded tree with two ROOT arcs, which `mst` returns only when every one-root tree holds a -inf arc,
scores -inf), which is the constraint Zmigrod et al. add to Camerini's algorithm.

Static shapes. The partitions live in a pool of `1 + (k - 1) n` slots per sentence (the children of
round i go to slots `1 + i n ..`); a partition stores its forced heads [n] and its excluded arcs
[k - 1] (round i excludes one arc, in entry i: a partition made in round i has at most i + 1). Each
round's n children are decoded as one batch of `B n` constrained problems (in chunks, as in
`_max_marginals.map_in_chunks`). Cost: `1 + (k - 1) n` decodings per sentence, i.e. O(k n) times one
MST (or one Eisner pass); memory O(B k n^2) for the pool plus one chunk of decodings.
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from jax_structured.trees import _inputs
from jax_structured.trees._max_marginals import best_trees
from jax_structured.trees._max_marginals import map_in_chunks

__all__ = ['k_best', 'projective_k_best']

_FREE = -2   # forced-head entry of a word whose head is not forced


def _constrained(full, forced, excluded):
  """Scores [C, n + 1, n] with the other heads of forced words and the excluded arcs set to -inf.

  Args:
    full: float [C, n + 1, n] scores, row 0 = ROOT, row h + 1 = word h.
    forced: int32 [C, n], forced head of each word (-1 = ROOT) or `_FREE`.
    excluded: int32 [C, E], excluded arcs as `(head + 1) * n + m`, -1 for none.
  """
  count, rows, n = full.shape
  keep = (forced[:, None, :] == _FREE) | (jnp.arange(rows)[None, :, None] == forced[:, None, :] + 1)
  scores = jnp.where(keep, full, -jnp.inf).reshape(count, rows * n)
  target = jnp.where(excluded >= 0, excluded, rows * n)
  scores = scores.at[jnp.arange(count)[:, None], target].set(-jnp.inf, mode='drop')
  return scores.reshape(count, rows, n)


def _pop(pool, out, i):
  """Emits the pool's best partition's tree as tree i (ties: lowest slot) and empties that slot."""
  batch = pool['score'].shape[0]
  rows = jnp.arange(batch)
  slot = jnp.argmax(pool['score'], axis=1)
  best = pool['score'][rows, slot]
  found = best > -jnp.inf
  heads = jnp.where(found[:, None], pool['heads'][rows, slot], -1)
  out = dict(heads=out['heads'].at[:, i].set(heads), score=out['score'].at[:, i].set(best))
  pool = dict(pool, score=pool['score'].at[rows, slot].set(-jnp.inf))
  return pool, out, (found, heads, pool['forced'][rows, slot], pool['excluded'][rows, slot])


def _children(full, lengths, popped, i, single_root, projective):
  """The n children of each popped partition (module docstring) and their best trees."""
  found, heads, forced, excluded = popped
  batch, n = heads.shape
  word = jnp.arange(n, dtype=jnp.int32)
  free = (forced == _FREE) & (word[None, :] < lengths[:, None]) & found[:, None]       # [B, n]
  before = free[:, None, :] & (word[None, None, :] < word[None, :, None])                # [B, child, word]
  child_forced = jnp.where(before, heads[:, None, :], forced[:, None, :])
  new_arc = (heads + 1) * n + word[None, :]
  slot = jnp.arange(excluded.shape[-1]) == i
  child_excluded = jnp.where(slot[None, None, :], new_arc[:, :, None], excluded[:, None, :])

  def solve(index):
    b, c = index // n, index % n
    scores = _constrained(full[b], child_forced[b, c], child_excluded[b, c])
    return best_trees(scores, lengths[b], single_root, projective)

  child_heads, child_score = map_in_chunks(solve, batch * n, n)
  child_score = jnp.where(free, child_score.reshape(batch, n), -jnp.inf)
  return dict(forced=child_forced, excluded=child_excluded, heads=child_heads.reshape(batch, n, n),
              score=child_score)


@functools.partial(jax.jit, static_argnames=('k', 'single_root', 'projective'))
def _k_best(arc, root, lengths, k, single_root, projective):
  """heads [B, k, n], scores [B, k] (module docstring)."""
  full = jnp.concatenate([root[:, None, :], arc], axis=1)
  batch, n = arc.shape[0], arc.shape[-1]
  slots, depth = 1 + (k - 1) * n, max(k - 1, 1)
  heads0, score0 = best_trees(full, lengths, single_root, projective)
  pool = dict(forced=jnp.full((batch, slots, n), _FREE, jnp.int32),
              excluded=jnp.full((batch, slots, depth), -1, jnp.int32),
              heads=jnp.full((batch, slots, n), -1, jnp.int32).at[:, 0].set(heads0),
              score=jnp.full((batch, slots), -jnp.inf, full.dtype).at[:, 0].set(score0))
  out = dict(heads=jnp.full((batch, k, n), -1, jnp.int32), score=jnp.full((batch, k), -jnp.inf, full.dtype))

  def body(i, carry):
    pool, out, popped = _pop(*carry, i)
    children = _children(full, lengths, popped, i, single_root, projective)
    start = 1 + i * n
    pool = {name: lax.dynamic_update_slice_in_dim(pool[name], children[name], start, axis=1)
            for name in pool}
    return pool, out

  if k > 1:
    pool, out = lax.fori_loop(0, k - 1, body, _inputs.vary_like((pool, out), arc, root))
  _, out, _ = _pop(pool, out, k - 1)
  return out['heads'], out['score']


def _run(arc_scores, root_scores, lengths, k, single_root, projective):
  if int(k) != k or k < 1:
    raise ValueError(f'k must be a positive integer, got {k!r}')
  arc_scores, root_scores, lengths = _inputs.check_scores(arc_scores, root_scores, lengths)
  batch_shape, n = arc_scores.shape[:-2], arc_scores.shape[-1]
  if n == 0:
    scores = jnp.full(batch_shape + (k,), -jnp.inf, arc_scores.dtype).at[..., 0].set(0)
    return jnp.zeros(batch_shape + (k, 0), jnp.int32), scores
  flat = int(np.prod(batch_shape))
  heads, scores = _k_best(arc_scores.reshape(flat, n, n), root_scores.reshape(flat, n),
                          jnp.clip(lengths, 0, n).reshape(flat), int(k), bool(single_root), projective)
  return heads.reshape(batch_shape + (k, n)), scores.reshape(batch_shape + (k,))


_DOC_ARGS = """
  Args:
    arc_scores: float [..., n, n]; `arc_scores[..., h, m]` scores word h -> word m; `-inf` forbids.
    root_scores: float [..., n]; scores ROOT -> word m.
    lengths: optional int [...]; number of real words (default n).
    k: static positive int, the number of trees.
    single_root: if True exactly one word hangs from ROOT; otherwise any number.

  Returns:
    (heads int32 [..., k, n], scores [..., k]): the k highest-scoring trees in non-increasing score
    order, each at most once, with their scores (a tree with a -inf arc is no tree). Fewer than k
    trees: the rest have score -inf and heads -1. A sentence of length 0 has one tree, the empty one
    (score 0). Ties: equal-scoring trees come out in the order their partitions were made (the
    children of an earlier round first; within a round, by the word whose arc the child excludes,
    left to right), the decoders breaking their own ties deterministically: the result depends on
    the scores only.
"""


def k_best(arc_scores, root_scores, lengths=None, *, k, single_root=True):
  """The k best non-projective trees (Lawler / Camerini partitions over constrained Chu-Liu-Edmonds).

  Algorithm (module docstring of `jax_structured.trees._kbest`): partitions of the tree set by forced
  and excluded arcs, each decoded by `mst` on constrained scores; each of k rounds emits the best
  partition's tree and splits it. Cost: `1 + (k - 1) n` MSTs per sentence, batched (one batch of
  `B n` constrained MSTs per round), memory O(B k n^2). Single root as in Zmigrod, Vieira & Cotterell
  (2021), multi root as in Camerini et al. (1980).
  """
  return _run(arc_scores, root_scores, lengths, k, single_root, projective=False)


def projective_k_best(arc_scores, root_scores, lengths=None, *, k, single_root=True):
  """The k best projective trees (Lawler partitions over constrained Eisner decodings).

  Algorithm: the partition scheme of `k_best` with `projective_mst` (Eisner's algorithm, O(n^3)) as
  the decoder of each partition. Cost: `1 + (k - 1) n` Eisner passes per sentence, batched (one batch
  of `B n` per round), memory O(B k n^2) (no O(k n^3) chart as in a top-k semiring).
  """
  return _run(arc_scores, root_scores, lengths, k, single_root, projective=True)


k_best.__doc__ += _DOC_ARGS
projective_k_best.__doc__ += _DOC_ARGS
