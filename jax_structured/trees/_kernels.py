"""Fused Pallas kernels for the matrix-tree common path: one launch forward, one backward.

Per sentence (one program of the grid per batch element, the whole sentence in one block), the
forward kernel (`_forward_kernel`) forms the column-shifted potentials and the Laplacian of
`_lu_path` (multi-root, or Koo et al.'s single-root root row, with its root-row shift), inverts it
by Gauss-Jordan elimination with partial pivoting in registers / on-chip memory, and writes `log Z`,
the marginals, the error estimate's flag (`_lu_path._needs_exact`: the same criterion, so flagged
sentences still take the exact path) and the inverse (the residual of the backward pass). The
backward kernel (`_backward_kernel`) reads the scores, the inverse and the cotangents of
`(log Z, arc marginals, root marginals)` and writes the cotangent of the scores, i.e.
`g_z * mu + H (G, g)` with the Hessian `H` of `log Z`: the Hessian-vector product the LU path's
custom JVP (`d X = -X dL X`) gives under reverse mode, written out (see `_backward_kernel`).

The kernels work on the transposed Laplacian `L^T`, whose inverse `Y = X^T` (`X = L^-1`) is what the
marginals read (`mu[h, m] = A[h, m] (X[m, m] - X[m, h]) = A[h, m] (Y[m, m] - Y[h, m])`), so no
transposition is needed on the forward path.

Stability. Gauss-Jordan elimination with partial pivoting has a forward error bounded like that of
LU with partial pivoting and solves (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd
ed., sec. 14.4, after Peters & Wilkinson 1975), which is what the error estimate
`eps ||L||_1 ||L^-1||_inf` of `_needs_exact` bounds; its value here is the same number (norms of
`L^T` and `Y`). The multi-root Laplacian is column diagonally dominant (its diagonal is the column's
arc sum plus the root potential), so `L^T` is row diagonally dominant and its elimination has a
growth factor of at most 2 whichever rows partial pivoting picks. The single-root Laplacian is not:
its first row holds the root potentials (Koo et al. 2007, sec. 3.3; Liu & Lapata 2018 eq. 14), and
partial pivoting, with the root row scaled to a largest entry of 1 (`_lu_path._potentials`), keeps
its elimination stable as far as the estimate can tell; the estimate flags what it cannot bound.

Selected by `trees.use_kernels` (see `_statistics`); compiled for the GPU by Pallas's Triton
lowering, run by the Pallas interpreter elsewhere (tests). The sentence length is padded to a power
of two of at least 16 (Triton blocks, and its `dot`, need them); padded words are identity rows and
columns, as in `_lu_path`.
"""
import contextlib
import contextvars
import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

__all__ = ['AUTO_MAX_BLOCK', 'BLOCK_MIN', 'KERNEL_MODES', 'KERNEL_PLATFORMS', 'MAX_BLOCK', 'block_length',
           'compiler_params', 'fused_statistics', 'num_warps', 'selected', 'use_kernels']

# The settings of `use_kernels`.
KERNEL_MODES = ('auto', 'on', 'off')
# The largest block (padded sentence length) any kernel takes: the whole block stays in one program's
# on-chip memory, and a 256 x 256 float32 block asks 256 KiB of shared memory where an H200 program has
# 227 KiB (the kernels failed to compile at 32 x 200 there). Longer sentences take the LU path.
MAX_BLOCK = 128
# Per platform, the largest block at which 'auto' selects the kernels: where the benchmark report
# measured both `kernel marg` and `kernel +grad` faster than `model marg` / `model +grad`
# (docs/benchmarks/gpu_h200_ec2ec20.json: 0.56x / 0.85x at 512 x 32; at 64 x 64 +grad was 1.05x).
AUTO_MAX_BLOCK = {'gpu': 32}
KERNEL_PLATFORMS = frozenset(AUTO_MAX_BLOCK)
_MODE = contextvars.ContextVar('jax_structured_trees_use_kernels', default='auto')


