"""HM-LSTM (Chung et al. 2016) against a float64 numpy transcription of COPY / UPDATE / FLUSH."""
import jax
import jax.numpy as jnp
import numpy as np

from jax_structured.nn import hm_rnn

E, H, L = 3, 2, 3


def _layers(seed=0):
  rng = np.random.default_rng(seed)
  w = 4 * H + 1
  return tuple(hm_rnn.HMLayer(rng.normal(0, .6, (E if l == 0 else H, w)), rng.normal(0, .6, (H, w)),
                              rng.normal(0, .6, (H, w)), rng.normal(0, .6, (w,))) for l in range(L))


def _sig(v):
  return 1 / (1 + np.exp(-v))


def _reference(layers, x, z_forced, slope=1.0):
  h, c, z = np.zeros((L, H)), np.zeros((L, H)), np.zeros(L)
  hs, zs, ops = [], [], []
  for t in range(len(x)):
    nh, nc, nz, op_t = h.copy(), c.copy(), z.copy(), []
    below_h, below_z = x[t], 1.0
    for l in range(L):
      lay = layers[l]
      s = h[l] @ lay.w_rec + lay.b + below_z * (below_h @ lay.w_bottom)
      if l + 1 < L:
        s = s + z[l] * (h[l + 1] @ lay.w_top)
      f, i, o, g = _sig(s[:H]), _sig(s[H:2 * H]), _sig(s[2 * H:3 * H]), np.tanh(s[3 * H:4 * H])
      prob = min(1.0, max(0.0, (slope * s[4 * H] + 1) / 2))
      if z[l] == 1:  # FLUSH
        nc[l], op = i * g, 'flush'
        nh[l] = o * np.tanh(nc[l])
      elif below_z == 1:  # UPDATE
        nc[l], op = f * c[l] + i * g, 'update'
        nh[l] = o * np.tanh(nc[l])
      else:  # COPY
        nc[l], nh[l], op = c[l], h[l], 'copy'
      nz[l] = z_forced[t, l] if z_forced is not None else below_z * float(prob > 0.5)
      op_t.append(op)
      below_h, below_z = nh[l], nz[l]
    h, c, z = nh, nc, nz
    hs.append(h.copy()), zs.append(z.copy()), ops.append(op_t)
  return np.array(hs), np.array(zs), ops


def test_copy_update_flush_match_numpy():
  layers = _layers()
  rng = np.random.default_rng(1)
  x = rng.normal(size=(1, 7, E))
  zf = np.array([[1, 0, 0], [0, 0, 0], [1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1], [1, 0, 0]], float)
  ref_h, ref_z, ops = _reference(layers, x[0], zf)
  seen = {op for row in ops for op in row}
  assert seen == {'copy', 'update', 'flush'}, seen
  j = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), layers)
  got = jax.jit(hm_rnn.hm_lstm_scan)(j, jnp.asarray(x, jnp.float32), jnp.array([7]),
                                     dynamic_boundaries=jnp.asarray(zf[None], jnp.float32))
  np.testing.assert_allclose(np.asarray(got.h[0]), ref_h, atol=2e-5)
  # the learned detectors, and padding: a longer pad changes nothing and is zero
  learned = jax.jit(hm_rnn.hm_lstm_scan)(j, jnp.asarray(np.pad(x, ((0, 0), (0, 2), (0, 0))), jnp.float32),
                                         jnp.array([7]), slope=2.0)
  ref_h, ref_z, _ = _reference(layers, x[0], None, slope=2.0)
  np.testing.assert_allclose(np.asarray(learned.h[0, :7]), ref_h, atol=2e-5)
  np.testing.assert_array_equal(np.asarray(learned.z[0, :7]), ref_z)
  assert not np.asarray(learned.h[0, 7:]).any()
