"""Max-marginals of dependency trees: for every arc, the score of the best tree that contains it.

`max_marginals(...)[h, m] = max_{trees T with h -> m} score(T)` (`-inf` where no tree contains the arc),
exactly, for non-projective trees (`max_marginals`) and projective trees (`projective_max_marginals`).
For every real word `m`, `max_h` of its column (ROOT included) is the score of the best tree, reached at
the best tree's head of `m`.

Projective: Viterbi inside-outside. The inside pass is Eisner's charts in the max semiring
(`_projective._inside_tables`), the outside pass the same backward walk over the widths as
`_projective._outside` with (+, x) replaced by (max, +): the outside score of a chart item is the best
score of everything outside it, pushed from each parent item to both halves of each split. The
max-marginal of the arc i -> j is `outside(I[i, j]) + I[i, j]`. O(n^3) time and O(n^2) memory per
sentence, the cost of `projective_marginals`.

Non-projective: one constrained Chu-Liu-Edmonds per arc. The best tree containing h -> m is the best
tree of the scores whose column m forbids every head but h (an arc scored `-inf` is chosen only when no
tree avoids it, so a `-inf` total says that no tree contains h -> m). That is `n (n + 1)` MSTs per
sentence (`n^2` arcs and the `n` ROOT arcs), run as batched `mst` calls over chunks of the forced
problems (`lax.map`, each chunk at most `_CHUNK_ELEMENTS` score entries): O(n^2) times the cost of one
MST (O(n^3) each worst case). It is exact but not cheap; see the decision record
docs/decisions/2026-12-04-k-best-and-max-marginals.md for what was tried and measured.
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from jax_structured.trees import _inputs
from jax_structured.trees import _projective
from jax_structured.trees._mst import mst
from jax_structured.trees._projective import projective_mst

__all__ = ['max_marginals', 'projective_max_marginals']

# Score entries (problems x (n + 1) x n) per chunk of the batched constrained decodings, by platform: it
# bounds the peak memory, and on the CPU small chunks stay in cache (k-best, k = 3, at 16x64 on one
# shared core: 2^17 entries, ~31 problems a chunk, took 0.2-0.35x the time of 2^22, ~1000 problems).
_CHUNK_ELEMENTS = {'cpu': 2**17, 'default': 2**22}


def _full(arc, root):
  """[B, n, n] arcs and [B, n] root scores -> [B, n + 1, n] with ROOT as row 0 (row h + 1 = word h)."""
  return jnp.concatenate([root[:, None, :], arc], axis=1)


def tree_scores(full, heads, lengths):
  """Score [B] of `heads` [B, n] under `full` [B, n + 1, n] (real words only; -inf if an arc is)."""
  n = heads.shape[-1]
  picked = jnp.take_along_axis(full, (heads + 1)[:, None, :], axis=1)[:, 0]
  real = jnp.arange(n)[None, :] < lengths[:, None]
  return jnp.sum(jnp.where(real, picked, jnp.zeros((), full.dtype)), axis=-1)


def best_trees(full, lengths, single_root, projective):
  """Best tree (heads [G, n]) of each `full` [G, n + 1, n] and its score [G] (-inf: no finite tree).

  The score is -inf when the tree holds a -inf arc or, with `single_root`, more than one ROOT arc
  (`mst` returns such a tree when every one-root tree holds a -inf arc).
  """
  decode = projective_mst if projective else mst
  heads = decode(full[:, 1:], full[:, 0], lengths, single_root=single_root)
  scores = tree_scores(full, heads, lengths)
  if single_root:  # `mst` avoids -inf arcs before extra ROOT arcs: a tree with two is not a tree here
    real = jnp.arange(heads.shape[-1])[None, :] < lengths[:, None]
    roots = jnp.sum(real & (heads == -1), axis=-1)
    scores = jnp.where((roots == 1) | (lengths == 0), scores, -jnp.inf)
  return heads, scores


def map_in_chunks(fn, count, n):
  """[fn(indices) for chunks of arange(count)], concatenated: `fn` maps int32 [C] -> pytree of [C, ...].

  The chunk size C bounds the problems solved at once to `_CHUNK_ELEMENTS` score entries (by the default
  backend); the last
  chunk is padded with copies of problem 0 (computed and dropped). One chunk runs without `lax.map`.
  """
  budget = _CHUNK_ELEMENTS.get(jax.default_backend(), _CHUNK_ELEMENTS['default'])
  chunk = max(1, min(count, budget // ((n + 1) * n)))
  groups = -(-count // chunk)
  index = jnp.arange(groups * chunk, dtype=jnp.int32)
  index = jnp.where(index < count, index, 0).reshape(groups, chunk)
  out = fn(index[0]) if groups == 1 else lax.map(fn, index)
  return jax.tree.map(lambda x: x.reshape((groups * chunk,) + x.shape[(1 if groups == 1 else 2):])[:count],
                      out)


@functools.partial(jax.jit, static_argnames=('single_root',))
def _nonprojective(arc, root, lengths, single_root):
  """Max-marginals [B, n + 1, n] (row 0 = ROOT) by one constrained MST per arc (module docstring)."""
  full = _full(arc, root)
  batch, n = arc.shape[0], arc.shape[-1]
  rows = jnp.arange(n + 1)[:, None]

  def solve(index):                                        # index over (b, r, m) -> scores [C]
    b, rest = index // ((n + 1) * n), index % ((n + 1) * n)
    r, m = rest // n, rest % n
    scores = full[b]
    keep = (rows[None] == r[:, None, None]) | (jnp.arange(n)[None, None, :] != m[:, None, None])
    scores = jnp.where(keep, scores, -jnp.inf)
    return best_trees(scores, lengths[b], single_root, projective=False)[1]

  mm = map_in_chunks(solve, batch * (n + 1) * n, n).reshape(batch, n + 1, n)
  node = jnp.arange(n)
  real = node[None, :] < lengths[:, None]
  usable = real[:, None, :] & jnp.concatenate([jnp.ones((batch, 1), bool), real], axis=1)[:, :, None]
  usable &= (rows - 1 != node[None, :])[None]
  return jnp.where(usable, mm, -jnp.inf)


def _push(o, tables, name, w, n_splits, n_starts, parent):
  """Max-semiring outside of one split sum of width w (`_projective._split_sum`): every split term
  `S[t, i] + E[t, i]` gives `parent[i] + E[t, i]` to its S item and `parent[i] + S[t, i]` to its E item."""
  s_name, s_row, e_name, e_shift = _projective._OPERANDS[name]
  n_nodes = tables['cr_s'].shape[1]
  e_row = n_nodes - w + e_shift
  s_part = tables[s_name][:, s_row:s_row + n_splits, :n_starts]
  e_part = _projective._window(tables[e_name], e_row, w, n_splits, n_starts)
  in_range = lax.broadcasted_iota(jnp.int32, (1, n_splits, 1), 1) < w
  neg_inf = jnp.array(-jnp.inf, parent.dtype)
  to_s = jnp.where(in_range, parent + e_part, neg_inf)
  to_e = jnp.where(in_range, parent + s_part, neg_inf)
  window = _projective._window
  o = dict(o)
  o[s_name] = _projective._put(o[s_name], jnp.maximum(window(o[s_name], s_row, 0, n_splits, n_starts), to_s),
                               s_row, 0)
  o[e_name] = _projective._put(o[e_name], jnp.maximum(window(o[e_name], e_row, w, n_splits, n_starts), to_e),
                               e_row, w)
  return o


def _outside_max(tables, arc_r, arc_l, o_cr, o_cl):
  """Viterbi outside scores of the incomplete items I_R, I_L ([B, N, N] by [width, start]).

  Mirrors `_projective._outside` (same chunks, same order of reads and writes) in the (max, +)
  semiring; `o_cr`, `o_cl` are the outside scores the readout gives the complete items.
  """
  n_nodes = o_cr.shape[1]
  window = _projective._window
  neg_square = jnp.full(o_cr.shape, -jnp.inf, o_cr.dtype)
  neg_border = jnp.full(tables['cr_e'].shape, -jnp.inf, o_cr.dtype)

  def complete_rows(o, w):
    row = n_nodes - 1 - w
    return (jnp.maximum(window(o['cr_s'], w, 0, 1, n_nodes), window(o['cr_e'], row, w, 1, n_nodes)),
            jnp.maximum(window(o['cl_s'], w, 0, 1, n_nodes), window(o['cl_e'], row, w, 1, n_nodes)))

  o = dict(cr_s=o_cr, cl_s=o_cl, ir_s=neg_square, cr_e=neg_border, cl_e=neg_border, il_e=neg_border,
           out_r=neg_square, out_l=neg_square)
  o['rows'] = complete_rows(o, n_nodes - 1)
  for lo, hi, n_splits, n_starts in reversed(_projective._width_chunks(n_nodes)):
    def body(step, o, hi=hi, n_splits=n_splits, n_starts=n_starts):
      w = hi - 1 - step
      o_cr, o_cl = (row[:, :, :n_starts] for row in o['rows'])
      o = _push(o, tables, 'b', w, n_splits, n_starts, o_cr)
      o = _push(o, tables, 'c', w, n_splits, n_starts, o_cl)
      o_ir = window(o['ir_s'], w, 0, 1, n_starts)
      o_il = window(o['il_e'], n_nodes - 1 - w, w, 1, n_starts)
      o_inner = jnp.maximum(o_ir + window(arc_r, w, 0, 1, n_starts), o_il + window(arc_l, w, 0, 1, n_starts))
      o = _push(o, tables, 'a', w, n_splits, n_starts, o_inner)
      o = dict(o, out_r=_projective._put(o['out_r'], o_ir, w, 0), out_l=_projective._put(o['out_l'], o_il, w, 0))
      return dict(o, rows=complete_rows(o, w - 1))
    o = lax.fori_loop(0, hi - lo, body, _inputs.vary_like(o, tables['cr_s'], o_cr, o_cl))
  return o['out_r'], o['out_l']


@functools.partial(jax.jit, static_argnames=('single_root',))
def _projective_mm(arc, root, lengths, single_root):
  """Projective max-marginals [B, n + 1, n] (row 0 = ROOT) by Viterbi inside-outside."""
  return viterbi_max_marginals(arc, root, lengths, single_root)


def viterbi_max_marginals(arc, root, lengths, single_root, tables=None):
  """`_projective_mm` (not jitted), reusing the max-semiring inside `tables` of
  `_projective._inside_tables` when given (so that a caller that also backtracks the best tree runs
  the inside pass once)."""
  arc_r, arc_l, root_s = _projective._span_arcs(arc, root, lengths)
  if tables is None:
    tables = _projective._inside_tables(arc_r, arc_l, 'max')
  batch, n_nodes = arc_r.shape[0], arc_r.shape[1]
  n = n_nodes - 1
  rows = jnp.arange(batch)[:, None]
  m = jnp.arange(1, n_nodes)[None, :]
  real = m <= lengths[:, None]
  neg = jnp.full(arc_r.shape, -jnp.inf, arc_r.dtype)
  if single_root:   # readout: max_m s[0, m] + C_L[1, m] + C_R[m, L]
    left_w, right_w = m - 1, jnp.clip(lengths[:, None] - m, 0, n)
    left = tables['cl_s'][rows, left_w, 1]
    right = tables['cr_s'][rows, right_w, m]
    o_cl = neg.at[rows, left_w, 1].max(jnp.where(real, root_s + right, -jnp.inf))
    o_cr = neg.at[rows, right_w, m].max(jnp.where(real, root_s + left, -jnp.inf))
    root_mm = jnp.where(real, root_s + left + right, -jnp.inf)
  else:             # readout: C_R[0, L]
    o_cl = neg
    o_cr = neg.at[rows[:, 0], lengths, 0].set(jnp.where(lengths > 0, 0.0, -jnp.inf).astype(neg.dtype))
  out_r, out_l = _outside_max(tables, arc_r, arc_l, o_cr, o_cl)
  mm_r = out_r + arc_r + tables['inner']                    # by [width, start]: arc start -> start + w
  mm_l = out_l + arc_l + tables['inner']                    # arc start + w -> start
  node = jnp.arange(n_nodes)
  u, v = node[:, None], node[None, :]
  width, start = jnp.abs(u - v), jnp.minimum(u, v)
  by_node = jnp.where(u < v, mm_r[:, width, start], mm_l[:, width, start])    # [B, N, N], u -> v
  mm = by_node[:, :, 1:]
  if single_root:
    mm = mm.at[:, 0, :].set(root_mm)
  word_real = jnp.arange(n)[None, :] < lengths[:, None]
  usable = word_real[:, None, :] & jnp.concatenate([jnp.ones((batch, 1), bool), word_real], 1)[:, :, None]
  usable &= (u != v[:, 1:])[None]
  return jnp.where(usable, mm, -jnp.inf)


def _run(fn, arc_scores, root_scores, lengths, single_root):
  arc_scores, root_scores, lengths = _inputs.check_scores(arc_scores, root_scores, lengths)
  batch_shape, n = arc_scores.shape[:-2], arc_scores.shape[-1]
  if n == 0:
    return jnp.zeros(batch_shape + (0, 0), arc_scores.dtype), jnp.zeros(batch_shape + (0,), arc_scores.dtype)
  flat = int(np.prod(batch_shape))
  mm = fn(arc_scores.reshape(flat, n, n), root_scores.reshape(flat, n), jnp.clip(lengths, 0, n).reshape(flat),
          bool(single_root))
  return mm[:, 1:].reshape(batch_shape + (n, n)), mm[:, 0].reshape(batch_shape + (n,))


def max_marginals(arc_scores, root_scores, lengths=None, *, single_root=True):
  """Max-marginals of non-projective trees: the score of the best tree containing each arc, exactly.

  Algorithm: for every arc h -> m, Chu-Liu-Edmonds (`mst`) on the scores whose column m keeps only
  head h; the forced tree's score is the max-marginal. Cost: `n (n + 1)` MSTs per sentence (O(n^2)
  times one MST, each O(n^3) worst case), batched in chunks under `lax.map` so that peak memory stays
  bounded (`2^17` score entries per chunk on the CPU, `2^22` elsewhere). Exact, on the device, jit- and
  vmap-able.

  Args:
    arc_scores: float [..., n, n]; `arc_scores[..., h, m]` scores word h -> word m; `-inf` forbids.
    root_scores: float [..., n]; scores ROOT -> word m.
    lengths: optional int [...]; number of real words (default n).
    single_root: if True exactly one word hangs from ROOT; otherwise any number.

  Returns:
    (arc_mm [..., n, n], root_mm [..., n]): `arc_mm[..., h, m]` = max score of a tree containing
    h -> m, `root_mm[..., m]` of one containing ROOT -> m; `-inf` where no tree contains the arc, on
    the diagonal and on padding. For every real word m, `max(arc_mm[..., :, m].max(), root_mm[..., m])`
    is the score of the best tree (`mst`).
  """
  return _run(_nonprojective, arc_scores, root_scores, lengths, single_root)


def projective_max_marginals(arc_scores, root_scores, lengths=None, *, single_root=True):
  """Max-marginals of projective trees (Viterbi inside-outside over Eisner's charts), exactly.

  Algorithm: the inside charts of Eisner's algorithm in the (max, +) semiring, then the outside pass
  in the same semiring (the backward walk of `projective_marginals` with max for sum); the
  max-marginal of the arc i -> j is `outside(I[i, j]) + I[i, j]`. Cost: O(n^3) time, O(n^2) memory
  per sentence, like `projective_marginals`.

  Args:
    arc_scores: float [..., n, n]; `arc_scores[..., h, m]` scores word h -> word m; `-inf` forbids.
    root_scores: float [..., n]; scores ROOT -> word m.
    lengths: optional int [...]; number of real words (default n).
    single_root: if True exactly one word hangs from ROOT; otherwise any number.

  Returns:
    (arc_mm [..., n, n], root_mm [..., n]): the best score of a projective tree containing each arc
    (`-inf` where none does, on the diagonal and on padding); each real column's max (ROOT included)
    is the score of `projective_mst`'s tree.
  """
  return _run(_projective_mm, arc_scores, root_scores, lengths, single_root)
