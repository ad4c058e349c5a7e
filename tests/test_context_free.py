"""The 'context_free' encoder (models/context_free.py) against a float64 numpy transcription.

e_t = tanh(W_e x_t + b_e) and d_t = tanh(W_d [x_t; q_t] + b_d), then Liu & Lapata's eqs. 8-18 with the tree marginals of every
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


def np_encoder(p, x, length, position, semantic_size, attention, position_dim, shift=0):
  """The encoder for one sentence in float64 numpy: states [length, D] of the real words; the
  positions of its words are shift, ..., shift + length - 1."""
  x = np.asarray(x, np.float64)[:length]
  e = np.tanh(x @ p['semantic_kernel'] + p['semantic_bias'])  # word only
  if attention == 'none':
    return e
  if position == 'learned':
    x = np.concatenate([x, np.asarray(p['position_embedding'])[shift:shift + length]], -1)
  elif position == 'sinusoidal':
    x = np.concatenate([x, np_sinusoids(shift + length, position_dim)[shift:]], -1)
  d = np.tanh(x @ p['structure_kernel'] + p['structure_bias'])  # word and position
  a = p['attention']
  t_p = np.tanh(d @ a['parent']['kernel'] + a['parent']['bias'])  # eq. 8
  t_c = np.tanh(d @ a['child']['kernel'] + a['child']['bias'])  # eq. 9
  f = t_p @ a['bilinear'] @ t_c.T  # eq. 10
  if position == 'distance':  # minus m |i - j|, m = 0.7
    f = f - 0.7 * np.abs(np.arange(length)[:, None] - np.arange(length)[None, :])
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


def _run(attention, position, pad=0, seed=0, shift=0, train=False):
  encoder = encoders.build({'name': 'context_free', 'hidden_size': 4, 'semantic_size': 2,
                            'attention': attention, 'position': position, 'position_dim': 4,
                            'max_length': 8 + shift, 'position_shift': shift,
                            'distance_slope': 0.7})
  x = jax.random.normal(jax.random.key(seed), (len(LENGTHS), T, E), jnp.float64)
  x = jnp.pad(x, ((0, 0), (0, pad), (0, 0)))  # the same words with `pad` more padded positions
  variables = jax.jit(lambda key, x: encoder.init(key, x, LENGTHS))(jax.random.key(1), x)  # eager: ~4x compile
  variables = jax.tree.map(lambda v: v.astype(jnp.float64), variables)
  apply = jax.jit(lambda v, x: encoder.apply(v, x, LENGTHS, train=train, mutable=['intermediates'],
                                             rngs={'dropout': jax.random.key(seed + 7)}))
  out, state = apply(variables, x)
  return out.states, state, variables['params'], x


@pytest.mark.parametrize('attention,position', [('structured', 'learned'), ('simple', 'sinusoidal'),
                                                ('structured', 'distance'), ('simple', 'distance'),
                                                ('none', 'none')])
def test_matches_numpy_transcription(attention, position):
  states, state, params, x = _run(attention, position)
  p = jax.tree.map(lambda v: np.asarray(v, np.float64), params)
  width = 4  # 2 * semantic_size: r_t, or e_t without attention
  assert states.shape == (len(LENGTHS), T, width) and states.dtype == jnp.float64
  for b, length in enumerate(LENGTHS):
    np.testing.assert_array_equal(states[b, length:], 0.0)  # padding, and the empty sentence
    if length:
      expected = np_encoder(p, x[b], length, position, 2, attention, 4)
      np.testing.assert_allclose(states[b, :length], expected, atol=1e-9)
  sown = jax.tree.leaves(state) if attention != 'none' else []
  assert (len(sown) == 5) == (attention != 'none')  # arc/root scores and marginals, lengths


@pytest.mark.parametrize('position', ['learned', 'distance'])
def test_padding_is_exact(position):
  short, _, _, _ = _run('structured', position)
  long, _, _, _ = _run('structured', position, pad=3)
  np.testing.assert_allclose(long[:, :T], short, atol=1e-12)
  np.testing.assert_array_equal(long[:, T:], 0.0)


def test_no_attention_is_a_bag_of_words():
  """Without attention the states are e_t: no position information, so any permutation of a
  sentence's words permutes its states (max/mean pooling over them is a bag-of-words model)."""
  states, _, _, x = _run('none', 'sinusoidal')
  encoder = encoders.build({'name': 'context_free', 'hidden_size': 4, 'semantic_size': 2,
                            'attention': 'none', 'position': 'sinusoidal', 'position_dim': 4})
  variables = encoder.init(jax.random.key(1), x, LENGTHS)
  order = np.array([3, 0, 2, 1, 4])
  permuted = encoder.apply(variables, x[:1, order], LENGTHS[:1]).states
  np.testing.assert_allclose(permuted[0, :4], encoder.apply(variables, x[:1], LENGTHS[:1]).states[0, order[:4]], atol=1e-6)