@contextlib.contextmanager
def use_kernels(mode):
  """Whether the matrix-tree functions traced inside the block use the fused kernels (`_kernels`).

  The kernels compute, per sentence and in one GPU launch, what the LU path computes in several (the
  Laplacian, its inverse, log Z, the marginals and the error estimate's flags), and the gradient in one
  more; flagged sentences still take the exact path, as on the LU path (`exact_mode`). Modes:

  * 'auto' (the default): the kernels on the platforms of `KERNEL_PLATFORMS` for sentences padded to
    at most `AUTO_MAX_BLOCK[platform]` words (where the benchmark measured them faster: a GPU, up to
    32 words), the LU path elsewhere.
  * 'on': the kernels on any platform: compiled by Pallas's Triton lowering on a GPU, run by the Pallas
    interpreter elsewhere (slow: for tests).

  In every mode, sentences padded to more than `MAX_BLOCK` words take the LU path (a block must fit in
  one program's on-chip memory).
  * 'off': the LU path.

  With the kernels, `log_partition`, `marginals`, `entropy`, `kl_divergence` and `log_prob` are
  differentiable once in reverse mode (`jax.grad`, `jax.vjp`: what training needs); forward mode
  (`jax.jvp`) and second derivatives raise JAX's custom-VJP error (use 'off' for them). Like
  `exact_mode`, read when a function is traced: enter the block inside the function you jit.

  Args:
    mode: one of KERNEL_MODES.
  """
  if mode not in KERNEL_MODES:
    raise ValueError(f'use_kernels({mode!r}): use one of {KERNEL_MODES}')
  token = _MODE.set(mode)
  try:
    yield
  finally:
    _MODE.reset(token)


def selected(n):
  """None (the LU path), or whether the kernels run interpreted (False: compiled for the GPU), for
  sentences of `n` words (padded), by the setting of `use_kernels`, the default platform and the
  block limits `MAX_BLOCK` / `AUTO_MAX_BLOCK`."""
  mode, platform = _MODE.get(), jax.default_backend()
  block = block_length(n)
  if mode == 'off' or block > MAX_BLOCK:
    return None
  if mode == 'auto' and block > AUTO_MAX_BLOCK.get(platform, 0):
    return None
  return platform != 'gpu'


# The smallest block (sentence length after padding): Triton's dot needs 16.
BLOCK_MIN = 16


def block_length(n):
  """The kernels' padded sentence length for n words: a power of two, at least `BLOCK_MIN`."""
  return max(BLOCK_MIN, 1 << max(0, n - 1).bit_length())


def _pick(matrix, index, axis):
  """Row (`axis=0`) or column (`axis=1`) `index` of a block, by a masked sum (no dynamic indexing)."""
  iota = lax.broadcasted_iota(jnp.int32, matrix.shape, axis)
  return jnp.sum(jnp.where(iota == index, matrix, 0.0), axis=axis)


