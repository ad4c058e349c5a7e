"""A fused Pallas kernel for the exact path's derivative: the Hessian-vector product of log Z.

The exact path's derivatives are one product (`_exact_path`, `_hessian_product`): along a direction
`t = (d_arc, d_root)` of the scores the marginals `mu = grad log Z` move by `H t`, the Hessian of log Z
times `t`; reverse mode (the training step's gradient through the marginals) needs `H^T g = H g` on the
cotangent `g`, the same product. On XLA it is forward mode through the linear elimination and its
reverse sweep (`_exact_path._exact_chunk_product`, nested `jax.jvp` of `_elimination._linear_marginals`):
two `lax.scan`s of n small steps, each several launches. Here one program per flagged sentence runs the
whole product in one launch: `_exact_kernel`'s elimination (`_eliminate_step`) and reverse sweep
(`_sweep_step`) with a tangent carried beside every quantity, all linear in it (forward mode written out,
the product rule on each line of those two functions).

Tangents of the potentials. `_linear_potentials` scales column m (arc potentials `A[:, m]` and the root
potential `r[m]`) by `exp(-shift[m])`, and in the single-root case the root potentials by
`exp(-root_shift)`. Every tree has exactly one head per word, and (single root) exactly one root arc,
so these scalings multiply every tree's weight by one constant: they move log Z, not the marginals. The
kernel therefore treats the shifts as constants, `dA = A * d_arc`, `dr = r * d_root` (where `A`, `r`
are positive: a forbidden arc's direction never enters), which is the same product as autodiff's, whose
terms through the shifts cancel exactly in real arithmetic (they differ by rounding only).

Per step t of the elimination (`_elimination._linear_elimination_start`; `W` the off-diagonal weights,
`e` the excess, `f` the first-order excess, `p = e[k] + sum_live W[:, k]` the pivot, `s = W[k] / p` the
scaled row, `c = W[:, k]` the column, over the live words):

  dp = de[k] + sum_live dW[:, k],   ds = (dW[k] - s dp) / p,   dc = dW[:, k],
  dW' = dW + dc s^T + c ds^T,   de' = de + ds e[k] + s de[k],   df' = df + ds f[k] + s df[k],

(each divides by the pivot once, like `_elimination._ratio`); `d(1 / v) = -(1 / v) dv / v` for the
scalar that seeds the reverse sweep. The reverse sweep (`_elimination._linear_step_back`) is bilinear
in a step's record and the cotangent `(G, g_e, g_f)`, so its tangent is the sum of the sweep with the
record's tangent and the sweep's own tangent. Finally `d mu = dA * G + A * dG` and
`d mu_root = dr * g + r * dg`.

Memory per program: the forward sweep keeps the weights, their tangent, and the records (column and
scaled row and their tangents: four [p, p] blocks, the step of each word's elimination as a [p]
vector instead of `_exact_kernel`'s block of remaining-masks, eleven scalars per step as [p] vectors);
the reverse sweep the records and the cotangent with its tangent.

The product is only exact where `_linear_trusted` holds (the kernel returns that test); the other
sentences take the log-space elimination on XLA (`_exact_path`). See
docs/decisions/2026-12-04-fused-matrix-tree-kernels.md.
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from jax_structured.trees import _elimination
from jax_structured.trees import _exact_kernel
from jax_structured.trees import _kernels

__all__ = ['linear_marginals_product']

# pylint: disable-next=protected-access
_at, _put, _row = _exact_kernel._at, _exact_kernel._put, _exact_kernel._row


def _iotas(p):
  """(word index [p], rows [p, p], columns [p, p]) of a block."""
  return (lax.broadcasted_iota(jnp.int32, (p,), 0), lax.broadcasted_iota(jnp.int32, (p, p), 0),
          lax.broadcasted_iota(jnp.int32, (p, p), 1))


def _column(block, k):
  """Column k of a block, by a masked sum."""
  return jnp.sum(jnp.where(lax.broadcasted_iota(jnp.int32, block.shape, 1) == k, block, 0.0), axis=1)


def _eliminate_step(t, state, single_root):
  """Step t of the elimination (`_exact_kernel._eliminate_step`) and its tangent, records at entry t.

  `state = (W, dW, e, de, f, df, log_z, order, records)`: weights [p, p], excess [p], first-order
  excess [p] and their tangents, log Z [], `order` [p] (the step at which each word was eliminated, p
  while it is not), `records = (column, scaled row, their tangents: [p, p] blocks with row t the
  step's, scalars: eleven [p] vectors with entry t the step's)`.
  """
  weights, d_weights, excess, d_excess, first_order, d_first_order, log_z, order, records = state
  col_rec, row_rec, d_col_rec, d_row_rec, scalars = records
  p = order.shape[-1]
  index, rows, cols = _iotas(p)
  off_diagonal = rows != cols
  dtype = weights.dtype
  live = order > t  # the words not yet eliminated (padding: eliminated from the start)
  pivots = excess + jnp.sum(jnp.where(live[:, None], weights, 0.0), axis=0)
  d_pivots = d_excess + jnp.sum(jnp.where(live[:, None], d_weights, 0.0), axis=0)
  candidates = jnp.where(live, pivots, -1.0)
  k = jnp.min(jnp.where(candidates == jnp.max(candidates), index, p))
  k = jnp.where(k < p, k, 0)
  count = jnp.sum(live.astype(jnp.int32))
  pivot, d_pivot = _at(pivots, k), _at(d_pivots, k)
  last = (count == 1) if single_root else False
  first_order_k, d_first_order_k = _at(first_order, k), _at(d_first_order, k)
  value = jnp.where(last, first_order_k, pivot)
  d_value = jnp.where(last, d_first_order_k, d_pivot)
  positive = pivot > 0
  safe_pivot = jnp.where(positive, pivot, 1.0)
  d_safe_pivot = jnp.where(positive, d_pivot, 0.0)
  usable = (count > 0) & (value > 0)
  safe_value = jnp.where(usable, value, 1.0)
  scaled_row = jnp.where(live, _row(weights, k), 0.0) / safe_pivot
  d_scaled_row = (jnp.where(live, _row(d_weights, k), 0.0) - scaled_row * d_safe_pivot) / safe_pivot
  column = jnp.where(live, _column(weights, k), 0.0)
  d_column = jnp.where(live, _column(d_weights, k), 0.0)
  weights = jnp.where(off_diagonal, weights + column[:, None] * scaled_row[None, :], 0.0)
  d_weights = jnp.where(off_diagonal, d_weights + d_column[:, None] * scaled_row[None, :]
                        + column[:, None] * d_scaled_row[None, :], 0.0)
  excess_k, d_excess_k = _at(excess, k), _at(d_excess, k)
  excess = excess + scaled_row * excess_k
  d_excess = d_excess + d_scaled_row * excess_k + scaled_row * d_excess_k
  if single_root:
    first_order = first_order + scaled_row * first_order_k
    d_first_order = d_first_order + d_scaled_row * first_order_k + scaled_row * d_first_order_k
  log_z = log_z + jnp.where((count > 0) & ~usable, -jnp.inf, jnp.log(safe_value))
  inverse = jnp.where(usable, 1.0 / safe_value, 0.0)  # d log Z / d value
  d_inverse = jnp.where(usable, -(inverse * d_value) / safe_value, 0.0)
  # The step's scalars: k, the pivot (0 unless positive), excess[k], first_order[k], d log Z / d pivot,
  # d log Z / d first_order[k], then the tangents of the last five.
  step_scalars = (k.astype(dtype), jnp.where(positive, pivot, 0.0), excess_k, first_order_k,
                  jnp.where(last, 0.0, inverse), jnp.where(last, inverse, 0.0),
                  d_safe_pivot, d_excess_k, d_first_order_k,
                  jnp.where(last, 0.0, d_inverse), jnp.where(last, d_inverse, 0.0))
  scalars = tuple(jnp.where(index == t, v, s) for v, s in zip(step_scalars, scalars))
  records = (_put(col_rec, t, column), _put(row_rec, t, scaled_row), _put(d_col_rec, t, d_column),
             _put(d_row_rec, t, d_scaled_row), scalars)
  order = jnp.where((index == k) & live, t, order)
  return weights, d_weights, excess, d_excess, first_order, d_first_order, log_z, order, records


def _sweep_step(i, cotangent, order, records, single_root):
  """`_exact_kernel._sweep_step` of step p - 1 - i and its tangent.

  `cotangent = (G, dG, g_e, dg_e, g_f, dg_f)`: the cotangent of (weights, excess, first-order excess)
  after the step, and its tangent; returns them before the step.
  """
  d_weights, dd_weights, d_excess, dd_excess, d_first_order, dd_first_order = cotangent
  col_rec, row_rec, d_col_rec, d_row_rec, scalars = records
  p = order.shape[-1]
  index, rows, cols = _iotas(p)
  off_diagonal = rows != cols
  t = p - 1 - i
  remaining = order >= t
  column, scaled_row = _row(col_rec, t), _row(row_rec, t)
  t_column, t_scaled_row = _row(d_col_rec, t), _row(d_row_rec, t)
  (k_f, pivot, excess_k, first_order_k, seed_pivot, seed_first_order, t_pivot, t_excess_k,
   t_first_order_k, t_seed_pivot, t_seed_first_order) = (_at(s, t) for s in scalars)
  at_k = index == k_f.astype(jnp.int32)
  d_weights = jnp.where(off_diagonal, d_weights, 0.0)
  dd_weights = jnp.where(off_diagonal, dd_weights, 0.0)
  d_column = jnp.sum(d_weights * scaled_row[None, :], axis=1)
  dd_column = jnp.sum(dd_weights * scaled_row[None, :] + d_weights * t_scaled_row[None, :], axis=1)
  d_scaled_row = jnp.sum(column[:, None] * d_weights, axis=0) + d_excess * excess_k
  dd_scaled_row = (jnp.sum(t_column[:, None] * d_weights + column[:, None] * dd_weights, axis=0)
                   + dd_excess * excess_k + d_excess * t_excess_k)
  new_d_excess = d_excess + jnp.where(at_k, jnp.sum(d_excess * scaled_row), 0.0)
  dd_excess = dd_excess + jnp.where(at_k, jnp.sum(dd_excess * scaled_row + d_excess * t_scaled_row), 0.0)
  d_excess = new_d_excess
  if single_root:
    d_scaled_row = d_scaled_row + d_first_order * first_order_k
    dd_scaled_row = dd_scaled_row + dd_first_order * first_order_k + d_first_order * t_first_order_k
    new_d_first_order = d_first_order + jnp.where(
        at_k, jnp.sum(d_first_order * scaled_row) + seed_first_order, 0.0)
    dd_first_order = dd_first_order + jnp.where(
        at_k, jnp.sum(dd_first_order * scaled_row + d_first_order * t_scaled_row) + t_seed_first_order,
        0.0)
    d_first_order = new_d_first_order
  positive = pivot > 0
  safe_pivot = jnp.where(positive, pivot, 1.0)
  ratio = jnp.sum(d_scaled_row * scaled_row) / safe_pivot
  d_pivot = seed_pivot - jnp.where(positive, ratio, 0.0)
  dd_pivot = t_seed_pivot - jnp.where(positive, (jnp.sum(dd_scaled_row * scaled_row
                                                         + d_scaled_row * t_scaled_row)
                                                 - ratio * t_pivot) / safe_pivot, 0.0)
  d_row = jnp.where(remaining, d_scaled_row / safe_pivot, 0.0)
  dd_row = jnp.where(remaining, (dd_scaled_row - (d_scaled_row / safe_pivot) * t_pivot) / safe_pivot, 0.0)
  d_col = jnp.where(remaining, d_column + d_pivot, 0.0)
  dd_col = jnp.where(remaining, dd_column + dd_pivot, 0.0)
  at_row, at_col = rows == k_f.astype(jnp.int32), cols == k_f.astype(jnp.int32)
  d_weights = d_weights + jnp.where(at_row, d_row[None, :], 0.0) + jnp.where(at_col, d_col[:, None], 0.0)
  dd_weights = (dd_weights + jnp.where(at_row, dd_row[None, :], 0.0)
                + jnp.where(at_col, dd_col[:, None], 0.0))
  d_excess = d_excess + jnp.where(at_k, d_pivot, 0.0)
  dd_excess = dd_excess + jnp.where(at_k, dd_pivot, 0.0)
  return d_weights, dd_weights, d_excess, dd_excess, d_first_order, dd_first_order


def _potential_tangents(a, r, d_arc, d_root, arc_ok, mask):
  """(dA [p, p], dr [p]): the potentials' tangents with the shifts held constant (module docstring)."""
  d_a = jnp.where(arc_ok & (a > 0), a * jnp.where(arc_ok, d_arc, 0.0), 0.0)
  d_r = jnp.where(mask & (r > 0), r * jnp.where(mask, d_root, 0.0), 0.0)
  return d_a, d_r