def test_sinusoids_depend_on_the_position_only():
  np.testing.assert_allclose(context_free.sinusoidal_positions(np.arange(7), 6), np_sinusoids(7, 6),
                             atol=1e-6)
  np.testing.assert_allclose(context_free.sinusoidal_positions(np.arange(3, 10), 6),
                             np_sinusoids(10, 6)[3:], atol=1e-5)


@pytest.mark.parametrize('position', ['learned', 'sinusoidal'])
def test_position_shift_in_training_only(position):
  """Training shifts each sentence's positions by one offset in [0, shift]; evaluation never."""
  shift = 3
  evaluated, _, params, x = _run('structured', position, shift=shift)
  trained, _, _, _ = _run('structured', position, shift=shift, train=True)
  p = jax.tree.map(lambda v: np.asarray(v, np.float64), params)
  offsets = []
  for b, length in enumerate(LENGTHS[LENGTHS > 1]):
    row = int(np.flatnonzero(LENGTHS > 1)[b])
    np.testing.assert_allclose(evaluated[row, :length],
                               np_encoder(p, x[row], length, position, 2, 'structured', 4), atol=1e-9)
    errors = [np.abs(np_encoder(p, x[row], length, position, 2, 'structured', 4, s)
                     - np.asarray(trained[row, :length])).max() for s in range(shift + 1)]
    assert min(errors) < 1e-5, errors
    offsets.append(int(np.argmin(errors)))
  assert len(set(offsets)) > 1 or offsets[0] > 0  # some sentence was shifted


def test_config_errors_name_the_key():
  x = jnp.zeros((1, 9, E))
  with pytest.raises(ValueError, match='config.model.encoder.position_shift=-1'):
    encoders.build({'name': 'context_free', 'position_shift': -1}).init(jax.random.key(0), x, [9])
  with pytest.raises(ValueError, match='config.model.encoder.max_length=8'):
    encoders.build({'name': 'context_free', 'position': 'learned', 'max_length': 8}).init(
        jax.random.key(0), x, [9])
  with pytest.raises(ValueError, match='config.model.encoder.semantic_size=32 must be in'):
    encoders.build({'name': 'context_free', 'semantic_size': 32}).init(jax.random.key(0), x, [9])
  with pytest.raises(ValueError, match='config.model.encoder.position='):
    encoders.build({'name': 'context_free', 'position': 'rotary'}).init(jax.random.key(0), x, [9])
  with pytest.raises(ValueError, match='config.model.encoder.attention='):
    encoders.build({'name': 'context_free', 'attention': 'tree'}).init(jax.random.key(0), x, [9])
  with pytest.raises(ValueError, match='config.model.encoder.distance_slope=0.0 must be > 0'):
    encoders.build({'name': 'context_free', 'distance_slope': 0.0}).init(jax.random.key(0), x, [9])
  with pytest.raises(ValueError, match='position_dim=5 must be even'):
    encoders.build({'name': 'context_free', 'position': 'sinusoidal', 'position_dim': 5}).init(
        jax.random.key(0), x, [9])
