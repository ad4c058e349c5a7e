"""The LU path of the matrix-tree theorem: potentials, Laplacian, one LU with closed-form derivatives.

The common path of every matrix-tree function (`_matrix_tree`): column- and root-row-shifted potentials,
the (root-reduced) Laplacian, `log|det|` and the inverse from one LU factorisation, the marginals from the
inverse, and the error estimate that sends a batch element to the exact path (`_needs_exact`).

One LU factorisation (`jax.lax.linalg.lu`, partial pivoting) gives both `log|det|` and the inverse.
`_logdet_and_inverse` carries a `jax.custom_jvp` with the closed forms
`d log det L = tr(L^-1 dL)` and `d L^-1 = -L^-1 dL L^-1`, so gradients of `log_partition` reuse the
forward factorisation (instead of `slogdet`'s JVP, which factorises again) and the marginals are
differentiable to any order (structured attention backpropagates through them) without
differentiating the LU decomposition itself: on par with `slogdet` + autodiff and the inverse + plain
autodiff for the forward marginals, faster for marginals + gradient (the backward pass is two matmuls;
docs/decisions/2026-12-04-matrix-tree-and-mst-measurements.md).
"""
import jax
import jax.numpy as jnp
from jax import lax

from jax_structured.trees import _inputs


def _prepare(arc_scores, root_scores, lengths):
  """Checks shapes and dtypes; returns float arrays, int32 lengths and the word mask.

  Args:
    arc_scores: [..., n, n] log-potentials of head -> modifier.
    root_scores: [..., n] log-potentials of ROOT -> modifier.
    lengths: None or integer array broadcastable to the batch shape `[...]`.

  Returns:
    (arc_scores, root_scores, lengths [...] int32, mask [..., n] bool), scores in one float dtype.
  """
  arc_scores, root_scores, lengths = _inputs.check_scores(arc_scores, root_scores, lengths)
  n = arc_scores.shape[-1]
  mask = jnp.arange(n, dtype=jnp.int32) < lengths[..., None]
  return arc_scores, root_scores, lengths, mask


def _arc_mask(mask):
  """[..., n, n] bool: both ends real and h != m."""
  n = mask.shape[-1]
  return mask[..., :, None] & mask[..., None, :] & ~jnp.eye(n, dtype=bool)


def _potentials(arc_scores, root_scores, mask, single_root):
  """Column-shifted potentials, and in the single-root case a shifted root row (module docstring).

  Args:
    arc_scores: [..., n, n] float.
    root_scores: [..., n] float.
    mask: [..., n] bool, real words.
    single_root: root mode; only then is the root row shifted.

  Returns:
    (arc_potentials [..., n, n], root_potentials [..., n], shift [..., n], root_shift [...]) with
    `arc_potentials[h, m] = exp(arc_scores[h, m] - shift[m])` on real arcs (0 elsewhere and on the
    diagonal) and `root_potentials[m] = exp(root_scores[m] - shift[m] - root_shift)` (0 on padding);
    `shift[m]` is the column max (0 on padding), `root_shift` the largest `root_scores[m] - shift[m]`
    (single root; 0 otherwise and for empty sentences), both without gradient. `log Z` is the log
    determinant of their Laplacian plus `sum(shift) + root_shift`.
  """
  arc_ok = _arc_mask(mask)
  arc = jnp.where(arc_ok, arc_scores, -jnp.inf)
  root = jnp.where(mask, root_scores, -jnp.inf)
  shift = jnp.maximum(jnp.max(arc, axis=-2), root)
  shift = lax.stop_gradient(jnp.where(mask, shift, 0.0))
  arc_potentials = jnp.exp(arc - shift[..., None, :])
  root = root - shift
  root_shift = jnp.zeros(root.shape[:-1], root.dtype)
  if single_root:
    root_shift = jnp.max(root, axis=-1)
    root_shift = lax.stop_gradient(jnp.where(jnp.isfinite(root_shift), root_shift, 0.0))
  root_potentials = jnp.exp(root - root_shift[..., None])
  return arc_potentials, root_potentials, shift, root_shift


