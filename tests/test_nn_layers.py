"""Masked BiLSTM, embeddings, pooling, softmax intra/inter-attention and MLP against float64 numpy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_structured import nn as jsnn


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def np_lstm(cell, x, reverse=False):
  """Standard LSTM (flax OptimizedLSTMCell gate layout i, f, g, o) over one unpadded sequence."""
  p = jax.tree.map(lambda a: np.asarray(a, np.float64), cell)
  hidden = p['hi']['kernel'].shape[0]
  h, c = np.zeros(hidden), np.zeros(hidden)
  steps = range(len(x) - 1, -1, -1) if reverse else range(len(x))
  out = np.zeros((len(x), hidden))
  for t in steps:
    gate = {g: x[t] @ p['i' + g]['kernel'] + h @ p['h' + g]['kernel'] + p['h' + g]['bias']
            for g in 'ifgo'}
    c = _sigmoid(gate['f']) * c + _sigmoid(gate['i']) * np.tanh(gate['g'])
    h = _sigmoid(gate['o']) * np.tanh(c)
    out[t] = h
  return out


def test_bilstm_matches_numpy_and_ignores_padding():
  lengths = np.array([5, 2, 0, 3], np.int32)
  x = jax.random.normal(jax.random.key(0), (4, 6, 3), jnp.float64)
  module = jsnn.BiLSTM(hidden_size=4, num_layers=2)
  variables = jax.tree.map(lambda a: a.astype(jnp.float64),
                           jax.jit(module.init)(jax.random.key(1), x, lengths))
  apply = jax.jit(lambda x, l: module.apply(variables, x, l))
  out = apply(x, lengths)
  assert out.shape == (4, 6, 8)
  p = variables['params']
  for b, n in enumerate(lengths):
    layer = np.asarray(x[b, :n], np.float64)
    for i in range(2):
      fw = np_lstm(p[f'forward_{i}']['OptimizedLSTMCell_0'], layer)
      bw = np_lstm(p[f'backward_{i}']['OptimizedLSTMCell_0'], layer, reverse=True)
      layer = np.concatenate([fw, bw], -1)
    np.testing.assert_allclose(out[b, :n], layer, atol=1e-10)
    np.testing.assert_array_equal(out[b, n:], 0.0)
  # Garbage in padded positions and more padding change nothing real.
  noisy = jnp.where((jnp.arange(6) < lengths[:, None])[..., None], x, 100.0)
  noisy = jnp.concatenate([noisy, jnp.full((4, 2, 3), -7.0)], 1)
  out2 = apply(noisy, lengths)
  np.testing.assert_allclose(out2[:, :6], out, atol=1e-12)
  # Leading batch dims [2, 2] are flattened and restored.
  nested = apply(x.reshape(2, 2, 6, 3), lengths.reshape(2, 2))
  np.testing.assert_allclose(nested.reshape(4, 6, 8), out, atol=1e-12)


def test_split_directions():
  h = jnp.arange(10.0)[None]  # H = 5: forward 0..4, backward 5..9
  head, tail = jsnn.split_directions(h, 3)
  np.testing.assert_array_equal(head, [[0, 1, 2, 5, 6, 7]])
  np.testing.assert_array_equal(tail, [[3, 4, 8, 9]])
  with pytest.raises(ValueError, match='cannot split'):
    jsnn.split_directions(h, 6)


def test_embedding_pretrained_frozen_and_errors():
  table = np.arange(12, dtype=np.float32).reshape(4, 3)
  emb = jsnn.WordEmbedding(4, 3, embedding_init=jsnn.pretrained_init(table), freeze=True)
  tokens = jnp.array([[1, 3, 0]])
  variables = emb.init(jax.random.key(0), tokens)
  np.testing.assert_array_equal(variables['params']['embedding'], table)
  np.testing.assert_array_equal(emb.apply(variables, tokens), table[[1, 3, 0]][None])
  grad = jax.grad(lambda v: emb.apply(v, tokens).sum())(variables)
  np.testing.assert_array_equal(grad['params']['embedding'], 0.0)
  trainable = jsnn.WordEmbedding(4, 3, embedding_init=jsnn.pretrained_init(table))
  grad = jax.grad(lambda v: trainable.apply(v, tokens).sum())(variables)
  np.testing.assert_array_equal(grad['params']['embedding'][:, 0], [1, 1, 0, 1])
  with pytest.raises(ValueError, match=r'shape \(4, 3\).*expects \(5, 3\)'):
    jsnn.WordEmbedding(5, 3, embedding_init=jsnn.pretrained_init(table)).init(jax.random.key(0), tokens)
  bad = table.copy()
  bad[2, 1] = np.nan
  with pytest.raises(ValueError, match='row 2, column 1'):
    jsnn.pretrained_init(bad)
  # Dropout is active only when not deterministic.
  drop = jsnn.WordEmbedding(4, 3, embedding_init=jsnn.pretrained_init(table), dropout_rate=0.5)
  out = drop.apply(variables, jnp.ones((1, 50), jnp.int32), deterministic=False,
                   rngs={'dropout': jax.random.key(2)})
  assert 0 < int((out == 0).sum()) < out.size


def test_poolings_match_numpy_and_handle_empty():
  rng = np.random.default_rng(0)
  x = rng.normal(size=(3, 4, 2))
  lengths = np.array([4, 2, 0])
  for kind, fn in [('mean', np.mean), ('max', np.max), ('sum', np.sum)]:
    out = jax.jit(lambda x, l, k=kind: jsnn.Pooling(k).apply({}, x, l))(x, lengths)
    for b, n in enumerate(lengths):
      expected = fn(x[b, :n], 0) if n else np.zeros(2)
      np.testing.assert_allclose(out[b], expected, atol=1e-12)
  module = jsnn.Pooling('attention')
  variables = module.init(jax.random.key(0), x, lengths)
  out, state = module.apply(variables, x, lengths, mutable=['intermediates'])
  p = variables['params']['attention']
  for b, n in enumerate(lengths[:2]):
    u = np.tanh(x[b, :n] @ p['projection']['kernel'] + p['projection']['bias']) @ p['query']
    a = np.exp(u - u.max()) / np.exp(u - u.max()).sum()
    np.testing.assert_allclose(out[b], a @ x[b, :n], atol=1e-6)
  np.testing.assert_array_equal(out[2], 0.0)
  weights = jsnn.find_intermediates(state)['pooling_weights']
  np.testing.assert_allclose(weights.sum(-1), [1, 1, 0], atol=1e-6)
  with jax.debug_nans(True):
    for kind in ('mean', 'max', 'attention'):
      pool = jsnn.Pooling(kind)
      v = pool.init(jax.random.key(0), x, lengths)
      g = jax.grad(lambda x: pool.apply(v, x, lengths).sum())(jnp.asarray(x))
      assert np.all(np.isfinite(g)) and np.all(np.asarray(g)[2] == 0)
  with pytest.raises(ValueError, match='unknown pooling'):
    jsnn.Pooling('median').init(jax.random.key(0), x, lengths)


def test_intra_attention_eqs_1_to_3():
  rng = np.random.default_rng(1)
  u = rng.normal(size=(2, 4, 3))
  lengths = np.array([4, 3])
  module = jsnn.IntraAttention(exclude_self=True)
  variables = module.init(jax.random.key(0), u, lengths)
  ctx, weights = jax.jit(lambda u, l: module.apply(variables, u, l))(u, lengths)
  w = np.asarray(variables['params']['bilinear'], np.float64)
  for b, n in enumerate(lengths):
    f = u[b, :n] @ w @ u[b, :n].T  # eq. 1
    f[np.diag_indices(n)] = -np.inf
    a = np.exp(f - f.max(1, keepdims=True))
    a /= a.sum(1, keepdims=True)  # eq. 2
    np.testing.assert_allclose(weights[b, :n, :n], a, atol=1e-6)
    np.testing.assert_allclose(ctx[b, :n], a @ u[b, :n], atol=1e-6)  # eq. 3
    np.testing.assert_array_equal(ctx[b, n:], 0.0)


def test_inter_attention_eqs_21_22_and_masked_softmax():
  rng = np.random.default_rng(2)
  o = rng.normal(size=(4, 5))
  p, h = rng.normal(size=(4, 2)), rng.normal(size=(5, 2))
  beta, alpha = jax.jit(jsnn.inter_attention)(o[None], p[None], h[None], np.array([3]), np.array([4]))
  sub = o[:3, :4]
  row = np.exp(sub) / np.exp(sub).sum(1, keepdims=True)
  col = np.exp(sub) / np.exp(sub).sum(0, keepdims=True)
  np.testing.assert_allclose(beta[0, :3], row @ h[:4], atol=1e-12)
  np.testing.assert_allclose(alpha[0, :4], col.T @ p[:3], atol=1e-12)
  np.testing.assert_array_equal(beta[0, 3:], 0.0)
  np.testing.assert_array_equal(alpha[0, 4:], 0.0)
  # masked_softmax: huge scores do not overflow; an empty row is all zeros with finite gradient.
  scores = jnp.array([[1000.0, 999.0, -5.0], [3.0, 2.0, 1.0]])
  mask = jnp.array([[True, True, False], [False, False, False]])
  out = jsnn.masked_softmax(scores, mask)
  np.testing.assert_allclose(out[0], [1 / (1 + np.exp(-1)), np.exp(-1) / (1 + np.exp(-1)), 0], atol=1e-12)
  np.testing.assert_array_equal(out[1], 0.0)
  g = jax.grad(lambda s: (jsnn.masked_softmax(s, mask) * jnp.arange(3.0)).sum())(scores)
  assert np.all(np.isfinite(g)) and np.all(np.asarray(g)[1] == 0)


def test_mlp_matches_numpy():
  x = np.random.default_rng(3).normal(size=(2, 3))
  module = jsnn.MLP((4, 2), activate_last=False)
  variables = module.init(jax.random.key(0), x)
  p = variables['params']
  hidden = np.maximum(x @ p['dense_0']['kernel'] + p['dense_0']['bias'], 0)
  np.testing.assert_allclose(module.apply(variables, x), hidden @ p['dense_1']['kernel']
                             + p['dense_1']['bias'], atol=1e-6)
