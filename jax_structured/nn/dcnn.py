"""Dynamic convolutional neural network (DCNN) of Kalchbrenner, Grefenstette & Blunsom (2014), as Chen et
al. (2017, "Tree-LSTM guided attention pooling of DCNN", eqs. 2-3) use it, with static shapes and masks.

A DCNN layer l (of L) over a sequence of n_{l-1} real positions:
  1. wide one-dimensional convolution of width m (Kalchbrenner sec. 2.1; Chen eq. 2): every window of m
     positions that overlaps the sequence, zeros outside it, gives n_{l-1} + m - 1 outputs;
  2. folding (Kalchbrenner sec. 3.5, `convolution='row'` only): sums every two adjacent rows;
  3. dynamic k-max pooling (Kalchbrenner eq. 4, Chen eq. 3): per feature, the k_l largest values of the
     real outputs in their original order, k_l = max(k_top, ceil((L - l) / L * s)) for a sentence of s
     words (k_L = k_top);
  4. a bias per feature (row) and tanh (Kalchbrenner applies both after the pooling).
Two convolutions:
  'full': Chen et al.'s eq. 2: c_{l,i} = W_l^T [c_{l-1,i}; ...; c_{l-1,i+m-1}] mixes every input feature
          (a Kim-style window convolution); each position's vector has `features` entries, so the top
          layer's k_top local vectors c_i can be compared with a Tree-LSTM vector of the same size.
  'row':  Kalchbrenner's original: every feature map keeps the embedding's d rows and each row is
          convolved separately (F^j_i = sum_k m^j_{i,k} * F^{j-1}_k, row by row); the last layer folds the
          rows to d / 2. Local vectors have `features * d / 2` entries.

Per-example lengths are handled with masks (`lax.top_k` needs a static k): each layer pools to the
static K_l = max(k_top, ceil((L - l) / L * T)) of the padded length T, keeps the k_l(s) <= K_l largest real
values and zeroes the rest, so a sentence padded longer gives exactly the same outputs.
"""
from __future__ import annotations

import functools
import math
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured.nn import masks

CONVOLUTIONS = ('full', 'row')


def dynamic_k(lengths: jax.typing.ArrayLike, layer: int, num_layers: int, k_top: int) -> jax.Array:
  """Kalchbrenner eq. 4 / Chen eq. 3: k_l = max(k_top, ceil((L - l) / L * s)).

  Args:
    lengths: int [...] sentence lengths s (words).
    layer: l in 1..L.
    num_layers: L.
    k_top: the top layer's k.

  Returns:
    int32 [...] the number of values each feature keeps after layer l's pooling.
  """
  lengths = jnp.asarray(lengths, jnp.int32)
  # Integer arithmetic: ceil(a / b) = (a + b - 1) // b, exact for every length.
  k = ((num_layers - layer) * lengths + num_layers - 1) // num_layers
  return jnp.maximum(k_top, k).astype(jnp.int32)


def static_k(max_length: int, layer: int, num_layers: int, k_top: int) -> int:
  """The static width of layer l's pooled output for a padded length T (an upper bound of `dynamic_k`)."""
  return max(k_top, math.ceil((num_layers - layer) * max_length / num_layers))


def wide_windows(x: jax.Array, width: int) -> jax.Array:
  """Every window of `width` positions of a wide convolution: x [..., T, C] -> [..., T + width - 1, width, C].

  Window t covers input positions t - width + 1 .. t (zeros outside 0..T-1), so outputs t < n + width - 1
  are the wide convolution of a sequence whose n real positions are followed by zeros.
  """
  time_axis = x.ndim - 2
  pad = [(0, 0)] * x.ndim
  pad[time_axis] = (width - 1, width - 1)
  padded = jnp.pad(x, pad)
  steps = x.shape[time_axis] + width - 1
  windows = [jax.lax.slice_in_dim(padded, w, w + steps, axis=time_axis) for w in range(width)]
  return jnp.stack(windows, axis=time_axis + 1)


def wide_convolution(x: jax.Array, kernel: jax.Array) -> jax.Array:
  """Chen eq. 2 (wide): out_t = sum_w W[w]^T x_{t - m + 1 + w}; x [..., T, C], kernel [m, C, F] -> [..., T + m - 1, F]."""
  windows = wide_windows(x, kernel.shape[0])  # [..., T + m - 1, m, C]
  return jnp.einsum('...twc,wcf->...tf', windows, kernel)