def _kernel(length_ref, arc_ref, root_ref, d_arc_ref, d_root_ref, d_arc_m_ref, d_root_m_ref, trusted_ref,
            *, single_root, floor):
  """One sentence: the marginals' tangent along `(d_arc, d_root)`, and whether to trust it."""
  length = length_ref[0]
  a, r, _, mask = _exact_kernel._linear_potentials(  # pylint: disable=protected-access
      arc_ref[...], root_ref[...], length, single_root)
  p = r.shape[-1]
  _, rows, cols = _iotas(p)
  arc_ok = mask[:, None] & mask[None, :] & (rows != cols)
  d_a, d_r = _potential_tangents(a, r, d_arc_ref[...], d_root_ref[...], arc_ok, mask)
  dtype = a.dtype
  zeros_block, zeros = jnp.zeros((p, p), dtype), jnp.zeros((p,), dtype)
  records = (zeros_block,) * 4 + ((zeros,) * 11,)
  order = jnp.where(mask, p, -1).astype(jnp.int32)
  state = (a, d_a, zeros if single_root else r, zeros if single_root else d_r, r, d_r,
           jnp.zeros((), dtype), order, records)
  state = lax.fori_loop(0, p, functools.partial(_eliminate_step, single_root=single_root), state)
  log_z, order, records = state[6:]
  cotangent = lax.fori_loop(
      0, p, functools.partial(_sweep_step, order=order, records=records, single_root=single_root),
      (zeros_block,) * 2 + (zeros,) * 4)
  d_weights, dd_weights, d_excess, dd_excess, d_first_order, dd_first_order = cotangent
  d_arc_m_ref[...] = jnp.where(arc_ok, d_a * d_weights + a * dd_weights, 0.0)
  g, dg = (d_first_order, dd_first_order) if single_root else (d_excess, dd_excess)
  d_root_m_ref[...] = jnp.where(mask, d_r * g + r * dg, 0.0)
  # `_linear_trusted`.
  column_sums = jnp.sum(a, axis=0) + r
  has_head = jnp.sum(jnp.where(mask & ~(column_sums > 0), 1, 0)) == 0
  log_p_indep = log_z - jnp.sum(jnp.log(jnp.where(mask & has_head, column_sums, 1.0)))
  trusted_ref[0] = (has_head & (log_p_indep >= floor)).astype(jnp.int32)


