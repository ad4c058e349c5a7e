"""`trees._hessian_product`: derivatives of a gradient, transposed by symmetry, vs float64 numpy.

The function is `f(x, y) = logsumexp(W [x; y] * keep)` (`keep` a constant mask), whose Hessian is
`W'^T (diag(p) - p p^T) W'` with `W' = W * keep`, `p = softmax(W' [x; y])`: written out in numpy,
not taken from JAX.
"""
import functools

import jax
from jax.test_util import check_grads
import jax.numpy as jnp
import numpy as np
import pytest

from jax_structured.trees import _hessian_product

RNG = np.random.default_rng(0)
W = RNG.normal(size=(7, 5))
KEEP = (RNG.uniform(size=7) > 0.3)


def f(x, y, keep):
  return jax.nn.logsumexp(jnp.where(keep, W @ jnp.concatenate([x, y]), -jnp.inf))


@functools.lru_cache(maxsize=None)
def _gradient():
  return jax.grad(f, (0, 1))


def hessian_numpy(x, y, keep):
  """[5, 5] float64: the Hessian of f at (x, y), by the closed form."""
  z = np.concatenate([x, y])
  logits = np.where(keep, W @ z, -np.inf)
  p = np.exp(logits - logits.max())
  p /= p.sum()
  return W.T @ (np.diag(p) - np.outer(p, p)) @ W


def third_numpy(x, y, a, b):
  """[5] float64: the third derivative of f at (x, y) along the directions a and b ([5] each), by the
  closed form of logsumexp's: `p a b - p <p, a b> - p a <p, b> - p b <p, a> + 2 p <p, a> <p, b>` of
  the logits' directions, mapped back by W'^T."""
  z = np.concatenate([x, y])
  logits = np.where(KEEP, W @ z, -np.inf)
  p = np.exp(logits - logits.max())
  p /= p.sum()
  wa, wb = np.where(KEEP, W @ a, 0.0), np.where(KEEP, W @ b, 0.0)
  pa, pb = p @ wa, p @ wb
  return W.T @ (p * wa * wb - p * (p @ (wa * wb)) - p * wa * pb - p * wb * pa + 2 * p * pa * pb)


def product(x, y, tx, ty):
  return _hessian_product.hessian_product(_gradient(), (x, y), (KEEP,), (tx, ty))


@jax.custom_jvp
def gradient_of_f(x, y):
  """grad f, differentiated through `hessian_product` (as the exact path's marginals are)."""
  return _gradient()(x, y, KEEP)


@gradient_of_f.defjvp
def _gradient_of_f_jvp(primals, tangents):
  return gradient_of_f(*primals), product(*primals, *tangents)


def _point(seed):
  rng = np.random.default_rng(seed)
  return rng.normal(size=3), rng.normal(size=2), rng.normal(size=3), rng.normal(size=2)


def test_forward_and_transpose_are_the_hessian_product():
  x, y, tx, ty = _point(1)
  hess = hessian_numpy(x, y, KEEP)
  want = hess @ np.concatenate([tx, ty])
  got = jax.jit(product)(x, y, tx, ty)
  np.testing.assert_allclose(np.concatenate(got), want, rtol=1e-12, atol=1e-14)
  # Reverse mode: the transpose (H^T g), by the primitive's rule, equals the numpy H^T g.
  g = np.random.default_rng(2).normal(size=5)
  _, vjp = jax.vjp(lambda tx, ty: product(x, y, tx, ty), tx, ty)
  np.testing.assert_allclose(np.concatenate(jax.jit(vjp)((g[:3], g[3:]))), hess.T @ g, rtol=1e-12, atol=1e-14)
  # A loss through the gradient: its gradient is H w.
  weights = np.random.default_rng(3).normal(size=5)
  loss = lambda x, y: jnp.dot(jnp.concatenate(gradient_of_f(x, y)), weights)
  np.testing.assert_allclose(np.concatenate(jax.jit(jax.grad(loss, (0, 1)))(x, y)), hess @ weights,
                             rtol=1e-12, atol=1e-14)
  assert np.abs(hess @ weights).max() > 1e-2  # not trivially zero


def test_derivatives_of_every_order_match_finite_differences():
  """Forward and reverse, order 2: the product's derivative in its point is the third derivative."""
  x, y, _, _ = _point(4)
  check_grads(jax.jit(gradient_of_f), (x, y), order=2, modes=['fwd', 'rev'], eps=1e-5)
  # The Hessian through the primitive (forward over reverse and reverse over reverse) vs numpy.
  for jac in (jax.jacfwd, jax.jacrev):
    got = jax.jit(jac(lambda z: jnp.concatenate(gradient_of_f(z[:3], z[3:]))))(np.concatenate([x, y]))
    np.testing.assert_allclose(got, hessian_numpy(x, y, KEEP), rtol=1e-12, atol=1e-14)