def row_convolution(x: jax.Array, kernel: jax.Array) -> jax.Array:
  """Kalchbrenner's row-wise wide convolution with several maps (sec. 3.1 and eq. 6 without the bias):
  out[t, j, r] = sum_k sum_w K[w, k, j, r] x[t - m + 1 + w, k, r].

  Args:
    x: [..., T, n_in, R] feature maps (n_in maps of R rows; the sentence matrix is one map of d rows).
    kernel: [m, n_in, n_out, R].

  Returns:
    [..., T + m - 1, n_out, R].
  """
  width = kernel.shape[0]
  lead = x.shape[:-3]
  flat = x.reshape(lead + (x.shape[-3], -1))  # [..., T, n_in * R]: windows along time only
  windows = wide_windows(flat, width).reshape(lead + (x.shape[-3] + width - 1, width) + x.shape[-2:])
  return jnp.einsum('...twkr,wkjr->...tjr', windows, kernel)


def fold(x: jax.Array) -> jax.Array:
  """Kalchbrenner sec. 3.5 folding: sums rows 2i and 2i + 1; [..., R] -> [..., R / 2] (R even)."""
  if x.shape[-1] % 2:
    raise ValueError(f'folding needs an even number of rows, got {x.shape[-1]} (use an even embedding_dim)')
  return x[..., 0::2] + x[..., 1::2]


def kmax_pooling(x: jax.Array, lengths: jax.Array, k: jax.Array, k_static: int) -> tuple[jax.Array, jax.Array]:
  """Order-preserving k-max pooling over time with a per-example k (Kalchbrenner sec. 3.3).

  For every feature (every trailing index), the k largest values among the first `lengths` positions,
  in their original order; ties go to the earlier position. A sequence with fewer than k real positions
  keeps all of them.

  Args:
    x: float [..., T, *F] values.
    lengths: int [...] real positions of each sequence.
    k: int [...] how many to keep (<= k_static).
    k_static: the static output width K (inputs shorter than K are zero-padded to it).

  Returns:
    (pooled [..., K, *F], zero at slots >= the kept count; kept [...] = min(k, lengths)).
  """
  time_axis = len(lengths.shape)
  if x.shape[time_axis] < k_static:  # fewer positions than slots: pad (never real, never kept)
    pad = [(0, 0)] * x.ndim
    pad[time_axis] = (0, k_static - x.shape[time_axis])
    x = jnp.pad(x, pad)
  steps = x.shape[time_axis]
  feature_shape = x.shape[time_axis + 1:]
  # Move time last: [..., *F, T].
  moved = jnp.moveaxis(x, len(lengths.shape), -1)
  extra = (1,) * len(feature_shape)
  valid = masks.sequence_mask(lengths, steps).reshape(lengths.shape + extra + (steps,))
  low = jnp.finfo(x.dtype).min
  scores = jnp.where(valid, moved, low)
  _, index = jax.lax.top_k(scores, k_static)  # [..., *F, K]; equal values: the lower index first
  kept = jnp.minimum(k, lengths).astype(jnp.int32)
  rank_ok = jnp.arange(k_static) < kept.reshape(kept.shape + extra + (1,))
  index = jnp.where(rank_ok, index, steps)  # dropped ranks sort last
  index = jnp.sort(index, axis=-1)
  keep = index < steps
  values = jnp.take_along_axis(moved, jnp.minimum(index, steps - 1), axis=-1)
  values = jnp.where(keep, values, jnp.zeros((), x.dtype))
  return jnp.moveaxis(values, -1, len(lengths.shape)), kept


@functools.partial(jax.jit, static_argnames=('layer', 'num_layers', 'k_top', 'convolution', 'steps'))
def dcnn_layer(h: jax.Array, n: jax.Array, lengths: jax.Array, kernel: jax.Array, bias: jax.Array, *,
               layer: int, num_layers: int, k_top: int, convolution: str, steps: int
               ) -> tuple[jax.Array, jax.Array, jax.Array | None]:
  """DCNN layer l of L (module docstring; one jitted function, so that eager calls compile once).

  Args:
    h: [B, T_l, C] ('full') or [B, T_l, n_in, R] ('row') the layer's input, zero at slots >= n.
    n: int [B] real input positions; lengths: int [B] sentence lengths s (for k_l).
    kernel: [m, C, F] or [m, n_in, F, R]; bias: [F] or [F, R'] (R' = R / 2 when the layer folds).
    layer, num_layers, k_top, convolution: l, L, k_top and the convolution kind.
    steps: the padded sentence length T (the static pooled width).

  Returns:
    (output [B, K_l, F] or [B, K_l, F, R'], zero at slots >= n_l; n_l [B]; for layer 1 the word-aligned
    tanh(convolution + bias) of the window ending at each word, [B, T, F * R'], else None).
  """
  width = kernel.shape[0]
  if convolution == 'full':
    conv = wide_convolution(h, kernel)  # [B, T_l + m - 1, F]
  else:
    conv = row_convolution(h, kernel)  # [B, T_l + m - 1, F, R]
    if layer == num_layers:
      conv = fold(conv)
  first = None
  if layer == 1:
    states = jnp.tanh(conv[:, :steps] + bias)
    first = masks.masked_fill(states.reshape(states.shape[:2] + (-1,)), masks.sequence_mask(lengths, steps))
  k = dynamic_k(lengths, layer, num_layers, k_top)
  pooled, kept = kmax_pooling(conv, n + width - 1, k, static_k(steps, layer, num_layers, k_top))
  out = jnp.tanh(pooled + bias)  # Kalchbrenner: bias and non-linearity after the pooling
  return masks.masked_fill(out, masks.sequence_mask(kept, out.shape[1])), kept, first