def _laplacian(arc_potentials, root_potentials, mask, single_root):
  """The (root-reduced) Laplacian whose determinant is Z, with identity rows/columns on padding.

  Args:
    arc_potentials: [..., n, n] non-negative, zero diagonal and zero on padding.
    root_potentials: [..., n] non-negative, zero on padding.
    mask: [..., n] bool.
    single_root: Koo et al.'s first-row replacement (Liu & Lapata eq. 14) if True.

  Returns:
    [..., n, n] matrix.
  """
  n = mask.shape[-1]
  eye = jnp.eye(n, dtype=arc_potentials.dtype)
  diagonal = jnp.sum(arc_potentials, axis=-2) + jnp.where(mask, 0.0, 1.0).astype(arc_potentials.dtype)
  if not single_root:
    diagonal = diagonal + root_potentials
  lap = diagonal[..., None, :] * eye - arc_potentials
  if single_root:
    # Row 0 holds the root potentials (eq. 14); for an empty sentence it stays the identity row.
    first_row = root_potentials + jnp.where(mask[..., :1], 0.0, 1.0).astype(lap.dtype) * eye[0]
    lap = lap.at[..., 0, :].set(first_row)
  return lap


def _laplacian_column_abs_sums(arc_potentials, root_potentials, mask, single_root):
  """`sum_i |L[i, m]|` of `_laplacian`'s matrix, from [..., n] vectors, without a pass over |L|.

  Every potential is non-negative, so with `colsum[m] = sum_h A[h, m]` and the diagonal `d`:
  multi-root, column m holds `d[m]` and the off-diagonal `-A[h, m]`: `d[m] + colsum[m]`;
  single root, row 0 is replaced by `first_row` (eq. 14): `first_row[m] + colsum[m] - A[0, m]`, plus
  `d[m]` for m >= 1 (a pass over |L| would materialise [B, n, n]). Equal to
  `jnp.sum(jnp.abs(lap), axis=-2)` up to rounding (the error estimate's
  `||L||_1` reads it).
  """
  column_sums = jnp.sum(arc_potentials, axis=-2)
  padding = jnp.where(mask, 0.0, 1.0).astype(arc_potentials.dtype)
  if not single_root:
    return 2 * column_sums + root_potentials + padding
  first_row = root_potentials + padding[..., :1] * (jnp.arange(mask.shape[-1]) == 0)
  below_first = jnp.maximum(column_sums - arc_potentials[..., 0, :], 0.0)
  diagonal = jnp.where(jnp.arange(mask.shape[-1]) == 0, 0.0, column_sums + padding)
  return first_row + below_first + diagonal


def _lu_logdet_and_inverse(lap):
  lu, _, permutation = lax.linalg.lu(lap)
  logdet = jnp.sum(jnp.log(jnp.abs(jnp.diagonal(lu, axis1=-2, axis2=-1))), axis=-1)
  n = lap.shape[-1]
  # P A = L U with P the row permutation, so A^-1 = U^-1 L^-1 P.
  p = jnp.broadcast_to(jnp.eye(n, dtype=lap.dtype), lap.shape)
  p = jnp.take_along_axis(p, permutation[..., :, None], axis=-2)
  y = lax.linalg.triangular_solve(lu, p, left_side=True, lower=True, unit_diagonal=True)
  inverse = lax.linalg.triangular_solve(lu, y, left_side=True, lower=False)
  return logdet, inverse


@jax.custom_jvp
def _logdet_and_inverse(lap, lap_column_sums):
  """(log|det lap| [...], lap^-1 [..., n, n], spoiled [...] 0./1.) from one LU and one solve.

  Differentiable to any order (in `lap`; `lap_column_sums`, `_laplacian_column_abs_sums`, only feeds
  the error estimate and carries no derivative). `spoiled` is `_needs_exact` (the error estimate is
  too large, or something is not finite); there both results are returned as zeros, so that the
  derivatives of those batch elements are zero rather than NaN (`_statistics` recomputes them
  exactly).
  """
  logdet, inverse = _lu_logdet_and_inverse(lap)
  spoiled = _needs_exact(inverse, lap_column_sums)
  # `spoiled` is returned as a float (tangent zero), not a bool (tangent float0), so that the rule also
  # types inside shard_map with varying-axis checks.
  return (jnp.where(spoiled, 0.0, logdet), jnp.where(spoiled[..., None, None], 0.0, inverse),
          spoiled.astype(logdet.dtype))


