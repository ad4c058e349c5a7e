"""The k best dependency trees, in order, exactly: binary partitions split by a next-best oracle.

Camerini, Fratta & Maffioli (1980, "The k best spanning arborescences of a network"); Zmigrod, Vieira &
Cotterell (2021, "On Finding the K-best Non-projective Dependency Trees"). The trees of a sentence are
split into disjoint partitions, each given by arcs it must contain (forced heads) and arcs it must not
(excluded arcs). For a partition P an *oracle* returns, in one pass, P's best tree T, the score of P's
second-best tree and an arc `a` that separates the two:

* non-projective (`_camerini.best_and_next`): Camerini's next-best swap, one Chu-Liu-Edmonds pass.
  `a` is an arc of T, and the best tree of P without `a` is the second best (`split_in_best`);
* projective (`_projective_oracle`): the Viterbi max-marginals of P (one inside-outside pass). Every
  other tree of P holds an arc that T does not, so the second best scores `max_{a not in T} mm(a)`,
  reached by the best tree of P that contains the argmax arc `a`.

The queue holds partitions whose best tree has been emitted, keyed by their second-best score. Round i
pops the partition with the highest key (ties: the lowest slot, i.e. the partition made first) and
splits it on its arc `a` into two disjoint children that cover it: the *new* child, whose best tree is
the popped second best (it is emitted as tree i + 1), and the *old* child, whose best tree is T (already
emitted). Non-projective: new = P without `a`, old = P with `a` forced; projective: new = P with `a`
forced, old = P without `a`. Both children get their own oracle pass (one batch of 2B problems), and
join the queue keyed by their second-best scores. So every tree comes out once, in non-increasing
score order, and the cost is `2k - 2` oracle passes per sentence (the last round needs only the new
child), against `1 + (k - 1) n` decodings for Lawler's n-way split with a full decoding per child.

One root. The non-projective oracle orders trees lexicographically by (fewest -inf arcs, fewest ROOT
arcs, score) as `mst` does (`_mst.py`), so with `single_root` the one-root trees come first and a next
tree with a second ROOT arc (or a -inf arc) means that the partition has no second tree: its key is
-inf. This is the root constraint that Zmigrod et al. add to Camerini's algorithm, kept here by the
integer penalty of `_mst.py`. The projective oracle's charts enforce one root themselves.

Static shapes. The queue is a pool of `1 + 2 (k - 1)` slots per sentence (round i writes slots
`1 + 2i`, `2 + 2i`); a partition stores its forced heads [n] and its excluded arcs [k - 1] (every
round adds at most one exclusion to a partition, in entry i). Memory O(B k n) for the pool plus one
chunk of oracle passes.
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from jax_structured.trees import _camerini
from jax_structured.trees import _inputs
from jax_structured.trees import _max_marginals
from jax_structured.trees import _projective
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


def _projective_oracle(full, lengths, single_root, heads=None):
  """Best projective tree, its score, the second-best score and the split arc (module docstring).

  One max-semiring inside pass, then its outside passes: Viterbi max-marginals
  (`_max_marginals.viterbi_max_marginals`) and, unless the best tree `heads` is known already (the old
  child of a split), the backtracked best tree (`_projective.projective_mst`'s gradient).

  Args:
    full: float [C, n + 1, n] (row 0 = ROOT); lengths: int32 [C]; heads: optional int32 [C, n].

  Returns:
    dict(heads int32 [C, n], score [C], next_score [C], split int32 [C]): the split arc `a` (flat
    `(head + 1) * n + m`) is the lowest-index arc outside the best tree whose max-marginal is largest;
    the best tree containing it is the second-best tree.
  """
  count, rows, n = full.shape
  arc, root = full[:, 1:], full[:, 0]
  arc_r, arc_l, _ = _projective._span_arcs(arc, root, lengths)
  tables = _projective._inside_tables(arc_r, arc_l, 'max')
  if heads is None:
    _, (arc_g, root_g) = _projective._value_and_gradients(arc, root, lengths, single_root, 'max', tables)
    heads = _projective.heads_from_argmax_gradients(arc_g, root_g, lengths)
  score = _max_marginals.tree_scores(full, heads, lengths)
  mm = _max_marginals.viterbi_max_marginals(arc, root, lengths, single_root, tables)   # [C, n + 1, n]
  in_best = jnp.arange(rows)[None, :, None] == heads[:, None, :] + 1
  other = jnp.where(in_best, -jnp.inf, mm).reshape(count, rows * n)
  split = jnp.argmax(other, axis=-1).astype(jnp.int32)
  next_score = jnp.where(score > -jnp.inf, jnp.max(other, axis=-1), -jnp.inf)
  return dict(heads=heads, score=score, next_score=next_score, split=split)


def _camerini_oracle(full, lengths, single_root, heads=None):
  """`_camerini.best_and_next` with its split arc flattened to `(head + 1) * n + m` (a known best
  tree `heads` saves nothing here: the swap needs the contraction of this very partition)."""
  del heads
  out = _camerini.best_and_next(full, lengths, single_root)
  n = full.shape[-1]
  split = (out['split_head'] + 1) * n + out['split_dep']
  return dict(heads=out['heads'], score=out['score'], next_score=out['next_score'],
              split=split.astype(jnp.int32))


def _solve(oracle, full, lengths, forced, excluded, heads=None):
  """The oracle on one constrained problem per sentence (forced [B, n], excluded [B, E]; optional
  known best trees heads [B, n]), in chunks of sentences (`map_in_chunks`)."""
  n = full.shape[-1]

  def solve(b):
    known = None if heads is None else heads[b]
    return oracle(_constrained(full[b], forced[b], excluded[b]), lengths[b], heads=known)

  return map_in_chunks(solve, full.shape[0], n)


def _pop(pool):
  """The pool's best partition (ties: lowest slot); its slot is emptied. Returns (pool, popped)."""
  batch = pool['key'].shape[0]
  rows = jnp.arange(batch)
  slot = jnp.argmax(pool['key'], axis=1)
  popped = {name: value[rows, slot] for name, value in pool.items()}
  return dict(pool, key=pool['key'].at[rows, slot].set(-jnp.inf)), popped


def _children(popped, i, split_in_best):
  """(forced, excluded) of the new child and of the old child (module docstring): [B, n], [B, E] each."""
  forced, excluded, split = popped['forced'], popped['excluded'], popped['split']
  n = forced.shape[-1]
  head, dep = split // n - 1, split % n
  with_arc = (jnp.where(jnp.arange(n)[None, :] == dep[:, None], head[:, None], forced), excluded)
  without_arc = (forced, jnp.where(jnp.arange(excluded.shape[-1])[None, :] == i, split[:, None], excluded))
  return (without_arc, with_arc) if split_in_best else (with_arc, without_arc)


@functools.partial(jax.jit, static_argnames=('k', 'single_root', 'projective'))
def _k_best(arc, root, lengths, k, single_root, projective):
  """heads [B, k, n], scores [B, k] (module docstring)."""
  full = jnp.concatenate([root[:, None, :], arc], axis=1)
  batch, n = arc.shape[0], arc.shape[-1]
  oracle = functools.partial(_projective_oracle if projective else _camerini_oracle,
                             single_root=single_root)
  split_in_best = not projective
  slots, depth = 1 + 2 * (k - 1), max(k - 1, 1)
  first = _solve(oracle, full, lengths, jnp.full((batch, n), _FREE, jnp.int32),
                 jnp.full((batch, depth), -1, jnp.int32))
  found = first['score'] > -jnp.inf
  out = dict(heads=jnp.full((batch, k, n), -1, jnp.int32).at[:, 0].set(
                 jnp.where(found[:, None], first['heads'], -1)),
             score=jnp.full((batch, k), -jnp.inf, full.dtype).at[:, 0].set(first['score']))
  entry = lambda forced, excluded, solved, found: dict(
      forced=forced, excluded=excluded, heads=solved['heads'], split=solved['split'],
      key=jnp.where(found, solved['next_score'], -jnp.inf))
  pool = jax.tree.map(
      lambda x: jnp.zeros((batch, slots) + x.shape[1:], x.dtype).at[:, 0].set(x),
      entry(jnp.full((batch, n), _FREE, jnp.int32), jnp.full((batch, depth), -1, jnp.int32), first,
            found))
  pool['key'] = pool['key'].at[:, 1:].set(-jnp.inf)

  def round_(i, carry, last):
    pool, out = carry
    pool, popped = _pop(pool)
    found = popped['key'] > -jnp.inf
    new, old = _children(popped, i, split_in_best)
    new_solved = _solve(oracle, full, lengths, *new)
    out = dict(heads=out['heads'].at[:, i + 1].set(jnp.where(found[:, None], new_solved['heads'], -1)),
               score=out['score'].at[:, i + 1].set(jnp.where(found, new_solved['score'], -jnp.inf)))
    if last:
      return pool, out
    old_solved = _solve(oracle, full, lengths, *old, heads=popped['heads'])
    children = jax.tree.map(lambda a, b: jnp.stack([a, b], axis=1),
                            entry(*new, new_solved, found), entry(*old, old_solved, found))
    pool = {name: lax.dynamic_update_slice_in_dim(pool[name], children[name], 1 + 2 * i, axis=1)
            for name in pool}
    return pool, out

  carry = _inputs.vary_like((pool, out), arc, root)
  if k > 2:
    carry = lax.fori_loop(0, k - 2, functools.partial(round_, last=False), carry)
  if k > 1:
    carry = round_(k - 2, carry, last=True)
  out = carry[1]
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
    (score 0). Ties: deterministic, a function of the scores only: a popped partition is the one
    made first among equal keys, the oracles break their own ties by lowest index (the decoders'
    lowest source, the lowest contraction id or flat arc index for the split). The queue is keyed by
    the oracle's second-best score (Camerini's swap value, computed with re-weighted scores); the
    returned score of each tree is the sum of its arcs, so the two agree up to float rounding.
