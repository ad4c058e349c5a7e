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

Layout and cost. Every chart is stored twice where it is read both ways: by `[width, start]`
("S" tables, [N, N]) and by `[N - 1 - width, end]` inside a -inf border ("E" tables, [2N, 2N]), so
that for a fixed width `w` every split sum above is an elementwise sum of two `[splits, starts]`
windows, one static slice of an S table and one `dynamic_slice` of an E table, followed by a
reduction over the splits. Entries not computed yet are -inf, which masks the out-of-range splits.
A `lax.fori_loop` fills one width per step for all starts at once. The widths are cut into a few
chunks with their own static window shapes (at most `w_max` splits and `N - w_min` starts), so the
work is close to the `sum_w w (N - w) ~ N^3 / 6` terms of the triangular chart instead of `N^3`
for full `[N, N]` windows.

Marginals: inside-outside by hand. log Z is differentiable (a `jax.custom_jvp` whose rule computes
the marginals), but the marginals are not obtained by differentiating the inside loop: plain reverse
mode through it stores every step's `[B, splits, starts]` operands (O(B N^3) memory traffic). The
outside pass below walks the widths backwards, recomputes each step's split weights from the final
inside charts (softmax over the splits, or one-hot at the first maximiser for the max semiring) and
pushes the adjoints into the same windows (Eisner 2016, "Inside-Outside and Forward-Backward
Algorithms Are Just Backprop": this is exactly the backward pass, with O(B N^2) residuals).
The best tree is the same backward pass in the max semiring, i.e. the 0/1 indicator of the
backtracked Viterbi tree (ties broken deterministically: first split, lowest ROOT child).
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from jax_structured.trees import _inputs

__all__ = ['projective_log_partition', 'projective_marginals', 'projective_mst']

# Width chunks (each a fori_loop with its own static window shapes): one per `_CHUNK_WIDTHS` widths,
# at most `_MAX_CHUNKS` (more chunks trim more of the square windows but compile more loops).
_MAX_CHUNKS, _CHUNK_WIDTHS = 8, 8


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


def _softmax_weights(x, total, axis):
  """d logsumexp(x) / dx given `total = logsumexp(x)`; all zero where `total` is -inf."""
  finite = jnp.isfinite(total)
  top = jnp.expand_dims(jnp.where(finite, total, 0.0), axis)
  return jnp.where(jnp.expand_dims(finite, axis), jnp.exp(x - top), 0.0)


def _argmax_weights(x, total, axis):
  """d select_max(x) / dx: one-hot at the first maximiser; all zero where `total` is -inf."""
  first = jnp.argmax(x, axis=axis, keepdims=True)
  chosen = lax.broadcasted_iota(jnp.int32, x.shape, axis) == first
  return (chosen & jnp.expand_dims(jnp.isfinite(total), axis)).astype(x.dtype)


_SEMIRINGS = {'log': (_logsumexp, _softmax_weights), 'max': (_select_max, _argmax_weights)}


def _width_chunks(n_nodes):
  """Static chunks of widths 1..N-1 as (first, last + 1, splits T = last, starts S = N - first)."""
  widths = n_nodes - 1
  count = min(_MAX_CHUNKS, max(1, widths // _CHUNK_WIDTHS))
  bounds = np.unique(np.round(np.linspace(1, n_nodes, count + 1)).astype(int))
  return [(int(lo), int(hi), int(hi) - 1, n_nodes - int(lo)) for lo, hi in zip(bounds[:-1], bounds[1:])]


def _window(table, row, col, rows, cols):
  """table[:, row:row + rows, col:col + cols] for [B, R, C] tables (row/col may be traced)."""
  zero = jnp.zeros((), jnp.int32)
  return lax.dynamic_slice(table, (zero, jnp.asarray(row, jnp.int32), jnp.asarray(col, jnp.int32)),
                           (table.shape[0], rows, cols))


def _put(table, values, row, col):
  """Writes `values` [B, rows, cols] into table[:, row:, col:] (row/col may be traced)."""
  zero = jnp.zeros((), jnp.int32)
  return lax.dynamic_update_slice(
      table, values, (zero, jnp.asarray(row, jnp.int32), jnp.asarray(col, jnp.int32)))


def _add(table, values, row, col):
  """table[:, row:, col:] += values."""
  return _put(table, _window(table, row, col, values.shape[1], values.shape[2]) + values, row, col)


# Which tables each split sum reads: (S table, its first row, E table, row of the E window - (N - w)).
_OPERANDS = {'a': ('cr_s', 0, 'cl_e', 0), 'b': ('ir_s', 1, 'cr_e', 0), 'c': ('cl_s', 0, 'il_e', -1)}


def _split_sum(tables, name, w, n_splits, n_starts):
  """One `[B, T, S]` split sum of width `w` (before the reduction over the splits t):

    a[t, i] = C_R[i, i + t] + C_L[i + t + 1, i + w]        (incomplete spans, t in [0, w))
    b[t, i] = I_R[i, i + t + 1] + C_R[i + t + 1, i + w]    (complete right,   t in [0, w))
    c[t, i] = C_L[i, i + t] + I_L[i + t, i + w]            (complete left,    t in [0, w))

  Splits t >= w are masked with -inf explicitly (the S tables hold wider spans after the pass).
  """
  s_name, s_row, e_name, e_shift = _OPERANDS[name]
  n_nodes = tables['cr_s'].shape[1]
  total = (tables[s_name][:, s_row:s_row + n_splits, :n_starts]
           + _window(tables[e_name], n_nodes - w + e_shift, w, n_splits, n_starts))
  in_range = lax.broadcasted_iota(jnp.int32, (1, n_splits, 1), 1) < w
  return jnp.where(in_range, total, jnp.array(-jnp.inf, total.dtype))


def _inside_tables(arc_r, arc_l, semiring):
  """Inside charts of a batch of sentences (the table layout of the module docstring).

  Args:
    arc_r: float [B, N, N], `arc_r[:, w, i]` = score of the arc node i -> node i + w (-inf where
      i + w > N - 1).
    arc_l: float [B, N, N], `arc_l[:, w, i]` = score of the arc node i + w -> node i.
    semiring: 'log' or 'max' (static).

  Returns:
    dict of the final charts: `cr_s`, `cl_s`, `ir_s`, `inner` ([B, N, N], by [width, start]) and
    `cr_e`, `cl_e`, `il_e` ([B, 2N, 2N], by [N - 1 - width, end]).
  """
  plus = _SEMIRINGS[semiring][0]
  batch, n_nodes = arc_r.shape[0], arc_r.shape[1]
  dtype = arc_r.dtype
  square = jnp.full((batch, n_nodes, n_nodes), -jnp.inf, dtype)
  border = jnp.full((batch, 2 * n_nodes, 2 * n_nodes), -jnp.inf, dtype)
  width0_s = square.at[:, 0, :].set(0)                       # C[i, i] = 0
  width0_e = border.at[:, n_nodes - 1, :n_nodes].set(0)
  tables = dict(cr_s=width0_s, cl_s=width0_s, ir_s=square, inner=square,
                cr_e=width0_e, cl_e=width0_e, il_e=border)

  for lo, hi, n_splits, n_starts in _width_chunks(n_nodes):
    def body(w, t, n_splits=n_splits, n_starts=n_starts):
      inner = plus(_split_sum(t, 'a', w, n_splits, n_starts), axis=1)[:, None, :]                     # [B, 1, S]
      new_ir = _window(arc_r, w, 0, 1, n_starts) + inner
      new_il = _window(arc_l, w, 0, 1, n_starts) + inner
      t = dict(t, inner=_put(t['inner'], inner, w, 0), ir_s=_put(t['ir_s'], new_ir, w, 0),
               il_e=_put(t['il_e'], new_il, n_nodes - 1 - w, w))
      new_cr = plus(_split_sum(t, 'b', w, n_splits, n_starts), axis=1)[:, None, :]
      new_cl = plus(_split_sum(t, 'c', w, n_splits, n_starts), axis=1)[:, None, :]
      return dict(t, cr_s=_put(t['cr_s'], new_cr, w, 0), cl_s=_put(t['cl_s'], new_cl, w, 0),
                  cr_e=_put(t['cr_e'], new_cr, n_nodes - 1 - w, w),
                  cl_e=_put(t['cl_e'], new_cl, n_nodes - 1 - w, w))
    tables = lax.fori_loop(lo, hi, body, _inputs.vary_like(tables, arc_r, arc_l))
  return tables


def _outside(tables, g_cr, g_cl, semiring):
  """Backward (outside) pass: adjoints of the arc scores from adjoints of the complete charts.

  Args:
    tables: the output of `_inside_tables`.
    g_cr, g_cl: float [B, N, N], d(value) / d C_R and d C_L by [width, start] (from the readout).
    semiring: 'log' or 'max' (static).

  Returns:
    (g_arc_r, g_arc_l): float [B, N, N], d(value) / d arc_r and d arc_l (layout of the inputs of
    `_inside_tables`).
  """
  weights = _SEMIRINGS[semiring][1]
  n_nodes = g_cr.shape[1]
  zeros_e = jnp.zeros(tables['cr_e'].shape, g_cr.dtype)

  def final_rows(g, w):
    """Adjoints of C_R, C_L at width w ([B, 1, N] each, by start): the S plus the E contributions.

    Read at the end of the step of width w + 1, after its updates: reading a table before updating
    it in the same step would make XLA copy the whole table every step instead of updating it in
    place.
    """
    row = n_nodes - 1 - w
    return (_window(g['cr_s'], w, 0, 1, n_nodes) + _window(g['cr_e'], row, w, 1, n_nodes),
            _window(g['cl_s'], w, 0, 1, n_nodes) + _window(g['cl_e'], row, w, 1, n_nodes))

  grads = dict(cr_s=g_cr, cl_s=g_cl, ir_s=jnp.zeros_like(g_cr), cr_e=zeros_e, cl_e=zeros_e,
               il_e=zeros_e, arc_r=jnp.zeros_like(g_cr), arc_l=jnp.zeros_like(g_cr))
  grads['rows'] = final_rows(grads, n_nodes - 1)

  for lo, hi, n_splits, n_starts in reversed(_width_chunks(n_nodes)):
    def body(step, g, hi=hi, n_splits=n_splits, n_starts=n_starts):
      w = hi - 1 - step
      e_row = n_nodes - 1 - w
      a, b, c = (_split_sum(tables, name, w, n_splits, n_starts) for name in 'abc')
      # Complete spans of width w: their adjoints are final (all their uses are wider or the readout).
      g_cr, g_cl = (row[:, :, :n_starts] for row in g['rows'])
      g_b = g_cr * weights(b, _window(tables['cr_s'], w, 0, 1, n_starts)[:, 0], 1)
      g_c = g_cl * weights(c, _window(tables['cl_s'], w, 0, 1, n_starts)[:, 0], 1)
      g = dict(g, ir_s=_add(g['ir_s'], g_b, 1, 0), cr_e=_add(g['cr_e'], g_b, n_nodes - w, w),
               cl_s=_add(g['cl_s'], g_c, 0, 0), il_e=_add(g['il_e'], g_c, e_row, w))
      # Incomplete spans of width w (used only by complete spans of width >= w, done above).
      g_ir = _window(g['ir_s'], w, 0, 1, n_starts)
      g_il = _window(g['il_e'], e_row, w, 1, n_starts)
      g_a = (g_ir + g_il) * weights(a, _window(tables['inner'], w, 0, 1, n_starts)[:, 0], 1)
      g = dict(g, arc_r=_put(g['arc_r'], g_ir, w, 0), arc_l=_put(g['arc_l'], g_il, w, 0),
               cr_s=_add(g['cr_s'], g_a, 0, 0), cl_e=_add(g['cl_e'], g_a, n_nodes - w, w))
      return dict(g, rows=final_rows(g, w - 1))
    grads = lax.fori_loop(0, hi - lo, body, _inputs.vary_like(grads, tables['cr_s'], g_cr, g_cl))
  return grads['arc_r'], grads['arc_l']


def _node_scores(arc_scores, root_scores, lengths):
  """[B, N, N] node scores with ROOT at 0; entries touching padding set to 0 (finite, never used)."""
  n = arc_scores.shape[-1]
  scores = jnp.zeros(arc_scores.shape[:-2] + (n + 1, n + 1), arc_scores.dtype)
  scores = scores.at[:, 1:, 1:].set(arc_scores).at[:, 0, 1:].set(root_scores)
  node = jnp.arange(n + 1)
  real = node[None, :] <= lengths[:, None]
  return jnp.where(real[:, :, None] & real[:, None, :], scores, 0.0)


def _span_arcs(arc_scores, root_scores, lengths):
  """Arc scores of every span by [width, start]: (arc_r, arc_l) float [B, N, N] and root [B, n].

  `arc_r[:, w, i]` scores node i -> node i + w, `arc_l[:, w, i]` node i + w -> node i; -inf where
  the span does not fit and for arcs into ROOT.
  """
  scores = _node_scores(arc_scores, root_scores, lengths)
  n_nodes = scores.shape[-1]
  neg_inf = jnp.array(-jnp.inf, scores.dtype)
  scores = scores.at[:, :, 0].set(neg_inf)                   # nothing heads ROOT
  node = jnp.arange(n_nodes)
  width, start = node[:, None], node[None, :]
  end = jnp.minimum(start + width, n_nodes - 1)
  fits = (start + width <= n_nodes - 1)[None]
  arc_r = jnp.where(fits, scores[:, start, end], neg_inf)
  arc_l = jnp.where(fits, scores[:, end, start], neg_inf)
  return arc_r, arc_l, scores[:, 0, 1:]


def _readout(comp_r, comp_l, root, lengths, single_root, semiring):
  """Value of each sentence from the complete charts [B, N, N] (by [width, start]) -> [B].

  `single_root=False`: C_R[0, L]; `single_root=True`: (+)_m s[0, m] + C_L[1, m] + C_R[m, L].
  """
  plus = _SEMIRINGS[semiring][0]
  batch, n_nodes = comp_r.shape[0], comp_r.shape[1]
  rows = jnp.arange(batch)
  if not single_root:
    return comp_r[rows, lengths, 0]
  m = jnp.arange(1, n_nodes)
  real = m[None, :] <= lengths[:, None]
  left = comp_l[:, jnp.clip(m - 1, 0, n_nodes - 1), 1]
  right = comp_r[rows[:, None], jnp.clip(lengths[:, None] - m[None, :], 0, n_nodes - 1), m[None, :]]
  total = plus(jnp.where(real, root + left + right, -jnp.inf), axis=-1)
  return jnp.where(lengths > 0, total, jnp.zeros((), comp_r.dtype))


def _value_and_gradients(arc_scores, root_scores, lengths, single_root, semiring, tables=None):
  """Inside value [B] and its gradient w.r.t. (arc_scores [B, n, n], root_scores [B, n]).

  Runs the inside pass (unless its `tables` are given), then the hand-written outside pass; the cheap
  O(B N^2) gathers before and after it (span layout, readout) are differentiated by `jax.vjp`.
  """
  (arc_r, arc_l, root), spans_vjp = jax.vjp(
      lambda a, r: _span_arcs(a, r, lengths), arc_scores, root_scores)
  if tables is None:
    tables = _inside_tables(arc_r, arc_l, semiring)
  value, readout_vjp = jax.vjp(
      lambda cr, cl, r: _readout(cr, cl, r, lengths, single_root, semiring),
      tables['cr_s'], tables['cl_s'], root)
  g_cr, g_cl, g_root = readout_vjp(jnp.ones_like(value))
  g_arc_r, g_arc_l = _outside(tables, g_cr, g_cl, semiring)
  return value, spans_vjp((g_arc_r, g_arc_l, g_root))


@functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
def _log_z(arc_scores, root_scores, lengths, single_root):
  arc_r, arc_l, root = _span_arcs(arc_scores, root_scores, lengths)
  tables = _inside_tables(arc_r, arc_l, 'log')
  return _readout(tables['cr_s'], tables['cl_s'], root, lengths, single_root, 'log')


@_log_z.defjvp
def _log_z_jvp(single_root, primals, tangents):
  """d log Z = <marginals, d scores> (the marginals by inside-outside)."""
  arc_scores, root_scores, lengths = primals
  d_arc, d_root, _ = tangents
  value, (arc_m, root_m) = _value_and_gradients(arc_scores, root_scores, lengths, single_root, 'log')
  return value, jnp.sum(arc_m * d_arc, axis=(-2, -1)) + jnp.sum(root_m * d_root, axis=-1)


@functools.partial(jax.jit, static_argnames=('single_root',))
def _log_partition(arc_scores, root_scores, lengths, single_root):
  return _log_z(arc_scores, root_scores, lengths, single_root)


@functools.partial(jax.jit, static_argnames=('single_root', 'semiring'))
def _gradients(arc_scores, root_scores, lengths, single_root, semiring):
  return _value_and_gradients(arc_scores, root_scores, lengths, single_root, semiring)[1]


def _prepare(arc_scores, root_scores, lengths):
  """Validates shapes; returns flat (arc [B, n, n], root [B, n], lengths [B]), batch shape, n."""
  arc_scores, root_scores, lengths = _inputs.check_scores(arc_scores, root_scores, lengths)
  batch_shape, n = arc_scores.shape[:-2], arc_scores.shape[-1]
  flat = int(np.prod(batch_shape))
  return (arc_scores.reshape(flat, n, n), root_scores.reshape(flat, n),
          jnp.clip(lengths, 0, n).reshape(flat)), batch_shape, n


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
  return heads_from_argmax_gradients(arc_g, root_g, lengths).reshape(batch_shape + (n,))


def heads_from_argmax_gradients(arc_g, root_g, lengths):
  """heads int32 [B, n] from the max-semiring gradients (arc [B, n, n], root [B, n]) of Eisner's
  value: column m of [root; arcs] is one-hot at the head of m (ROOT in row 0); -1 on padding."""
  n = arc_g.shape[-1]
  chosen = jnp.concatenate([root_g[:, None, :], arc_g], axis=1)
  heads = jnp.argmax(chosen, axis=1).astype(jnp.int32) - 1
  real = jnp.arange(n)[None, :] < lengths[:, None]
  return jnp.where(real, heads, -1)
