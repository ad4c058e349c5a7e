"""A context-free word encoder under the attention of Liu & Lapata (2018).

Registered as the encoder 'context_free' (`config.model.encoder.name`). Each word's vector is computed
from the word and its position ALONE (no recurrence, no convolution):

    h_t = tanh(W_h [x_t; q_t] + b_h)                                   [..., T, 2 * hidden_size]

with x_t the word's embedding and q_t its position vector (`position`: a learned table row, the
sinusoids of Vaswani et al. 2017, sec. 3.5, or nothing). Then the attention of Liu & Lapata (2018)
exactly as over BiLSTM outputs (`nn.StructuredAttention`): h_t is split into a semantic part e_t and a
structure part d_t (eq. 7, the first `semantic_size` features of each half), d_t scores every arc
(eqs. 8-11), the scores are normalised ('structured': matrix-tree marginals, eqs. 12-15; 'simple': a
softmax over each word's candidate heads; 'inside_outside': projective marginals) and
r_t = tanh(W_r [e_t, p_t, c_t]) (eqs. 16-18). With attention 'none' the states are h itself.

Why it exists: over a BiLSTM, a task that needs each word combined with its head can be solved by the
recurrence alone, and the attention never has to align (README, "The default job"). Here the only
route from one word to another is the attention, so a model that solves such a task must put its
attention on the right words, and the trees induced from its arc scores show whether it did. The
position vector lets the bilinear arc scorer (eq. 10) prefer near heads, in a direction, over far
ones. Tried as the default job's encoder (issue 20, 3 seeds on a nearest-agreement grammar) it did NOT
beat no attention (test accuracy none 0.849 / simple 0.711 / structured 0.671, UAS at chance), so the
default job keeps its BiLSTM; see the closing note of that attempt.

Padding is exact: h_t depends on word t and the index t only, and the attention masks by `lengths`.
"""
from __future__ import annotations

from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jax_structured import nn as jsnn
from jax_structured.models import encoders

POSITIONS = ('learned', 'sinusoidal', 'none')


def sinusoidal_positions(positions: jax.Array, features: int) -> jax.Array:
  """Sinusoidal position vectors (Vaswani et al. 2017, sec. 3.5) of any (shifted) positions.

  PE[t, 2i] = sin(t / 10000^(2i / F)), PE[t, 2i + 1] = cos(t / 10000^(2i / F)).

  Args:
    positions: int or float [...] positions t (e.g. `arange(T)`, plus a per-sentence shift).
    features: F, even.

  Returns:
    float32 [..., features]; the row of t depends on t only, so padding is exact.
  """
  if features < 2 or features % 2:
    raise ValueError(f'config.model.encoder.position_dim={features} must be even and >= 2 for '
                     "position='sinusoidal'")
  t = jnp.asarray(positions, jnp.float32)[..., None]
  rates = 10000.0 ** (-np.arange(0, features, 2, dtype=np.float32) / features)
  angles = t * rates
  return jnp.stack([jnp.sin(angles), jnp.cos(angles)], axis=-1).reshape(angles.shape[:-1] + (features,))


def word_vectors(x: jax.Array, positions: jax.Array | None, kernel: jax.Array, bias: jax.Array,
                 ) -> jax.Array:
  """h_t = tanh(W_h [x_t; q_t] + b_h): each word from itself and its position only.

  Args:
    x: float [..., T, E] word embeddings.
    positions: float [T, P] or [..., T, P] position vectors q_t (None: no position information).
    kernel: W_h [E + P, D]; bias: b_h [D].

  Returns:
    float [..., T, D].
  """
  if positions is not None:
    positions = jnp.broadcast_to(positions.astype(x.dtype), x.shape[:-1] + positions.shape[-1:])
    x = jnp.concatenate([x, positions], axis=-1)
  return jnp.tanh(x @ kernel.astype(x.dtype) + bias.astype(x.dtype))


@encoders.register('context_free')
class ContextFreeEncoder(encoders.Encoder):
  """Embeddings + position -> word vectors h_t (no recurrence) -> Liu & Lapata attention (module
  docstring). States: [..., T, 2 * semantic_size] with attention, [..., T, 2 * hidden_size] without.
  Attention variants other than 'none' sow `arc_scores`, `root_scores`, `lengths`, `arc_marginals`,
  `root_marginals` (prefixed by `sow_prefix`), as the 'liu_lapata' encoder does.

  Attributes:
    hidden_size: h_t has 2 * hidden_size features (two halves, split as BiLSTM outputs are, eq. 7).
    semantic_size: per-half semantic part (eq. 7); 2 * (hidden_size - semantic_size) structure
      features score the arcs.
    attention: 'none' | 'simple' | 'structured' | 'inside_outside' (`encoders.ATTENTIONS`).
    position: one of POSITIONS.
    position_dim: size of q_t ('learned' and 'sinusoidal').
    max_length: rows of the learned position table (inputs longer than max_length - position_shift
      are an error).
    position_shift: in training, every sentence's positions are shifted by a random offset in
      [0, position_shift] (rng stream 'dropout'); 0 in evaluation. Absolute positions then say
      little, relative ones (which the bilinear arc scorer can compare) keep their meaning.
    single_root: exactly one word hangs from ROOT (the paper's formulation).
  """
  hidden_size: int = 32
  semantic_size: int = 16
  attention: str = 'structured'
  position: str = 'learned'
  position_dim: int = 16
  max_length: int = 64
  position_shift: int = 0
  single_root: bool = True
  CAUSAL: ClassVar[bool] = False

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del structure
    normalizer = encoders.attention_normalizer(self.attention, 'encoder.attention')
    if self.position not in POSITIONS:
      raise ValueError(f'config.model.encoder.position={self.position!r}; valid: {POSITIONS}')
    if self.position_shift < 0:
      raise ValueError(f'config.model.encoder.position_shift={self.position_shift} must be >= 0')
    steps = x.shape[-2]
    index = jnp.broadcast_to(jnp.arange(steps), x.shape[:-1])  # [..., T]
    if train and self.position_shift and self.position != 'none':
      shift = jax.random.randint(self.make_rng('dropout'), x.shape[:-2] + (1,), 0,
                                 self.position_shift + 1)
      index = index + shift
    positions = None
    if self.position == 'learned':
      if steps + self.position_shift > self.max_length:
        raise ValueError(f'inputs of {steps} words (+ position_shift={self.position_shift}), but the '
                         f'learned position table has config.model.encoder.max_length='
                         f'{self.max_length} rows: raise it (or use position=\'sinusoidal\')')
      table = self.param('position_embedding',
                         nn.initializers.normal(stddev=self.position_dim ** -0.5),
                         (self.max_length, self.position_dim))
      positions = jnp.take(table, index, axis=0)
    elif self.position == 'sinusoidal':
      positions = sinusoidal_positions(index, self.position_dim)
    inputs = x.shape[-1] + (0 if positions is None else positions.shape[-1])
    kernel = self.param('word_kernel', nn.initializers.lecun_normal(), (inputs, 2 * self.hidden_size))
    bias = self.param('word_bias', nn.initializers.zeros, (2 * self.hidden_size,))
    lengths = jnp.asarray(lengths, jnp.int32)
    hidden = jsnn.masked_fill(word_vectors(x, positions, kernel, bias),
                              jsnn.sequence_mask(lengths, steps))
    states = jsnn.StructuredAttention(self.semantic_size, normalizer=normalizer,
                                      single_root=self.single_root, name='attention')(
                                          hidden, lengths, sow_prefix=sow_prefix, sow_splits=sow_splits)
    return encoders.EncoderOutput(states)
