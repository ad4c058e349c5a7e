"""The 'context_free' encoder (models/context_free.py) against a float64 numpy transcription.

h_t = tanh(W_h [x_t; q_t] + b_h), then Liu & Lapata's eqs. 7-18 with the tree marginals of every
sentence enumerated by brute force (tests/brute_force.py), or the per-word softmax ('simple').
"""
import brute_force
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_structured.models import context_free
from jax_structured.models import encoders

E, T = 3, 5
LENGTHS = np.array([4, 1, 5, 0], np.int32)


def np_sinusoids(length, features):
  """Vaswani et al. (2017), sec. 3.5, written out per entry."""
  out = np.zeros((length, features))
  for t in range(length):
    for i in range(features // 2):
      out[t, 2 * i] = np.sin(t / 10000 ** (2 * i / features))
      out[t, 2 * i + 1] = np.cos(t / 10000 ** (2 * i / features))
  return out


def np_encoder(p, x, length, position, semantic_size, attention, position_dim):
  """The encoder for one sentence in float64 numpy: states [length, D] of the real words."""
  x = np.asarray(x, np.float64)[:length]
  if position == 'learned':
    x = np.concatenate([x, np.asarray(p['position_embedding'])[:length]], -1)
  elif position == 'sinusoidal':
    x = np.concatenate([x, np_sinusoids(length, position_dim)], -1)
  h = np.tanh(x @ p['word_kernel'] + p['word_bias'])
  if attention == 'none':
    return h
  a = p['attention']
  half = h.shape[-1] // 2
  e = np.concatenate([h[:, :semantic_size], h[:, half:half + semantic_size]], -1)  # eq. 7
  d = np.concatenate([h[:, semantic_size:half], h[:, half + semantic_size:]], -1)
  t_p = np.tanh(d @ a['parent']['kernel'] + a['parent']['bias'])  # eq. 8
  t_c = np.tanh(d @ a['child']['kernel'] + a['child']['bias'])  # eq. 9
  f = t_p @ a['bilinear'] @ t_c.T  # eq. 10
  f_root = d @ a['root']['kernel'][:, 0]  # eq. 11
  if attention == 'structured':  # eqs. 12-15: marginals of the single-root tree distribution
    _, arc_m, root_m, _, _ = brute_force.reference(f, f_root, single_root=True)
  else:  # softmax over ROOT and the other words, per modifier
    scores = np.concatenate([f_root[None], np.where(np.eye(length, dtype=bool), -np.inf, f)], 0)
    w = np.exp(scores - scores.max(0)) / np.exp(scores - scores.max(0)).sum(0)
    arc_m, root_m = w[1:], w[0]
  parents = arc_m.T @ e + root_m[:, None] * a['root_embedding'][None]  # eq. 16
  children = arc_m @ e  # eq. 17
  return np.tanh(np.concatenate([e, parents, children], -1) @ a['output']['kernel']
                 + a['output']['bias'])  # eq. 18


def _run(attention, position, padded=T, seed=0):
  encoder = encoders.build({'name': 'context_free', 'hidden_size': 4, 'semantic_size': 2,
                            'attention': attention, 'position': position, 'position_dim': 4,
                            'max_length': 8})
  x = jax.random.normal(jax.random.key(seed), (len(LENGTHS), padded, E), jnp.float64)
  variables = encoder.init(jax.random.key(1), x, LENGTHS)
  variables = jax.tree.map(lambda v: v.astype(jnp.float64), variables)
  apply = jax.jit(lambda v, x: encoder.apply(v, x, LENGTHS, mutable=['intermediates']))
  out, state = apply(variables, x)
  return out.states, state, variables['params'], x


@pytest.mark.parametrize('attention,position', [('structured', 'learned'), ('simple', 'sinusoidal'),
                                                ('none', 'learned'), ('structured', 'none')])
def test_matches_numpy_transcription(attention, position):
  states, state, params, x = _run(attention, position)
  p = jax.tree.map(lambda v: np.asarray(v, np.float64), params)
  width = 4 if attention != 'none' else 8  # 2 * semantic_size, or 2 * hidden_size
  assert states.shape == (len(LENGTHS), T, width) and states.dtype == jnp.float64
  for b, length in enumerate(LENGTHS):
    np.testing.assert_array_equal(states[b, length:], 0.0)  # padding, and the empty sentence
    if length:
      expected = np_encoder(p, x[b], length, position, 2, attention, 4)
      np.testing.assert_allclose(states[b, :length], expected, atol=1e-9)
  sown = jax.tree.leaves(state) if attention != 'none' else []
  assert (len(sown) == 5) == (attention != 'none')  # arc/root scores and marginals, lengths


@pytest.mark.parametrize('attention', ['structured', 'none'])
def test_padding_is_exact(attention):
  short, _, _, x = _run(attention, 'learned')
  long, _, _, _ = _run(attention, 'learned', padded=T + 3)  # same words, 3 more padded positions
  np.testing.assert_allclose(long[:, :T], short, atol=1e-12)
  np.testing.assert_array_equal(long[:, T:], 0.0)
  del x


def test_sinusoids_depend_on_the_position_only():
  np.testing.assert_allclose(context_free.sinusoidal_positions(7, 6), np_sinusoids(7, 6), atol=1e-6)
  np.testing.assert_array_equal(context_free.sinusoidal_positions(9, 6)[:7],
                                context_free.sinusoidal_positions(7, 6))


def test_config_errors_name_the_key():
  x = jnp.zeros((1, 9, E))
  with pytest.raises(ValueError, match='config.model.encoder.max_length=8'):
    encoders.build({'name': 'context_free', 'max_length': 8}).init(jax.random.key(0), x, [9])
  with pytest.raises(ValueError, match='config.model.encoder.position='):
    encoders.build({'name': 'context_free', 'position': 'rotary'}).init(jax.random.key(0), x, [9])
  with pytest.raises(ValueError, match='config.model.encoder.attention='):
    encoders.build({'name': 'context_free', 'attention': 'tree'}).init(jax.random.key(0), x, [9])
  with pytest.raises(ValueError, match='position_dim=5 must be even'):
    encoders.build({'name': 'context_free', 'position': 'sinusoidal', 'position_dim': 5}).init(
        jax.random.key(0), x, [9])
