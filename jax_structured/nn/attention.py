"""Softmax attention: intra-sentence attention (Liu & Lapata 2018, eqs. 1-3) and the decomposable
inter-sentence attention of Parikh et al. (2016) as used by Liu & Lapata (eqs. 20-22)."""
import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured.nn import masks


def masked_softmax(scores: jax.Array, mask: jax.Array, axis: int = -1) -> jax.Array:
  """Softmax of `scores` over `axis` restricted to `mask`; rows with no allowed entry are all 0.

  Masked entries get probability exactly 0 and no gradient; an empty row gives zeros (not NaN), which
  keeps padded examples finite.

  Args:
    scores: float array [...].
    mask: bool array broadcastable to `scores`.
    axis: the normalised axis.

  Returns:
    float array like `scores`.
  """
  mask = jnp.broadcast_to(mask, scores.shape)
  safe = jnp.where(mask, scores, jnp.asarray(-jnp.inf, scores.dtype))
  top = jnp.max(safe, axis=axis, keepdims=True)
  top = jnp.where(jnp.isfinite(top), top, 0.0)
  weights = jnp.where(mask, jnp.exp(jnp.where(mask, scores, 0.0) - jax.lax.stop_gradient(top)), 0.0)
  total = jnp.sum(weights, axis=axis, keepdims=True)
  return weights / jnp.where(total > 0, total, 1.0)


def intra_attention(scores: jax.Array, values: jax.Array, lengths: jax.Array, *,
                    exclude_self: bool = False) -> tuple[jax.Array, jax.Array]:
  """Intra-sentence attention, Liu & Lapata (2018) eqs. 2-3: `a_ij = softmax_j f_ij`, `r_i = sum_j a_ij u_j`.

  Args:
    scores: f [..., T, T], `scores[..., i, j] = F(u_i, u_j)` (eq. 1).
    values: u [..., T, D].
    lengths: int [...], real positions.
    exclude_self: forbid `j == i` (a word does not attend to itself).

  Returns:
    (context r [..., T, D], weights a [..., T, T]); rows and columns of padded positions are 0.
  """
  length = scores.shape[-1]
  mask = masks.pair_mask(lengths, length)
  if exclude_self:
    mask = mask & ~jnp.eye(length, dtype=bool)
  weights = masked_softmax(scores, mask, axis=-1)
  return jnp.einsum('...ij,...jd->...id', weights, values), weights


class IntraAttention(nn.Module):
  """Eqs. 1-3 of Liu & Lapata (2018) with a bilinear score `F(u_i, u_j) = u_i^T W u_j`.

  Attributes:
    exclude_self: forbid a word from attending to itself.
  """
  exclude_self: bool = False

  @nn.compact
  def __call__(self, values: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
    """values [..., T, D], lengths [...] -> (context [..., T, D], weights [..., T, T])."""
    features = values.shape[-1]
    kernel = self.param('bilinear', nn.initializers.lecun_normal(), (features, features))
    scores = jnp.einsum('...id,de,...je->...ij', values, kernel.astype(values.dtype), values)
    return intra_attention(scores, values, lengths, exclude_self=self.exclude_self)


def inter_attention(scores: jax.Array, premise: jax.Array, hypothesis: jax.Array,
                    premise_lengths: jax.Array, hypothesis_lengths: jax.Array,
                    ) -> tuple[jax.Array, jax.Array]:
  """Soft alignment between two sentences, Liu & Lapata (2018) eqs. 21-22 (Parikh et al. 2016, eq. 2).

  Args:
    scores: o [..., n, m] alignment scores between premise word i and hypothesis word j (eq. 20).
    premise: r^p [..., n, D].
    hypothesis: r^h [..., m, D].
    premise_lengths, hypothesis_lengths: int [...].

  Returns:
    (beta [..., n, D], alpha [..., m, D]): `beta_i = sum_j softmax_j(o_ij) r^h_j` aligned to each
    premise word and `alpha_j = sum_i softmax_i(o_ij) r^p_i` aligned to each hypothesis word; padded
    positions are 0.
  """
  mask = (masks.sequence_mask(premise_lengths, scores.shape[-2])[..., :, None]
          & masks.sequence_mask(hypothesis_lengths, scores.shape[-1])[..., None, :])
  to_hypothesis = masked_softmax(scores, mask, axis=-1)
  to_premise = masked_softmax(scores, mask, axis=-2)
  beta = jnp.einsum('...ij,...jd->...id', to_hypothesis, hypothesis)
  alpha = jnp.einsum('...ij,...id->...jd', to_premise, premise)
  return beta, alpha
