"""The exact path's derivative kernel (jax_structured/trees/_exact_kernel_grad.py): in the Pallas
interpreter here, compiled by Triton on a GPU (`_interpret`, as tests/test_trees_kernels.py).

References: forward mode through today's XLA linear elimination (`jax.jvp` of
`_elimination._linear_marginals`, and `_exact_path._exact_chunk_product`, the product the kernel
replaces), brute-force enumeration (tests/brute_force.py) and central differences of the enumerated
loss, float64, on sharp sentences (a 2-cycle scored 40: flagged by the LU error estimate in float32
and float64, so `exact='in_program'` takes the exact path and its derivative). The CUDA lowering test
checks that every operation has a Triton lowering (not that Triton compiles it, nor its speed).
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brute_force
from stages import MULTI_ROOT_QUICK, SINGLE_ROOT_QUICK
from jax_structured import trees
from jax_structured.trees import _elimination
from jax_structured.trees import _exact_kernel_grad
from jax_structured.trees import _exact_path
from jax_structured.trees import _kernels

ROOT_MODES = [True, False]
BIG = 1e4  # garbage in padded entries: never read
SHARP = 40.0  # arcs 0 -> 1 and 1 -> 0 scored this: the LU path flags the sentence


def _interpret():
  """The kernels as `use_kernels('on')` runs them here: interpreted, or compiled on a GPU."""
  with trees.use_kernels('on'):
    return _kernels.selected(8)


def _batch(seed, lengths, n, scale=1.0, cycle=None):
  """float64 scores [B, n, n] / [B, n] with garbage past each length, a forbidden arc (1 -> 2) in
  sentence 0, and arcs 0 -> 1 and 1 -> 0 scored `cycle` in every sentence of at least 3 words."""
  rng = np.random.default_rng(seed)
  arc = rng.normal(scale=scale, size=(len(lengths), n, n))
  root = rng.normal(scale=scale, size=(len(lengths), n))
  for b, length in enumerate(lengths):
    arc[b, length:, :] = BIG
    arc[b, :, length:] = -BIG
    root[b, length:] = BIG
    if cycle is not None and length >= 3:
      arc[b, 0, 1] = arc[b, 1, 0] = cycle
  arc[0, 1, 2] = -np.inf
  return arc, root


def _direction(seed, arc, root):
  """A random direction of the scores, 0 on padding and forbidden arcs (as a loss's cotangent is)."""
  rng = np.random.default_rng(seed)
  d_arc = np.where(np.isfinite(arc) & (np.abs(arc) < BIG), rng.normal(size=arc.shape), 0.0)
  return d_arc, np.where(np.abs(root) < BIG, rng.normal(size=root.shape), 0.0)


def _mask(lengths, n):
  return jnp.arange(n)[None, :] < jnp.asarray(lengths)[:, None]


def _jvp_of_linear_marginals(arc, root, mask, d_arc, d_root, single_root):
  """Forward mode through the XLA linear elimination and its reverse sweep (vmapped)."""
  def marginals(a, r, m):
    return _elimination._linear_marginals(*_elimination._forbid_padding(a, r, m), m, single_root)[1:3]

  def one(a, r, m, da, dr):
    return jax.jvp(lambda a, r: marginals(a, r, m), (a, r), (da, dr))[1]

  return jax.vmap(one)(arc, root, mask, d_arc, d_root)


@pytest.mark.parametrize('single_root', MULTI_ROOT_QUICK)
def test_product_matches_forward_mode_through_the_linear_elimination(single_root):
  """The kernel's `H t` equals `jax.jvp` of `_linear_marginals` (float64) at N(0, 20^2) scores, with
  padding, lengths 0 and 1, a forbidden arc and a sharp 2-cycle; 0 on padding, the diagonal and the
  forbidden arc."""
  lengths = np.array([5, 3, 0, 1])
  arc, root = _batch(0, lengths, 5, scale=20.0, cycle=SHARP)
  d_arc, d_root = _direction(1, arc, root)
  mask = _mask(lengths, 5)
  inputs = tuple(jnp.asarray(x) for x in (arc, root))
  got_arc, got_root, trusted = _exact_kernel_grad.linear_marginals_product(
      *inputs, mask, jnp.asarray(d_arc), jnp.asarray(d_root), single_root, _interpret())
  want_arc, want_root = _jvp_of_linear_marginals(*inputs, mask, jnp.asarray(d_arc), jnp.asarray(d_root),
                                                 single_root)
  assert np.asarray(trusted).all()
  np.testing.assert_allclose(got_arc, want_arc, rtol=1e-10, atol=1e-13)
  np.testing.assert_allclose(got_root, want_root, rtol=1e-10, atol=1e-13)
  assert np.asarray(got_arc[0, :3, :3]).any()
  assert float(got_arc[0, 1, 2]) == 0.0
  assert not np.asarray(got_arc[1, 3:]).any() and not np.asarray(got_arc[1, :, 3:]).any()
  assert not np.asarray(got_root[1, 3:]).any() and not np.asarray(got_arc[2]).any()
  assert not np.diagonal(np.asarray(got_arc), axis1=-2, axis2=-1).any()


def _loss(arc_weights, root_weights, single_root):
  """sum(W mu) + sum(w mu_root) + 0.3 sum(log Z) through the exact path inside the program."""
  def loss(arc, root, lengths):
    log_z = trees.log_partition(arc, root, lengths, single_root=single_root, exact='in_program')
    arc_m, root_m = trees.marginals(arc, root, lengths, single_root=single_root, exact='in_program')
    return jnp.sum(arc_m * arc_weights) + jnp.sum(root_m * root_weights) + 0.3 * jnp.sum(log_z)
  return loss


def _enumerated_loss(arc, root, lengths, single_root, arc_weights, root_weights):
  """`_loss` by enumeration of all trees of each sentence (float64)."""
  total = 0.0
  for b, length in enumerate(lengths):
    log_z, arc_m, root_m, _, _ = brute_force.reference(arc[b, :length, :length], root[b, :length],
                                                       single_root)
    total += (np.sum(arc_m * arc_weights[b, :length, :length]) + np.sum(root_m * root_weights[b, :length])
              + 0.3 * log_z)
  return total


def _counting(monkeypatch):
  """Counts the traces of the derivative kernel (a list that grows by one per trace)."""
  calls = []
  real = _exact_kernel_grad.linear_marginals_product

  def counted(*args):
    calls.append(args[-1])
    return real(*args)

  monkeypatch.setattr(_exact_kernel_grad, 'linear_marginals_product', counted)
  _exact_path._kernel_chunk_product.clear_cache()
  return calls


def _gradients(arc, root, lengths, single_root, mode, seed=3):
  """The gradient of `_loss` under `use_kernels(mode)`, jitted afresh, and the loss's weights."""
  rng = np.random.default_rng(seed)
  arc_weights, root_weights = rng.normal(size=arc.shape), rng.normal(size=root.shape)

  def grad(arc, root):
    with trees.use_kernels(mode):
      return jax.grad(_loss(arc_weights, root_weights, single_root), argnums=(0, 1))(arc, root, lengths)

  return jax.jit(grad)(arc, root), (arc_weights, root_weights)


@pytest.mark.parametrize('single_root', SINGLE_ROOT_QUICK)
def test_exact_gradient_matches_enumeration_and_finite_differences(single_root, monkeypatch):
  """Sharp sentences (flagged) through `exact='in_program'` with the kernels: the gradient of a loss
  through log Z and both marginals equals central differences of the enumerated loss (float64) and
  today's XLA exact path (`use_kernels('off')`); the derivative kernel is what ran."""
  calls = _counting(monkeypatch)
  lengths = np.array([5, 4])
  arc, root = _batch(2, lengths, 5, cycle=SHARP)
  with trees.use_kernels('off'):
    flagged = trees.marginals(arc, root, lengths, single_root=single_root, exact='flag')[0]
  assert np.isnan(np.asarray(flagged)).any(axis=(1, 2)).all()
  (d_arc, d_root), weights = _gradients(arc, root, lengths, single_root, 'on')
  assert calls == [_interpret()]  # one trace
  (xla_arc, xla_root), _ = _gradients(arc, root, lengths, single_root, 'off')
  np.testing.assert_allclose(d_arc, xla_arc, rtol=1e-9, atol=1e-12)
  np.testing.assert_allclose(d_root, xla_root, rtol=1e-9, atol=1e-12)
  direction_arc, direction_root = _direction(4, arc, root)
  step = 1e-5
  enumerated = lambda t: _enumerated_loss(arc + t * direction_arc, root + t * direction_root, lengths,
                                          single_root, *weights)
  numeric = (enumerated(step) - enumerated(-step)) / (2 * step)
  analytic = (np.sum(np.where(direction_arc != 0, d_arc * direction_arc, 0.0))
              + np.sum(d_root * direction_root))
  np.testing.assert_allclose(analytic, numeric, rtol=1e-6)


def _chunk_products(seed, lengths, n, single_root, cycle, dtype=np.float64):
  """(`_kernel_chunk_product`, `_exact_chunk_product`) of one chunk along a random direction."""
  arc, root = _batch(seed, lengths, n, cycle=cycle)
  d_arc, d_root = _direction(seed + 1, arc, root)
  mask = _mask(lengths, n)
  arc, root, d_arc, d_root = (jnp.asarray(x, dtype) for x in (arc, root, d_arc, d_root))
  directions = ((d_arc, d_root),)
  got = _exact_path._kernel_chunk_product(arc, root, mask, directions, single_root, _interpret())
  want = _exact_path._exact_chunk_product(arc, root, mask, directions, single_root)
  return got, want


@pytest.mark.parametrize('single_root', MULTI_ROOT_QUICK)
def test_chunk_product_equals_the_xla_exact_path(single_root):
  """At 20 words (a 32-word block), float64: the kernel's chunk product equals today's XLA one."""
  got, want = _chunk_products(5, np.array([20, 17, 9]), 20, single_root, SHARP)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)
    assert np.isfinite(np.asarray(g)).all()


