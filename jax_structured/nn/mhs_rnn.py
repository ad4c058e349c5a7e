"""The MHS-RNN cell of Luo & Zhu ("Recurrent Neural Networks with Mixed Hierarchical Structures"),
sec. III-A/B: word, phrase and sentence LSTM layers driven by a static boundary p_t (punctuation /
sentence ends, eq. 2) and a learned dynamic boundary z_t (eqs. 1, 3, 7), in ONE `lax.scan` over the
document's tokens, batched, with static shapes.

With b_{t-1} = z_{t-1} OR p_{t-1} (a boundary at the previous token), the six scenarios of sec. III-B are
  b_{t-1}  p_t  z_t   word layer           phrase layer   sentence layer   scenario
  0        1    any   eqs. 3-4 (continue)  eq. 5 update   eq. 6 update     1
  1        0    0     eqs. 7-8 (restart)   copy           copy             2
  0        0    0     eqs. 3-4             copy           copy             3
  0        0    1     eqs. 3-4             eq. 5 update   copy             4
  1        0    1     eqs. 7-8             eq. 5 update   copy             5
  1        1    any   eqs. 7-8             eq. 5 update   eq. 6 update     6
i.e. the word layer restarts from the phrase state (h^2_{t-1} in place of h^1_{t-1}, no c^1_{t-1}) after a
boundary, the phrase layer updates when z_t OR p_t, the sentence layer when p_t. The selects are written
multiplicatively with the 0/1 flags (`b h^2 + (1 - b) h^1`), which equals the scenario table exactly and
lets the straight-through gradient of z_t reach the detector (Chung et al. 2016, sec. 3.3).

Deviations from the printed equations, both typos by the paper's own pattern: eq. 5's output gate reads
h^1_t (printed h^1_{t-1}, unlike the other three gates), and eq. 5 uses the phrase layer's own biases
(printed b_{i^1}, b_{f^1}, ...).

Dynamic boundary: z~_t = hardsigm(W_d h + U_d x_t + b_d) with hardsigm(v) = max(0, min(1, (a v + 1)/2))
(slope a, annealed by the caller), z_t = 1[z~_t > 0.5] forward, gradient of z~_t backward (straight
through). The forward value of z_t does not depend on a (z_t = 1 iff W_d h + U_d x + b_d > 0); the slope
only shapes the gradient.

In a batched static-shape scan every layer is computed at every step and selected: COPY saves no work
here (it cannot with static shapes on an accelerator); it saves gradient path length, as in the paper.
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured.nn import masks


class LSTMWeights(NamedTuple):
  """One LSTM layer, gates in the order (i, f, c~, o): w_h [H, 4H] (recurrent), w_x [D, 4H], b [4H]."""
  w_h: jax.Array
  w_x: jax.Array
  b: jax.Array


class MHSParams(NamedTuple):
  """MHS-RNN weights: word (eq. 4 / 8, input x), phrase (eq. 5, input h^1), sentence (eq. 6, input h^2)
  layers, and the dynamic detector W_d [H], U_d [E], b_d [] (eqs. 3 / 7)."""
  word: LSTMWeights
  phrase: LSTMWeights
  sentence: LSTMWeights
  detector_w: jax.Array
  detector_u: jax.Array
  detector_b: jax.Array


class MHSOutputs(NamedTuple):
  """Per-token results of `mhs_rnn_scan`, all [B, T, H] or [B, T], zero at padding.

  h1, c1, h2, c2, h3, c3: states of the word, phrase and sentence layers after token t.
  z: dynamic boundary z_t (0/1 forward, straight-through gradient).
  z_prob: z~_t (the hard-sigmoid value).
  scenario: int32 1-6 (the table of the module docstring), 0 at padding.
  """
  h1: jax.Array
  c1: jax.Array
  h2: jax.Array
  c2: jax.Array
  h3: jax.Array
  c3: jax.Array
  z: jax.Array
  z_prob: jax.Array
  scenario: jax.Array


def hard_sigmoid(x: jax.Array, slope: jax.typing.ArrayLike) -> jax.Array:
  """hardsigm(x) = max(0, min(1, (a x + 1) / 2)) (Luo & Zhu eq. 3; Chung et al. 2016)."""
  return jnp.clip((slope * x + 1.0) / 2.0, 0.0, 1.0)


def straight_through_step(prob: jax.Array) -> jax.Array:
  """1[prob > 0.5] forward (eq. 1), identity gradient backward (the straight-through estimator)."""
  hard = (prob > 0.5).astype(prob.dtype)
  return prob + jax.lax.stop_gradient(hard - prob)


def lstm_update(gates: jax.Array, c: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(c_t, h_t) from pre-activations [..., 4H] in the order (i, f, c~, o) and c_{t-1} (eq. 4)."""
  i, f, g, o = jnp.split(gates, 4, axis=-1)
  c = jax.nn.sigmoid(i) * jnp.tanh(g) + jax.nn.sigmoid(f) * c
  return c, jax.nn.sigmoid(o) * jnp.tanh(c)