def _potentials(arc, root, length, single_root):
  """The kernel's copy of `_lu_path._potentials` and `_laplacian` on one [p, p] block.

  Returns:
    (arc potentials A [p, p], root potentials r [p], transposed Laplacian L^T [p, p], column sums of
    |L| [p], log-scale `sum(shift) + root_shift`).
  """
  p = root.shape[-1]
  rows = lax.broadcasted_iota(jnp.int32, (p, p), 0)
  cols = lax.broadcasted_iota(jnp.int32, (p, p), 1)
  words = lax.broadcasted_iota(jnp.int32, (p,), 0)
  mask = words < length
  arc_ok = (rows < length) & (cols < length) & (rows != cols)
  arc = jnp.where(arc_ok, arc, -jnp.inf)
  root = jnp.where(mask, root, -jnp.inf)
  shift = jnp.where(mask, jnp.maximum(jnp.max(arc, axis=0), root), 0.0)
  a = jnp.exp(arc - shift[None, :])
  root = root - shift
  root_shift = jnp.zeros((), root.dtype)
  if single_root:
    root_shift = jnp.max(root)
    root_shift = jnp.where(jnp.abs(root_shift) < jnp.inf, root_shift, 0.0)
  r = jnp.exp(root - root_shift)
  column_sums = jnp.sum(a, axis=0)
  padding = (~mask).astype(a.dtype)
  eye = rows == cols
  if single_root:
    diagonal = jnp.where(words == 0, 0.0, column_sums + padding)
    first_row = r + jnp.where(words == 0, padding, 0.0)  # an empty sentence keeps the identity row
    # L^T[m, i] = L[i, m]; column 0 of L^T is the root row of L (eq. 14).
    lap_t = jnp.where(cols == 0, first_row[:, None],
                      jnp.where(eye, diagonal[:, None], 0.0) - a.T)
    below_first = jnp.maximum(column_sums - _pick(a, 0, 0), 0.0)
    abs_sums = first_row + below_first + diagonal
  else:
    diagonal = column_sums + r + padding
    lap_t = jnp.where(eye, diagonal[:, None], 0.0) - a.T
    abs_sums = 2 * column_sums + r + padding
  return a, r, lap_t, abs_sums, jnp.sum(shift) + root_shift


def _gauss_jordan(matrix):
  """(log|det|, inverse) of a [p, p] block by in-place Gauss-Jordan with partial pivoting.

  Step k picks the row of largest |entry| in column k among rows k.. (the first on ties, as LAPACK),
  swaps it into row k and sweeps column k out of every other row; the inverse of the row-swapped
  matrix is then un-swapped by exchanging columns in reverse order (Numerical Recipes' `gaussj`).
  """
  p = matrix.shape[-1]
  rows = lax.broadcasted_iota(jnp.int32, (p, p), 0)
  cols = lax.broadcasted_iota(jnp.int32, (p, p), 1)
  index = lax.broadcasted_iota(jnp.int32, (p,), 0)

  def step(k, state):
    m, logdet, pivots = state
    column = _pick(m, k, 1)
    candidates = jnp.where(index >= k, jnp.abs(column), -1.0)
    top = jnp.max(candidates)
    # NaN never equals the max: then k itself (the NaN reaches the results and the flag).
    chosen = jnp.min(jnp.where(candidates == top, index, p))
    chosen = jnp.where(chosen < p, chosen, k)
    row_k, row_chosen = _pick(m, k, 0), _pick(m, chosen, 0)
    m = jnp.where(rows == k, row_chosen[None, :], jnp.where(rows == chosen, row_k[None, :], m))
    pivot = jnp.sum(jnp.where(index == k, row_chosen, 0.0))
    scaled = jnp.where(index == k, 1.0, row_chosen) / pivot
    column = jnp.where(index == k, 0.0, _pick(m, k, 1))
    m = jnp.where(rows == k, scaled[None, :],
                  jnp.where(cols == k, -column[:, None] / pivot, m - column[:, None] * scaled[None, :]))
    return m, logdet + jnp.log(jnp.abs(pivot)), jnp.where(index == k, chosen, pivots)

  m, logdet, pivots = lax.fori_loop(0, p, step, (matrix, jnp.zeros((), matrix.dtype), index))

  def unswap(i, m):
    k = p - 1 - i
    chosen = jnp.sum(jnp.where(index == k, pivots, 0))
    col_k, col_chosen = _pick(m, k, 1), _pick(m, chosen, 1)
    return jnp.where(cols == k, col_chosen[:, None], jnp.where(cols == chosen, col_k[:, None], m))

  return logdet, lax.fori_loop(0, p, unswap, m)