@pytest.mark.slow  # the log-space elimination's forward mode compiles for ~20 s
@pytest.mark.parametrize('single_root', ROOT_MODES)
def test_chunk_product_untrusted_sentences_take_the_log_space_path(single_root):
  """A 2-cycle scored 800 (float64 trusts the linear elimination down to P_indep ~ e^-656): those
  sentences' product comes from the log-space elimination on XLA, the others' from the kernel; all
  equal `_exact_chunk_product`. And float32 at 30 words."""
  lengths = np.array([6, 6, 5])
  arc, root = _batch(6, lengths, 6, cycle=800.0)
  arc[2, 0, 1] = arc[2, 1, 0] = SHARP  # trusted: from the kernel
  d_arc, d_root = _direction(7, arc, root)
  mask = _mask(lengths, 6)
  inputs = tuple(jnp.asarray(x) for x in (arc, root))
  directions = ((jnp.asarray(d_arc), jnp.asarray(d_root)),)
  trusted = _exact_kernel_grad.linear_marginals_product(*inputs, mask, *directions[0], single_root,
                                                        _interpret())[2]
  assert list(np.asarray(trusted)) == [False, False, True]
  got = _exact_path._kernel_chunk_product(*inputs, mask, directions, single_root, _interpret())
  want = _exact_path._exact_chunk_product(*inputs, mask, directions, single_root)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)
  got, want = _chunk_products(8, np.array([30, 25, 12, 1]), 30, single_root, SHARP, np.float32)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-5)


