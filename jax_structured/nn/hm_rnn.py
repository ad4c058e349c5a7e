"""The hierarchical multiscale LSTM (HM-LSTM) of Chung, Ahn & Bengio (2016), eqs. 1-9: L layers, each with
a learned boundary detector, updated by COPY / UPDATE / FLUSH in ONE `lax.scan`, batched.

For layer l at step t, with z^{l-1}_t the boundary of the layer below (z^0_t = 1) and z^l_{t-1} its own:
  s_t = U^l_l h^l_{t-1} + z^l_{t-1} U^l_{l+1} h^{l+1}_{t-1} + z^{l-1}_t W^l_{l-1} h^{l-1}_t + b^l    (eqs. 6-7)
  (f, i, o, g, z~) = (sig, sig, sig, tanh, hardsigm_a)(s_t)                                       (eq. 5)
  c^l_t = i g                      FLUSH   (z^l_{t-1} = 1)
          f c^l_{t-1} + i g        UPDATE  (z^l_{t-1} = 0, z^{l-1}_t = 1)
          c^l_{t-1}                COPY    (z^l_{t-1} = 0, z^{l-1}_t = 0)                           (eq. 2)
  h^l_t = h^l_{t-1} under COPY, o tanh(c^l_t) otherwise                                            (eq. 3)
  z^l_t = z^{l-1}_t * 1[z~ > 0.5] (straight through, slope a)                                       (eq. 9)
The top layer has no top-down term. A layer can close a segment only at a step where the layer below
closed one (z^l_t <= z^{l-1}_t), so segments nest; this is our reading of sec. 3.1 ("the upper layer
is updated only when the lower layer finishes a segment"), which the equations leave implicit for COPY.
As in `nn.mhs_rnn`, the three operations are multiplicative selects: every layer is computed every step.
"""
from __future__ import annotations

from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured.nn import masks
from jax_structured.nn import mhs_rnn


class HMLayer(NamedTuple):
  """One HM-LSTM layer; pre-activations in the order (f, i, o, g: 4H, then z~: 1).

  w_bottom [D_below, 4H+1] (W^l_{l-1}; D_below = E for l = 1), w_rec [H, 4H+1] (U^l_l),
  w_top [H, 4H+1] (U^l_{l+1}; unused for the top layer), b [4H+1].
  """
  w_bottom: jax.Array
  w_rec: jax.Array
  w_top: jax.Array
  b: jax.Array


class HMOutputs(NamedTuple):
  """h [B, T, L, H] hidden states and z [B, T, L] boundaries, z_prob [B, T, L] z~; 0 at padding."""
  h: jax.Array
  z: jax.Array
  z_prob: jax.Array


def hm_lstm_scan(layers: tuple[HMLayer, ...], x: jax.Array, lengths: jax.Array, *,
                 slope: jax.typing.ArrayLike = 1.0, dynamic_boundaries=None) -> HMOutputs:
  """Runs an L-layer HM-LSTM over x [B, T, E] with lengths [B].

  Args:
    layers: L `HMLayer`s (all of hidden size H).
    x: float [B, T, E].
    lengths: int [B].
    slope: hard-sigmoid slope a.
    dynamic_boundaries: optional [B, T, L] 0/1 imposed z^l_t (tests); z_prob is still the detector's.

  Returns:
    `HMOutputs`. States start at zero with z^l_{-1} = 0.
  """
  batch, steps, _ = x.shape
  num = len(layers)
  hidden = layers[0].w_rec.shape[0]
  mask = masks.sequence_mask(lengths, steps)
  forced = dynamic_boundaries is not None
  zf = (jnp.asarray(dynamic_boundaries, x.dtype) if forced else jnp.zeros((batch, steps, num), x.dtype))
  xb = x @ layers[0].w_bottom + layers[0].b  # the first layer's bottom-up term, outside the scan

  def step(carry, inputs):
    hs, cs, zs = carry  # [L, B, H], [L, B, H], [L, B]
    xb_t, zf_t, real = inputs
    new_h, new_c, new_z, probs = [], [], [], []
    below_h, below_z = None, jnp.ones((batch,), x.dtype)
    for l, layer in enumerate(layers):
      zp, zb = zs[l][:, None], below_z[:, None]
      s = hs[l] @ layer.w_rec
      if l + 1 < num:
        s = s + zp * (hs[l + 1] @ layer.w_top)
      s = s + (xb_t if l == 0 else zb * (below_h @ layer.w_bottom) + layer.b)
      f, i, o = (jax.nn.sigmoid(s[:, k * hidden:(k + 1) * hidden]) for k in range(3))
      g = jnp.tanh(s[:, 3 * hidden:4 * hidden])
      prob = mhs_rnn.hard_sigmoid(s[:, 4 * hidden], slope)
      copy = (1.0 - zp) * (1.0 - zb)
      c = zp * (i * g) + (1.0 - zp) * zb * (f * cs[l] + i * g) + copy * cs[l]
      h = copy * hs[l] + (1.0 - copy) * (o * jnp.tanh(c))
      z = zf_t[:, l] if forced else below_z * mhs_rnn.straight_through_step(prob)
      new_h.append(h), new_c.append(c), new_z.append(z), probs.append(prob)
      below_h, below_z = h, z
    new = (jnp.stack(new_h), jnp.stack(new_c), jnp.stack(new_z))
    carry = tuple(jnp.where(real.reshape((1, -1) + (1,) * (n.ndim - 2)), n, o) for n, o in zip(new, carry))
    out = (jnp.where(real[:, None, None], jnp.swapaxes(new[0], 0, 1), 0.0),
           jnp.where(real[:, None], new[2].T, 0.0), jnp.where(real[:, None], jnp.stack(probs).T, 0.0))
    return carry, out

  init = (jnp.zeros((num, batch, hidden), x.dtype), jnp.zeros((num, batch, hidden), x.dtype),
          jnp.zeros((num, batch), x.dtype))
  seq = (jnp.swapaxes(xb, 0, 1), jnp.swapaxes(zf, 0, 1), jnp.swapaxes(mask, 0, 1))
  _, out = jax.lax.scan(step, init, seq)
  return HMOutputs(*(jnp.swapaxes(o, 0, 1) for o in out))


class HMLSTM(nn.Module):
  """Linen wrapper of `hm_lstm_scan`: `(x [B, T, E], lengths [B], slope) -> HMOutputs`.

  Attributes:
    hidden_size: H of every layer.
    num_layers: L (Chung et al. and Luo & Zhu's baseline: 3).
  """
  hidden_size: int
  num_layers: int = 3

  @nn.compact
  def __call__(self, x, lengths, slope=1.0, dynamic_boundaries=None):
    width = 4 * self.hidden_size + 1
    layers = []
    for l in range(self.num_layers):
      below = x.shape[-1] if l == 0 else self.hidden_size
      layers.append(HMLayer(
          self.param(f'layer{l}_w_bottom', nn.initializers.lecun_normal(), (below, width), jnp.float32),
          self.param(f'layer{l}_w_rec', nn.initializers.orthogonal(column_axis=-1),
                     (self.hidden_size, width), jnp.float32),
          self.param(f'layer{l}_w_top', nn.initializers.lecun_normal(), (self.hidden_size, width), jnp.float32),
          self.param(f'layer{l}_b', nn.initializers.zeros, (width,), jnp.float32)))
    return hm_lstm_scan(tuple(layers), x, lengths, slope=slope, dynamic_boundaries=dynamic_boundaries)