def _marginal_terms(y, single_root):
  """The factors of the marginals from `Y = L^-T`: `mu = A * arc_factor`, `mu_root = r * root_factor`."""
  p = y.shape[-1]
  rows = lax.broadcasted_iota(jnp.int32, (p, p), 0)
  cols = lax.broadcasted_iota(jnp.int32, (p, p), 1)
  diag = jnp.sum(jnp.where(rows == cols, y, 0.0), axis=0)  # Y[m, m] = X[m, m]
  if single_root:
    arc_factor = jnp.where(cols != 0, diag[None, :], 0.0) - jnp.where(rows != 0, y, 0.0)
    return arc_factor, _pick(y, 0, 0)  # X[m, 0] = Y[0, m]
  return diag[None, :] - y, diag


def _forward_kernel(length_ref, arc_ref, root_ref, log_z_ref, arc_m_ref, root_m_ref, flag_ref, y_ref, *,
                    single_root, tolerance):
  """One sentence: potentials, Laplacian, Gauss-Jordan inverse, log Z, marginals, flag, inverse."""
  length = length_ref[0]
  a, r, lap_t, abs_sums, log_scale = _potentials(arc_ref[...], root_ref[...], length, single_root)
  logdet, y = _gauss_jordan(lap_t)
  # `_needs_exact`: eps ||L||_1 ||L^-1||_inf; the row sums of |X| are the column sums of |Y|.
  eps = jnp.finfo(y.dtype).eps
  inverse_sums = jnp.sum(jnp.abs(y), axis=0)
  estimate = eps * jnp.max(abs_sums) * jnp.max(inverse_sums)
  finite = jnp.abs(jnp.sum(abs_sums) + jnp.sum(inverse_sums)) < jnp.inf
  flagged = ~(finite & (estimate < tolerance))
  arc_factor, root_factor = _marginal_terms(y, single_root)
  arc_m, root_m = a * arc_factor, r * root_factor
  nan = jnp.full((), jnp.nan, y.dtype)
  log_z_ref[0] = jnp.where(flagged, nan, logdet + log_scale)
  flag_ref[0] = flagged.astype(jnp.int32)
  arc_m_ref[...] = jnp.where(flagged, nan, arc_m)
  root_m_ref[...] = jnp.where(flagged, nan, root_m)
  y_ref[...] = jnp.where(flagged, 0.0, y)


def _backward_kernel(length_ref, flag_ref, g_z_ref, arc_ref, root_ref, y_ref, g_arc_ref, g_root_ref,
                     d_arc_ref, d_root_ref, *, single_root):
  """One sentence: the cotangent of the scores from those of `(log Z, mu, mu_root)` and `Y = L^-T`.

  With `K = G * A` (the arc cotangent times the potentials) and the marginal factors of
  `_marginal_terms`, reverse mode through `mu = A * arc_factor(Y)`, `mu_root = r * root_factor(Y)`
  gives `A_bar = G * arc_factor`, `r_bar = g * root_factor` and `Y_bar` (the diagonal collects the
  column sums of `K`, the rest is `-K`; single root: rows and columns 0 as in the marginals, and row 0
  gains `g * r`). `Y = L^-T` and `log Z = log|det L| + const` give `L_bar = g_z Y - Y Y_bar^T Y`
  (`d Y = -Y dL^T Y`), which enters `A_bar` and `r_bar` through the Laplacian's entries exactly as `Y`
  enters the marginals (`_marginal_terms` of `L_bar`); the scores' cotangents are `A * A_bar` and
  `r * r_bar` (the shifts carry no gradient). Zero for flagged sentences.
  """
  length = length_ref[0]
  a, r, _, _, _ = _potentials(arc_ref[...], root_ref[...], length, single_root)
  y = y_ref[...]
  g_arc, g_root = g_arc_ref[...], g_root_ref[...]
  p = y.shape[-1]
  rows = lax.broadcasted_iota(jnp.int32, (p, p), 0)
  cols = lax.broadcasted_iota(jnp.int32, (p, p), 1)
  k = jnp.where(a > 0, g_arc * a, 0.0)  # zero potentials (padding, -inf scores) take no cotangent
  arc_factor, root_factor = _marginal_terms(y, single_root)
  a_bar = jnp.where(a > 0, g_arc * arc_factor, 0.0)
  r_bar = jnp.where(r > 0, g_root * root_factor, 0.0)
  gr = jnp.where(r > 0, g_root * r, 0.0)
  if single_root:
    diag_bar = jnp.where(lax.broadcasted_iota(jnp.int32, (p,), 0) != 0, jnp.sum(k, axis=0), 0.0)
    y_bar = (jnp.where(rows == cols, diag_bar[None, :], 0.0) - jnp.where(rows != 0, k, 0.0)
             + jnp.where(rows == 0, gr[None, :], 0.0))
  else:
    diag_bar = jnp.sum(k, axis=0) + gr
    y_bar = jnp.where(rows == cols, diag_bar[None, :], 0.0) - k
  precision = lax.Precision.HIGHEST
  y_times_bar_t = lax.dot_general(y, y_bar, (((1,), (1,)), ((), ())), precision=precision)  # Y Y_bar^T
  product = jnp.dot(y_times_bar_t, y, precision=precision)
  lap_bar = g_z_ref[0] * y - product
  lap_arc_factor, lap_root_factor = _marginal_terms(lap_bar, single_root)
  a_bar = a_bar + jnp.where(a > 0, lap_arc_factor, 0.0)
  r_bar = r_bar + jnp.where(r > 0, lap_root_factor, 0.0)
  keep = flag_ref[0] == 0
  d_arc_ref[...] = jnp.where(keep & (a > 0), a * a_bar, 0.0)
  d_root_ref[...] = jnp.where(keep & (r > 0), r * r_bar, 0.0)


