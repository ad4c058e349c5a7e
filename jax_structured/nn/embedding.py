"""Word embeddings with optional pretrained initialisation (word2vec, GloVe) and freezing."""
from typing import Any, Callable, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np


def pretrained_init(embeddings: Any) -> Callable[..., jax.Array]:
  """An initializer returning a given table, checking the requested shape.

  Args:
    embeddings: array-like [vocab_size, features], e.g. `TaskData.embeddings`.

  Returns:
    `init(key, shape, dtype) -> jax.Array` suitable for `nn.Embed(embedding_init=...)`; it raises a
    ValueError naming both shapes when the model asks for another shape.
  """
  table = np.asarray(embeddings)
  if table.ndim != 2:
    raise ValueError(f'pretrained embeddings must be [vocab_size, dim], got shape {table.shape}')
  if not np.all(np.isfinite(table)):
    bad = np.argwhere(~np.isfinite(table))[0]
    raise ValueError(f'pretrained embeddings hold a non-finite value at row {bad[0]}, column {bad[1]}')

  def init(key, shape, dtype=jnp.float32):
    del key
    if tuple(shape) != table.shape:
      raise ValueError(f'pretrained embeddings have shape {table.shape} but the model expects '
                       f'{tuple(shape)} (vocab_size, embedding_dim): check model.embedding_dim and '
                       'that the vocabulary matches the embeddings file')
    return jnp.asarray(table, dtype)

  return init


class WordEmbedding(nn.Module):
  """Token ids -> vectors, with dropout on the output (Liu & Lapata: dropout on the input layer).

  The table is the parameter `embedding` of this module (optimisers find embeddings by that name to
  exclude them from L2 or to scale their learning rate).

  Attributes:
    vocab_size: number of rows.
    features: embedding size.
    embedding_init: initializer, e.g. `pretrained_init(task_data.embeddings)`; default N(0, 1/features).
    freeze: when True the table receives no gradient (`stop_gradient`), so pretrained vectors stay fixed.
    dropout_rate: dropout on the looked-up vectors.
    static_channel: Kim (2014)'s multichannel input: a second table `static_embedding`, initialised to
      the same values as `embedding` and never trained (`stop_gradient`), whose vectors are ADDED to
      the (fine-tuned) first table's. Kim applies each filter to both channels and adds the results;
      for a first layer that is linear in its input (a convolution, an LSTM's input projection) that is
      the layer applied to the sum of the channels, bias once: W x_static + W x_tuned + b =
      W (x_static + x_tuned) + b. So any encoder gets the multichannel input through this sum.
  """
  vocab_size: int
  features: int
  embedding_init: Optional[Callable[..., jax.Array]] = None
  freeze: bool = False
  dropout_rate: float = 0.0
  static_channel: bool = False

  @nn.compact
  def __call__(self, tokens: jax.Array, *, deterministic: bool = True) -> jax.Array:
    """Looks up `tokens` (int array [...]) and returns float array [..., features]."""
    init = self.embedding_init or nn.initializers.normal(stddev=self.features ** -0.5)
    table = self.param('embedding', init, (self.vocab_size, self.features))
    static = None
    if self.static_channel:  # initialised as a copy of `embedding` (also for a random init)
      static = jax.lax.stop_gradient(self.param('static_embedding', lambda _key, _shape: table,
                                                (self.vocab_size, self.features)))
    if self.freeze:
      table = jax.lax.stop_gradient(table)
    vectors = jnp.take(table, tokens, axis=0)
    if static is not None:
      vectors = vectors + jnp.take(static, tokens, axis=0)
    if self.dropout_rate > 0:
      vectors = nn.Dropout(self.dropout_rate)(vectors, deterministic=deterministic)
    return vectors