@_logdet_and_inverse.defjvp
def _logdet_and_inverse_jvp(primals, tangents):
  (lap, lap_column_sums), (d_lap, _) = primals, tangents
  # Calling itself: higher orders use this rule too.
  logdet, inverse, spoiled = _logdet_and_inverse(lap, lap_column_sums)
  d_logdet = jnp.sum(jnp.swapaxes(inverse, -1, -2) * d_lap, axis=(-2, -1))
  d_inverse = -inverse @ d_lap @ inverse
  d_spoiled = jnp.zeros_like(d_logdet)
  return (logdet, inverse, spoiled), (d_logdet, d_inverse, d_spoiled)


def _marginals_from_inverse(arc_potentials, root_potentials, inverse, single_root):
  """Koo et al. (2007) / Liu & Lapata eq. 15 marginals from X = L^-1 ([..., n, n])."""
  n = inverse.shape[-1]
  diag = jnp.diagonal(inverse, axis1=-2, axis2=-1)  # X[m, m], indexed by m.
  transposed = jnp.swapaxes(inverse, -1, -2)  # transposed[h, m] = X[m, h].
  if single_root:
    not_first = jnp.arange(n) != 0
    diag = jnp.where(not_first, diag, 0.0)
    transposed = jnp.where(not_first[:, None], transposed, 0.0)
    root_marginals = root_potentials * inverse[..., :, 0]
  else:
    root_marginals = root_potentials * diag
  arc_marginals = arc_potentials * (diag[..., None, :] - transposed)
  return arc_marginals, root_marginals


def _needs_exact(inverse, lap_column_sums):
  """[...] bool: the LU marginals may be off by more than about 1e-3 (float32), or are not finite.

  `inverse`: L^-1 [..., n, n]; `lap_column_sums`: `sum_i |L[i, m]|` [..., n]
  (`_laplacian_column_abs_sums`, without a pass over |L|).

  Rounding moves the marginals by at most about `eps ||L||_1 ||L^-1||_inf` (a condition number
  times eps). Measured against the exact elimination in float64, the float32 LU error never
  exceeded 0.45 of this estimate (single and multi root; n = 9 with N(0, s^2) scores, s = 10, 30;
  n = 32, 40, 200, 500 with N(0, 1), N(0, 10^2), N(0, 3^2), U(-60, 60)), while the estimate stays
  below 1e-2 for the well-conditioned problems of those sizes. So the threshold `6 sqrt(eps)`
  (2e-3 in float32, 9e-8 in float64) keeps the LU path for ordinary scores and bounds its error by
  about 1e-3 (float32) / 4e-8 (float64).

  Finiteness is decided by SUMS, not by the norms' maxima: XLA's vectorised max reduction on the CPU
  can drop NaN, while a sum of absolute values is finite exactly when every term is (or overflows,
  which flags it too).

  The row sums of |L^-1| are a product with a vector of ones (HIGHEST precision, so no TF32 / bf16
  rounding on accelerators): the solve returns L^-1 column-major, and a row reduction makes XLA's
  CPU transpose it into a [..., n, n] copy first.
  """
  eps = jnp.finfo(inverse.dtype).eps
  row_sums = jnp.matmul(jnp.abs(inverse), jnp.ones(inverse.shape[-1], inverse.dtype),
                        precision=lax.Precision.HIGHEST)  # [..., n]
  estimate = eps * jnp.max(lap_column_sums, axis=-1) * jnp.max(row_sums, axis=-1)
  finite = jnp.isfinite(jnp.sum(lap_column_sums, axis=-1) + jnp.sum(row_sums, axis=-1))
  return ~(finite & (estimate < _lu_tolerance(inverse.dtype)))


def _lu_tolerance(dtype):
  """6 sqrt(eps): the largest rounding error the LU paths may carry (`_needs_exact`, `sample`)."""
  return 6 * jnp.sqrt(jnp.finfo(dtype).eps)