def _specs(p):
  """BlockSpecs of per-sentence scalars [B], vectors [B, p] and blocks [B, p, p]."""
  scalar = pl.BlockSpec((1,), lambda b: (b,))
  vector = pl.BlockSpec((None, p), lambda b: (b, 0))
  block = pl.BlockSpec((None, p, p), lambda b: (b, 0, 0))
  return scalar, vector, block


def num_warps(p):
  """Warps per program for a block of p x p.

  Every elimination step reduces rows and columns of the block; in one warp those reductions are warp
  shuffles, across warps they go through shared memory with barriers. Measured on an H200 (value +
  gradient, 1 to 16 warps; docs/benchmarks/gpu_h200_abde495_kernels.txt): 2 warps at 32 x 32 (0.20 ms
  for 512 sentences; 1 warp 0.26 ms), 8 at 64 x 64 (0.41 ms for 64; 4 warps 0.59 ms). Other blocks: about
  32 entries per thread, 1 to 16 warps (unmeasured).
  """
  return _MEASURED_WARPS.get(p, max(1, min(16, p * p // 1024)))


_MEASURED_WARPS = {32: 2, 64: 8}


def compiler_params(p):
  """Triton's launch parameters for a block of p x p (ignored by the interpreter)."""
  from jax.experimental.pallas import triton as pallas_triton  # pylint: disable=g-import-not-at-top
  return pallas_triton.CompilerParams(num_warps=num_warps(p), num_stages=1)


def _forward_call(lengths, arc, root, single_root, interpret):
  """The forward kernel over a flat padded batch: (log Z [B], mu [B, p, p], mu_root [B, p], flag [B] int32,
  Y [B, p, p])."""
  size, p = root.shape
  dtype = arc.dtype
  scalar, vector, block = _specs(p)
  tolerance = 6 * math.sqrt(float(jnp.finfo(dtype).eps))  # `_lu_path._lu_tolerance`
  kernel = functools.partial(_forward_kernel, single_root=single_root, tolerance=tolerance)
  return pl.pallas_call(
      kernel, grid=(size,), in_specs=[scalar, block, vector],
      out_specs=[scalar, block, vector, scalar, block],
      out_shape=[jax.ShapeDtypeStruct((size,), dtype), jax.ShapeDtypeStruct((size, p, p), dtype),
                 jax.ShapeDtypeStruct((size, p), dtype), jax.ShapeDtypeStruct((size,), jnp.int32),
                 jax.ShapeDtypeStruct((size, p, p), dtype)],
      interpret=interpret, compiler_params=None if interpret else compiler_params(p),
      name='matrix_tree_forward')(lengths, arc, root)


def _backward_call(lengths, flags, g_z, arc, root, y, g_arc, g_root, single_root, interpret):
  """The backward kernel over a flat padded batch: (d arc [B, p, p], d root [B, p])."""
  size, p = root.shape
  scalar, vector, block = _specs(p)
  kernel = functools.partial(_backward_kernel, single_root=single_root)
  return pl.pallas_call(
      kernel, grid=(size,), in_specs=[scalar, scalar, scalar, block, vector, block, block, vector],
      out_specs=[block, vector],
      out_shape=[jax.ShapeDtypeStruct((size, p, p), arc.dtype), jax.ShapeDtypeStruct((size, p), arc.dtype)],
      interpret=interpret, compiler_params=None if interpret else compiler_params(p),
      name='matrix_tree_backward')(lengths, flags, g_z, arc, root, y, g_arc, g_root)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _fused(lengths, arc, root, single_root, interpret):
  """(log Z, mu, mu_root, flag) of a flat padded batch; first-order reverse mode by `_backward_kernel`."""
  log_z, arc_m, root_m, flags, _ = _forward_call(lengths, arc, root, single_root, interpret)
  return log_z, arc_m, root_m, flags


def _fused_forward(lengths, arc, root, single_root, interpret):
  log_z, arc_m, root_m, flags, y = _forward_call(lengths, arc, root, single_root, interpret)
  return (log_z, arc_m, root_m, flags), (lengths, flags, arc, root, y)


def _fused_backward(single_root, interpret, residuals, cotangents):
  lengths, flags, arc, root, y = residuals
  g_z, g_arc, g_root, _ = cotangents
  d_arc, d_root = _backward_call(lengths, flags, g_z, arc, root, y, g_arc, g_root, single_root, interpret)
  return None, d_arc, d_root


_fused.defvjp(_fused_forward, _fused_backward)


def fused_statistics(arc_scores, root_scores, lengths, single_root, interpret):
  """log Z, marginals and the error estimate's flags of a batch by the fused kernels.

  Args:
    arc_scores: [..., n, n] float32 / float64 (checked by `_inputs.check_scores`).
    root_scores: [..., n].
    lengths: int32 [...], in 0..n.
    single_root: root mode.
    interpret: run the Pallas interpreter (any platform) instead of the Triton GPU kernels.

  Returns:
    (log_z [...], arc_marginals [..., n, n], root_marginals [..., n], flagged [...] bool): NaN results
    where flagged (`_lu_path._needs_exact`'s criterion), exactly 0 on padding and forbidden arcs.
    Differentiable once in reverse mode (`jax.grad`, `jax.vjp`); the derivatives of flagged elements
    are zero. Forward mode and higher orders are not supported (use the default path).
  """
  batch_shape = root_scores.shape[:-1]
  n = root_scores.shape[-1]
  p = block_length(n)
  arc = arc_scores.reshape((-1, n, n))
  root = root_scores.reshape((-1, n))
  if p != n:
    arc = jnp.pad(arc, ((0, 0), (0, p - n), (0, p - n)))
    root = jnp.pad(root, ((0, 0), (0, p - n)))
  lengths = jnp.broadcast_to(lengths, batch_shape).reshape(-1).astype(jnp.int32)
  log_z, arc_m, root_m, flags = _fused(lengths, arc, root, single_root, interpret)
  arc_m, root_m = arc_m[:, :n, :n], root_m[:, :n]
  return (log_z.reshape(batch_shape), arc_m.reshape(batch_shape + (n, n)),
          root_m.reshape(batch_shape + (n,)), flags.reshape(batch_shape) > 0)
