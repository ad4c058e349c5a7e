"""Length masks shared by every module of `jax_structured.nn`.

Every sequence tensor in the library is padded to a static length `T` and comes with `lengths` (int32,
the number of real positions); padding must never change a real output, so modules derive their masks
from `lengths` with these helpers.
"""
import jax
import jax.numpy as jnp


def sequence_mask(lengths: jax.typing.ArrayLike, max_length: int) -> jax.Array:
  """Boolean mask of real positions.

  Args:
    lengths: int array [...], number of real positions of each sequence.
    max_length: the padded length T.

  Returns:
    bool array [..., T], True at positions `t < lengths`.
  """
  lengths = jnp.asarray(lengths)
  return jnp.arange(max_length) < lengths[..., None]


def pair_mask(lengths: jax.typing.ArrayLike, max_length: int) -> jax.Array:
  """Boolean mask [..., T, T] of pairs (i, j) where both positions are real."""
  mask = sequence_mask(lengths, max_length)
  return mask[..., :, None] & mask[..., None, :]


def masked_fill(x: jax.Array, mask: jax.Array, value: float = 0.0) -> jax.Array:
  """`x` where `mask` (broadcast over trailing feature axes) else `value`."""
  mask = mask.reshape(mask.shape + (1,) * (x.ndim - mask.ndim))
  return jnp.where(mask, x, jnp.asarray(value, x.dtype))
