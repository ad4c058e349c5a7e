"""A fused Pallas kernel for the exact path's linear elimination (values only).

One program per flagged sentence runs `_elimination._linear_marginals` in one launch: the column- and
root-row-shifted potentials (`_linear_potentials`), the subtraction-free (GTH-style) elimination of
`_linear_elimination_start` (largest pivot first, every pivot a sum), keeping each step's record (the
eliminated column and scaled row as rows of two [p, p] blocks, six scalars per step), then the
hand-written reverse sweep of `_linear_step_back` over those records for the marginals, and the test
`_linear_trusted`. On a GPU the XLA version is a `lax.scan` of n small steps each way (~10 launches
per step); here it is one launch per chunk of flagged sentences.

No derivatives: the first derivative (forward mode through both sweeps, the Hessian-vector product of
log Z) is its own kernel, `_exact_kernel_grad`; higher ones (`_exact_path._exact_chunk_product`) and
the log-space elimination of untrusted sentences stay on XLA. Used for the exact values of `marginals`
/ `log_partition` under `trees.use_kernels`, on concrete arrays ('auto') and inside a program
('in_program', `_exact_path._exact_where_flagged`); see
docs/decisions/2026-12-04-fused-matrix-tree-kernels.md.
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from jax_structured.trees import _elimination
from jax_structured.trees import _kernels

__all__ = ['linear_marginals']


def _put(block, index, vector):
  """`block` with row `index` replaced by `vector` (masked select, no dynamic indexing)."""
  return jnp.where(lax.broadcasted_iota(jnp.int32, block.shape, 0) == index, vector[None, :], block)


def _at(vector, index):
  """`vector[index]` by a masked sum."""
  return jnp.sum(jnp.where(lax.broadcasted_iota(jnp.int32, vector.shape, 0) == index, vector, 0))


def _linear_potentials(arc, root, length, single_root):
  """`_elimination._linear_potentials` of one block: (A, r, log_scale, mask)."""
  p = root.shape[-1]
  rows = lax.broadcasted_iota(jnp.int32, (p, p), 0)
  cols = lax.broadcasted_iota(jnp.int32, (p, p), 1)
  mask = lax.broadcasted_iota(jnp.int32, (p,), 0) < length
  arc = jnp.where((rows < length) & (cols < length) & (rows != cols), arc, -jnp.inf)
  root = jnp.where(mask, root, -jnp.inf)
  shift = jnp.where(mask, jnp.maximum(jnp.max(arc, axis=0), root), 0.0)
  no_head = shift == -jnp.inf
  safe_shift = jnp.where(no_head, 0.0, shift)
  a = jnp.where(no_head[None, :], 0.0, jnp.exp(arc - safe_shift[None, :]))
  root = root - safe_shift
  root_shift = jnp.zeros((), root.dtype)
  if single_root:
    root_shift = jnp.max(jnp.where(no_head, -jnp.inf, root))
    root_shift = jnp.where(jnp.abs(root_shift) < jnp.inf, root_shift, 0.0)
  r = jnp.where(no_head, 0.0, jnp.exp(root - root_shift))
  return a, r, jnp.sum(shift) + root_shift, mask


def _eliminate_step(t, state, single_root):
  """Step t of `_linear_elimination_start` on a block, with its record stored at row / entry t."""
  p = state[1].shape[-1]
  index = lax.broadcasted_iota(jnp.int32, (p,), 0)
  off_diagonal = lax.broadcasted_iota(jnp.int32, (p, p), 0) != lax.broadcasted_iota(jnp.int32, (p, p), 1)
  dtype = state[1].dtype
  weights, excess, first_order, log_z, remaining, records = state
  rem_rec, col_rec, row_rec, scalars = records
  live = remaining > 0
  pivots = excess + jnp.sum(jnp.where(live[:, None], weights, 0.0), axis=0)
  candidates = jnp.where(live, pivots, -1.0)
  k = jnp.min(jnp.where(candidates == jnp.max(candidates), index, p))
  k = jnp.where(k < p, k, 0)
  count = jnp.sum(remaining)
  pivot = _at(pivots, k)
  last = (count == 1) if single_root else False
  first_order_k = _at(first_order, k)
  value = jnp.where(last, first_order_k, pivot)
  safe_pivot = jnp.where(pivot > 0, pivot, 1.0)
  usable = (count > 0) & (value > 0)
  safe_value = jnp.where(usable, value, 1.0)
  row_k = jnp.sum(jnp.where(lax.broadcasted_iota(jnp.int32, (p, p), 0) == k, weights, 0.0), axis=0)
  col_k = jnp.sum(jnp.where(lax.broadcasted_iota(jnp.int32, (p, p), 1) == k, weights, 0.0), axis=1)
  scaled_row = jnp.where(live, row_k, 0.0) / safe_pivot
  column = jnp.where(live, col_k, 0.0)
  weights = jnp.where(off_diagonal, weights + column[:, None] * scaled_row[None, :], 0.0)
  excess_k = _at(excess, k)
  excess = excess + scaled_row * excess_k
  if single_root:
    first_order = first_order + scaled_row * first_order_k
  log_z = log_z + jnp.where((count > 0) & ~usable, -jnp.inf, jnp.log(safe_value))
  d_value = jnp.where(usable, 1.0 / safe_value, 0.0)
  # The step's scalars (`_linear_elimination_start`'s record): k, the pivot (0 unless positive), excess[k],
  # first_order[k], d log Z / d pivot, d log Z / d first_order[k]; entry t of six [p] vectors.
  scalars = tuple(jnp.where(index == t, v, s) for v, s in zip(
      (k.astype(dtype), jnp.where(pivot > 0, pivot, 0.0), excess_k, first_order_k,
       jnp.where(last, 0.0, d_value), jnp.where(last, d_value, 0.0)), scalars))
  records = (_put(rem_rec, t, remaining), _put(col_rec, t, column), _put(row_rec, t, scaled_row), scalars)
  remaining = jnp.where(index == k, 0.0, remaining)
  return weights, excess, first_order, log_z, remaining, records


def _sweep_step(i, cotangent, records, single_root):
  """`_linear_step_back` of step p - 1 - i, from the records of `_eliminate_step`."""
  rem_rec, col_rec, row_rec, scalars = records
  p = rem_rec.shape[-1]
  index = lax.broadcasted_iota(jnp.int32, (p,), 0)
  off_diagonal = lax.broadcasted_iota(jnp.int32, (p, p), 0) != lax.broadcasted_iota(jnp.int32, (p, p), 1)
  d_weights, d_excess, d_first_order = cotangent
  t = p - 1 - i
  remaining = _row(rem_rec, t) > 0
  column, scaled_row = _row(col_rec, t), _row(row_rec, t)
  k_f, pivot, excess_k, first_order_k, d_pivot, d_first_order_k = (_at(s, t) for s in scalars)
  k = k_f.astype(jnp.int32)
  at_k = index == k
  d_weights = jnp.where(off_diagonal, d_weights, 0.0)
  d_column = jnp.sum(d_weights * scaled_row[None, :], axis=1)
  d_scaled_row = jnp.sum(column[:, None] * d_weights, axis=0) + d_excess * excess_k
  d_excess = d_excess + jnp.where(at_k, jnp.sum(d_excess * scaled_row), 0.0)
  if single_root:
    d_scaled_row = d_scaled_row + d_first_order * first_order_k
    d_first_order = d_first_order + jnp.where(
        at_k, jnp.sum(d_first_order * scaled_row) + d_first_order_k, 0.0)
  safe_pivot = jnp.where(pivot > 0, pivot, 1.0)
  d_pivot = d_pivot - jnp.where(pivot > 0, jnp.sum(d_scaled_row * scaled_row) / safe_pivot, 0.0)
  d_row = jnp.where(remaining, d_scaled_row / safe_pivot, 0.0)
  d_col = jnp.where(remaining, d_column + d_pivot, 0.0)
  rows = lax.broadcasted_iota(jnp.int32, (p, p), 0) == k
  cols = lax.broadcasted_iota(jnp.int32, (p, p), 1) == k
  d_weights = d_weights + jnp.where(rows, d_row[None, :], 0.0) + jnp.where(cols, d_col[:, None], 0.0)
  d_excess = d_excess + jnp.where(at_k, d_pivot, 0.0)
  return d_weights, d_excess, d_first_order


def _kernel(length_ref, arc_ref, root_ref, log_z_ref, arc_m_ref, root_m_ref, trusted_ref, *, single_root,
            floor):
  """One sentence: the linear elimination, its reverse sweep, and whether to trust them."""
  length = length_ref[0]
  a, r, log_scale, mask = _linear_potentials(arc_ref[...], root_ref[...], length, single_root)
  p = r.shape[-1]
  off_diagonal = lax.broadcasted_iota(jnp.int32, (p, p), 0) != lax.broadcasted_iota(jnp.int32, (p, p), 1)
  dtype = a.dtype
  zeros_block, zeros = jnp.zeros((p, p), dtype), jnp.zeros((p,), dtype)
  records = (zeros_block, zeros_block, zeros_block, (zeros,) * 6)
  state = (a, zeros if single_root else r, r, jnp.zeros((), dtype), mask.astype(dtype), records)
  _, _, _, log_z, _, records = lax.fori_loop(
      0, p, functools.partial(_eliminate_step, single_root=single_root), state)
  d_weights, d_excess, d_first_order = lax.fori_loop(
      0, p, functools.partial(_sweep_step, records=records, single_root=single_root),
      (zeros_block, zeros, zeros))
  arc_ok = mask[:, None] & mask[None, :] & off_diagonal
  arc_m = jnp.where(arc_ok, a * d_weights, 0.0)
  root_m = jnp.where(mask, r * (d_first_order if single_root else d_excess), 0.0)
  # `_linear_trusted`.
  column_sums = jnp.sum(a, axis=0) + r
  has_head = jnp.sum(jnp.where(mask & ~(column_sums > 0), 1, 0)) == 0
  log_p_indep = log_z - jnp.sum(jnp.log(jnp.where(mask & has_head, column_sums, 1.0)))
  trusted_ref[0] = (has_head & (log_p_indep >= floor)).astype(jnp.int32)
  log_z_ref[0] = log_z + log_scale
  arc_m_ref[...] = arc_m
  root_m_ref[...] = root_m


def _row(block, t):
  """Row t of a block, by a masked sum."""
  return jnp.sum(jnp.where(lax.broadcasted_iota(jnp.int32, block.shape, 0) == t, block, 0.0), axis=0)


def linear_marginals(arc_scores, root_scores, mask, single_root, interpret):
  """`_elimination._linear_marginals` of a flat batch by one kernel launch.

  Args:
    arc_scores: [B, n, n] float32 / float64 scores (the diagonal and padding are ignored).
    root_scores: [B, n].
    mask: [B, n] bool, real words (a prefix of each row).
    single_root: root mode.
    interpret: the Pallas interpreter instead of Triton.

  Returns:
    (log Z [B], arc marginals [B, n, n], root marginals [B, n], trusted [B] bool), as
    `_linear_marginals` vmapped; not differentiable.
  """
  size, n = root_scores.shape
  p = _kernels.block_length(n)
  arc, root = arc_scores, root_scores
  if p != n:
    arc = jnp.pad(arc, ((0, 0), (0, p - n), (0, p - n)))
    root = jnp.pad(root, ((0, 0), (0, p - n)))
  lengths = jnp.sum(mask, axis=-1).astype(jnp.int32)
  dtype = arc.dtype
  floor = _elimination._linear_floor(dtype, n)  # pylint: disable=protected-access
  scalar = pl.BlockSpec((1,), lambda b: (b,))
  vector = pl.BlockSpec((None, p), lambda b: (b, 0))
  block = pl.BlockSpec((None, p, p), lambda b: (b, 0, 0))
  call = pl.pallas_call(
      functools.partial(_kernel, single_root=single_root, floor=floor), grid=(size,),
      in_specs=[scalar, block, vector], out_specs=[scalar, block, vector, scalar],
      out_shape=[jax.ShapeDtypeStruct((size,), dtype), jax.ShapeDtypeStruct((size, p, p), dtype),
                 jax.ShapeDtypeStruct((size, p), dtype), jax.ShapeDtypeStruct((size,), jnp.int32)],
      interpret=interpret,
      compiler_params=None if interpret else _kernels.compiler_params(p),
      name='matrix_tree_exact_linear')
  log_z, arc_m, root_m, trusted = call(lengths, arc, root)
  return log_z, arc_m[:, :n, :n], root_m[:, :n], trusted > 0
