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

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured.nn import rnn
from jax_structured.nn.attention import masked_softmax

__all__ = ['LSTMNParams', 'FusionParams', 'lstmn_scan', 'LSTMN', 'StackedLSTMN', 'FusionLSTMN',
           'inter_attention']


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


def lstmn_scan(params: LSTMNParams, inputs, lengths, *, memory_span: int | None = None,
               source=None, fusion: FusionParams | None = None):
  """Runs one LSTMN layer over a padded batch.

  Args:
    params: `LSTMNParams`.
    inputs: [B, T, D] inputs x_t.
    lengths: [B] int, real lengths; outputs past them are zeroed and never attended to.
    memory_span: attend only to the last `memory_span` previous tokens (None = all).
    source: for deep fusion, a tuple (source_hidden [B, M, H], source_memory [B, M, H], source_lengths [B]).
    fusion: `FusionParams` (required with `source`).

  Returns:
    (hidden [B, T, H], memory [B, T, H], intra_attention [B, T, T] (row t: weights over tokens < t),
     inter_attention [B, T, M] or None).
  """
  batch, steps, _ = inputs.shape
  hidden = params.w_h.shape[0]
  dtype = inputs.dtype
  x_att = inputs @ params.w_x                                   # [B, T, A]
  x_gates = inputs @ params.w_gates_x + params.b_gates          # [B, T, 4H]
  positions = jnp.arange(steps)
  if source is not None:
    src_h, src_c, src_len = source
    src_keys = src_h @ fusion.w_y                               # [B, M, Bf]
    src_mask = jnp.arange(src_h.shape[1])[None, :] < src_len[:, None]
    x_src = inputs @ fusion.w_x                                 # [B, T, Bf]
    x_r = inputs @ fusion.w_r_x + fusion.b_r                    # [B, T, H]

  def step(carry, t):
    tape_h, tape_c, tape_k, h_tilde, y_tilde = carry
    visible = positions < t
    if memory_span is not None:
      visible &= positions >= t - memory_span
    scores = jnp.tanh(tape_k + x_att[:, t, None, :] + (h_tilde @ params.w_htilde)[:, None, :]) @ params.v
    s = masked_softmax(scores, jnp.broadcast_to(visible, scores.shape))      # eq. 5, [B, T]
    h_tilde = jnp.einsum('bi,bih->bh', s, tape_h)                              # eq. 6
    c_tilde = jnp.einsum('bi,bih->bh', s, tape_c)
    gates = h_tilde @ params.w_gates_h + x_gates[:, t]                         # eq. 7
    i, f, o, c_hat = jnp.split(gates, 4, axis=-1)
    c = jax.nn.sigmoid(f) * c_tilde + jax.nn.sigmoid(i) * jnp.tanh(c_hat)      # eq. 8
    p = None
    if source is not None:
      b = jnp.tanh(src_keys + x_src[:, t, None, :] + (y_tilde @ fusion.w_ytilde)[:, None, :]) @ fusion.u
      p = masked_softmax(b, src_mask)                                         # eqs. 11-12
      y_tilde = jnp.einsum('bj,bjh->bh', p, src_h)                             # eq. 13
      a_tilde = jnp.einsum('bj,bjh->bh', p, src_c)
      r = jax.nn.sigmoid(y_tilde @ fusion.w_r_y + x_r[:, t])                   # eq. 14
      c = c + r * a_tilde                                                      # eq. 15
    h = jax.nn.sigmoid(o) * jnp.tanh(c)                                        # eq. 9 / 16
    tape_h = tape_h.at[:, t].set(h)
    tape_c = tape_c.at[:, t].set(c)
    tape_k = tape_k.at[:, t].set(h @ params.w_h)
    return (tape_h, tape_c, tape_k, h_tilde, y_tilde), (s, p)

  zeros = jnp.zeros((batch, steps, hidden), dtype)
  y0 = jnp.zeros((batch, source[0].shape[-1]), dtype) if source is not None else jnp.zeros((batch, 0), dtype)
  init = (zeros, zeros, jnp.zeros((batch, steps, params.w_h.shape[1]), dtype),
          jnp.zeros((batch, hidden), dtype), y0)
  (tape_h, tape_c, _, _, _), (intra, inter) = jax.lax.scan(step, init, positions)
  real = (positions[None, :] < lengths[:, None])[..., None]
  intra = jnp.swapaxes(intra, 0, 1) * real                                      # [B, T, T]
  if inter is not None:
    inter = jnp.swapaxes(inter, 0, 1) * real
  return tape_h * real, tape_c * real, intra, inter


def inter_attention(query, keys, values, key_lengths, w_query, w_key, u):
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
      context, inter = inter_attention(
          hidden, source_hidden, source_hidden, source_lengths,
          self.param('inter_w_query', glorot, (self.hidden_size, att)),
          self.param('inter_w_key', glorot, (source_hidden.shape[-1], att)),
          self.param('inter_u', nn.initializers.normal(att ** -0.5), (att,)))
      out = nn.tanh(nn.Dense(self.hidden_size, name='combine')(jnp.concatenate([hidden, context], -1)))
      out = out * (jnp.arange(out.shape[1])[None, :] < lengths[:, None])[..., None]
    self.sow('intermediates', 'intra_attention', intra)
    self.sow('intermediates', 'inter_attention', inter)
    return out
