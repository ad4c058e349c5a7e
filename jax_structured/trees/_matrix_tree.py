"""The matrix-tree theorem for non-projective dependency trees (Koo et al., 2007; Liu & Lapata, 2018).

A dependency tree over words `0..n-1` gives every word exactly one head (another word or ROOT) and
has no cycles. Its potential is the product of `exp(arc_scores[h, m])` over its arcs `h -> m` and
`exp(root_scores[m])` over its root children `m`. The partition function `Z = sum_T prod potentials`
is a determinant (Tutte's directed matrix-tree theorem):

* multi-root (`single_root=False`): with `A[h, m] = exp(arc_scores[h, m])` (zero diagonal) and
  `r[m] = exp(root_scores[m])`, the Laplacian `L[i, j] = -A[i, j] + [i == j] (sum_h A[h, j] + r[j])`
  is the graph Laplacian of words + ROOT with ROOT's row and column removed, and `Z = det L`.
* single-root (`single_root=True`, Koo et al. 2007, sec. 3.3; Liu & Lapata 2018, eqs. 12-15): the
  root-free Laplacian (eq. 13) with its first row replaced by `r` (eq. 14), `Z = det L_bar`.

Marginals are the derivatives of `log Z` (eq. 15 in the single-root case); with `X = L^-1`:

    multi-root:  P(h -> m) = A[h, m] (X[m, m] - X[m, h]),                       P(ROOT -> m) = r[m] X[m, m]
    single-root: P(h -> m) = A[h, m] ([m != 0] X[m, m] - [h != 0] X[m, h]),     P(ROOT -> m) = r[m] X[m, 0]

Numerics (all exact, no eps, no clamping of scores):

* Column shift: every potential in column `m` of the Laplacian belongs to modifier `m`, so scaling the
  column by `exp(-c[m])` with `c[m] = max(max_h arc_scores[h, m], root_scores[m])` scales `det` by
  `exp(-c[m])`; `log Z = log|det L(scores - c)| + sum_m c[m]`, and the marginals are unchanged. The
  largest potential of every column is then 1, so nothing overflows (float32 is fine for
  |scores| <= 60 and n = 500).
* Root row shift (single root): row 0 of `L_bar` holds only root potentials, so scaling it by
  `exp(-c_r)` with `c_r = max_m (root_scores[m] - c[m])` scales `det` by `exp(-c_r)` and leaves the
  marginals unchanged (`X[:, 0]` scales by `exp(c_r)`, the root potentials by `exp(-c_r)`, the other
  columns of `X` not at all); `log Z` gains `c_r`. The largest entry of row 0 is then 1. Without it,
  root scores a few units below the arc scores (a bilinear arc scorer next to a linear root scorer)
  made row 0 tiny: at n = 30 with arc scores 5 above N(0, 1) root scores, 50 of 64 sentences failed
  the error estimate and took the exact path (0 with the shift), and ~100 below, every root potential
  underflowed and the LU met a zero pivot.
* Padding: positions at or past `lengths` become identity rows/columns (their potentials are 0 and
  their diagonal is 1), so the determinant and the inverse restricted to real words are those of
  the unpadded problem; padded marginals are exactly 0. `lengths == 0` gives `log Z = 0`.
* `arc_scores[h, m] = -inf` forbids the arc: its potential is exactly 0 and so is its marginal.
* Non-finite input: a NaN or +inf among a batch element's *real* scores gives NaN `log Z`,
  marginals, entropy and KL for that batch element only; a batch element that admits no tree at
  all (a real word whose heads, words and ROOT, are all -inf; or, single root, words that can only
  hang from ROOT among themselves) gets `log Z = -inf` and NaN marginals and entropy. The other
  batch elements are untouched (every operation is per batch element). Padded scores are never
  read, whatever they hold.
* Sharp scores: LU forms the diagonal `sum_h A[h, m] + r[m]` and loses potentials below eps
  next to 1 (two words that are each other's best head make the shifted Laplacian singular to
  working precision; N(0, 30^2) scores at n = 9 gave NaN in float32 and float64). Every result
  carries an error estimate (`_needs_exact`: eps times a condition number, never exceeded by the
  measured error); batch elements whose estimate is above `6 sqrt(eps)` (or not finite) are
  recomputed by a subtraction-free elimination (GTH-style: every pivot a sum, never a difference).
  It runs on the potentials themselves (`_linear_marginals`, with a hand-written reverse sweep for
  the marginals) wherever that is provably exact to working precision: nothing overflows, and
  underflow can only matter when a tree needs arcs far below their columns' best, measured by the
  probability that independently drawn heads form a tree (`_linear_trusted`: at least ~e^-55 in
  float32 at n = 200, ~e^-656 in float64). Only the other sentences take the same elimination in
  log space (`_eliminate_sentence`), whose log Z and autodiff marginals matched 80-digit and
  enumeration references to a few ulps up to |scores| ~ 200. The linear elimination is ~20x faster
  than the log-space one (one sentence of n = 200 with a 2-cycle scored 40, one CPU core: 22x for
  the marginals, 15x for value + gradient through them). The common path is a straight line, one LU
  and one solve plus two norms for the estimate; the exact path lies outside it
  (`_replace_flagged`): a `lax.while_loop` over the flagged elements only, gathered a fixed-size
  chunk at a time (at most 1/32 of the batch and 128k n^3 work: `_chunk_size`) and written back in
  place, which stops before its first step when none is flagged (under a user's `vmap`: it runs
  while any call of the mapped batch has a chunk left), so its memory is one chunk's whatever
  number of elements is flagged, and its time about proportional to that number. Below 32 words the
  chunks run at a multiple of 4 words and hold a power of two of sentences (`_exact_padded`), so
  that the programs of different short lengths and batch sizes share few traces of the exact path.
  Its marginals come from a hand-written reverse sweep of the elimination: the log-space one past
  32 words in checkpointed segments of sqrt(n) steps (`_sweep`): O(n^2.5) memory per sentence, where
  autodiff kept every step (O(n^3)); the linear one keeps a record of vectors per step
  (`_linear_marginals`). Every derivative of the exact marginals is forward mode: along a
  direction they move by a Hessian-vector product (forward mode through both sweeps); reverse mode
  (a loss through the marginals, as structured attention trains) needs the transposed product, and
  the Hessian is symmetric, so it is the same forward-mode product on the cotangent; so are all
  higher derivatives (symmetric in all their directions). `_hessian_product` binds them as one
  primitive whose transposes are itself (`_exact_where_flagged`, `_FlaggedProduct`): reverse mode
  keeps nothing of the exact path but the scores, never transposes its loop, and runs it over the
  flagged elements only. (Transposing the forward-mode program instead ran both sweeps backwards
  from checkpoints: one sentence of n = 200, value + gradient through the marginals 1.6x the time
  on a CPU.)
  Value + gradient through `marginals` at B = 64, n = 200 (float32, compiled `memory_analysis`):
  108 MiB of temporaries with any number of sharp sentences vs 88 MiB with the exact path left out
  (`exact='flag'`; 140 MiB with the cond-and-scan fallback before, and before the chunked
  exact path 584 MiB already at B = 64, n = 50, where the LU alone takes 3 MiB).
  `sample` draws from the same two paths: the LU inverse with Sherman-Morrison updates, and for the
  sentences the estimate sends to the exact path, conditionals from the elimination (O(n^4) per tree).
* Where the exact path runs (`exact_mode`, the `exact=` keyword): on concrete arrays ('auto'), in a
  second program over the flagged elements only, after the LU program; inside a traced program the
  LU path alone by default ('flag': flagged elements NaN, derivatives zero), so that the programs
  users run most (a model's train and eval steps) compile without the exact path; the training loop
  recomputes the examples whose trees were flagged with a separate program (`training.steps`), and
  'in_program' puts the exact path above inside the caller's program. (The in-program exact path was
  ~95% of the CPU compile time of a value + gradient through `marginals` at 4 x 8.)
* One LU factorisation (`jax.lax.linalg.lu`, partial pivoting) gives both `log|det|` and the inverse.
  `_logdet_and_inverse` carries a `jax.custom_jvp` with the closed forms
  `d log det L = tr(L^-1 dL)` and `d L^-1 = -L^-1 dL L^-1`, so gradients of `log_partition` reuse the
  forward factorisation (instead of `slogdet`'s JVP, which factorises again) and the marginals are
  differentiable to any order (structured attention backpropagates through them) without
  differentiating the LU decomposition itself. Measured with the functions of the
  `python -m launch.benchmark trees` columns, called in 9 interleaved rounds (median ms, float32,
  shared 2-core CPU, OPENBLAS_NUM_THREADS=1), sizes 512x32 / 64x64 / 32x200 (batch x length):

      marginals:              this rule 32.7 / 20.0 / 108.0   inv + autodiff 39.0 / 17.3 / 99.4
                              slogdet + grad 48.0 / 18.0 / 106.0
      marginals + grad loss:  this rule 63.6 / 32.1 / 225.2   inv + autodiff 70.1 / 35.9 / 226.9
                              slogdet + grad-of-grad 87.3 / 44.0 / 292.0

  i.e. on par for the forward marginals (all three do one LU and two triangular solves) and the
  fastest for marginals + gradient (10-27% faster than slogdet + autodiff: the backward pass is two
  matmuls instead of more triangular solves), so the custom rule is kept. (Without
  OPENBLAS_NUM_THREADS=1 on this oversubscribed box, batched LAPACK trsm calls were ~30x slower.)

All functions are pure, jit-able and vmap-able, accept any leading batch shape and float32 or
float64 scores, and run entirely on the device.
"""
import contextlib
import contextvars
import functools
import math

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from jax_structured.trees import _exact_kernel
from jax_structured.trees import _hessian_product
from jax_structured.trees import _inputs
from jax_structured.trees import _kernels

