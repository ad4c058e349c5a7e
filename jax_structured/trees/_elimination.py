"""The exact elimination of the matrix-tree theorem: subtraction-free, in log space and linear.

Sharp scores: LU forms the diagonal `sum_h A[h, m] + r[m]` and loses potentials below eps
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
enumeration references to a few ulps up to |scores| ~ 200. The linear elimination is about 20x faster
than the log-space one (docs/decisions/2026-11-27-exact-path-linear-elimination-and-flat-scans.md).
"""
import math

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from jax_structured.trees import _inputs
from jax_structured.trees._lu_path import _arc_mask
from jax_structured.trees._lu_path import _potentials


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
# sweeps make programs that differentiate `marginals` smaller and faster to compile. (The linear
# elimination's sweeps are always flat: its records are vectors, `_linear_marginals`.)
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
  # so checkpointed segments would save nothing and only cost time.
  final, records = lax.scan(lambda c, _: step(*c), init, None, length=n)
  d_weights, d_excess, d_first_order = lax.scan(step_back, start, records, reverse=True)[0]
  arc_m = jnp.where(_arc_mask(mask), arc_potentials * d_weights, 0.0)
  root_m = jnp.where(mask, root_potentials * (d_first_order if single_root else d_excess), 0.0)
  log_z = final[0][-1]
  return log_z + log_scale, arc_m, root_m, _linear_trusted(log_z, arc_potentials, root_potentials, mask)


def _forbid_padding(arc_scores, root_scores, mask):
  """The scores with -inf on the diagonal and wherever a padded word is head or modifier."""
  return (jnp.where(_arc_mask(mask), arc_scores, -jnp.inf), jnp.where(mask, root_scores, -jnp.inf))
