"""Feed-forward blocks."""
from typing import Callable, Sequence

import flax.linen as nn
import jax


class MLP(nn.Module):
  """Dense layers with an activation after each one (and after the last only if `activate_last`).

  Parikh et al. (2016) and Liu & Lapata (2018, eqs. 20 and 23) use two-layer ReLU perceptrons with
  dropout on each layer's input.

  Attributes:
    features: output size of each layer.
    activation: nonlinearity, default ReLU.
    dropout_rate: dropout applied to the input of every layer.
    activate_last: apply the activation after the last layer too.
  """
  features: Sequence[int]
  activation: Callable[[jax.Array], jax.Array] = nn.relu
  dropout_rate: float = 0.0
  activate_last: bool = True
  dropout_position: str = 'input'

  @nn.compact
  def __call__(self, x: jax.Array, *, deterministic: bool = True) -> jax.Array:
    """Maps [..., D] to [..., features[-1]]."""
    if self.dropout_position not in ('input', 'output'):
      raise ValueError(f"MLP dropout_position={self.dropout_position!r}; expected 'input' or 'output'")
    drop = self.dropout_rate > 0
    for i, size in enumerate(self.features):
      if drop and self.dropout_position == 'input':
        x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
      x = nn.Dense(size, name=f'dense_{i}')(x)
      if i + 1 < len(self.features) or self.activate_last:
        x = self.activation(x)
      if drop and self.dropout_position == 'output':
        x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
    return x