__all__ = ['EXACT_MODES', 'entropy', 'exact_mode', 'kl_divergence', 'log_partition', 'log_prob', 'marginals',
           'sample', 'score']


# ----------------------------------------------------------------------------------------------
# Input handling.


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
  `d[m]` for m >= 1. (A pass over |L| materialised [B, n, n] on the CPU: ~9% of the marginals' time
  at 32 x 200.) Equal to `jnp.sum(jnp.abs(lap), axis=-2)` up to rounding (the error estimate's
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


# ----------------------------------------------------------------------------------------------
# log|det| and inverse from one LU factorisation, with closed-form derivatives.


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


# ----------------------------------------------------------------------------------------------
# Public functions.


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


# ----------------------------------------------------------------------------------------------
# Exact fallback for sharp scores: GTH-style elimination (no cancellation anywhere).


def _log_sum(x):
  """log sum_i exp(x[i]) over axis 0, -inf where all are -inf, with finite derivatives of any order."""
  top = lax.stop_gradient(jnp.max(x, axis=0))
  top = jnp.where(jnp.isfinite(top), top, 0.0)
  total = jnp.sum(jnp.exp(x - top), axis=0)
  positive = total > 0
  return jnp.where(positive, top + jnp.log(jnp.where(positive, total, 1.0)), -jnp.inf)


def _log_add(a, b):
  """log(exp(a) + exp(b)) elementwise, -inf where both are, with finite derivatives of any order.

  The shift `max(a, b)` carries no gradient (the result does not depend on it), so every order of
  derivative is that of the plain formula; no [2, ...] stack is formed (`_log_sum` of the pair).
  """
  top = lax.stop_gradient(jnp.maximum(a, b))
  top = jnp.where(jnp.isfinite(top), top, 0.0)
  total = jnp.exp(a - top) + jnp.exp(b - top)
  positive = total > 0
  return jnp.where(positive, top + jnp.log(jnp.where(positive, total, 1.0)), -jnp.inf)


def _eliminate_sentence(arc_scores, root_scores, mask, single_root):
  """log Z of one sentence by subtraction-free elimination in log space (Grassmann-Taksar-Heyman).

  The Laplacian is kept as its off-diagonal weights `W` (`L[h, m] = -W[h, m]`) and its column
  excesses `e` (`e[m] = L[m, m] - sum_h W[h, m]`, the root potentials in the multi-root case).
  Eliminating word k leaves the Schur complement, which is again such a Laplacian:
  `W'[i, j] = W[i, j] + W[i, k] W[k, j] / p` and `e'[j] = e[j] + W[k, j] e[k] / p` with the pivot
  `p = e[k] + sum_i W[i, k]`, and `log det L = sum log p`. Every quantity is a sum of non-negative
  terms, so no pivot suffers cancellation (LU instead forms `L[m, m] = sum_h A[h, m] + r[m]` and
  loses a tiny `r[m]` next to 1; cf. Alfa, Xue & Ye 2002 on the entrywise accuracy of this
  elimination for M-matrices), and in log space (`log W`, `log e`) nothing under- or overflows.

  Single root: `Z = sum_m r[m] det(L_0 without row and column m)` with the root-free Laplacian
  `L_0` (zero excess): the first-order coefficient of `det(L_0 + t diag(r))` in t. The elimination
  runs on `L_0` while a second excess vector carries `r` to first order; the last word's pivot is
  its first-order excess. Words are eliminated in the order of the largest pivot, so all pivots
  before the last are positive whenever a tree exists (hard constraints can leave words whose only
  allowed head is ROOT).

  Args:
    arc_scores: [n, n] log-potentials, -inf on the diagonal, on padding and on forbidden arcs.
    root_scores: [n] log-potentials, -inf on padding.
    mask: [n] bool, real words.
    single_root: root mode.

  Returns:
    [] log Z (-inf when no tree exists). Its autodiff gradients (the marginals) were accurate to
    a few ulps against 80-digit references on problems where the LU path fails.
  """
  step, init = _elimination_start(arc_scores, root_scores, mask, single_root)
  carry, remaining = lax.fori_loop(0, mask.shape[-1], lambda _, c: step(*c), init)
  return carry[-1]


def _elimination_start(arc_scores, root_scores, mask, single_root):
  """The step of `_eliminate_sentence` and its initial carry.

  Returns:
    (step, (carry, remaining)): `step(carry, remaining) -> (carry, remaining)` eliminates the
    remaining word of largest pivot; `carry = (log_weights [n, n], log_excess [n],
    log_first_order [n], log_z [])` holds everything differentiable, `remaining` [n] bool the words
    not yet eliminated. Once none is left a step changes nothing.
  """
  n = mask.shape[-1]
  off_diagonal = ~jnp.eye(n, dtype=bool)
  minus_inf = jnp.full((), -jnp.inf, arc_scores.dtype)
  lowest = jnp.finfo(arc_scores.dtype).min

  def step(carry, remaining):
    log_weights, log_excess, log_first_order, log_z = carry
    heads = jnp.where(remaining[:, None], log_weights, minus_inf)
    log_pivots = _log_sum(jnp.concatenate([log_excess[None], heads]))
    # A remaining word with a zero pivot still beats every eliminated word.
    k = jnp.argmax(jnp.where(remaining, jnp.maximum(log_pivots, lowest), minus_inf))
    count = jnp.sum(remaining)
    log_pivot = log_pivots[k]
    value = jnp.where(count == 1, log_first_order[k], log_pivot) if single_root else log_pivot
    safe_pivot = jnp.where(jnp.isfinite(log_pivot), log_pivot, 0.0)
    column = jnp.where(remaining, log_weights[:, k], minus_inf)
    scaled_row = jnp.where(remaining, log_weights[k], minus_inf) - safe_pivot
    log_weights = jnp.where(off_diagonal, _log_add(log_weights, column[:, None] + scaled_row[None, :]),
                            minus_inf)
    log_excess = _log_add(log_excess, scaled_row + log_excess[k])
    if single_root:  # the first-order excess only exists in the single-root case
      log_first_order = _log_add(log_first_order, scaled_row + log_first_order[k])
    log_z = log_z + jnp.where(count > 0, value, 0.0)
    return (log_weights, log_excess, log_first_order, log_z), remaining & (jnp.arange(n) != k)

  log_excess = jnp.full_like(root_scores, -jnp.inf) if single_root else root_scores
  init = ((arc_scores, log_excess, root_scores, jnp.zeros((), arc_scores.dtype)), mask)
  return step, _inputs.vary_like(init, arc_scores, root_scores, mask)


# Up to this length the log-space elimination's sweeps (`_sweep`) are flat scans that keep every step
# (n states of [n, n] per sentence; a chunk of the exact path holds at most 128k / n^3 sentences,
# `_CHUNK_WORK`, so at most 128k numbers); past it, checkpointed segments of sqrt(n) steps
# (`_segments`: O(n^2.5) memory per sentence).
# The segments nest a loop in a loop and recompute each segment in the backward pass, so the flat
# sweeps make programs that differentiate `marginals` smaller: value + gradient at 4 x 8 compiled
# in 6.2 s instead of 8.8 s (suite settings; 55 instead of 91 loops), at 64 x 16 / 32 x 28 in 20.7 /
# 14.4 s instead of 25.3 / 17.2 s (default settings; 64 x 32, a shared core: 31 vs 43 s), and every
# sentence sharp ran 11-21% faster. (The linear elimination's sweeps are always flat: its records are
# vectors, `_linear_marginals`.)
_FLAT_UP_TO = 32


def _segments(n):
  """(steps per segment, segments) for the eliminations' checkpointed sweeps: ceil(sqrt(n)) steps per
  segment, and enough segments for n steps (steps past the n-th find no word left, change nothing)."""
  inner = max(1, math.isqrt(n - 1) + 1) if n > 1 else 1
  return inner, -(-n // inner)


def _sweep(step, init, n):
  """Runs an elimination (`step`, `init`: see `_elimination_start`) and its hand-written reverse sweep.

  The reverse sweep applies each step's VJP from the last step to the first. The steps' states are
  recomputed per segment of ceil(sqrt(n)) steps from the carries kept at the segment boundaries,
  and both sweeps' segments are `jax.checkpoint`ed, so this function and any derivative of it
  (structured attention differentiates the marginals) keep about 2 sqrt(n) states of [n, n]: O(n^2.5)
  memory per sentence, where autodiff of the elimination keeps all n (O(n^3), and autodiff of that
  again more). Rounding is that of autodiff (the same operations).

  Up to `_FLAT_UP_TO` words both sweeps are flat scans: the forward one keeps every step's state.

  Returns:
    (final carry, cotangent of the initial carry for d log Z = 1): the carry's last entry is log Z.
  """
  def step_back(cotangent, state):
    carry, remaining = state
    return jax.vjp(lambda c: step(c, remaining)[0], carry)[1](cotangent)[0], None

  start = jax.tree.map(jnp.zeros_like, init[0])
  start = start[:-1] + (jnp.ones_like(start[-1]),)  # d log Z / d log Z
  if n <= _FLAT_UP_TO:
    final, states = lax.scan(lambda c, _: (step(*c), c), init, None, length=n)
    return final[0], lax.scan(step_back, start, states, reverse=True)[0]

  inner, outer = _segments(n)

  def segment_forward(state, _):
    return lax.fori_loop(0, inner, lambda _, c: step(*c), state), state

  final, boundaries = lax.scan(jax.checkpoint(segment_forward, prevent_cse=False), init, None,
                               length=outer)

  def segment_backward(cotangent, boundary):
    states = lax.scan(lambda c, _: (step(*c), c), boundary, None, length=inner)[1]
    return lax.scan(step_back, cotangent, states, reverse=True)[0], None

  cotangent = lax.scan(jax.checkpoint(segment_backward, prevent_cse=False), start, boundaries,
                       reverse=True)[0]
  return final[0], cotangent


def _elimination_marginals(arc_scores, root_scores, mask, single_root):
  """log Z and its gradient (the marginals) by `_eliminate_sentence` and its reverse sweep (`_sweep`).

  Args:
    arc_scores: [n, n] raw scores (the diagonal and padding are ignored).
    root_scores: [n].
    mask: [n] bool, real words.
    single_root: root mode.

  Returns:
    (log Z [], arc marginals [n, n], root marginals [n]); 0 on padding and the diagonal.
  """
  step, init = _elimination_start(*_forbid_padding(arc_scores, root_scores, mask), mask, single_root)
  final, (d_weights, d_excess, d_first_order, _) = _sweep(step, init, mask.shape[-1])
  arc_m = jnp.where(_arc_mask(mask), d_weights, 0.0)
  root_m = jnp.where(mask, d_first_order if single_root else d_excess, 0.0)
  return final[-1], arc_m, root_m


@jax.custom_jvp
def _ratio(x, y):
  """`x / y` whose derivatives divide by `y` once: `d(x / y) = (dx - (x / y) dy) / y`.

  Autodiff of `x / y` forms `x / y^2`, which underflows to 0 (then inf, then NaN) in float32 for
  `|y|` below ~1e-19, where the ratio itself is fine; the linear elimination's pivots go that low.
  """
  return x / y


@_ratio.defjvp
def _ratio_jvp(primals, tangents):
  (x, y), (dx, dy) = primals, tangents
  ratio = _ratio(x, y)
  return ratio, _ratio(dx - ratio * dy, y)  # _ratio again: every order divides by y once


def _linear_elimination_start(arc_potentials, root_potentials, mask, single_root):
  """`_elimination_start` on the potentials themselves instead of their logs.

  The same elimination (`W' = W + W[:, k] W[k, :] / p`, pivots summed, never subtracted, largest
  first) with products and sums in place of log-sums (no exp / log per entry), as accurate as long
  as nothing it needs underflows (`_linear_trusted`).

  Args:
    arc_potentials: [n, n] non-negative, column maxima 1 (`_linear_potentials`), 0 on the diagonal,
      padding and forbidden arcs.
    root_potentials: [n] non-negative, 0 on padding.
    mask: [n] bool; single_root: root mode.

  Returns:
    (step, (carry, remaining)) as `_elimination_start`, with `carry = (weights [n, n], excess [n],
    first_order [n], log_z [])`; `step` also returns what the reverse sweep of `_linear_marginals`
    needs of the step, `(remaining [n], k, column [n], scaled_row [n], pivot, excess[k],
    first_order[k], d log_z / d pivot, d log_z / d first_order[k])`.
  """
  n = mask.shape[-1]
  off_diagonal = ~jnp.eye(n, dtype=bool)

  def step(carry, remaining):
    weights, excess, first_order, log_z = carry
    pivots = excess + jnp.sum(jnp.where(remaining[:, None], weights, 0.0), axis=0)
    k = jnp.argmax(jnp.where(remaining, pivots, -1.0))
    count = jnp.sum(remaining)
    pivot = pivots[k]
    last = (count == 1) if single_root else False  # single root: the last word's first-order excess
    value = jnp.where(last, first_order[k], pivot)
    # Zero pivots (no tree) give finite garbage, never NaN (`_linear_trusted` rejects them).
    safe_pivot = jnp.where(pivot > 0, pivot, 1.0)
    usable = (count > 0) & (value > 0)  # a word was left and its value enters log Z
    safe_value = jnp.where(usable, value, 1.0)
    scaled_row = _ratio(jnp.where(remaining, weights[k], 0.0), safe_pivot)
    column = jnp.where(remaining, weights[:, k], 0.0)
    weights = jnp.where(off_diagonal, weights + column[:, None] * scaled_row[None, :], 0.0)
    new_excess = excess + scaled_row * excess[k]
    new_first_order = first_order + scaled_row * first_order[k] if single_root else first_order
    # A zero pivot before the last word (or a zero last value): no tree, log Z = -inf (untrusted).
    log_z = log_z + jnp.where((count > 0) & ~usable, -jnp.inf, jnp.log(safe_value))
    d_value = jnp.where(usable, _ratio(jnp.ones_like(safe_value), safe_value), 0.0)
    record = (remaining, k, column, scaled_row, jnp.where(pivot > 0, pivot, 0.0), excess[k],
              first_order[k], jnp.where(last, 0.0, d_value), jnp.where(last, d_value, 0.0))
    return ((weights, new_excess, new_first_order, log_z), remaining & (jnp.arange(n) != k)), record

  zeros = jnp.zeros_like(root_potentials)
  excess = zeros if single_root else root_potentials
  init = ((arc_potentials, excess, root_potentials, jnp.zeros((), arc_potentials.dtype)), mask)
  return step, _inputs.vary_like(init, arc_potentials, root_potentials, mask)


def _linear_step_back(cotangent, record, single_root):
  """The VJP of one step of `_linear_elimination_start` (d log Z / d log Z = 1), from its record.

  Written out instead of `jax.vjp` of the step: it needs only the step's vectors (no state of
  [n, n] is kept or recomputed), and it divides by the pivot once where autodiff of `row / p`
  divides by `p^2` (which underflows in float32 for pivots below 1e-19).

  Args:
    cotangent: (d_weights [n, n], d_excess [n], d_first_order [n]) after the step.
    record: the step's record (`_linear_elimination_start`).
    single_root: root mode.

  Returns:
    the cotangent before the step.
  """
  d_weights, d_excess, d_first_order = cotangent
  remaining, k, column, scaled_row, pivot, excess_k, first_order_k, d_pivot, d_first_order_k = record
  n = column.shape[-1]
  d_weights = jnp.where(jnp.eye(n, dtype=bool), 0.0, d_weights)
  d_column = d_weights @ scaled_row
  d_scaled_row = column @ d_weights + d_excess * excess_k
  d_excess = d_excess.at[k].add(jnp.sum(d_excess * scaled_row))
  if single_root:
    d_scaled_row = d_scaled_row + d_first_order * first_order_k
    d_first_order = d_first_order.at[k].add(jnp.sum(d_first_order * scaled_row) + d_first_order_k)
  safe_pivot = jnp.where(pivot > 0, pivot, 1.0)
  d_pivot = d_pivot - jnp.where(pivot > 0, _ratio(jnp.sum(d_scaled_row * scaled_row), safe_pivot), 0.0)
  # scaled_row = remaining * weights[k] / pivot; column = remaining * weights[:, k];
  # pivot = excess[k] + sum over remaining i of weights[i, k].
  d_row = jnp.where(remaining, _ratio(d_scaled_row, safe_pivot), 0.0)
  d_col = jnp.where(remaining, d_column + d_pivot, 0.0)
  d_weights = d_weights.at[k, :].add(d_row).at[:, k].add(d_col)
  d_excess = d_excess.at[k].add(d_pivot)
  return d_weights, d_excess, d_first_order


def _linear_floor(dtype, n):
  """The smallest `log P_indep` (`_linear_trusted`) at which the linear elimination is trusted.

  Underflow loses at most the smallest normal number `tiny` per operation (n^3 of them), and a
  loss in an intermediate reaches log Z and the marginals amplified by at most 1 / P_indep, so the
  loss stays below eps when `P_indep >= n^3 tiny / eps`: about e^-55 in float32 and e^-656 in float64
  at n = 200.
  """
  info = jnp.finfo(dtype)
  return float(3 * np.log(max(n, 1)) + np.log(float(info.tiny)) - np.log(float(info.eps)))


def _linear_potentials(arc_scores, root_scores, mask, single_root):
  """The potentials of `_potentials` for the linear elimination, and the log of their scale.

  Returns:
    (arc_potentials [n, n], root_potentials [n], log_scale []): log Z = log_scale + the log Z of the
    potentials. A column without any allowed head (shift -inf, NaN potentials) gets zeros; NaN
    scores stay NaN.
  """
  arc_potentials, root_potentials, shift, root_shift = _potentials(arc_scores, root_scores, mask,
                                                                   single_root)
  no_head = shift == -jnp.inf
  arc_potentials = jnp.where(no_head[None, :], 0.0, arc_potentials)
  root_potentials = jnp.where(no_head, 0.0, root_potentials)
  return arc_potentials, root_potentials, jnp.sum(shift) + root_shift


def _linear_trusted(log_z, arc_potentials, root_potentials, mask):
  """[] bool: the linear elimination of this sentence is exact to working precision.

  With the potentials of `_linear_potentials` (largest of each column 1, so every column sum is at
  least 1), every quantity of the elimination and of its reverse sweep is a sum of products of
  potentials divided by pivots, and no pivot is below `P_indep = Z' / prod_m colsum_m`, the
  probability that heads drawn independently per word (m takes h with probability
  `A[h, m] / colsum_m`) form a tree. So nothing overflows, and underflow loses at most the
  smallest normal number per operation, amplified by at most `1 / P_indep`. Trusted: `log P_indep`
  (from the elimination's own log Z' of these potentials) is at least `_linear_floor` and every real
  word has some allowed head. Otherwise (a tree needs arcs e^-55 below their columns' best, in
  float32; no tree; non-finite scores) the log-space elimination decides.
  """
  log_z, arc_potentials, root_potentials = lax.stop_gradient((log_z, arc_potentials, root_potentials))
  column_sums = jnp.sum(arc_potentials, axis=-2) + root_potentials
  has_head = jnp.all(jnp.where(mask, column_sums > 0, True))
  log_p_indep = log_z - jnp.sum(jnp.log(jnp.where(mask & has_head, column_sums, 1.0)))
  return has_head & (log_p_indep >= _linear_floor(arc_potentials.dtype, mask.shape[-1]))


def _linear_marginals(arc_scores, root_scores, mask, single_root):
  """`_elimination_marginals` by the linear elimination, whose reverse sweep is written out
  (`_linear_step_back`) and keeps one record of vectors per step, and whether to trust it.

  Returns:
    (log Z [], arc marginals [n, n], root marginals [n], trusted [] bool): exact where trusted
    (`_linear_trusted`); elsewhere finite or not, not to be used (`_exact_log_z_and_marginals` selects
    the log-space elimination's results there, and their derivatives, all forward mode).
  """
  arc_potentials, root_potentials, log_scale = _linear_potentials(arc_scores, root_scores, mask,
                                                                  single_root)
  step, init = _linear_elimination_start(arc_potentials, root_potentials, mask, single_root)
  n = mask.shape[-1]
  step_back = lambda c, r: (_linear_step_back(c, r, single_root), None)
  start = jax.tree.map(jnp.zeros_like, init[0][:3])
  # Flat scans: the records are vectors (O(n^2) per sentence in all), and nothing differentiates this
  # function in reverse mode (the exact path's derivatives are forward mode, `_exact_chunk_product`),
  # so checkpointed segments would save nothing (they made one n = 200 sentence ~10% slower).
  final, records = lax.scan(lambda c, _: step(*c), init, None, length=n)
  d_weights, d_excess, d_first_order = lax.scan(step_back, start, records, reverse=True)[0]
  arc_m = jnp.where(_arc_mask(mask), arc_potentials * d_weights, 0.0)
  root_m = jnp.where(mask, root_potentials * (d_first_order if single_root else d_excess), 0.0)
  log_z = final[0][-1]
  return log_z + log_scale, arc_m, root_m, _linear_trusted(log_z, arc_potentials, root_potentials, mask)


def _forbid_padding(arc_scores, root_scores, mask):
  """The scores with -inf on the diagonal and wherever a padded word is head or modifier."""
  return (jnp.where(_arc_mask(mask), arc_scores, -jnp.inf), jnp.where(mask, root_scores, -jnp.inf))


def _per_sentence(sentence_fn, inputs):
  """`jax.vmap(sentence_fn)(*inputs)`, without the vmap for a batch of one (the exact path's chunk
  from n = 32 on): batched, the eliminations' per-step row and column picks become gathers, which
  made one sentence ~3x slower on the CPU (n = 200, linear elimination: 97 vs 31 ms)."""
  if inputs[0].shape[0] == 1:
    return jax.tree.map(lambda x: x[None], sentence_fn(*(x[0] for x in inputs)))
  return jax.vmap(sentence_fn)(*inputs)


def _exact_log_z_and_marginals(arc_scores, root_scores, mask, single_root, kernels=None):
  """(log Z [...], arc marginals, root marginals) of a batch, exactly, NaN where undefined.

  The linear elimination (`_linear_marginals`) where `_linear_trusted`; the log-space one
  (`_elimination_marginals`) for the other elements, only when there are any (a `lax.cond`; under a
  user's `vmap`, when any element of the mapped batch has one). Differentiated in forward mode only
  (`_exact_chunk_product`): a select passes no NaN of the branch it drops into a tangent. `kernels`
  (`_kernels.selected()`, values only): the linear elimination by one kernel launch (`_exact_kernel`).
  """
  batch_shape = mask.shape[:-1]
  flat = lambda x: x.reshape((-1,) + x.shape[len(batch_shape):])
  inputs = (flat(arc_scores), flat(root_scores), flat(mask))
  if kernels is None:
    *linear, trusted = _per_sentence(functools.partial(_linear_marginals, single_root=single_root), inputs)
  else:
    *linear, trusted = _exact_kernel.linear_marginals(*inputs, single_root, kernels)
  linear, untrusted = tuple(linear), ~trusted

  def log_space(linear):
    exact = _per_sentence(functools.partial(_elimination_marginals, single_root=single_root), inputs)
    return tuple(jnp.where(untrusted.reshape((-1,) + (1,) * (e.ndim - 1)), e, v)
                 for e, v in zip(exact, linear))

  log_z, arc_m, root_m = lax.cond(_any_anywhere(untrusted), log_space, lambda v: v, linear)
  # NaN or +inf among the real scores: NaN; no tree at all (log Z = -inf): NaN marginals.
  invalid = (jnp.any(jnp.where(_arc_mask(mask), jnp.isnan(arc_scores) | (arc_scores == jnp.inf), False),
                     axis=(-2, -1))
             | jnp.any(jnp.where(mask, jnp.isnan(root_scores) | (root_scores == jnp.inf), False), axis=-1))
  unflat = lambda x: x.reshape(batch_shape + x.shape[1:])
  log_z = jnp.where(invalid, jnp.nan, unflat(log_z))
  undefined = invalid | (log_z == -jnp.inf)
  arc_m = jnp.where(undefined[..., None, None], jnp.nan, unflat(arc_m))
  root_m = jnp.where(undefined[..., None], jnp.nan, unflat(root_m))
  return log_z, arc_m, root_m


# Jitted on its own so that its trace, and the traces of its derivatives (JAX caches both per input
# shape), are made once per process, not once per program that contains it: the exact path is most
# of the tracing of anything that differentiates `marginals` (value + gradient at 4x8: 4.7 of 13 s,
# suite compile settings; a second program with the same chunk shape traces it in 0.1 s).
_exact_chunk = jax.jit(_exact_log_z_and_marginals, static_argnums=(3, 4))

# Below this length the exact path's chunks run on sentences padded to a multiple of _PAD_MULTIPLE
# words (and hold a power of two of them, `_chunk_size`), so that programs over different short
# lengths and batch sizes (length buckets, test cases) share one trace of `_exact_chunk` and of its
# derivatives (4.7 s of the 13 s compile of value + gradient at 4 x 8, suite settings). The padding
# adds at most (n + 3)^3 / n^3 of the exact path's work, 2.4x at n = 9, 1.6x at n = 17, on the
# sentences that take it; from _PAD_BELOW words on, chunks keep the exact length.
_PAD_BELOW = 32
_PAD_MULTIPLE = 4


def _canonical_length(n):
  """The sentence length the exact path's chunks run at (`_PAD_BELOW`)."""
  return -(-n // _PAD_MULTIPLE) * _PAD_MULTIPLE if 0 < n < _PAD_BELOW else n


def _at_canonical_length(chunk_fn, inputs):
  """`chunk_fn(*inputs)` run at `_canonical_length(n)` words and cut back to n.

  `inputs` are a chunk's `[k, n]` / `[k, n, n]` arrays (scores, mask, directions), padded with zeros
  (padded words are masked out, so the results on the real words are those at length n); every
  output's axes after the first are word axes, cut back to their first n entries.
  """
  n = inputs[2].shape[-1]  # the mask
  extra = _canonical_length(n) - n
  if not extra:
    return chunk_fn(*inputs)
  outputs = chunk_fn(*(jnp.pad(x, ((0, 0),) + ((0, extra),) * (x.ndim - 1)) for x in inputs))
  return jax.tree.map(lambda x: x[(slice(None),) + (slice(0, n),) * (x.ndim - 1)], outputs)


def _exact_padded(inputs, single_root, kernels=None):
  """`_exact_chunk` of a chunk `(arc [k, n, n], root [k, n], mask [k, n])`, run at the canonical length."""
  return _at_canonical_length(lambda *chunk: _exact_chunk(*chunk, single_root, kernels), inputs)


@functools.lru_cache(maxsize=None)
def _chunk_marginals(single_root):
  """`(arc [k, n, n], root [k, n], mask [k, n]) -> (arc marginals, root marginals)` of the exact path:
  the gradient of the chunk's summed log Z (one hashable function per root mode)."""
  return lambda arc_scores, root_scores, mask: _exact_log_z_and_marginals(
      arc_scores, root_scores, mask, single_root)[1:]


@functools.partial(jax.jit, static_argnums=(4,))
def _exact_chunk_product(arc_scores, root_scores, mask, directions, single_root):
  """The exact marginals' derivative along `directions` (a tuple of k `(d_arc, d_root)` pairs shaped
  like the scores): `D^(k+1) log Z [directions]` per sentence, by nested forward mode through both
  eliminations and their reverse sweeps (`_hessian_product.JvpProduct`). Jitted on its own, like
  `_exact_chunk`, so that programs with the same chunk shape share its trace."""
  return _hessian_product.JvpProduct(_chunk_marginals(single_root))(
      (arc_scores, root_scores), (mask,), directions)


class _FlaggedProduct:
  """The derivative product (`_hessian_product.derivative_product`) of the exact marginals of the
  flagged batch elements, zero elsewhere: a `lax.while_loop` over chunks of the flagged elements
  (`_replace_flagged`) runs `_exact_chunk_product` on each. Block diagonal, each block a derivative
  of one sentence's log Z, so symmetric like the primitive needs.

  Called as `(args=(arc [B, n, n], root [B, n]), constants=(mask [B, n], flags [B]), directions)`.
  """

  def __init__(self, single_root, chunk):
    self.single_root, self.chunk = single_root, chunk

  def __call__(self, args, constants, directions):
    (arc_scores, root_scores), (mask, flags) = args, constants
    flat_directions = tuple(t for direction in directions for t in direction)

    def chunk_product(arc, root, mask, *chunk_directions):
      pairs = tuple(tuple(chunk_directions[i:i + 2]) for i in range(0, len(chunk_directions), 2))
      return _exact_chunk_product(arc, root, mask, pairs, self.single_root)

    zeros = _inputs.vary_like((jnp.zeros_like(arc_scores), jnp.zeros_like(root_scores)),
                              arc_scores, root_scores, mask, *flat_directions)
    return _replace_flagged(flags, lambda inputs: _at_canonical_length(chunk_product, inputs),
                            (arc_scores, root_scores, mask) + flat_directions, zeros, self.chunk)

  def __eq__(self, other):
    return type(other) is _FlaggedProduct and (other.single_root, other.chunk) == (self.single_root,
                                                                                   self.chunk)

  def __hash__(self):
    return hash((_FlaggedProduct, self.single_root, self.chunk))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _exact_where_flagged(single_root, chunk, flags, arc_scores, root_scores, mask, log_z, arc_marginals,
                         root_marginals):
  """The LU path's `(log_z [B], arc_marginals [B, n, n], root_marginals [B, n])` with the `flags` [B]
  elements replaced by the exact path's (`_replace_flagged`, chunks of `chunk`), and derivatives to
  match: the LU path's tangents where not flagged; where flagged, `d log Z = <marginals, d scores>`
  and the marginals' derivative by the primitive of `_hessian_product` over `_FlaggedProduct`, whose
  transpose is itself: reverse mode runs the exact path forward, over the flagged elements only.

  So when no element is flagged, the exact path adds two `lax.while_loop`s that stop before their
  first step (value, and one per derivative product) and selects; no conditional copies the
  [B, n, n] arrays and no chunk buffers are allocated (a `lax.cond` with a `lax.scan` of chunks
  did both: value + gradient at 32 x 200 took 1.09-1.15x the time without the exact path in two
  runs on a CPU, this design 1.06-1.08x).
  """
  return _replace_flagged(flags, functools.partial(_exact_padded, single_root=single_root),
                          (arc_scores, root_scores, mask), (log_z, arc_marginals, root_marginals), chunk)


@_exact_where_flagged.defjvp
def _exact_where_flagged_jvp(single_root, chunk, primals, tangents):
  flags, arc_scores, root_scores, mask = primals[:4]
  outputs = _exact_where_flagged(single_root, chunk, *primals)
  _, d_arc, d_root, _, d_log_z, d_arc_marginals, d_root_marginals = tangents
  arc_m, root_m = outputs[1:]
  # Marginals are exactly 0 on padding and forbidden arcs: a tangent there (even inf) adds nothing.
  d_log_z_exact = (jnp.sum(jnp.where(arc_m != 0, arc_m * d_arc, 0.0), axis=(-2, -1))
                   + jnp.sum(jnp.where(root_m != 0, root_m * d_root, 0.0), axis=-1))
  d_arc_exact, d_root_exact = _hessian_product.derivative_product(
      _FlaggedProduct(single_root, chunk), (arc_scores, root_scores), (mask, flags), (d_arc, d_root))
  return outputs, (jnp.where(flags, d_log_z_exact, d_log_z),
                   jnp.where(flags[:, None, None], d_arc_exact, d_arc_marginals),
                   jnp.where(flags[:, None], d_root_exact, d_root_marginals))


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
  can drop NaN (at B = 64, n = 64 a batch whose inverses were NaN got finite norms, so a zero pivot,
  e.g. root potentials that all underflow next to arc scores ~130 higher, went unflagged and NaN
  marginals reached a model: SNLI structured attention diverged at step 135), while a sum of
  absolute values is finite exactly when every term is (or overflows, which flags it too).

  The row sums of |L^-1| are a product with a vector of ones (HIGHEST precision, so no TF32 / bf16
  rounding on accelerators): the solve returns L^-1 column-major, and a row reduction made XLA's
  CPU transpose it into a [..., n, n] copy first (forward marginals 0.92-0.94x with the product).
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


@jax.custom_batching.custom_vmap
def _any_anywhere(flags):
  """`jnp.any(flags)`; under a user's `vmap`, over the whole mapped batch as well.

  The predicate of the exact fallback's loop (`_replace_flagged`) and of its choice of elimination
  (`_exact_log_z_and_marginals`): batched, a `lax.cond` becomes a select that runs the exact path for
  every call (20-100x the LU path) and a `lax.while_loop` runs every call's body with selects, so
  under `vmap` the predicate stays unbatched (any element of any mapped call) and the results are
  still chosen per element.
  """
  return jnp.any(flags)


@_any_anywhere.def_vmap
def _any_anywhere_vmap(axis_size, in_batched, flags):
  del axis_size, in_batched
  return _any_anywhere(flags), False


# Chunks of the exact path. A chunk runs whole however few of its elements are flagged, so one sharp
# sentence costs one chunk; but every chunk also costs a fixed overhead (at n = 8, 16 / 128
# sentences took 1.6x / 13x the time of one; at n = 32, 4 / 16 took 2.9x / 12x: float32, jitted
# `_exact_log_z_and_marginals`, shared 2-core CPU), which many sharp sentences pay once per chunk. So
# a chunk holds at most 1/_CHUNK_SHARE of the batch (one sharp sentence then adds at most ~1/32 of
# the batch's sentences' exact work) and at most _CHUNK_WORK n^3 of work (memory and program size).
# Measured against the previous rule (2^15 n^3, batch-blind), value + gradient through `marginals`
# in one process (medians of 7 interleaved rounds, CPU): 512 x 32 with every sentence x30 0.53x the
# time (4 per chunk instead of 1), 512 x 8 with one sharp sentence 1.18 instead of 1.45x the no-sharp
# time (16 instead of 64), the rest within noise (256 x 16, 64 x 64).
_CHUNK_WORK = 2**17
_CHUNK_SHARE = 32


def _power_of_two_chunk(count, cap):
  """The power of two at or below `cap` (at least 1), and at most the power of two at or above
  `count`: elements per call of an exact program over `count` elements (the last call's slots past
  them are filled and their results dropped)."""
  cap = max(1, cap)
  cap = 1 << (cap.bit_length() - 1)
  return min(cap, 1 << max(0, count - 1).bit_length())


def _chunk_size(size, n):
  """Elements per chunk of the in-program exact path over a batch of `size`: at most both
  `size / _CHUNK_SHARE` and `_CHUNK_WORK / n^3` (`_power_of_two_chunk`)."""
  return _power_of_two_chunk(size, min(_CHUNK_WORK // max(1, n)**3, size // _CHUNK_SHARE))


def _replace_flagged(flags, exact_fn, inputs, values, chunk):
  """`values` with the flagged elements replaced by `exact_fn`'s results: the exact fallback.

  Usually no element or a few are flagged (0.7% of the sentences of a trained document model, in 35%
  of its batches). The flagged elements' indices are listed first (`jnp.nonzero`, [size] ints), and a
  `lax.while_loop` gathers `chunk` of them at a time, runs `exact_fn` on them and writes the results
  into `values` in place, for as many chunks as there are flagged elements: none when none is. The
  loop's predicate stays unbatched under a user's `vmap` (`_any_anywhere`: it runs while any mapped
  call has a chunk left; the others' slots are dropped). So the exact path's memory is one chunk's,
  whatever number of elements is flagged, and nothing of it is touched when none is. A while loop
  cannot be transposed; its derivatives are the primitive of `_hessian_product` (`_exact_where_flagged`),
  which never transposes it.

  Args:
    flags: [size] bool, the elements to replace.
    exact_fn: pytree of [k, ...] inputs -> pytree of [k, ...], the exact results of those elements.
    inputs: pytree of [size, ...] arrays, the per-element inputs of `exact_fn`.
    values: pytree of [size, ...], the fast path's results.
    chunk: int >= 1, elements per call of `exact_fn` (may exceed the number flagged: the slots past
      the last flagged element repeat an element, and their results are dropped).

  Returns:
    a pytree like `values`.
  """
  size = flags.shape[0]
  chunk = max(1, chunk)
  num_chunks = -(-size // chunk)
  # Flagged elements first; slots past them hold `size`, whose results are dropped.
  where = jnp.nonzero(flags, size=num_chunks * chunk, fill_value=size)[0]
  count = jnp.sum(flags)

  def more(state):
    return _any_anywhere(state[0] * chunk < count)

  def one_chunk(state):
    index, values = state
    slots = lax.dynamic_slice(where, (index * chunk,), (chunk,))
    results = exact_fn(jax.tree.map(lambda x: x[jnp.minimum(slots, size - 1)], inputs))
    return index + 1, jax.tree.map(lambda v, e: v.at[slots].set(e, mode='drop'), values, results)

  start = _inputs.vary_like((jnp.zeros((), jnp.int32), values), count, *jax.tree.leaves(values))
  return lax.while_loop(more, one_chunk, start)[1]


# How the functions of `_statistics` treat the batch elements that the LU error estimate flags.
EXACT_MODES = ('auto', 'in_program', 'flag')
_EXACT_MODE = contextvars.ContextVar('jax_structured_trees_exact_mode', default='auto')


def _check_mode(mode):
  if mode not in EXACT_MODES:
    raise ValueError(f'exact={mode!r}: use one of {EXACT_MODES} (see trees.exact_mode)')
  return mode


@contextlib.contextmanager
def exact_mode(mode):
  """The default `exact=` of the matrix-tree functions called (traced) inside the block.

  `log_partition`, `marginals`, `entropy`, `kl_divergence` and `log_prob` take `exact=None` by default,
  which reads this setting (itself 'auto' unless a block sets it). The modes:

  * 'auto': on concrete arrays (a notebook call outside any `jit` / `grad` / `vmap`), exact results by
    two programs, each compiled once per shape and cached: the LU path with its error estimate over the
    whole batch, then the exact elimination over the flagged elements only (none run when none is
    flagged). Inside a trace (the caller's `jit`, `grad`, `vmap`, a Flax `apply` under `jit`), the same as
    'flag': the program holds the LU path only.
  * 'flag': the LU path only. A flagged element's results are NaN (never a silently wrong value); its
    derivatives are zero (not NaN), so a loss that drops it (`jnp.where`) keeps finite gradients. The
    training loop runs every model this way and recomputes the examples whose trees were flagged with a
    separate program ('in_program', compiled the first time one is flagged): exact results, while the
    programs it runs at every step hold no exact path (`nn.exactness`, `training.steps`).
  * 'in_program': the exact elimination inside the traced program, run for the flagged elements only (a
    `lax.while_loop` that stops before its first step when none is flagged; derivatives of any order).
    Exact wherever the program runs, at a price paid by every program that contains it, flagged or
    not: value + gradient through `marginals` compiled 4.5x (4 x 8) to 5.5x (64 x 64) slower on a CPU,
    with 9x the HLO, and on a GPU the loop's predicate is read on the host at every call.

  Read when a function is traced: a jitted function keeps the mode of its first trace, so enter the
  block inside the function you jit (or jit a separate function per mode).

  Args:
    mode: one of EXACT_MODES.
  """
  token = _EXACT_MODE.set(_check_mode(mode))
  try:
    yield
  finally:
    _EXACT_MODE.reset(token)


def _resolve_mode(exact, *arrays):
  """'outside' (concrete inputs under 'auto'), 'flag' or 'in_program'."""
  mode = _check_mode(_EXACT_MODE.get() if exact is None else exact)
  if mode != 'auto':
    return mode
  traced = any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(arrays))
  return 'flag' if traced else 'outside'


def _statistics(arc_scores, root_scores, lengths, single_root, exact):
  """Everything the public functions share: log Z, marginals, shifted scores and masks, and
  `flagged` [...] bool (the LU error estimate was too large: `_needs_exact`), under the mode `exact`
  (`exact_mode`)."""
  mode = _resolve_mode(exact, arc_scores, root_scores, lengths)
  kernels = _kernels.selected(arc_scores.shape[-1])  # `use_kernels`
  if mode == 'outside':
    return _statistics_outside(arc_scores, root_scores, lengths, single_root, kernels)
  return _traced_statistics(arc_scores, root_scores, lengths, single_root, mode == 'in_program', kernels)


def _traced_statistics(arc_scores, root_scores, lengths, single_root, in_program, kernels=None):
  """`_statistics` inside one program.

  The common path is a straight line: one LU factorisation and one solve (`_logdet_and_inverse`,
  whose error estimate costs two norms). With `in_program`, batch elements whose estimate is too large
  are recomputed by the exact elimination in chunks (`_exact_where_flagged`), outside that line: when
  no element is flagged, no exact work runs; what remains is the flagged elements' index list, a
  `lax.while_loop` that stops before its first step (one more per derivative product) and a select per
  output. Without it the flagged elements are NaN (their derivatives zero: `_logdet_and_inverse`
  returns zeros there) and the exact path is not traced at all. `kernels` (`_kernels.selected()`): None
  for that line, else the fused kernels replace it (True: interpreted), with the same flags.
  """
  arc_scores, root_scores, lengths, mask = _prepare(arc_scores, root_scores, lengths)
  arc_potentials, root_potentials, shift, root_shift = _potentials(arc_scores, root_scores, mask,
                                                                   single_root)
  total_shift = jnp.sum(shift, axis=-1)
  if kernels is None:
    lap = _laplacian(arc_potentials, root_potentials, mask, single_root)
    lap_column_sums = _laplacian_column_abs_sums(arc_potentials, root_potentials, mask, single_root)
    logdet, inverse, exact = _logdet_and_inverse(lap, lax.stop_gradient(lap_column_sums))
    exact = exact > 0
    arc_marginals, root_marginals = _marginals_from_inverse(arc_potentials, root_potentials, inverse,
                                                            single_root)
    log_z = logdet + total_shift + root_shift
  else:  # already NaN where flagged
    log_z, arc_marginals, root_marginals, exact = _kernels.fused_statistics(
        arc_scores, root_scores, lengths, single_root, kernels)

  n = mask.shape[-1]
  if not in_program:
    log_z = jnp.where(exact, jnp.nan, log_z)
    arc_marginals = jnp.where(exact[..., None, None], jnp.nan, arc_marginals)
    root_marginals = jnp.where(exact[..., None], jnp.nan, root_marginals)
  else:
    size = exact.size
    flat = lambda x, tail: x.reshape((size,) + tail)
    log_z, arc_marginals, root_marginals = _exact_where_flagged(
        single_root, _chunk_size(size, n), flat(exact, ()), flat(arc_scores, (n, n)), flat(root_scores, (n,)),
        flat(mask, (n,)), flat(log_z, ()), flat(arc_marginals, (n, n)), flat(root_marginals, (n,)))
    log_z = log_z.reshape(exact.shape)
    arc_marginals = arc_marginals.reshape(exact.shape + (n, n))
    root_marginals = root_marginals.reshape(exact.shape + (n,))
  logdet = log_z - total_shift  # NaN (as the entropy should be) when some word has no allowed head
  return dict(arc_scores=arc_scores, root_scores=root_scores, mask=mask, shift=shift, logdet=logdet,
              log_z=log_z, arc_marginals=arc_marginals, root_marginals=root_marginals, flagged=exact)


# The LU program of the 'auto' mode on concrete arrays (`_statistics_outside`): one per shape, dtype and
# root mode, cached by jit.
@functools.partial(jax.jit, static_argnums=(3, 4))
def _lu_statistics(arc_scores, root_scores, lengths, single_root, kernels):
  """`_traced_statistics` without the exact path, jitted (`kernels`: see there)."""
  return _traced_statistics(arc_scores, root_scores, lengths, single_root, False, kernels)


def _outside_chunk(count, n):
  """Elements per call of the exact program outside (`_statistics_outside`) for `count` flagged
  elements: at most `_CHUNK_WORK / n^3` (`_power_of_two_chunk`), so that few shapes are compiled."""
  return _power_of_two_chunk(count, _CHUNK_WORK // max(1, n)**3)


def _statistics_outside(arc_scores, root_scores, lengths, single_root, kernels=None):
  """`_statistics` of concrete arrays, exact: the LU program over the batch (`_lu_statistics`), then
  the exact elimination (`_exact_chunk`, jitted on its own) over the flagged elements only, gathered
  on the host in chunks of `_outside_chunk` and written back. Nothing but the LU program runs when no
  element is flagged (the flags are read once on the host)."""
  stats = _lu_statistics(arc_scores, root_scores, lengths, single_root, kernels)
  flagged = np.asarray(stats['flagged'])
  if not flagged.any():
    return stats
  n = stats['mask'].shape[-1]
  batch_shape = flagged.shape
  where = np.flatnonzero(flagged)
  flat = {k: np.array(stats[k]).reshape((-1,) + stats[k].shape[len(batch_shape):])
          for k in ('arc_scores', 'root_scores', 'mask', 'log_z', 'arc_marginals', 'root_marginals')}
  chunk = _outside_chunk(where.size, n)
  for start in range(0, where.size, chunk):
    rows = where[start:start + chunk]
    slots = np.resize(rows, chunk)  # a full chunk: the slots past `rows` repeat elements and are dropped
    inputs = tuple(jnp.asarray(flat[k][slots]) for k in ('arc_scores', 'root_scores', 'mask'))
    exact = _exact_padded(inputs, single_root, kernels)
    log_z, arc_m, root_m = (np.asarray(x)[:rows.size] for x in exact)
    flat['log_z'][rows], flat['arc_marginals'][rows], flat['root_marginals'][rows] = log_z, arc_m, root_m
  unflat = lambda x: jnp.asarray(x.reshape(batch_shape + x.shape[1:]))
  stats = dict(stats, log_z=unflat(flat['log_z']), arc_marginals=unflat(flat['arc_marginals']),
               root_marginals=unflat(flat['root_marginals']))
  stats['logdet'] = stats['log_z'] - jnp.sum(stats['shift'], axis=-1)
  return stats


def log_partition(arc_scores, root_scores, lengths=None, *, single_root=True, exact=None):
  """log Z, the log-sum over all non-projective dependency trees of exp(tree score).

  `log Z = log det L + sum_m c[m]` with the column-shifted Laplacian `L` of Liu & Lapata eqs. 12-14
  (single root, Koo et al. 2007) or the multi-root Laplacian (root potentials on the diagonal).
  `jax.grad` of it equals `marginals` (closed-form JVP, one LU factorisation).

  Args:
    arc_scores: [..., n, n] float32/float64, `arc_scores[..., h, m]` log-potential of h -> m; -inf
      forbids the arc; the diagonal and padded entries are ignored.
    root_scores: [..., n] log-potentials of ROOT -> m.
    lengths: None (all n words are real) or int [...] number of real words in 0..n (concrete values
      outside raise ValueError; traced ones act as if clipped, which cannot be checked under jit).
    single_root: exactly one word hangs from ROOT if True; any number if False.
    exact: what the batch elements get whose LU result the error estimate flags (sharp scores): None
      (the setting of `exact_mode`, 'auto' by default: exact on concrete arrays, NaN inside a trace),
      'auto', 'flag' (NaN, zero derivative) or 'in_program' (the exact elimination inside the traced
      program, at a compile-time and per-call price paid by every call): see `exact_mode`.

  Returns:
    [...] log Z in the scores' dtype (0 for lengths == 0; NaN for a batch element with non-finite
    real scores, -inf for one that admits no tree; see the module docstring).
  """
  return _statistics(arc_scores, root_scores, lengths, single_root, exact)['log_z']


def marginals(arc_scores, root_scores, lengths=None, *, single_root=True, exact=None):
  """Arc and root marginal probabilities by the matrix-tree theorem (Liu & Lapata 2018, eq. 15).

  Differentiable to any order (the inverse carries the closed-form derivative `-X dL X`).

  Args:
    arc_scores: [..., n, n] float, see `log_partition`.
    root_scores: [..., n] float.
    lengths: None or int [...].
    single_root: see `log_partition`.
    exact: see `log_partition` and `exact_mode`.

  Returns:
    (arc_marginals [..., n, n], root_marginals [..., n]): `arc_marginals[..., h, m] = P(h -> m)`,
    `root_marginals[..., m] = P(ROOT -> m)`; for each real word `m`,
    `sum_h arc_marginals[h, m] + root_marginals[m] = 1`; exactly 0 on padding and forbidden arcs.
  """
  stats = _statistics(arc_scores, root_scores, lengths, single_root, exact)
  return stats['arc_marginals'], stats['root_marginals']


def score(arc_scores, root_scores, heads, lengths=None):
  """The score (log-potential) of given trees: sum over real words of the score of their arc.

  Args:
    arc_scores: [..., n, n] float.
    root_scores: [..., n] float.
    heads: [..., n] int, `heads[..., m]` the head word of `m` or -1 for ROOT; entries at or past
      `lengths` are ignored. Heads are not checked to form a tree (not possible under jit).
    lengths: None or int [...].

  Returns:
    [...] `sum_m root_scores[m] if heads[m] == -1 else arc_scores[heads[m], m]` over real `m`.
  """
  arc_scores, root_scores, _, mask = _prepare(arc_scores, root_scores, lengths)
  heads = jnp.asarray(heads)
  if heads.shape != root_scores.shape:
    raise ValueError(f'heads must have shape {root_scores.shape} (= root_scores.shape), got {heads.shape}')
  if not jnp.issubdtype(heads.dtype, jnp.integer):
    raise ValueError(f'heads must be integers, got dtype {heads.dtype}')
  n = root_scores.shape[-1]
  index = jnp.clip(heads, 0, n - 1).astype(jnp.int32)
  picked = jnp.take_along_axis(arc_scores, index[..., None, :], axis=-2)[..., 0, :]
  per_word = jnp.where(heads == -1, root_scores, picked)
  return jnp.sum(jnp.where(mask, per_word, 0.0), axis=-1)


def log_prob(arc_scores, root_scores, heads, lengths=None, *, single_root=True, exact=None):
  """log P(heads) = score(heads) - log Z under the tree CRF (the parser's CRF loss is its negative).

  Args:
    arc_scores, root_scores, heads, lengths: see `score`.
    single_root: see `log_partition`. A multi-root `heads` under `single_root=True` (or any
      non-tree) has probability 0 but this function does not detect it.
    exact: see `log_partition` and `exact_mode`.

  Returns:
    [...] log-probabilities.
  """
  return (score(arc_scores, root_scores, heads, lengths)
          - log_partition(arc_scores, root_scores, lengths, single_root=single_root, exact=exact))


def _expected_shifted_score(stats):
  """sum_T p(T) (score(T) - sum_m c[m]) = sum mu (s - c); terms with zero potential contribute 0."""
  arc_ok = _arc_mask(stats['mask']) & (stats['arc_scores'] > -jnp.inf)
  root_ok = stats['mask'] & (stats['root_scores'] > -jnp.inf)
  shift = stats['shift']
  arc_centred = jnp.where(arc_ok, stats['arc_scores'] - shift[..., None, :], 0.0)
  root_centred = jnp.where(root_ok, stats['root_scores'] - shift, 0.0)
  return (jnp.sum(stats['arc_marginals'] * arc_centred, axis=(-2, -1))
          + jnp.sum(stats['root_marginals'] * root_centred, axis=-1))


def entropy(arc_scores, root_scores, lengths=None, *, single_root=True, exact=None):
  """Entropy of the tree distribution, `H = log Z - sum_{h,m} P(h -> m) s[h, m] - sum_m P(ROOT -> m) r[m]`.

  Computed with the column-shifted scores (`log det L - sum mu (s - c)`, since every real word has
  exactly one head) to avoid cancellation between two large numbers.

  Args:
    arc_scores, root_scores, lengths, single_root, exact: see `log_partition`.

  Returns:
    [...] entropy in nats (0 for lengths <= 1 in the single-root case).
  """
  stats = _statistics(arc_scores, root_scores, lengths, single_root, exact)
  return stats['logdet'] - _expected_shifted_score(stats)


def kl_divergence(arc_p, root_p, arc_q, root_q, lengths=None, *, single_root=True, exact=None):
  """KL(p || q) between two tree distributions over the same words.

  `KL = log Z_q - log Z_p + sum_{h,m} P_p(h -> m) (p[h, m] - q[h, m]) + sum_m P_p(ROOT -> m)
  (root_p[m] - root_q[m])`; +inf when q forbids (-inf) a part that p allows.

  Args:
    arc_p, root_p: [..., n, n] and [..., n] scores of p.
    arc_q, root_q: the same shapes, scores of q.
    lengths: None or int [...], shared by p and q.
    single_root: see `log_partition`.
    exact: see `log_partition` and `exact_mode` (both distributions).

  Returns:
    [...] KL divergence in nats (>= 0).
  """
  arc_p, root_p, lengths, mask = _prepare(arc_p, root_p, lengths)
  arc_q, root_q, _, _ = _prepare(arc_q, root_q, lengths)
  if arc_q.shape != arc_p.shape:
    raise ValueError(f'arc_q must have the shape of arc_p {arc_p.shape}, got {arc_q.shape}')
  stats = _statistics(arc_p, root_p, lengths, single_root, exact)
  log_z_q = log_partition(arc_q, root_q, lengths, single_root=single_root, exact=exact)
  arc_ok = _arc_mask(mask) & (arc_p > -jnp.inf)
  root_ok = mask & (root_p > -jnp.inf)
  arc_diff = jnp.where(arc_ok, arc_p - arc_q, 0.0)
  root_diff = jnp.where(root_ok, root_p - root_q, 0.0)
  expected = (jnp.sum(stats['arc_marginals'] * arc_diff, axis=(-2, -1))
              + jnp.sum(stats['root_marginals'] * root_diff, axis=-1))
  return log_z_q - stats['log_z'] + expected


# ----------------------------------------------------------------------------------------------
# Exact sampling.


def _laplacian_column(arc_column, root_potential, m, single_root):
  """Column m of the Laplacian for the potentials arc_column [n] (heads of m) and root_potential."""
  n = arc_column.shape[-1]
  e_m = (jnp.arange(n) == m).astype(arc_column.dtype)
  if single_root:
    column = -arc_column + e_m * jnp.sum(arc_column)
    return column.at[0].set(root_potential)
  return -arc_column + e_m * (jnp.sum(arc_column) + root_potential)


def _draw_head(key, arc_probs, root_prob, top, m, root_taken, single_root):
  """Draws the head of word m from its conditional probabilities; only heads that keep a tree.

  Whatever rounding did to the probabilities, a head whose chain of already-drawn heads leads back
  to m (`top[h] == m`: a cycle) and, single root, a second ROOT child are never drawn: their exact
  probability is 0, and a sample is always a tree.

  Args:
    key: PRNG key.
    arc_probs: [n] P(h -> m | heads drawn so far); root_prob: [] P(ROOT -> m | ...).
    top: [n] int, the word at the top of each word's chain of drawn heads (n for ROOT).
    m: the word; root_taken: [] bool, a word already hangs from ROOT.
    single_root: root mode.

  Returns:
    (choice in 0..n (n = ROOT), updated top, updated root_taken, error): `error` is how far the
    given probabilities are from a distribution over the heads that keep a tree (|their sum - 1| plus
    the mass given to the others), a measure of the rounding in them (NaN if they are).
  """
  n = arc_probs.shape[-1]
  probs = jnp.concatenate([arc_probs, root_prob[None]])
  closes_cycle = jnp.concatenate([top == m, jnp.zeros((1,), bool)])
  if single_root:
    closes_cycle = closes_cycle.at[n].set(root_taken)
  kept = jnp.where(closes_cycle, 0.0, probs)
  error = jnp.abs(jnp.sum(kept) - 1.0) + jnp.sum(jnp.abs(jnp.where(closes_cycle, probs, 0.0)))
  # Rounding can make an allowed option's probability a tiny negative; forbidden ones are exactly 0.
  logits = jnp.log(jnp.maximum(kept, 0.0))  # log(0) = -inf: never drawn.
  choice = jax.random.categorical(key, logits)
  is_root = choice == n
  new_top = jnp.where(is_root, n, top[jnp.minimum(choice, n - 1)])
  return choice, jnp.where(top == m, new_top, top), root_taken | is_root, error


def _sample_one(key, arc_potentials, root_potentials, inverse, mask, single_root):
  """One sample for one sentence by sequential conditioning (chain rule over modifiers).

  Modifier m = 0, 1, ... draws its head from P(head(m) = . | heads of 0..m-1) (the marginals of the
  conditioned distribution, Koo et al. formulas), then its Laplacian column is replaced by the column
  of the chosen arc alone, with potential 1; the inverse is updated by Sherman-Morrison (O(n^2) per
  word, O(n^3) per tree, the scheme of Colbourn, Myrvold & Neufeld 1996). The denominator
  `1 + X[m] . u` is the probability of the drawn head over its potential, so it is positive. Exact up
  to the rounding of the inverse, which the returned error measures (`sample` sends the samples
  where it is too large to `_sample_one_exact`).

  Args:
    key: PRNG key.
    arc_potentials: [n, n]; root_potentials: [n]; inverse: [n, n] inverse of the Laplacian; mask: [n].
    single_root: root mode.

  Returns:
    (heads [n] int32 (-1 for ROOT and padding), [] the largest `_draw_head` error of the draws).
  """
  n = mask.shape[-1]

  def step(carry, m):
    inverse, top, root_taken, worst = carry
    row = inverse[m]
    arc_column = arc_potentials[:, m]
    if single_root:
      not_first = jnp.arange(n) != 0
      arc_probs = arc_column * (jnp.where(m != 0, row[m], 0.0) - jnp.where(not_first, row, 0.0))
      root_prob = root_potentials[m] * row[0]
    else:
      arc_probs = arc_column * (row[m] - row)
      root_prob = root_potentials[m] * row[m]
    choice, new_top, new_root_taken, error = _draw_head(jax.random.fold_in(key, m), arc_probs,
                                                        root_prob, top, m, root_taken, single_root)
    is_root = choice == n
    chosen = jnp.arange(n) == choice
    # The drawn arc's potential is a constant factor of every remaining tree, so it is set to 1:
    # keeping a small one made the conditioned Laplacian badly scaled, and the Sherman-Morrison error
    # grew ~100x faster (n = 200, N(0, 3^2) scores, float32: normalisation errors up to 4e-3 vs 3e-5).
    new_column = _laplacian_column(chosen.astype(arc_column.dtype), is_root.astype(arc_column.dtype),
                                   m, single_root)
    old_column = _laplacian_column(arc_column, root_potentials[m], m, single_root)
    u = new_column - old_column
    denominator = 1.0 + row @ u
    updated = inverse - jnp.outer(inverse @ u, row) / denominator
    real = mask[m]
    head = jnp.where(real & ~is_root, choice, -1).astype(jnp.int32)
    carry = (jnp.where(real, updated, inverse), jnp.where(real, new_top, top),
             jnp.where(real, new_root_taken, root_taken),
             jnp.where(real & ~(error <= worst), error, worst))  # NaN errors stick
    return carry, head

  init = _inputs.vary_like((inverse, jnp.arange(n), jnp.zeros((), bool), jnp.zeros((), inverse.dtype)),
                           arc_potentials, root_potentials, inverse, mask)
  (_, _, _, worst), heads = lax.scan(step, init, jnp.arange(n))
  return heads, worst


def _sample_one_exact(key, arc_scores, root_scores, mask, single_root):
  """`_sample_one` with the conditionals from the exact elimination, for sharp scores.

  Each step takes the marginals of the conditioned distribution as the gradient of
  `_eliminate_sentence` (`_elimination_marginals`; the drawn columns reduced to their one arc), so
  nothing is lost to rounding: O(n^3) per word, O(n^4) per tree.

  Args:
    key: PRNG key (the same draws as `_sample_one` would make from exact conditionals).
    arc_scores: [n, n] log-potentials, -inf on the diagonal, on padding and on forbidden arcs.
    root_scores: [n] log-potentials, -inf on padding.
    mask: [n] bool; single_root: root mode.

  Returns:
    heads [n] int32 (-1 for ROOT and padding).
  """
  n = mask.shape[-1]
  conditionals = lambda arc, root: _elimination_marginals(arc, root, mask, single_root)[1:]

  def step(carry, m):
    arc, root, top, root_taken = carry
    arc_marginals, root_marginals = conditionals(arc, root)
    choice, new_top, new_root_taken, _ = _draw_head(
        jax.random.fold_in(key, m), arc_marginals[:, m], root_marginals[m], top, m, root_taken,
        single_root)
    is_root = choice == n
    real = mask[m]
    keep = (jnp.arange(n) == choice) | ~real
    arc = arc.at[:, m].set(jnp.where(keep, arc[:, m], -jnp.inf))
    root = root.at[m].set(jnp.where(is_root | ~real, root[m], -jnp.inf))
    head = jnp.where(real & ~is_root, choice, -1).astype(jnp.int32)
    carry = (arc, root, jnp.where(real, new_top, top), jnp.where(real, new_root_taken, root_taken))
    return carry, head

  init = _inputs.vary_like((arc_scores, root_scores, jnp.arange(n), jnp.zeros((), bool)),
                           arc_scores, root_scores, mask)
  _, heads = lax.scan(step, init, jnp.arange(n))
  return heads


def sample(key, arc_scores, root_scores, lengths=None, *, single_root=True, num_samples=None):
  """Exact samples from the Gibbs distribution P(T) = exp(score(T)) / Z over non-projective trees.

  Sequential conditioning with Sherman-Morrison updates of the Laplacian inverse (see
  `_sample_one`): O(n^3) per tree after one O(n^3) factorisation shared by all samples of a
  sentence, a fixed-length `lax.scan` on device (no host callback, no rejection). Sentences whose
  LU error estimate is too large for `marginals` (sharp scores, see the module docstring) draw their
  conditionals from the exact elimination instead (`_sample_one_exact`, O(n^4) per tree), and so do
  samples whose conditionals drifted (see `_sample_one`); only those samples are redrawn when they
  are few (`_replace_flagged`).

  Args:
    key: a `jax.random` key.
    arc_scores: [..., n, n] float; -inf arcs are never sampled.
    root_scores: [..., n] float.
    lengths: None or int [...].
    single_root: see `log_partition`.
    num_samples: None for one sample per sentence, or a positive int.

  Returns:
    heads int32, [..., n] if `num_samples` is None else [num_samples, ..., n]; -1 for ROOT and at
    padded positions. Every sample is a tree of the root mode (a head that would close a cycle, or a
    second ROOT child, is never drawn). A batch element whose `log_partition` is NaN or -inf gives
    meaningless heads.
  """
  if num_samples is not None and (not isinstance(num_samples, int) or num_samples < 1):
    raise ValueError(f'num_samples must be None or a positive int, got {num_samples!r}')
  arc_scores, root_scores, _, mask = _prepare(arc_scores, root_scores, lengths)
  arc_scores = lax.stop_gradient(arc_scores)
  root_scores = lax.stop_gradient(root_scores)
  arc_potentials, root_potentials, _, _ = _potentials(arc_scores, root_scores, mask, single_root)
  lap = _laplacian(arc_potentials, root_potentials, mask, single_root)
  _, inverse = _lu_logdet_and_inverse(lap)
  exact = _needs_exact(inverse, _laplacian_column_abs_sums(arc_potentials, root_potentials, mask,
                                                           single_root))

  batch_shape = mask.shape[:-1]
  n = mask.shape[-1]
  size = 1
  for d in batch_shape:
    size *= d
  flat = lambda x, tail: x.reshape((size,) + tail)
  flat_mask = flat(mask, (n,))
  count = 1 if num_samples is None else num_samples
  keys = jax.random.split(key, (count, size))
  fast = jax.vmap(functools.partial(_sample_one, single_root=single_root))  # over the flat batch
  args = (flat(arc_potentials, (n, n)), flat(root_potentials, (n,)), flat(inverse, (n, n)), flat_mask)
  heads, worst = jax.vmap(lambda k: fast(k, *args))(keys)  # [count, size, n], [count, size]
  # Sherman-Morrison updates can lose accuracy as the conditioning goes on even where the first
  # inverse was fine; the conditionals' sum is a free check (it is 1 in exact arithmetic).
  exact = flat(exact, ())[None, :] | ~(worst < _lu_tolerance(worst.dtype))

  flat_keys = keys.reshape((count * size,) + keys.shape[2:])  # typed or raw uint32 keys
  slow = jax.vmap(functools.partial(_sample_one_exact, single_root=single_root))

  def exact_heads(inputs):  # keys and sentences of some of the flat [count * size] samples
    sample_keys, sentence = inputs
    arc, root = _forbid_padding(flat(arc_scores, (n, n))[sentence], flat(root_scores, (n,))[sentence],
                                flat_mask[sentence])
    return slow(sample_keys, arc, root, flat_mask[sentence])

  sentences = jnp.tile(jnp.arange(size), count)
  heads = _replace_flagged(exact.reshape(-1), exact_heads, (flat_keys, sentences),
                           heads.reshape(count * size, n), _chunk_size(count * size, n))
  heads = heads.reshape((count,) + batch_shape + (n,))
  return heads[0] if num_samples is None else heads