"""


def k_best(arc_scores, root_scores, lengths=None, *, k, single_root=True):
  """The k best non-projective trees (Camerini et al. 1980; Zmigrod, Vieira & Cotterell 2021).

  Algorithm (module docstring of `jax_structured.trees._kbest`): binary partitions of the tree set by
  forced and excluded arcs; each partition's best tree, second-best score and split arc come from one
  Chu-Liu-Edmonds pass with Camerini's next-best swap (`_camerini.best_and_next`); each of k - 1
  rounds emits the best second-best tree and splits its partition in two. Cost: `2k - 2` such passes
  per sentence (two per round, batched as one batch of `2B` problems), memory O(B k n) for the queue.
  Single root as in Zmigrod et al. (by the lexicographic root penalty of `mst`), multi root as in
  Camerini et al.
  """
  return _run(arc_scores, root_scores, lengths, k, single_root, projective=False)


def projective_k_best(arc_scores, root_scores, lengths=None, *, k, single_root=True):
  """The k best projective trees (binary partitions split by Viterbi max-marginals).

  Algorithm: the partition scheme of `k_best` with the projective oracle: per partition, Eisner's
  best tree (`projective_mst`) and the Viterbi inside-outside max-marginals
  (`projective_max_marginals`, O(n^3)); the second best is the best max-marginal of an arc outside the
  best tree. Cost: `2k - 2` oracle passes (each an Eisner pass and a Viterbi inside-outside) per
  sentence, memory O(B k n) for the queue (no O(k n^3) chart as in a top-k semiring).
  """
  return _run(arc_scores, root_scores, lengths, k, single_root, projective=True)


k_best.__doc__ += _DOC_ARGS
projective_k_best.__doc__ += _DOC_ARGS
