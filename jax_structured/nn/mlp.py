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

  @nn.compact
  def __call__(self, x: jax.Array, *, deterministic: bool = True) -> jax.Array:
    """Maps [..., D] to [..., features[-1]]."""
    for i, size in enumerate(self.features):
      if self.dropout_rate > 0:
        x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
      x = nn.Dense(size, name=f'dense_{i}')(x)
      if i + 1 < len(self.features) or self.activate_last:
        x = self.activation(x)
    return x