def mhs_rnn_scan(params: MHSParams, x: jax.Array, static_boundaries: jax.Array, lengths: jax.Array, *,
                 slope: jax.typing.ArrayLike = 1.0, dynamic_boundaries: Optional[jax.Array] = None,
                 ) -> MHSOutputs:
  """Runs the MHS-RNN over batched documents (Luo & Zhu eqs. 1-8).

  Args:
    params: `MHSParams` (hidden size H for all three layers).
    x: float [B, T, E] word vectors of the flat documents.
    static_boundaries: [B, T] 0/1, p_t (eq. 2); read at real tokens only.
    lengths: int [B] real tokens (0: an empty document, all outputs 0).
    slope: the hard-sigmoid slope a (scalar; annealed by the caller).
    dynamic_boundaries: optional [B, T] 0/1 z_t imposed instead of the detector's (tests, analysis);
      z_prob is still the detector's.

  Returns:
    `MHSOutputs`. The state before the first token is zero and b_{-1} = 1 (the document starts a phrase;
    with zero states eqs. 7-8 and 3-4 coincide there).
  """
  batch, steps, _ = x.shape
  hidden = params.word.w_h.shape[0]
  mask = masks.sequence_mask(lengths, steps)
  p = jnp.where(mask, jnp.asarray(static_boundaries, x.dtype), 0.0)
  forced = dynamic_boundaries is not None
  zf = jnp.asarray(dynamic_boundaries, x.dtype) if forced else jnp.zeros_like(p)
  xw = x @ params.word.w_x + params.word.b  # U x_t + b of eqs. 4 / 8, outside the scan
  xd = x @ params.detector_u + params.detector_b  # U_d x_t + b_d of eqs. 3 / 7

  def step(carry, inputs):
    h1, c1, h2, c2, h3, c3, prev = carry
    xw_t, xd_t, p_t, zf_t, real = inputs
    b = prev[:, None]
    h_in = b * h2 + (1.0 - b) * h1  # eq. 8 reads h^2_{t-1}, eq. 4 h^1_{t-1}
    c_in = (1.0 - b) * c1  # eq. 8 drops c^1_{t-1}
    z_prob = hard_sigmoid(h_in @ params.detector_w + xd_t, slope)  # eqs. 3 / 7
    z = zf_t if forced else straight_through_step(z_prob)
    c1n, h1n = lstm_update(h_in @ params.word.w_h + xw_t, c_in)
    up2 = (p_t + z - p_t * z)[:, None]  # phrase update: z_t OR p_t
    c2u, h2u = lstm_update(h2 @ params.phrase.w_h + h1n @ params.phrase.w_x + params.phrase.b, c2)
    h2n, c2n = up2 * h2u + (1.0 - up2) * h2, up2 * c2u + (1.0 - up2) * c2
    up3 = p_t[:, None]  # sentence update: p_t
    c3u, h3u = lstm_update(h3 @ params.sentence.w_h + h2n @ params.sentence.w_x + params.sentence.b, c3)
    h3n, c3n = up3 * h3u + (1.0 - up3) * h3, up3 * c3u + (1.0 - up3) * c3
    new = (h1n, c1n, h2n, c2n, h3n, c3n, up2[:, 0])
    carry = tuple(jnp.where(real.reshape((-1,) + (1,) * (n.ndim - 1)), n, o) for n, o in zip(new, carry))
    bp, pb, zb = prev > 0.5, p_t > 0.5, z > 0.5
    scenario = jnp.where(pb, jnp.where(bp, 6, 1),
                         jnp.where(bp, jnp.where(zb, 5, 2), jnp.where(zb, 4, 3)))
    out = tuple(jnp.where(real[:, None], n, 0.0) for n in new[:6])
    out += (jnp.where(real, z, 0.0), jnp.where(real, z_prob, 0.0), jnp.where(real, scenario, 0))
    return carry, out

  zeros = jnp.zeros((batch, hidden), x.dtype)
  init = (zeros,) * 6 + (jnp.ones((batch,), x.dtype),)
  seq = tuple(jnp.swapaxes(a, 0, 1) for a in (xw, xd, p, zf, mask))
  _, out = jax.lax.scan(step, init, seq)
  return MHSOutputs(*(jnp.swapaxes(o, 0, 1) for o in out))


def _lstm_weights(module: nn.Module, name: str, input_dim: int, hidden: int) -> LSTMWeights:
  return LSTMWeights(
      module.param(f'{name}_w_h', nn.initializers.orthogonal(column_axis=-1), (hidden, 4 * hidden), jnp.float32),
      module.param(f'{name}_w_x', nn.initializers.lecun_normal(), (input_dim, 4 * hidden), jnp.float32),
      module.param(f'{name}_b', nn.initializers.zeros, (4 * hidden,), jnp.float32))


def init_mhs_params(module: nn.Module, input_dim: int, hidden: int) -> MHSParams:
  """The `MHSParams` of a Linen module (random initialisation of every layer, sec. IV-B)."""
  return MHSParams(
      _lstm_weights(module, 'word', input_dim, hidden),
      _lstm_weights(module, 'phrase', hidden, hidden),
      _lstm_weights(module, 'sentence', hidden, hidden),
      module.param('detector_w', nn.initializers.normal(stddev=1.0 / hidden ** 0.5), (hidden,), jnp.float32),
      module.param('detector_u', nn.initializers.normal(stddev=1.0 / input_dim ** 0.5), (input_dim,), jnp.float32),
      module.param('detector_b', nn.initializers.zeros, (), jnp.float32))


class MHSRNN(nn.Module):
  """Linen wrapper of `mhs_rnn_scan`: `(x [B, T, E], p [B, T], lengths [B], slope) -> MHSOutputs`.

  Attributes:
    hidden_size: H of the word, phrase and sentence layers (the paper: 50).
  """
  hidden_size: int

  @nn.compact
  def __call__(self, x, static_boundaries, lengths, slope=1.0, dynamic_boundaries=None):
    params = init_mhs_params(self, x.shape[-1], self.hidden_size)
    return mhs_rnn_scan(params, x, static_boundaries, lengths, slope=slope,
                        dynamic_boundaries=dynamic_boundaries)