@pytest.mark.slow  # orders 3 and 4 by nested products; every order against finite differences stays quick
def test_third_and_fourth_derivatives():
  """The product's derivative in its point is the third derivative (closed form), symmetric in its two
  directions; also under a vmap that shares the point (the point's tangent then joins the mapped
  directions); and order 3 (the fourth derivative) vs finite differences, forward and reverse."""
  x, y, tx, ty = _point(11)
  _, _, ax, ay = _point(12)
  t, a = np.concatenate([tx, ty]), np.concatenate([ax, ay])
  third = jax.jit(lambda x, y, tx, ty, ax, ay: jax.jvp(
      lambda x, y: product(x, y, tx, ty), (x, y), (ax, ay))[1])
  np.testing.assert_allclose(np.concatenate(third(x, y, tx, ty, ax, ay)), third_numpy(x, y, t, a),
                             rtol=1e-10, atol=1e-13)
  np.testing.assert_allclose(np.concatenate(third(x, y, ax, ay, tx, ty)), third_numpy(x, y, t, a),
                             rtol=1e-10, atol=1e-13)
  assert np.abs(third_numpy(x, y, t, a)).max() > 1e-3
  txs, tys = np.stack([tx, 2 * tx, -tx]), np.stack([ty, 2 * ty, -ty])
  mapped = jax.vmap(product, in_axes=(None, None, 0, 0))
  got = jax.jit(lambda x, y, ax, ay: jax.jvp(lambda x, y: mapped(x, y, txs, tys), (x, y), (ax, ay))[1])(
      x, y, ax, ay)
  want = np.stack([k * third_numpy(x, y, t, a) for k in (1, 2, -1)])
  np.testing.assert_allclose(np.concatenate(got, axis=-1), want, rtol=1e-10, atol=1e-13)
  check_grads(jax.jit(gradient_of_f), (x, y), order=3, modes=['fwd', 'rev'], eps=1e-4, atol=1e-4, rtol=1e-4)


def test_vmap_with_mapped_and_unmapped_operands():
  points = [_point(seed) for seed in range(5, 9)]
  xs, ys, txs, tys = (np.stack(p) for p in zip(*points))
  want = np.stack([hessian_numpy(x, y, KEEP) @ np.concatenate([tx, ty]) for x, y, tx, ty in points])
  got = jax.jit(jax.vmap(product))(xs, ys, txs, tys)
  np.testing.assert_allclose(np.concatenate(got, axis=-1), want, rtol=1e-12, atol=1e-14)
  # The point mapped, the direction shared (and the other way round).
  got = jax.jit(jax.vmap(product, in_axes=(0, 0, None, None)))(xs, ys, txs[0], tys[0])
  want = np.stack([hessian_numpy(x, y, KEEP) @ np.concatenate([txs[0], tys[0]]) for x, y in zip(xs, ys)])
  np.testing.assert_allclose(np.concatenate(got, axis=-1), want, rtol=1e-12, atol=1e-14)
  got = jax.jit(jax.vmap(product, in_axes=(None, None, 0, 0)))(xs[0], ys[0], txs, tys)
  want = np.concatenate([txs, tys], axis=-1) @ hessian_numpy(xs[0], ys[0], KEEP).T
  np.testing.assert_allclose(np.concatenate(got, axis=-1), want, rtol=1e-12, atol=1e-14)
  # Per-example gradients of a loss through the gradient (the transpose under vmap).
  weights = np.random.default_rng(9).normal(size=5)
  loss = lambda x, y: jnp.dot(jnp.concatenate(gradient_of_f(x, y)), weights)
  got = jax.jit(jax.vmap(jax.grad(loss, (0, 1))))(xs, ys)
  want = np.stack([hessian_numpy(x, y, KEEP) @ weights for x, y in zip(xs, ys)])
  np.testing.assert_allclose(np.concatenate(got, axis=-1), want, rtol=1e-12, atol=1e-14)


def test_tangents_must_match_the_arguments():
  x, y, tx, _ = _point(10)
  with pytest.raises(ValueError, match='2 arguments but 1 tangents'):
    _hessian_product.hessian_product(_gradient(), (x, y), (KEEP,), (tx,))
