"""Projective dependency trees: inside-outside (log space) and Eisner's algorithm, batched, on device.

First-order projective parsing with Eisner's (1996) span charts, as used for structured attention by
Kim et al. (2017, "Structured Attention Networks", syntactic tree attention). With the sentence
written as nodes `0..n` (node 0 = ROOT, node `i` = word `i - 1`) and arc log-potentials `s[h, m]`,
the four charts over spans `[i, j]` are (`(+)` is the semiring sum: log-sum-exp or max)

  I_R[i, j] = s[i, j] + (+)_{i <= k < j} C_R[i, k] + C_L[k + 1, j]   (arc i -> j, incomplete)
  I_L[i, j] = s[j, i] + (+)_{i <= k < j} C_R[i, k] + C_L[k + 1, j]   (arc j -> i, incomplete)
  C_R[i, j] = (+)_{i < k <= j} I_R[i, k] + C_R[k, j]                 (head i, complete)
  C_L[i, j] = (+)_{i <= k < j} C_L[i, k] + I_L[k, j]                 (head j, complete)

with `C_R[i, i] = C_L[i, i] = 0`. For `single_root=False` the ROOT node heads any number of words and
`log Z = C_R[0, L]` (`L` = number of real words); for `single_root=True` ROOT heads exactly one word `m`:
`log Z = (+)_{1 <= m <= L} s[0, m] + C_L[1, m] + C_R[m, L]` (the ROOT-free sub-charts are those of the
same table). Spans ending at `L` never look past `L`, so reading the result at `L` makes padding exact.

Layout: each chart is stored as `[width, start]`, and the charts read "from the right" also as
`[N - 1 - width, end]` inside a -inf border; one `lax.fori_loop` step fills every span of one width at
once (all starts x all split points as one [N, N] reduction whose operands are static-shape
`dynamic_slice`s, so neither direction of autodiff needs a gather or scatter). A sentence costs `n`
sequential steps of O(n^2) parallel work, like torch-struct's width loop, with fixed shapes that
compile once for any length.

Marginals are the gradient of log Z (this is exactly inside-outside: Eisner 2016, "Inside-Outside and
Forward-Backward Algorithms Are Just Backprop"). The best tree is the gradient of the max-semiring value
where each max is a "select" whose gradient is one-hot at the first maximiser, so the gradient is the 0/1
indicator of the backtracked Viterbi tree (ties broken deterministically).
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

__all__ = ['projective_log_partition', 'projective_marginals', 'projective_mst']


def _logsumexp(x, axis=-1):
  """log-sum-exp that returns -inf (with zero, not NaN, gradients) when every entry is -inf."""
  top = jnp.max(x, axis=axis, keepdims=True)
  top = lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0))
  total = jnp.sum(jnp.exp(x - top), axis=axis)
  positive = total > 0
  return jnp.where(positive, jnp.log(jnp.where(positive, total, 1.0)) + jnp.squeeze(top, axis),
                   -jnp.inf)


def _select_max(x, axis=-1):
  """max whose gradient is one-hot at the first maximiser (Viterbi backtracking through autodiff)."""
  first = jnp.argmax(x, axis=axis, keepdims=True)
  chosen = lax.broadcasted_iota(jnp.int32, x.shape, axis % x.ndim) == first
  return jnp.sum(jnp.where(chosen, x, 0), axis=axis)


_SEMIRINGS = {'log': _logsumexp, 'max': _select_max}


def _inside(scores, length, single_root, semiring):
  """Inside value of one sentence.

  Args:
    scores: float [N, N] node log-potentials `scores[h, m]`, node 0 = ROOT, N = n + 1; entries touching
      padding must be finite (they never influence the result).
    length: int32 scalar, number of real words L (0 <= L <= n).
    single_root: bool (static).
    semiring: 'log' or 'max' (static).

  Returns:
    scalar: log Z (or the best tree score) of the projective trees over words 1..L.
  """
  plus = _SEMIRINGS[semiring]
  n_nodes = scores.shape[-1]
  dtype = scores.dtype
  neg_inf = jnp.array(-jnp.inf, dtype)
  scores = scores.at[:, 0].set(neg_inf)                     # nothing heads ROOT
  node = jnp.arange(n_nodes)
  width, start = node[:, None], node[None, :]
  end = start + width
  fits = end <= n_nodes - 1
  # Arc scores of every span as [width, start]: right arcs start -> end, left arcs end -> start.
  arc_r = jnp.where(fits, scores[start, jnp.minimum(end, n_nodes - 1)], neg_inf)
  arc_l = jnp.where(fits, scores[jnp.minimum(end, n_nodes - 1), start], neg_inf)
  # Charts by [width, start] (rows not yet computed are -inf, which masks the split sums), and the
  # ones read "backwards" also by [N - 1 - width, end] inside a -inf border of N rows and columns,
  # so that every split sum is a plain slice (cheap to differentiate, no gather/scatter).
  by_start = jnp.where(width == 0, jnp.zeros((), dtype), jnp.full((n_nodes, n_nodes), neg_inf))
  by_end = jnp.full((2 * n_nodes, 2 * n_nodes), neg_inf).at[n_nodes - 1, :n_nodes].set(0)
  empty_start = jnp.full((n_nodes, n_nodes), neg_inf)
  empty_end = jnp.full((2 * n_nodes, 2 * n_nodes), neg_inf)

  def window(table, row, w):
    return lax.dynamic_slice(table, (row, w), (n_nodes, n_nodes))   # [t, i]

  def put(table, row, col, values):
    return lax.dynamic_update_slice(table, values[None, :], (row, col))

  def body(w, charts):
    comp_r, comp_l, inc_r, comp_r_end, comp_l_end, inc_l_end = charts
    # Incomplete spans (i, i + w), split k = i + t: C_R[i, k] + C_L[k + 1, i + w], t in [0, w).
    inner = plus(comp_r + window(comp_l_end, n_nodes - w, w), axis=0)
    new_ir = lax.dynamic_index_in_dim(arc_r, w, keepdims=False) + inner
    new_il = lax.dynamic_index_in_dim(arc_l, w, keepdims=False) + inner
    inc_r = put(inc_r, w, 0, new_ir)
    inc_l_end = put(inc_l_end, n_nodes - 1 - w, w, new_il)
    # Complete spans: C_R = I_R[i, i + t] + C_R[i + t, i + w] (t in [1, w]),
    #                 C_L = C_L[i, i + t] + I_L[i + t, i + w] (t in [0, w)).
    new_cr = plus(inc_r + window(comp_r_end, n_nodes - 1 - w, w), axis=0)
    new_cl = plus(comp_l + window(inc_l_end, n_nodes - 1 - w, w), axis=0)
    return (put(comp_r, w, 0, new_cr), put(comp_l, w, 0, new_cl), inc_r,
            put(comp_r_end, n_nodes - 1 - w, w, new_cr), put(comp_l_end, n_nodes - 1 - w, w, new_cl),
            inc_l_end)

  init = (by_start, by_start, empty_start, by_end, by_end, empty_end)
  comp_r, comp_l = lax.fori_loop(1, n_nodes, body, init)[:2]
  if not single_root:
    return comp_r[length, 0]
  # ROOT -> m with C_L[1, m] (width m - 1, start 1) and C_R[m, L] (width L - m, start m).
  m = jnp.arange(1, n_nodes)
  real = m <= length
  left = comp_l[jnp.clip(m - 1, 0, n_nodes - 1), 1]
  right = comp_r[jnp.clip(length - m, 0, n_nodes - 1), m]
  total = plus(jnp.where(real, scores[0, m] + left + right, neg_inf))
  return jnp.where(length > 0, total, jnp.zeros((), scores.dtype))


def _node_scores(arc_scores, root_scores, lengths):
  """[B, N, N] node scores with ROOT at 0; entries touching padding set to 0 (finite, never used)."""
  n = arc_scores.shape[-1]
  scores = jnp.zeros(arc_scores.shape[:-2] + (n + 1, n + 1), arc_scores.dtype)
  scores = scores.at[:, 1:, 1:].set(arc_scores).at[:, 0, 1:].set(root_scores)
  node = jnp.arange(n + 1)
  real = node[None, :] <= lengths[:, None]
  return jnp.where(real[:, :, None] & real[:, None, :], scores, 0.0)


def _batched_value(arc_scores, root_scores, lengths, single_root, semiring):
  scores = _node_scores(arc_scores, root_scores, lengths)
  return jax.vmap(functools.partial(_inside, single_root=single_root, semiring=semiring))(
      scores, lengths)


@functools.partial(jax.jit, static_argnames=('single_root',))
def _log_partition(arc_scores, root_scores, lengths, single_root):
  return _batched_value(arc_scores, root_scores, lengths, single_root, 'log')


@functools.partial(jax.jit, static_argnames=('single_root', 'semiring'))
def _gradients(arc_scores, root_scores, lengths, single_root, semiring):
  def total(a, r):
    return jnp.sum(_batched_value(a, r, lengths, single_root, semiring))
  return jax.grad(total, argnums=(0, 1))(arc_scores, root_scores)


def _prepare(arc_scores, root_scores, lengths):
  """Validates shapes; returns flat (arc [B, n, n], root [B, n], lengths [B]), batch shape, n."""
  arc_scores = jnp.asarray(arc_scores)
  root_scores = jnp.asarray(root_scores)
  if arc_scores.ndim < 2 or arc_scores.shape[-1] != arc_scores.shape[-2]:
    raise ValueError(f'arc_scores must have shape [..., n, n], got {arc_scores.shape}')
  batch_shape, n = arc_scores.shape[:-2], arc_scores.shape[-1]
  if root_scores.shape != batch_shape + (n,):
    raise ValueError(f'root_scores must have shape {batch_shape + (n,)} to match arc_scores '
                     f'{arc_scores.shape}, got {root_scores.shape}')
  dtype = jnp.result_type(arc_scores.dtype, root_scores.dtype)
  if not jnp.issubdtype(dtype, jnp.floating):
    dtype = jnp.float32
  if lengths is None:
    lengths = jnp.full(batch_shape, n, jnp.int32)
  lengths = jnp.asarray(lengths)
  if lengths.shape != batch_shape:
    raise ValueError(f'lengths must have shape {batch_shape} (the batch shape of arc_scores '
                     f'{arc_scores.shape}), got {lengths.shape}')
  if not isinstance(lengths, jax.core.Tracer):
    values = np.asarray(lengths)
    if values.size and (values.min() < 0 or values.max() > n):
      raise ValueError(f'lengths must lie in [0, {n}] (n = arc_scores.shape[-1]), got values in '
                       f'[{values.min()}, {values.max()}]')
  flat = int(np.prod(batch_shape))
  return (arc_scores.astype(dtype).reshape(flat, n, n), root_scores.astype(dtype).reshape(flat, n),
          jnp.clip(lengths.astype(jnp.int32), 0, n).reshape(flat)), batch_shape, n


def projective_log_partition(arc_scores, root_scores, lengths=None, *, single_root=True):
  """log Z over projective dependency trees (inside algorithm, log space; Kim et al. 2017).

  Args:
    arc_scores: float [..., n, n]; `arc_scores[..., h, m]` log-potential of word h -> word m.
    root_scores: float [..., n]; log-potential of ROOT -> word m.
    lengths: optional int [...]; number of real words (default n); padding is ignored exactly.
    single_root: if True exactly one word hangs from ROOT; otherwise any number.

  Returns:
    float [...] (dtype of the scores): `log sum_{projective trees y} exp(sum_{(h, m) in y} s(h, m))`;
    0 for empty sentences.
  """
  (arc, root, lengths), batch_shape, n = _prepare(arc_scores, root_scores, lengths)
  if n == 0:
    return jnp.zeros(batch_shape, arc.dtype)
  return _log_partition(arc, root, lengths, bool(single_root)).reshape(batch_shape)


def projective_marginals(arc_scores, root_scores, lengths=None, *, single_root=True):
  """Arc marginals of the projective tree distribution (inside-outside as the gradient of log Z).

  Args:
    arc_scores: float [..., n, n]; `arc_scores[..., h, m]` log-potential of word h -> word m.
    root_scores: float [..., n]; log-potential of ROOT -> word m.
    lengths: optional int [...]; number of real words (default n).
    single_root: if True exactly one word hangs from ROOT; otherwise any number.

  Returns:
    (arc_marginals [..., n, n], root_marginals [..., n]): `P(h -> m)` and `P(ROOT -> m)`; for every real
    word the column sum plus the root marginal is 1; padded entries are 0.
  """
  (arc, root, lengths), batch_shape, n = _prepare(arc_scores, root_scores, lengths)
  if n == 0:
    return jnp.zeros(batch_shape + (0, 0), arc.dtype), jnp.zeros(batch_shape + (0,), arc.dtype)
  arc_m, root_m = _gradients(arc, root, lengths, bool(single_root), 'log')
  return arc_m.reshape(batch_shape + (n, n)), root_m.reshape(batch_shape + (n,))


def projective_mst(arc_scores, root_scores, lengths=None, *, single_root=True):
  """Highest-scoring projective tree (Eisner's algorithm, max semiring; Eisner 1996).

  Args:
    arc_scores: float [..., n, n]; `arc_scores[..., h, m]` score of word h -> word m.
    root_scores: float [..., n]; score of ROOT -> word m.
    lengths: optional int [...]; number of real words (default n).
    single_root: if True exactly one word hangs from ROOT; otherwise any number.

  Returns:
    heads: int32 [..., n], head word of each word, -1 for ROOT and for padding. Ties are broken
    deterministically.
  """
  (arc, root, lengths), batch_shape, n = _prepare(arc_scores, root_scores, lengths)
  if n == 0:
    return jnp.zeros(batch_shape + (0,), jnp.int32)
  arc_g, root_g = _gradients(arc, root, lengths, bool(single_root), 'max')
  # Column m of [root; arcs] is one-hot at the head of m (ROOT in row 0).
  chosen = jnp.concatenate([root_g[:, None, :], arc_g], axis=1)
  heads = jnp.argmax(chosen, axis=1).astype(jnp.int32) - 1
  real = jnp.arange(n)[None, :] < lengths[:, None]
  return jnp.where(real, heads, -1).reshape(batch_shape + (n,))
