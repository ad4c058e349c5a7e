"""A context-free word encoder under the attention of Liu & Lapata (2018).

Registered as the encoder 'context_free' (`config.model.encoder.name`). Each word's vectors are
computed from the word alone (no recurrence, no convolution), and word order reaches the model only
through the arc scores of the attention:

    e_t = tanh(W_e x_t + b_e)            semantic part   [..., T, 2 * semantic_size]
    d_t = tanh(W_d [x_t; q_t] + b_d)     structure part  [..., T, 2 * (hidden_size - semantic_size)]
    f_ij = (eq. 10 over d) - m |i - j|   (position 'distance', the default)

with x_t the word's embedding. `position` says how order enters: 'distance' (default) adds the fixed
linear distance penalty of ALiBi (Press et al. 2022) to every arc score f_ij of eq. 10, so that among
the words the content scores prefer equally, the nearest wins; 'sinusoidal' (Vaswani et al. 2017,
sec. 3.5) or 'learned' put a position vector q_t into d_t instead (no penalty); 'none': no order at all.
Then the attention of Liu & Lapata (2018) exactly as over BiLSTM outputs (`nn.StructuredAttention`,
fed [e_t; d_t] in its per-direction layout, so its eq. 7 split returns e_t and d_t): d_t scores every
arc (eqs. 8-11), the scores are normalised ('structured': matrix-tree marginals, eqs. 12-15; 'simple':
a softmax over each word's candidate heads; 'inside_outside': projective marginals) and
r_t = tanh(W_r [e_t, p_t, c_t]) (eqs. 16-18). With attention 'none' the states are e_t: a bag of words.

Why it exists: over a BiLSTM, a task that needs each word combined with its head can be solved by the
recurrence alone, and the attention never has to align (README, "The default job"). Here the only
route from one word to another, and the only route for word order, is the attention, so a model that
solves such a task must put its attention on the right words, and the trees induced from its arc
scores show whether it did.

What we measured on the nearest-agreement grammar of `data/synthetic.py` (issue 20; README, "The
default job"): with q_t in BOTH parts (h_t = tanh(W [x_t; q_t]) split by eq. 7) the no-attention model
read positions from its states (test accuracy 0.85 where a bag of words is at chance) and both
attention variants did worse than it, with trees at chance. With sinusoids in d_t only, the attention
variants solve the task, but in 2 of 3 seeds by attending to the FARTHER of the two candidate heads:
with soft attention, any weighting that differs between the near and the far candidate tells the
near one's colour, so the data cannot say which is the head. The distance penalty breaks that
symmetry the way the grammar does (nearest head), and the induced trees recover the planted ones.

Padding is exact: e_t and d_t depend on word t (and the index t) only, the penalty on i - j only, and
the attention masks by `lengths`.
"""
from __future__ import annotations

from typing import ClassVar

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jax_structured import nn as jsnn
from jax_structured.models import encoders

POSITIONS = ('distance', 'sinusoidal', 'learned', 'none')


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


def distance_matrix(steps: int) -> jax.Array:
  """|i - j| for i, j < steps: float32 [steps, steps] (the 'distance' position penalty, ALiBi's
  linear bias of Press et al. 2022, on the arc scores f_ij of Liu & Lapata's eq. 10).

  Shifting every position by the same offset leaves it unchanged, and so does padding.
  """
  index = jnp.arange(steps, dtype=jnp.float32)
  return jnp.abs(index[:, None] - index[None, :])


def interleave_halves(semantic: jax.Array, structure: jax.Array) -> jax.Array:
  """[e_fw; d_fw; e_bw; d_bw]: the per-direction layout whose eq. 7 split (`nn.rnn.split_directions`
  with the semantic size of one half of e) gives back e = [e_fw; e_bw] and d = [d_fw; d_bw].

  Args:
    semantic: [..., T, 2 S]; structure: [..., T, 2 K].

  Returns:
    [..., T, 2 (S + K)].
  """
  e_fw, e_bw = jnp.split(semantic, 2, axis=-1)
  d_fw, d_bw = jnp.split(structure, 2, axis=-1)
  return jnp.concatenate([e_fw, d_fw, e_bw, d_bw], axis=-1)


def word_vectors(x: jax.Array, positions: jax.Array | None, kernel: jax.Array, bias: jax.Array,
                 ) -> jax.Array:
  """tanh(W [x_t; q_t] + b): each word from itself and its position only (e_t and d_t).

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
  """Embeddings (+ position, for the arc scores only) -> word vectors e_t, d_t (no recurrence) ->
  Liu & Lapata attention (module docstring). States: [..., T, 2 * semantic_size] (r_t with attention,
  e_t without).
  Attention variants other than 'none' sow `arc_scores`, `root_scores`, `lengths`, `arc_marginals`,
  `root_marginals` (prefixed by `sow_prefix`), as the 'liu_lapata' encoder does.

  Attributes:
    hidden_size: e_t and d_t have 2 * hidden_size features together (as a BiLSTM of that size).
    semantic_size: e_t has 2 * semantic_size features; d_t, which scores the arcs, has
      2 * (hidden_size - semantic_size).
    attention: 'none' | 'simple' | 'structured' | 'inside_outside' (`encoders.ATTENTIONS`).
    position: one of POSITIONS: 'distance' adds -distance_slope * |i - j| to every arc score
      (no position vector); 'sinusoidal' / 'learned' put a position vector q_t into d_t; 'none'.
    distance_slope: m of the 'distance' penalty (fixed, as in ALiBi).
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
  position: str = 'distance'
  distance_slope: float = 1.0
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
    if self.position == 'distance' and not self.distance_slope > 0:
      raise ValueError(f'config.model.encoder.distance_slope={self.distance_slope} must be > 0 for '
                       "position='distance' (or use position='none')")
    if self.position_shift < 0:
      raise ValueError(f'config.model.encoder.position_shift={self.position_shift} must be >= 0')
    if not 0 < self.semantic_size < self.hidden_size:
      raise ValueError(f'config.model.encoder.semantic_size={self.semantic_size} must be in '
                       f'(0, hidden_size={self.hidden_size}): the rest of each half scores the arcs')
    steps = x.shape[-2]
    lengths = jnp.asarray(lengths, jnp.int32)
    mask = jsnn.sequence_mask(lengths, steps)
    semantic_width = 2 * self.semantic_size
    structure_width = 2 * (self.hidden_size - self.semantic_size)
    semantic = jsnn.masked_fill(word_vectors(
        x, None, self.param('semantic_kernel', nn.initializers.lecun_normal(),
                            (x.shape[-1], semantic_width)),
        self.param('semantic_bias', nn.initializers.zeros, (semantic_width,))), mask)  # e_t
    if self.attention == 'none':
      return encoders.EncoderOutput(semantic)
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
    structure = jsnn.masked_fill(word_vectors(
        x, positions, self.param('structure_kernel', nn.initializers.lecun_normal(),
                                 (inputs, structure_width)),
        self.param('structure_bias', nn.initializers.zeros, (structure_width,))), mask)  # d_t
    hidden = interleave_halves(semantic, structure)
    arc_bias = None
    if self.position == 'distance':
      arc_bias = -jnp.asarray(self.distance_slope, x.dtype) * distance_matrix(steps).astype(x.dtype)
    states = jsnn.StructuredAttention(self.semantic_size, normalizer=normalizer,
                                      single_root=self.single_root, name='attention')(
                                          hidden, lengths, arc_bias=arc_bias, sow_prefix=sow_prefix,
                                          sow_splits=sow_splits)
    return encoders.EncoderOutput(states)
