"""LSTMN (Cheng et al. 2016) against a float64 numpy loop over eqs. 4-9 and 11-16."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_structured.nn import lstmn


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def _reference(params, x, length, span=None, fusion=None, source=None):
  """Token-by-token numpy implementation of eqs. 4-9 (and 11-16 with `fusion`) for one sequence."""
  p = {k: np.asarray(v, np.float64) for k, v in params._asdict().items()}
  hdim = p['w_h'].shape[0]
  tape_h, tape_c, out, att = [], [], [], []
  h_tilde = np.zeros(hdim)
  if fusion is not None:
    f = {k: np.asarray(v, np.float64) for k, v in fusion._asdict().items()}
    src_h, src_c = source
    y_tilde = np.zeros(src_h.shape[-1])
  for t in range(length):
    lo = 0 if span is None else max(0, t - span)
    if t > lo or (t > 0 and span is None):
      hs, cs = np.array(tape_h[lo:t]), np.array(tape_c[lo:t])
      a = np.tanh(hs @ p['w_h'] + x[t] @ p['w_x'] + h_tilde @ p['w_htilde']) @ p['v']   # eq. 4
      s = np.exp(a - a.max()); s /= s.sum()                                                # eq. 5
      h_tilde, c_tilde = s @ hs, s @ cs                                                    # eq. 6
      row = np.zeros(len(x)); row[lo:t] = s
    else:
      h_tilde, c_tilde = np.zeros(hdim), np.zeros(hdim)
      row = np.zeros(len(x))
    g = h_tilde @ p['w_gates_h'] + x[t] @ p['w_gates_x'] + p['b_gates']                   # eq. 7
    i, fg, o, ch = np.split(g, 4)
    c = _sigmoid(fg) * c_tilde + _sigmoid(i) * np.tanh(ch)                                # eq. 8
    if fusion is not None:
      b = np.tanh(src_h @ f['w_y'] + x[t] @ f['w_x'] + y_tilde @ f['w_ytilde']) @ f['u']  # eq. 11
      pr = np.exp(b - b.max()); pr /= pr.sum()                                             # eq. 12
      y_tilde, a_tilde = pr @ src_h, pr @ src_c                                            # eq. 13
      r = _sigmoid(y_tilde @ f['w_r_y'] + x[t] @ f['w_r_x'] + f['b_r'])                    # eq. 14
      c = c + r * a_tilde                                                                  # eq. 15
    h = _sigmoid(o) * np.tanh(c)                                                           # eq. 9
    tape_h.append(h); tape_c.append(c); out.append(h); att.append(row)
  return np.array(out), np.array(att)


def _random_params(key, d, h, a):
  ks = jax.random.split(key, 7)
  n = lambda k, s: jax.random.normal(k, s, jnp.float64) * 0.5
  return lstmn.LSTMNParams(n(ks[0], (h, a)), n(ks[1], (d, a)), n(ks[2], (h, a)), n(ks[3], (a,)),
                           n(ks[4], (h, 4 * h)), n(ks[5], (d, 4 * h)), n(ks[6], (4 * h,)))


@pytest.mark.parametrize('span', [None, 2])
def test_lstmn_scan_matches_numpy_loop(span):
  d, h, a, t = 3, 4, 5, 6
  params = _random_params(jax.random.PRNGKey(0), d, h, a)
  x = jax.random.normal(jax.random.PRNGKey(1), (2, t, d), jnp.float64)
  lengths = jnp.array([6, 4])
  out, _, intra, _ = jax.jit(lambda p, x, l: lstmn.lstmn_scan(p, x, l, memory_span=span))(params, x, lengths)
  for b in range(2):
    ref_out, ref_att = _reference(params, np.asarray(x[b]), int(lengths[b]), span)
    n = int(lengths[b])
    np.testing.assert_allclose(out[b, :n], ref_out, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(intra[b, :n], ref_att, rtol=1e-10, atol=1e-12)
    assert np.all(np.asarray(out[b, n:]) == 0)


def test_deep_fusion_matches_numpy_loop():
  d, h, a, t, m = 3, 4, 5, 5, 3
  params = _random_params(jax.random.PRNGKey(0), d, h, a)
  ks = jax.random.split(jax.random.PRNGKey(2), 7)
  n = lambda k, s: jax.random.normal(k, s, jnp.float64) * 0.5
  fusion = lstmn.FusionParams(n(ks[0], (h, a)), n(ks[1], (d, a)), n(ks[2], (h, a)), n(ks[3], (a,)),
                              n(ks[4], (h, h)), n(ks[5], (d, h)), n(ks[6], (h,)))
  x = n(jax.random.PRNGKey(3), (1, t, d))
  src_h, src_c = n(jax.random.PRNGKey(4), (1, m + 2, h)), n(jax.random.PRNGKey(5), (1, m + 2, h))
  out, _, _, inter = lstmn.lstmn_scan(params, x, jnp.array([t]), source=(src_h, src_c, jnp.array([m])),
                                      fusion=fusion)
  ref_out, _ = _reference(params, np.asarray(x[0]), t, fusion=fusion,
                          source=(np.asarray(src_h[0, :m]), np.asarray(src_c[0, :m])))
  np.testing.assert_allclose(out[0], ref_out, rtol=1e-10, atol=1e-12)
  assert np.all(np.asarray(inter[0, :, m:]) == 0)  # padded source positions get no attention


def test_padding_does_not_change_real_outputs_and_grads_are_finite():
  model = lstmn.StackedLSTMN(hidden_size=6, num_layers=2)
  x = jax.random.normal(jax.random.PRNGKey(0), (1, 4, 5))
  padded = jnp.concatenate([x, jax.random.normal(jax.random.PRNGKey(1), (1, 3, 5))], axis=1)
  variables = model.init(jax.random.PRNGKey(2), padded, jnp.array([4]))
  short, _ = model.apply(variables, x, jnp.array([4]))
  long, _ = model.apply(variables, padded, jnp.array([4]))
  np.testing.assert_allclose(short[0], long[0, :4], rtol=1e-12)
  grads = jax.grad(lambda v: model.apply(v, padded, jnp.array([4]))[0].sum())(variables)
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in jax.tree_util.tree_leaves(grads))


@pytest.mark.parametrize('fusion', ['shallow', 'deep'])
def test_fusion_module_runs_and_masks(fusion):
  model = lstmn.FusionLSTMN(hidden_size=4, fusion=fusion)
  tgt = jax.random.normal(jax.random.PRNGKey(0), (2, 5, 3))
  src_h = jax.random.normal(jax.random.PRNGKey(1), (2, 4, 4))
  args = (tgt, jnp.array([5, 2]), src_h, src_h, jnp.array([4, 1]))
  variables = model.init(jax.random.PRNGKey(2), *args)
  out, state = model.apply(variables, *args, mutable=['intermediates'])
  assert out.shape == (2, 5, 4) and bool(jnp.all(out[1, 2:] == 0))
  inter = state['intermediates']['inter_attention'][0]
  np.testing.assert_allclose(inter[1, :2].sum(-1), 1.0, rtol=1e-6)
  assert bool(jnp.all(inter[1, :, 1:] == 0))
