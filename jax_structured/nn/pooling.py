"""Masked pooling of a padded sequence of vectors into one vector (sentence or document vector).

All poolings ignore positions `t >= lengths`; an empty sequence (length 0, e.g. a padding sentence
of a document) pools to the zero vector with zero (finite) gradients.
"""
import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured.nn import attention
from jax_structured.nn import masks

POOLINGS = ('mean', 'max', 'sum', 'attention')


def masked_sum(x: jax.Array, lengths: jax.Array) -> jax.Array:
  """Sum over real positions: x [..., T, D], lengths [...] -> [..., D]."""
  return jnp.sum(masks.masked_fill(x, masks.sequence_mask(lengths, x.shape[-2])), axis=-2)


def masked_mean(x: jax.Array, lengths: jax.Array) -> jax.Array:
  """Mean over real positions (0 for an empty sequence): [..., T, D] -> [..., D]."""
  count = jnp.maximum(jnp.asarray(lengths), 1).astype(x.dtype)[..., None]
  return masked_sum(x, lengths) / count


def masked_max(x: jax.Array, lengths: jax.Array) -> jax.Array:
  """Feature-wise max over real positions (0 for an empty sequence): [..., T, D] -> [..., D]."""
  mask = masks.sequence_mask(lengths, x.shape[-2])
  low = jnp.finfo(x.dtype).min
  pooled = jnp.max(masks.masked_fill(x, mask, low), axis=-2)
  return jnp.where((jnp.asarray(lengths) > 0)[..., None], pooled, jnp.zeros_like(pooled))


class AttentionPooling(nn.Module):
  """Attention pooling (Yang et al. 2016): `u_t = tanh(W x_t + b)`, `a = softmax_t(u_t^T q)`, `sum_t a_t x_t`.

  Attributes:
    features: size of the hidden projection u_t (default: input size).
  """
  features: int = 0

  @nn.compact
  def __call__(self, x: jax.Array, lengths: jax.Array) -> jax.Array:
    """x [..., T, D], lengths [...] -> [..., D]."""
    hidden = jnp.tanh(nn.Dense(self.features or x.shape[-1], name='projection')(x))
    query = self.param('query', nn.initializers.normal(stddev=0.1), (hidden.shape[-1],))
    scores = hidden @ query.astype(hidden.dtype)
    weights = attention.masked_softmax(scores, masks.sequence_mask(lengths, x.shape[-2]))
    self.sow('intermediates', 'pooling_weights', weights)
    return jnp.einsum('...t,...td->...d', weights, x)


class Pooling(nn.Module):
  """Dispatches on `kind` in POOLINGS ('mean', 'max', 'sum', 'attention')."""
  kind: str = 'max'

  @nn.compact
  def __call__(self, x: jax.Array, lengths: jax.Array) -> jax.Array:
    """x [..., T, D], lengths [...] -> [..., D]."""
    if self.kind == 'mean':
      return masked_mean(x, lengths)
    if self.kind == 'max':
      return masked_max(x, lengths)
    if self.kind == 'sum':
      return masked_sum(x, lengths)
    if self.kind == 'attention':
      return AttentionPooling(name='attention')(x, lengths)
    raise ValueError(f'unknown pooling {self.kind!r}; valid: {POOLINGS}')
