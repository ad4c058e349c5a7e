"""Long Short-Term Memory-Networks (Cheng, Dong & Lapata 2016): intra-attention over memory/hidden tapes.

The recurrence is a pure function (`lstmn_scan`) over explicit parameter arrays, run with `lax.scan` over
a fixed-size tape, so a batch compiles once per padded shape; `LSTMN` / `StackedLSTMN` / `FusionLSTMN`
are the Linen modules that own the parameters.

Equations (numbers as in the paper):
  a_i^t = v^T tanh(W_h h_i + W_x x_t + W_h~ h~_{t-1})                (4)
  s^t = softmax(a^t) over the previous tokens i < t                   (5)
  [h~_t; c~_t] = sum_i s_i^t [h_i; c_i]                               (6)
  [i; f; o; c^] = [sig; sig; sig; tanh](W [h~_t, x_t])                (7)
  c_t = f * c~_t + i * c^_t,  h_t = o * tanh(c_t)                     (8, 9)
Deep fusion (eqs. 11-16) adds inter-attention over source tapes Y (hidden) and A (memory):
  b_j^t = u^T tanh(W_y y_j + W_x' x_t + W_y~ y~_{t-1}),  p^t = softmax(b^t)   (11, 12)
  [y~_t; a~_t] = sum_j p_j^t [y_j; a_j],  r_t = sig(W_r [y~_t, x_t])          (13, 14)
  c_t = r_t * a~_t + f * c~_t + i * c^_t                                        (15)
(the printed eq. 15 multiplies i_t with c~_t; that repeats the f_t term and is read as the misprint of
c^_t it is, as in eq. 8).

Unlike the released Torch code, the h~_{t-1} term of eq. 4 is kept. At t = 1 there is no previous token:
h~ = c~ = 0. `memory_span` optionally bounds attention to the last `memory_span` tokens.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured.nn import rnn
from jax_structured.nn.attention import masked_softmax

__all__ = ['LSTMNParams', 'FusionParams', 'lstmn_scan', 'LSTMN', 'StackedLSTMN', 'FusionLSTMN',
           'additive_attention']


class LSTMNParams(NamedTuple):
  """Weights of one LSTMN layer (D = input dim, H = hidden/memory dim, A = attention dim)."""
  w_h: jax.Array       # [H, A]   tape keys (eq. 4)
  w_x: jax.Array       # [D, A]   current input (eq. 4)
  w_htilde: jax.Array  # [H, A]   previous summary h~_{t-1} (eq. 4)
  v: jax.Array         # [A]
  w_gates_h: jax.Array  # [H, 4H] W acting on h~_t (eq. 7)
  w_gates_x: jax.Array  # [D, 4H] W acting on x_t (eq. 7)
  b_gates: jax.Array    # [4H]


class FusionParams(NamedTuple):
  """Deep-fusion inter-attention weights (S = source hidden dim = H, B = attention dim)."""
  w_y: jax.Array       # [S, B]
  w_x: jax.Array       # [D, B]
  w_ytilde: jax.Array  # [S, B]
  u: jax.Array         # [B]
  w_r_y: jax.Array     # [S, H]  (eq. 14)
  w_r_x: jax.Array     # [D, H]
  b_r: jax.Array       # [H]


def _step(w, tape_h, tape_c, tape_k, h_tilde, y_tilde, x_t, src, visible):
  """One time step of eqs. 4-9 (and 11-15 when `src` is given), without the tape writes.

  Args:
    w: (w_htilde [H, A], v [A], w_gates_h [H, 4H], w_ytilde [S, Bf] | None, u [Bf] | None,
      w_r_y [S, H] | None).
    tape_h, tape_c: [B, T, H] hidden / memory tapes; tape_k: [B, T, A] their attention keys h_i W_h.
      Only the `visible` positions are read (others get weight exactly 0 and no gradient).
    h_tilde, y_tilde: the previous summaries h~_{t-1} [B, H] and y~_{t-1} [B, S].
    x_t: (x W_x [B, A], x W_gates_x + b [B, 4H], x W_x' [B, Bf] | None, x W_r_x + b_r [B, H] | None).
    src: (source keys Y W_y [B, M, Bf], Y [B, M, S], A [B, M, S], mask [B, M] float) or None.
    visible: [T] bool, the tape positions word t attends to.

  Returns:
    (h_t [B, H], c_t [B, H], h~_t [B, H], y~_t [B, S], s^t [B, T], p^t [B, M] | None).
  """
  w_htilde, v, w_gates_h, w_ytilde, u, w_r_y = w
  x_att, x_gates, x_src, x_r = x_t
  scores = jnp.tanh(tape_k + x_att[:, None, :] + (h_tilde @ w_htilde)[:, None, :]) @ v     # eq. 4
  s = masked_softmax(scores, jnp.broadcast_to(visible, scores.shape))                       # eq. 5
  h_tilde = jnp.einsum('bi,bih->bh', s, tape_h)                                              # eq. 6
  c_tilde = jnp.einsum('bi,bih->bh', s, tape_c)
  i, f, o, c_hat = jnp.split(h_tilde @ w_gates_h + x_gates, 4, axis=-1)                     # eq. 7
  c = jax.nn.sigmoid(f) * c_tilde + jax.nn.sigmoid(i) * jnp.tanh(c_hat)                     # eq. 8
  p = None
  if src is not None:
    src_keys, src_h, src_c, src_mask = src
    b = jnp.tanh(src_keys + x_src[:, None, :] + (y_tilde @ w_ytilde)[:, None, :]) @ u
    p = masked_softmax(b, src_mask > 0)                                                      # eqs. 11-12
    y_tilde = jnp.einsum('bj,bjh->bh', p, src_h)                                             # eq. 13
    a_tilde = jnp.einsum('bj,bjh->bh', p, src_c)
    r = jax.nn.sigmoid(y_tilde @ w_r_y + x_r)                                                # eq. 14
    c = c + r * a_tilde                                                                      # eq. 15
  h = jax.nn.sigmoid(o) * jnp.tanh(c)                                                        # eq. 9 / 16
  return h, c, h_tilde, y_tilde, s, p


def _visible(t, steps: int, memory_span: int | None):
  positions = jnp.arange(steps)
  visible = positions < t
  if memory_span is not None:
    visible &= positions >= t - memory_span
  return visible


def _forward(w_h, w, xs, src, h0, y0, memory_span):
  """The recurrence: returns (tape_h [B, T, H], tape_c, intra [T, B, T], inter [T, B, M] | None,
  h~ inputs [T, B, H], y~ inputs [T, B, S]) -- the summaries each step read."""
  batch, steps = xs[0].shape[:2]
  hidden = w_h.shape[0]
  dtype = xs[0].dtype

  def step(carry, t):
    tape_h, tape_c, tape_k, h_tilde, y_tilde = carry
    x_t = tuple(None if x is None else x[:, t] for x in xs)
    h, c, new_h_tilde, new_y_tilde, s, p = _step(w, tape_h, tape_c, tape_k, h_tilde, y_tilde, x_t, src,
                                                  _visible(t, steps, memory_span))
    tape_h = tape_h.at[:, t].set(h)
    tape_c = tape_c.at[:, t].set(c)
    tape_k = tape_k.at[:, t].set(h @ w_h)
    return (tape_h, tape_c, tape_k, new_h_tilde, new_y_tilde), (s, p, h_tilde, y_tilde)

  zeros = jnp.zeros((batch, steps, hidden), dtype)
  init = (zeros, zeros, jnp.zeros((batch, steps, w_h.shape[1]), dtype), h0, y0)
  (tape_h, tape_c, _, _, _), (intra, inter, h_in, y_in) = jax.lax.scan(step, init, jnp.arange(steps))
  return tape_h, tape_c, intra, inter, h_in, y_in


@functools.partial(jax.custom_vjp, nondiff_argnums=(6,))
def _recurrence(w_h, w, xs, src, h0, y0, memory_span):
  """`_forward` without its saved summaries, with a memory-lean reverse pass (see `_recurrence_bwd`)."""
  return _forward(w_h, w, xs, src, h0, y0, memory_span)[:4]


def _recurrence_fwd(w_h, w, xs, src, h0, y0, memory_span):
  tape_h, tape_c, intra, inter, h_in, y_in = _forward(w_h, w, xs, src, h0, y0, memory_span)
  return (tape_h, tape_c, intra, inter), (w_h, w, xs, src, tape_h, tape_c, h_in, y_in)


def _recurrence_bwd(memory_span, residuals, cotangents):
  """Reverse pass over the *final* tapes.

  The tapes are written once, at their own step, and step t reads only positions < t (masked softmax:
  other positions get weight exactly 0 and gradient 0), so step t computed on the final tapes equals
  step t computed on the tapes of its time. Plain autodiff of the scan instead saves the whole
  [B, T, H] tapes at every step (O(T^2 B H) memory and copies); here each reverse step recomputes its
  forward step on the final tapes, takes its VJP, and accumulates the tape cotangents in [B, T, H]
  buffers: the cotangent of h_t / c_t is complete when step t is reached (only later steps read it).
  """
  w_h, w, xs, src, tape_h, tape_c, h_in, y_in = residuals
  d_tape_h_out, d_tape_c_out, d_intra, d_inter = cotangents
  steps = tape_h.shape[1]
  tape_k = tape_h @ w_h
  zeros_like = lambda tree: jax.tree.map(jnp.zeros_like, tree)  # noqa: E731

  def back(carry, t):
    acc_h, acc_c, acc_k, d_h_tilde, d_y_tilde, d_w, d_w_h, d_src = carry
    x_t = tuple(None if x is None else x[:, t] for x in xs)
    d_h = d_tape_h_out[:, t] + acc_h[:, t] + acc_k[:, t] @ w_h.T
    d_c = d_tape_c_out[:, t] + acc_c[:, t]
    d_w_h = d_w_h + tape_h[:, t].T @ acc_k[:, t]
    visible = _visible(t, steps, memory_span)
    fn = lambda w, th, tc, tk, ht, yt, x_t, src: _step(w, th, tc, tk, ht, yt, x_t, src, visible)  # noqa
    _, vjp = jax.vjp(fn, w, tape_h, tape_c, tape_k, h_in[t], y_in[t], x_t, src)
    d_p = None if d_inter is None else d_inter[t]
    g_w, g_th, g_tc, g_tk, g_ht, g_yt, g_x, g_src = vjp((d_h, d_c, d_h_tilde, d_y_tilde, d_intra[t], d_p))
    add = lambda a, b: jax.tree.map(jnp.add, a, b)  # noqa: E731
    carry = (acc_h + g_th, acc_c + g_tc, acc_k + g_tk, g_ht, g_yt, add(d_w, g_w), d_w_h, add(d_src, g_src))
    return carry, g_x

  init = (jnp.zeros_like(tape_h), jnp.zeros_like(tape_c), jnp.zeros_like(tape_k), jnp.zeros_like(h_in[0]),
          jnp.zeros_like(y_in[0]), zeros_like(w), jnp.zeros_like(w_h), zeros_like(src))
  carry, g_xs = jax.lax.scan(back, init, jnp.arange(steps), reverse=True)
  _, _, _, d_h0, d_y0, d_w, d_w_h, d_src = carry
  d_xs = tuple(None if g is None else jnp.swapaxes(g, 0, 1) for g in g_xs)
  return d_w_h, d_w, d_xs, d_src, d_h0, d_y0


_recurrence.defvjp(_recurrence_fwd, _recurrence_bwd)


def lstmn_scan(params: LSTMNParams, inputs, lengths, *, memory_span: int | None = None,
               source=None, fusion: FusionParams | None = None, lean_gradient: bool = True):
  """Runs one LSTMN layer over a padded batch.

  Args:
    params: `LSTMNParams`.
    inputs: [B, T, D] inputs x_t.
    lengths: [B] int, real lengths; outputs past them are zeroed and never attended to.
    memory_span: attend only to the last `memory_span` previous tokens (None = all).
    source: for deep fusion, a tuple (source_hidden [B, M, H], source_memory [B, M, H], source_lengths [B]).
    fusion: `FusionParams` (required with `source`).
    lean_gradient: differentiate with the custom reverse pass over the final tapes (`_recurrence_bwd`:
      O(T B H) saved state instead of O(T^2 B H)); False = plain autodiff of the scan (the reference).

  Returns:
    (hidden [B, T, H], memory [B, T, H], intra_attention [B, T, T] (row t: weights over tokens < t),
     inter_attention [B, T, M] or None).
  """
  batch, steps, _ = inputs.shape
  hidden = params.w_h.shape[0]
  dtype = inputs.dtype
  x_att = inputs @ params.w_x                                   # [B, T, A]
  x_gates = inputs @ params.w_gates_x + params.b_gates          # [B, T, 4H]
  w = (params.w_htilde, params.v, params.w_gates_h, None, None, None)
  xs = (x_att, x_gates, None, None)
  src, y0 = None, jnp.zeros((batch, 0), dtype)
  if source is not None:
    if fusion is None:
      raise ValueError('lstmn_scan: `source` (deep fusion) needs `fusion` parameters')
    src_h, src_c, src_len = source
    src_mask = (jnp.arange(src_h.shape[1])[None, :] < src_len[:, None]).astype(dtype)
    src = (src_h @ fusion.w_y, src_h, src_c, src_mask)          # keys [B, M, Bf]
    xs = (x_att, x_gates, inputs @ fusion.w_x, inputs @ fusion.w_r_x + fusion.b_r)
    w = (params.w_htilde, params.v, params.w_gates_h, fusion.w_ytilde, fusion.u, fusion.w_r_y)
    y0 = jnp.zeros((batch, src_h.shape[-1]), dtype)
  h0 = jnp.zeros((batch, hidden), dtype)
  if lean_gradient:
    tape_h, tape_c, intra, inter = _recurrence(params.w_h, w, xs, src, h0, y0, memory_span)
  else:
    tape_h, tape_c, intra, inter = _forward(params.w_h, w, xs, src, h0, y0, memory_span)[:4]
  real = (jnp.arange(steps)[None, :] < lengths[:, None])[..., None]
  intra = jnp.swapaxes(intra, 0, 1) * real                                      # [B, T, T]
  if inter is not None:
    inter = jnp.swapaxes(inter, 0, 1) * real
  return tape_h * real, tape_c * real, intra, inter


def additive_attention(query, keys, values, key_lengths, w_query, w_key, u):
  """Bahdanau-style attention for shallow fusion: query [B, T, H] over keys/values [B, M, H] -> [B, T, H]."""
  scores = jnp.tanh((query @ w_query)[:, :, None, :] + (keys @ w_key)[:, None, :, :]) @ u   # [B, T, M]
  mask = (jnp.arange(keys.shape[1])[None, :] < key_lengths[:, None])[:, None, :]
  weights = masked_softmax(scores, jnp.broadcast_to(mask, scores.shape))
  return jnp.einsum('btm,bmh->bth', weights, values), weights


def _init_lstmn_params(module: nn.Module, input_dim: int, hidden: int, attention: int) -> LSTMNParams:
  glorot = nn.initializers.glorot_uniform()
  ortho = nn.initializers.orthogonal()

  def forget_bias(key, shape, dtype=jnp.float32):
    del key
    return jnp.zeros(shape, dtype).at[hidden:2 * hidden].set(1.0)

  return LSTMNParams(
      w_h=module.param('w_h', glorot, (hidden, attention)),
      w_x=module.param('w_x', glorot, (input_dim, attention)),
      w_htilde=module.param('w_htilde', glorot, (hidden, attention)),
      v=module.param('v', nn.initializers.normal(attention ** -0.5), (attention,)),
      w_gates_h=module.param('w_gates_h', ortho, (hidden, 4 * hidden)),
      w_gates_x=module.param('w_gates_x', glorot, (input_dim, 4 * hidden)),
      b_gates=module.param('b_gates', forget_bias, (4 * hidden,)),
  )


class LSTMN(nn.Module):
  """One LSTMN layer: [B, T, D] inputs + [B] lengths -> hidden tape [B, T, H] (sows `intra_attention`)."""
  hidden_size: int
  attention_size: int | None = None
  memory_span: int | None = None

  @nn.compact
  def __call__(self, inputs, lengths):
    params = _init_lstmn_params(self, inputs.shape[-1], self.hidden_size,
                                self.attention_size or self.hidden_size)
    hidden, memory, intra, _ = lstmn_scan(params, inputs, lengths, memory_span=self.memory_span)
    self.sow('intermediates', 'intra_attention', intra)
    return hidden, memory


class StackedLSTMN(nn.Module):
  """Stacked LSTMN (eq. 10): layer k+1 reads h^k and, through a skip connection, x_t (Graves 2013).

  `cell='lstm'` gives the stacked-LSTM baseline of Tables 1-3 in the same code path (its memory tape
  is not exposed; the hidden tape is returned in its place). Returns (hidden [B, T, H], memory [B, T, H])
  of the top layer.
  """
  hidden_size: int
  num_layers: int = 1
  cell: str = 'lstmn'
  attention_size: int | None = None
  memory_span: int | None = None
  skip_connections: bool = True
  dropout_rate: float = 0.0

  @nn.compact
  def __call__(self, inputs, lengths, *, train: bool = False):
    if self.cell not in ('lstmn', 'lstm'):
      raise ValueError(f"cell must be 'lstmn' or 'lstm', got {self.cell!r}")
    x, memory = inputs, None
    for k in range(self.num_layers):
      layer_in = x if k == 0 or not self.skip_connections else jnp.concatenate([x, inputs], -1)
      if k > 0:
        layer_in = nn.Dropout(self.dropout_rate, deterministic=not train)(layer_in)
      if self.cell == 'lstmn':
        x, memory = LSTMN(self.hidden_size, self.attention_size, self.memory_span, name=f'layer_{k}')(
            layer_in, lengths)
      else:
        x = memory = rnn.LSTM(self.hidden_size, name=f'layer_{k}')(layer_in, lengths)
    return x, memory


class FusionLSTMN(nn.Module):
  """Decoder LSTMN conditioned on a source's tapes: `fusion` = 'shallow' (eqs. 4-9 + Bahdanau inter-
  attention on the outputs, Fig. 3a) or 'deep' (eqs. 11-16, inter-attention inside the recurrence, Fig. 3b).

  Returns the target representations [B, T, H] (shallow: tanh(W [h_t, y~_t]); deep: h_t).
  """
  hidden_size: int
  fusion: str = 'deep'
  attention_size: int | None = None
  memory_span: int | None = None

  @nn.compact
  def __call__(self, inputs, lengths, source_hidden, source_memory, source_lengths):
    if self.fusion not in ('shallow', 'deep'):
      raise ValueError(f"fusion must be 'shallow' or 'deep', got {self.fusion!r}")
    att = self.attention_size or self.hidden_size
    params = _init_lstmn_params(self, inputs.shape[-1], self.hidden_size, att)
    if self.fusion == 'deep':
      glorot = nn.initializers.glorot_uniform()
      src_dim, in_dim = source_hidden.shape[-1], inputs.shape[-1]
      fusion = FusionParams(
          w_y=self.param('fusion_w_y', glorot, (src_dim, att)),
          w_x=self.param('fusion_w_x', glorot, (in_dim, att)),
          w_ytilde=self.param('fusion_w_ytilde', glorot, (src_dim, att)),
          u=self.param('fusion_u', nn.initializers.normal(att ** -0.5), (att,)),
          w_r_y=self.param('fusion_w_r_y', glorot, (src_dim, self.hidden_size)),
          w_r_x=self.param('fusion_w_r_x', glorot, (in_dim, self.hidden_size)),
          b_r=self.param('fusion_b_r', nn.initializers.zeros, (self.hidden_size,)))
      hidden, _, intra, inter = lstmn_scan(
          params, inputs, lengths, memory_span=self.memory_span,
          source=(source_hidden, source_memory, source_lengths), fusion=fusion)
      out = hidden
    else:
      hidden, _, intra, _ = lstmn_scan(params, inputs, lengths, memory_span=self.memory_span)
      glorot = nn.initializers.glorot_uniform()
      context, inter = additive_attention(
          hidden, source_hidden, source_hidden, source_lengths,
          self.param('inter_w_query', glorot, (self.hidden_size, att)),
          self.param('inter_w_key', glorot, (source_hidden.shape[-1], att)),
          self.param('inter_u', nn.initializers.normal(att ** -0.5), (att,)))
      out = nn.tanh(nn.Dense(self.hidden_size, name='combine')(jnp.concatenate([hidden, context], -1)))
      out = out * (jnp.arange(out.shape[1])[None, :] < lengths[:, None])[..., None]
    self.sow('intermediates', 'intra_attention', intra)
    self.sow('intermediates', 'inter_attention', inter)
    return out