@pytest.mark.slow  # the interpreter at a 64-word block (~20 s)
@pytest.mark.parametrize('single_root', ROOT_MODES)
def test_chunk_product_equals_the_xla_exact_path_at_64_words(single_root):
  """At 60 words (a 64-word block, the largest `use_kernels('auto')` may take next), float64 and float32."""
  for dtype, rtol, atol in ((np.float64, 1e-9, 1e-12), (np.float32, 1e-3, 1e-5)):
    got, want = _chunk_products(11, np.array([60, 41]), 60, single_root, SHARP, dtype)
    for g, w in zip(got, want):
      np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


@pytest.mark.slow  # four exact programs in the interpreter (~40 s)
def test_exact_gradient_under_vmap_and_with_many_flagged():
  """A user's `vmap` over the gradient (the product batched by `_hessian_product`), several sentences
  flagged in one chunk, multi-root: equal to the XLA exact path."""
  lengths = np.array([6, 6, 4, 5])
  arc, root = _batch(9, lengths, 6, cycle=SHARP)
  arc, root = arc.reshape(2, 2, 6, 6), root.reshape(2, 2, 6)
  rng = np.random.default_rng(10)
  weights = rng.normal(size=arc.shape[1:]), rng.normal(size=root.shape[1:])

  def grads(mode):
    def grad(arc, root, lengths):
      with trees.use_kernels(mode):
        return jax.grad(_loss(*weights, False), argnums=(0, 1))(arc, root, lengths)
    return jax.jit(jax.vmap(grad))(arc, root, lengths.reshape(2, 2))

  for g, w in zip(grads('on'), grads('off')):
    np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize('single_root', MULTI_ROOT_QUICK)
def test_exact_kernels_lower_for_cuda(single_root, monkeypatch):
  """The derivative kernel, and the exact path's value and gradient inside a program with the
  kernels, lower for CUDA on a CPU-only jaxlib: one Triton call for the derivative product, one for the
  exact values, two for the common path (forward and backward)."""
  for n in (20, 60):  # blocks of 32 and 64 words
    arc = jnp.zeros((4, n, n), jnp.float32)
    root = jnp.zeros((4, n), jnp.float32)
    product = functools.partial(_exact_kernel_grad.linear_marginals_product, mask=jnp.ones((4, n), bool),
                                single_root=single_root, interpret=False)
    text = jax.jit(lambda a, r: product(a, r, d_arc=a, d_root=r)).trace(arc, root).lower(
        lowering_platforms=('cuda',)).as_text()
    assert text.count('__gpu$xla.gpu.triton') == 1 and 'name = "matrix_tree_exact_linear_product"' in text

  def value_and_grad(arc, root):
    fn = lambda a, r: jnp.sum(trees.marginals(a, r, single_root=single_root, exact='in_program')[0] ** 2)
    return jax.value_and_grad(fn, argnums=(0, 1))(arc, root)

  monkeypatch.setattr(_kernels, 'selected', lambda n: False)  # as on a GPU
  text = jax.jit(value_and_grad).trace(arc, root).lower(lowering_platforms=('cuda',)).as_text()
  assert text.count('__gpu$xla.gpu.triton') == 4
  for name in ('matrix_tree_forward', 'matrix_tree_backward', 'matrix_tree_exact_linear',
               'matrix_tree_exact_linear_product'):
    assert f'name = "{name}"' in text
