"""Length-masked LSTM and BiLSTM encoders (Hochreiter & Schmidhuber 1997) built on `flax.linen.RNN`.

The forward direction stops updating its carry at `lengths` and the backward direction starts at the
last real token of each sequence (`flax.linen.RNN(..., seq_lengths=lengths)` flips only the real
prefix), so padding never changes a real output; outputs at padded positions are set to 0.
"""
from typing import Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured.nn import flatten
from jax_structured.nn import masks


class LSTM(nn.Module):
  """A unidirectional LSTM over padded sequences.

  Attributes:
    hidden_size: size of the hidden state (and of the outputs).
    reverse: run right-to-left over the real prefix of each sequence (outputs stay in input order).
  """
  hidden_size: int
  reverse: bool = False

  @nn.compact
  def __call__(self, inputs: jax.Array, lengths: jax.Array) -> jax.Array:
    """Encodes `inputs`.

    Args:
      inputs: float array [B, T, D_in].
      lengths: int array [B], real positions of each sequence (0 <= lengths <= T).

    Returns:
      float array [B, T, hidden_size]; zero at positions `t >= lengths`.
    """
    rnn = nn.RNN(nn.OptimizedLSTMCell(self.hidden_size), name='rnn')
    zeros = jnp.zeros(inputs.shape[:-2] + (self.hidden_size,), inputs.dtype)
    outputs = rnn(inputs, initial_carry=(zeros, zeros), seq_lengths=lengths, reverse=self.reverse,
                  keep_order=True)
    return masks.masked_fill(outputs, masks.sequence_mask(lengths, inputs.shape[-2]))


class BiLSTM(nn.Module):
  """A (multi-layer) bidirectional LSTM over padded sequences.

  Output position t is `[forward_t, backward_t]` (forward features first); Liu & Lapata (2018, eq. 7)
  split each direction's part into semantic and structure vectors, see `StructuredAttention`.

  Attributes:
    hidden_size: hidden size of EACH direction (outputs have 2 * hidden_size features).
    num_layers: stacked BiLSTM layers.
    dropout_rate: dropout between stacked layers (not after the last one).
  """
  hidden_size: int
  num_layers: int = 1
  dropout_rate: float = 0.0

  @nn.compact
  def __call__(self, inputs: jax.Array, lengths: jax.Array, *, deterministic: bool = True,
               ) -> jax.Array:
    """Encodes `inputs`.

    Args:
      inputs: float array [..., T, D_in] (any leading batch shape).
      lengths: int array [...], real positions of each sequence.
      deterministic: disables dropout when True.

    Returns:
      float array [..., T, 2 * hidden_size]; zero at positions `t >= lengths`.
    """
    x, flat_lengths, _, batch_shape = flatten.flatten_leading(inputs, lengths)
    for layer in range(self.num_layers):
      if layer > 0 and self.dropout_rate > 0:
        x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
      forward = LSTM(self.hidden_size, name=f'forward_{layer}')(x, flat_lengths)
      backward = LSTM(self.hidden_size, reverse=True, name=f'backward_{layer}')(x, flat_lengths)
      x = jnp.concatenate([forward, backward], axis=-1)
    return flatten.unflatten_leading(batch_shape, x)[0]


def split_directions(outputs: jax.Array, size: int, hidden_size: Optional[int] = None,
                     ) -> tuple[jax.Array, jax.Array]:
  """Splits BiLSTM outputs into `[first size features of each direction]` and the rest (eq. 7).

  Args:
    outputs: [..., 2 * H] BiLSTM outputs, forward half first.
    size: features taken from the start of each direction (0 < size <= H).
    hidden_size: H; defaults to `outputs.shape[-1] // 2`.

  Returns:
    (head [..., 2 * size], tail [..., 2 * (H - size)]): `head = [fw[:size], bw[:size]]`,
    `tail = [fw[size:], bw[size:]]`.
  """
  hidden_size = hidden_size or outputs.shape[-1] // 2
  if outputs.shape[-1] != 2 * hidden_size or not 0 < size <= hidden_size:
    raise ValueError(f'cannot split {outputs.shape[-1]} BiLSTM features into 2 x {size} + rest '
                     f'(hidden_size per direction {hidden_size})')
  forward, backward = outputs[..., :hidden_size], outputs[..., hidden_size:]
  head = jnp.concatenate([forward[..., :size], backward[..., :size]], axis=-1)
  tail = jnp.concatenate([forward[..., size:], backward[..., size:]], axis=-1)
  return head, tail