class DCNN(nn.Module):
  """One DCNN: `len(widths)` layers of wide convolution, (folding), dynamic k-max pooling, bias, tanh.

  Attributes:
    widths: the convolution width of each layer (Kalchbrenner and Chen: 7 then 5).
    features: feature maps per layer (Chen: 100).
    k_top: k of the top layer's pooling (Kalchbrenner's SST net: 4).
    convolution: 'full' (Chen eq. 2) or 'row' (Kalchbrenner; folds the last layer).
  """
  widths: Sequence[int] = (7, 5)
  features: int = 100
  k_top: int = 4
  convolution: str = 'full'

  @nn.compact
  def __call__(self, x: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Runs the DCNN.

    Args:
      x: float [B, T, E] embedded words, lengths int [B] (>= 1).

    Returns:
      local [B, K_top, D]: the top layer's k_top local vectors c_i (D = features for 'full',
        features * E / 2 for 'row'), zero at slots >= local_lengths;
      local_lengths [B]: min(k_top, real top-layer positions) (k_top unless a sentence is shorter
        than k_top - widths[-1] + 1 after the layers below);
      first [B, T, F1]: the first layer's tanh(convolution + bias) of the window ending at each word,
        zero at padding (the word-aligned states of the encoder; F1 = features, or features * E for 'row').
    """
    if self.convolution not in CONVOLUTIONS:
      raise ValueError(f'config.model.encoder.convolution={self.convolution!r}; valid: {CONVOLUTIONS}')
    if not self.widths or min(self.widths) < 1 or self.k_top < 1 or self.features < 1:
      raise ValueError(f'DCNN widths={tuple(self.widths)}, k_top={self.k_top}, features={self.features}: '
                       'need at least one layer, widths >= 1, k_top >= 1 and features >= 1')
    lengths = jnp.asarray(lengths, jnp.int32)
    steps = x.shape[-2]
    num_layers = len(self.widths)
    h = masks.masked_fill(x, masks.sequence_mask(lengths, steps))
    if self.convolution == 'row':
      h = h[..., None, :]  # one map of E rows
    n = lengths
    first = None
    init = nn.initializers.lecun_normal()
    for l, width in enumerate(self.widths, start=1):
      if self.convolution == 'full':
        kernel = self.param(f'kernel_{l}', init, (width, h.shape[-1], self.features))
        bias = self.param(f'bias_{l}', nn.initializers.zeros, (self.features,))
      else:
        rows = h.shape[-1] // (2 if l == num_layers else 1)
        if l == num_layers and h.shape[-1] % 2:
          raise ValueError(f'folding needs an even number of rows, got {h.shape[-1]} (use an even '
                           'embedding_dim with convolution="row")')
        kernel = self.param(f'kernel_{l}', _row_init, (width, h.shape[-2], self.features, h.shape[-1]))
        bias = self.param(f'bias_{l}', nn.initializers.zeros, (self.features, rows))
      h, n, states = dcnn_layer(h, n, lengths, kernel, bias, layer=l, num_layers=num_layers,
                                k_top=self.k_top, convolution=self.convolution, steps=steps)
      if l == 1:
        first = states
    local = h.reshape(h.shape[:2] + (-1,))
    return local, n, first


def _row_init(key, shape, dtype=jnp.float32):
  """Row-wise kernels [m, n_in, n_out, R]: LeCun normal with fan-in m * n_in (each row sums that many terms)."""
  return jax.random.normal(key, shape, dtype) * jnp.sqrt(1.0 / (shape[0] * shape[1])).astype(dtype)
