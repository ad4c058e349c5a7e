"""DCNN (Kalchbrenner et al. 2014; Chen et al. 2017 eqs. 2-3) against a direct float64 numpy transcription,
one unpadded sentence at a time; padding exactness; k-max pooling order and ties."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_structured.nn import dcnn


def _np_kmax(values, k):
  """values [n, ...] -> the k largest per trailing index, in original order (ties: earlier first)."""
  n = values.shape[0]
  flat = values.reshape(n, -1)
  out = np.zeros((min(k, n), flat.shape[1]))
  for f in range(flat.shape[1]):
    order = np.argsort(-flat[:, f], kind='stable')[:k]
    out[:, f] = flat[np.sort(order), f]
  return out.reshape((min(k, n),) + values.shape[1:])


def _np_dcnn(params, x, widths, k_top, convolution):
  """Kalchbrenner's DCNN on ONE sentence x [s, E] (no padding): wide convolution, (folding), dynamic
  k-max pooling, bias, tanh; returns the top layer [k, D] and the first layer's states [s, F1]."""
  s = x.shape[0]
  num_layers = len(widths)
  h = x if convolution == 'full' else x[:, None, :]
  first = None
  for l, m in enumerate(widths, start=1):
    kernel, bias = params[f'kernel_{l}'], params[f'bias_{l}']
    n = h.shape[0]
    padded = np.concatenate([np.zeros((m - 1,) + h.shape[1:]), h, np.zeros((m - 1,) + h.shape[1:])])
    if convolution == 'full':  # Chen eq. 2: c_i = W^T [x_{i-m+1}; ...; x_i]
      conv = np.stack([sum(padded[t + w] @ kernel[w] for w in range(m)) for t in range(n + m - 1)])
    else:  # F^j_r = sum_k m^j_{k,r} * F^{j-1}_{k,r}, row by row
      conv = np.stack([np.einsum('wkr,wkjr->jr', padded[t:t + m], kernel) for t in range(n + m - 1)])
      if l == num_layers:
        conv = conv[..., 0::2] + conv[..., 1::2]  # folding
    if l == 1:
      first = np.tanh(conv[:s] + bias).reshape(s, -1)
    k = max(k_top, math.ceil((num_layers - l) / num_layers * s))
    h = np.tanh(_np_kmax(conv, k) + bias)
  return h.reshape(h.shape[0], -1), first