def linear_marginals_product(arc_scores, root_scores, mask, d_arc, d_root, single_root, interpret):
  """The linear elimination's marginals differentiated along `(d_arc, d_root)`, by one kernel launch.

  `jax.jvp` of `_elimination._linear_marginals`'s marginals (vmapped) along the direction: the
  Hessian-vector product `H t` of each sentence's log Z (module docstring), exact where trusted.

  Args:
    arc_scores: [B, n, n] float32 / float64 scores (the diagonal and padding are ignored).
    root_scores: [B, n].
    mask: [B, n] bool, real words (a prefix of each row).
    d_arc: [B, n, n] the direction's arc entries (read on allowed arcs of real words only).
    d_root: [B, n] its root entries (read on real words only).
    single_root: root mode.
    interpret: the Pallas interpreter instead of Triton.

  Returns:
    (d arc marginals [B, n, n], d root marginals [B, n], trusted [B] bool (`_linear_trusted`)); 0 on
    padding, the diagonal and forbidden arcs. Not differentiable.
  """
  size, n = root_scores.shape
  p = _kernels.block_length(n)
  inputs = (arc_scores, root_scores, d_arc.astype(arc_scores.dtype), d_root.astype(arc_scores.dtype))
  if p != n:
    inputs = tuple(jnp.pad(x, ((0, 0),) + ((0, p - n),) * (x.ndim - 1)) for x in inputs)
  lengths = jnp.sum(mask, axis=-1).astype(jnp.int32)
  dtype = arc_scores.dtype
  floor = _elimination._linear_floor(dtype, n)  # pylint: disable=protected-access
  scalar = pl.BlockSpec((1,), lambda b: (b,))
  vector = pl.BlockSpec((None, p), lambda b: (b, 0))
  block = pl.BlockSpec((None, p, p), lambda b: (b, 0, 0))
  call = pl.pallas_call(
      functools.partial(_kernel, single_root=single_root, floor=floor), grid=(size,),
      in_specs=[scalar, block, vector, block, vector], out_specs=[block, vector, scalar],
      out_shape=[jax.ShapeDtypeStruct((size, p, p), dtype), jax.ShapeDtypeStruct((size, p), dtype),
                 jax.ShapeDtypeStruct((size,), jnp.int32)],
      interpret=interpret,
      compiler_params=None if interpret else _kernels.compiler_params(p),
      name='matrix_tree_exact_linear_product')
  d_arc_m, d_root_m, trusted = call(lengths, *inputs)
  return d_arc_m[:, :n, :n], d_root_m[:, :n], trusted > 0