@pytest.mark.parametrize('convolution,widths', [('full', (7, 5)), ('full', (3, 2, 2)), ('row', (3, 2))])
def test_dcnn_matches_numpy_transcription(convolution, widths):
  lengths = np.array([9, 1, 4, 13])
  steps, dim, k_top = 16, 6, 3
  x = jax.random.normal(jax.random.PRNGKey(0), (4, steps, dim), jnp.float64)
  model = dcnn.DCNN(widths, features=5, k_top=k_top, convolution=convolution)
  variables = jax.jit(model.init)(jax.random.PRNGKey(1), x, lengths)
  # Non-zero biases, so that their place (after pooling, per feature/row) is tested too.
  rng = np.random.default_rng(2)
  params = jax.tree_util.tree_map(lambda p: np.asarray(p) + 0.3 * rng.standard_normal(p.shape),
                                  variables['params'])
  local, local_lengths, first = jax.jit(model.apply)({'params': params}, x, lengths)
  np_params = jax.tree_util.tree_map(np.asarray, params)
  for b, s in enumerate(lengths):
    want_local, want_first = _np_dcnn(np_params, np.asarray(x[b, :s]), widths, k_top, convolution)
    assert int(local_lengths[b]) == want_local.shape[0]
    np.testing.assert_allclose(local[b, :want_local.shape[0]], want_local, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(local[b, want_local.shape[0]:], 0.0)
    np.testing.assert_allclose(first[b, :s], want_first, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(first[b, s:], 0.0)


@pytest.mark.parametrize('convolution', ['full', 'row'])
def test_dcnn_padding_is_exact(convolution):
  lengths = jnp.array([5, 2, 11])
  x = jax.random.normal(jax.random.PRNGKey(3), (3, 11, 4), jnp.float64)
  x = jnp.where(jnp.arange(11)[None, :, None] < lengths[:, None, None], x, 0.0)
  longer = jnp.concatenate([x, jax.random.normal(jax.random.PRNGKey(4), (3, 9, 4), jnp.float64)], 1)  # garbage
  model = dcnn.DCNN((7, 5), features=3, k_top=4, convolution=convolution)
  variables = jax.jit(model.init)(jax.random.PRNGKey(5), x, lengths)
  apply = jax.jit(model.apply)
  a = apply(variables, x, lengths)
  b = apply(variables, longer, lengths)
  # Equal up to the summation order XLA picks for another shape (float64 rounding).
  np.testing.assert_array_equal(a[1], b[1])
  np.testing.assert_allclose(a[0], b[0][:, :a[0].shape[1]], rtol=0, atol=1e-13)  # width k_top in both
  np.testing.assert_allclose(a[2], b[2][:, :11], rtol=0, atol=1e-13)
  np.testing.assert_array_equal(b[2][:, 11:], 0.0)


def test_dynamic_k_is_kalchbrenners_formula():
  lengths = np.arange(0, 60)
  for num_layers in (1, 2, 3, 5):
    for layer in range(1, num_layers + 1):
      got = dcnn.dynamic_k(lengths, layer, num_layers, 4)
      want = [max(4, math.ceil((num_layers - layer) / num_layers * s)) for s in lengths]
      np.testing.assert_array_equal(got, want)
      assert dcnn.static_k(59, layer, num_layers, 4) == want[-1]


def test_kmax_pooling_keeps_order_ties_and_per_example_k():
  x = jnp.array([[3., 1., 3., 5., 2., 9.], [1., 4., 4., 4., 0., 0.]])[..., None]
  pooled, kept = dcnn.kmax_pooling(x, jnp.array([5, 4]), jnp.array([3, 2]), 4)
  # Row 0: the 9 is padding; largest 3 of [3, 1, 3, 5, 2] in order = 3, 3, 5. Row 1: ties -> earlier.
  np.testing.assert_array_equal(pooled[..., 0], [[3., 3., 5., 0.], [4., 4., 0., 0.]])
  np.testing.assert_array_equal(kept, [3, 2])
  # Fewer real values than k: all of them, in order.
  pooled, kept = dcnn.kmax_pooling(x, jnp.array([2, 1]), jnp.array([3, 3]), 3)
  np.testing.assert_array_equal(pooled[..., 0], [[3., 1., 0.], [1., 0., 0.]])
  np.testing.assert_array_equal(kept, [2, 1])
  # Fewer positions than slots (a one-word sentence's windows): zero-padded to the static width.
  pooled, kept = dcnn.kmax_pooling(x[:, :2], jnp.array([2, 1]), jnp.array([4, 4]), 4)
  np.testing.assert_array_equal(pooled[..., 0], [[3., 1., 0., 0.], [1., 0., 0., 0.]])


def test_kmax_pooling_gradient_routes_to_kept_values():
  x = jnp.array([[0.5, -1.0, 2.0, 0.1, 7.0]])[..., None]
  g = jax.grad(lambda v: jnp.sum(dcnn.kmax_pooling(v, jnp.array([4]), jnp.array([2]), 3)[0] * 2.0))(x)
  np.testing.assert_array_equal(g[0, :, 0], [2.0, 0.0, 2.0, 0.0, 0.0])


def test_fold_needs_even_rows():
  np.testing.assert_array_equal(dcnn.fold(jnp.arange(6.0)), [1.0, 5.0, 9.0])
  with pytest.raises(ValueError, match='even'):
    dcnn.fold(jnp.ones((2, 3)))


def test_dcnn_rejects_bad_settings():
  x = jnp.ones((1, 4, 2))
  with pytest.raises(ValueError, match='convolution'):
    dcnn.DCNN((3,), convolution='diagonal').init(jax.random.PRNGKey(0), x, jnp.array([4]))
  with pytest.raises(ValueError, match='even'):  # 'row' folds the last layer's rows
    dcnn.DCNN((3,), convolution='row').init(jax.random.PRNGKey(0), jnp.ones((1, 4, 3)), jnp.array([4]))
  with pytest.raises(ValueError, match='k_top'):
    dcnn.DCNN((3,), k_top=0).init(jax.random.PRNGKey(0), x, jnp.array([4]))
