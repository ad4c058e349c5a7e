"""Tests of jax_structured.trees._matrix_tree against independent float64 references.

References: brute-force enumeration of all trees (tests/brute_force.py, n <= 6), a numpy/float64
matrix-tree implementation written here (root node added explicitly; Koo's sum over root children),
Cayley's formula for uniform potentials, finite differences (`check_grads`) and chi-square tests of
sample frequencies against enumerated tree probabilities.
"""
import functools
import importlib.util
import json
import os
import pathlib
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats
from jax.test_util import check_grads

import brute_force
from stages import MULTI_ROOT_QUICK, SINGLE_ROOT_QUICK, quick_and_slow
from jax_structured import trees
from jax_structured.trees import _hessian_product
from jax_structured.trees import _elimination
from jax_structured.trees import _exact_path
from jax_structured.trees import _lu_path
from jax_structured.trees import _matrix_tree
from jax_structured.trees import _sampling
from jax_structured.trees import _statistics

# The library as users run it: the exact fallback on (tests/conftest.py).
pytestmark = pytest.mark.usefixtures('in_program_exact')

ROOT_MODES = [True, False]
# Jitted entry points: one compilation per shape instead of op-by-op dispatch (keeps the tests fast).
LOG_Z = jax.jit(trees.log_partition, static_argnames='single_root')
MARGINALS = jax.jit(trees.marginals, static_argnames='single_root')
ENTROPY = jax.jit(trees.entropy, static_argnames='single_root')
KL = jax.jit(trees.kl_divergence, static_argnames='single_root')
SAMPLE = jax.jit(trees.sample, static_argnames=('single_root', 'num_samples'))
BIG = 1e4  # garbage written into padded entries


@functools.lru_cache(maxsize=None)
def _sentence_gradient(marginals_fn, single_root):
  return lambda arc, root, mask: tuple(marginals_fn(arc, root, mask, single_root)[1:3])


def _differentiable(marginals_fn):
  """One sentence's `(log Z, arc marginals, root marginals)` by one elimination (`_linear_marginals`,
  `_elimination_marginals`), differentiated as the exact path differentiates its chunks:
  `d log Z = <marginals, d scores>`, the marginals' derivatives by the primitive of `_hessian_product`
  (nested forward mode; every transpose by symmetry)."""

  @functools.partial(jax.custom_jvp, nondiff_argnums=(3,))
  def sentence(arc, root, mask, single_root):
    return tuple(marginals_fn(arc, root, mask, single_root)[:3])

  @sentence.defjvp
  def _(single_root, primals, tangents):
    out = sentence(*primals, single_root)
    (d_arc, d_root, _), (_, arc_m, root_m) = tangents, out
    d_log_z = (jnp.sum(jnp.where(arc_m != 0, arc_m * d_arc, 0.0))
               + jnp.sum(jnp.where(root_m != 0, root_m * d_root, 0.0)))
    return out, (d_log_z,) + _hessian_product.hessian_product(
        _sentence_gradient(marginals_fn, single_root), primals[:2], primals[2:], (d_arc, d_root))

  return sentence


LINEAR_SENTENCE = _differentiable(_elimination._linear_marginals)
LOG_SPACE_SENTENCE = _differentiable(_elimination._elimination_marginals)


def _random_problem(rng, lengths, n, std=1.0, dtype=np.float64):
  """Batch of scores [B, n, n] / [B, n] with garbage (BIG) in every padded entry."""
  b = len(lengths)
  arc = rng.normal(scale=std, size=(b, n, n))
  root = rng.normal(scale=std, size=(b, n))
  for i, length in enumerate(lengths):
    arc[i, length:, :] = BIG
    arc[i, :, length:] = -BIG
    root[i, length:] = BIG
  return arc.astype(dtype), root.astype(dtype), np.asarray(lengths, np.int32)


def _entropy_reference(arc, root, single_root):
  _, p = brute_force.tree_probabilities(arc, root, single_root)
  p = p[p > 0]
  return float(-(p * np.log(p)).sum())



@pytest.mark.parametrize('single_root', ROOT_MODES)
def test_laplacian_and_inverse_give_the_enumerated_log_z_and_marginals(single_root):
  """`trees.laplacian` with `lu_logdet_and_inverse` or any inverse (`marginals_from_inverse`): the log Z
  and marginals of enumeration, on a padded batch with garbage in the padding."""
  arc, root, lengths = _random_problem(np.random.default_rng(3), [5, 3], 5)
  lap, arc_p, root_p, log_scale = trees.laplacian(arc, root, lengths, single_root=single_root)
  logdet, inverse = trees.lu_logdet_and_inverse(lap)
  arc_m, root_m = trees.marginals_from_inverse(arc_p, root_p, jnp.linalg.inv(lap), single_root=single_root)
  lu_arc_m, _ = trees.marginals_from_inverse(arc_p, root_p, inverse, single_root=single_root)
  for i, n in enumerate(lengths):
    log_z, want_arc, want_root = brute_force.reference(arc[i, :n, :n], root[i, :n], single_root)[:3]
    np.testing.assert_allclose(logdet[i] + log_scale[i], log_z, rtol=1e-10)
    np.testing.assert_allclose(arc_m[i, :n, :n], want_arc, atol=1e-10)
    np.testing.assert_allclose(lu_arc_m[i, :n, :n], want_arc, atol=1e-10)
    np.testing.assert_allclose(root_m[i, :n], want_root, atol=1e-10)
    assert not np.any(arc_m[i, n:]) and not np.any(root_m[i, n:])

@pytest.mark.parametrize('single_root', MULTI_ROOT_QUICK)
def test_brute_force_padded_batch(single_root):
  """log Z, marginals, grad(log Z), entropy and KL against enumeration, lengths 6/4/1/3 in one batch."""
  rng = np.random.default_rng(0)
  lengths = [6, 4, 1, 3]
  arc, root, lens = _random_problem(rng, lengths, 6, std=1.5)
  arc_q, root_q, _ = _random_problem(rng, lengths, 6, std=1.5)

  with jax.debug_nans(True):
    log_z = jax.jit(trees.log_partition, static_argnames='single_root')(
        arc, root, lens, single_root=single_root)
    arc_m, root_m = jax.jit(trees.marginals, static_argnames='single_root')(
        arc, root, lens, single_root=single_root)
    grad_arc, grad_root = jax.jit(jax.grad(
        lambda a, r: trees.log_partition(a, r, lens, single_root=single_root).sum(), (0, 1)))(arc, root)
    ent = jax.jit(trees.entropy, static_argnames='single_root')(arc, root, lens, single_root=single_root)
    kl = jax.jit(trees.kl_divergence, static_argnames='single_root')(
        arc, root, arc_q, root_q, lens, single_root=single_root)
    # vmap over the batch of per-sentence calls gives the same as the batched call.
    log_z_v, (arc_m_v, root_m_v) = jax.jit(jax.vmap(
        lambda a, r, l: (trees.log_partition(a, r, l, single_root=single_root),
                         trees.marginals(a, r, l, single_root=single_root))))(arc, root, lens)

  for i, n in enumerate(lengths):
    a, r = arc[i, :n, :n], root[i, :n]
    ref_log_z, ref_arc, ref_root, _, _ = brute_force.reference(a, r, single_root)
    np.testing.assert_allclose(log_z[i], ref_log_z, rtol=1e-10)
    np.testing.assert_allclose(arc_m[i, :n, :n], ref_arc, atol=1e-10)
    np.testing.assert_allclose(root_m[i, :n], ref_root, atol=1e-10)
    np.testing.assert_allclose(grad_arc[i, :n, :n] * (1 - np.eye(n)), ref_arc, atol=1e-10)
    np.testing.assert_allclose(grad_root[i, :n], ref_root, atol=1e-10)
    np.testing.assert_allclose(ent[i], _entropy_reference(a, r, single_root), atol=1e-10)
    # KL(p || q) by enumeration.
    _, p = brute_force.tree_probabilities(a, r, single_root)
    _, q = brute_force.tree_probabilities(arc_q[i, :n, :n], root_q[i, :n], single_root)
    np.testing.assert_allclose(kl[i], float((p * (np.log(p) - np.log(q))).sum()), atol=1e-10)
    # Padded outputs are exactly zero, and so is the gradient into padded (garbage) scores.
    assert np.all(arc_m[i, n:, :] == 0) and np.all(arc_m[i, :, n:] == 0) and np.all(root_m[i, n:] == 0)
    assert np.all(grad_arc[i, n:, :] == 0) and np.all(grad_arc[i, :, n:] == 0)
    assert np.all(grad_root[i, n:] == 0)
  np.testing.assert_allclose(log_z_v, log_z, rtol=1e-12)
  np.testing.assert_allclose(arc_m_v, arc_m, atol=1e-12)
  np.testing.assert_allclose(root_m_v, root_m, atol=1e-12)
  np.testing.assert_allclose(KL(arc, root, arc, root, lens, single_root=single_root), 0, atol=1e-10)


def test_single_root_support_is_exact():
  """A length-1 sentence: Z = exp(root score); single-root entropy of 2 words is over 2 trees."""
  arc = np.array([[0.0, 0.3], [-0.7, 0.0]])
  root = np.array([0.5, -0.2])
  np.testing.assert_allclose(LOG_Z(arc, root, 1), 0.5)
  # Two words, single root: trees {0 <- ROOT, 0 -> 1} and {1 <- ROOT, 1 -> 0}.
  expected = np.logaddexp(0.5 + 0.3, -0.2 - 0.7)
  np.testing.assert_allclose(LOG_Z(arc, root), expected, rtol=1e-12)
  np.testing.assert_allclose(LOG_Z(arc, root, 0), 0.0)


def _numpy_multi_root(arc, root):
  """Multi-root reference: Tutte's theorem on words + explicit ROOT node 0, then its minor."""
  n = len(root)
  weights = np.zeros((n + 1, n + 1))  # weights[h, m] over nodes (ROOT = 0, word i = i + 1)
  weights[0, 1:] = np.exp(root)
  weights[1:, 1:] = np.exp(arc) * (1 - np.eye(n))
  full = np.diag(weights.sum(0)) - weights
  minor = full[1:, 1:]
  sign, log_z = np.linalg.slogdet(minor)
  assert sign > 0
  inv = np.linalg.inv(minor)
  a = weights[1:, 1:]
  arc_m = a * (np.diag(inv)[None, :] - inv.T)
  return log_z, arc_m, np.exp(root) * np.diag(inv)


def _numpy_single_root(arc, root, sum_over_roots):
  """Single-root reference (Koo et al. 2007) in numpy float64.

  log Z either as sum_m r[m] det(L with row/col m removed) (each root child m roots a spanning
  arborescence of the words) or by the first-row replacement; marginals from its inverse.
  """
  n = len(root)
  a = np.exp(arc) * (1 - np.eye(n))
  lap = np.diag(a.sum(0)) - a
  if sum_over_roots:
    minors = np.stack([np.delete(np.delete(lap, m, 0), m, 1) for m in range(n)])
    sign, logdets = np.linalg.slogdet(minors)
    assert np.all(sign > 0)
    log_z = np.logaddexp.reduce(root + logdets)
    root_m = np.exp(root + logdets - log_z)
  lap_bar = lap.copy()
  lap_bar[0] = np.exp(root)
  inv = np.linalg.inv(lap_bar)
  if not sum_over_roots:
    log_z = np.linalg.slogdet(lap_bar)[1]
    root_m = np.exp(root) * inv[:, 0]
  delta_m = (np.arange(n) != 0)[None, :]
  delta_h = (np.arange(n) != 0)[:, None]
  arc_m = a * (delta_m * np.diag(inv)[None, :] - delta_h * inv.T)
  return log_z, arc_m, root_m


@pytest.mark.parametrize('n,length', quick_and_slow([(150, 150)], [(160, 151), (500, 377)]))
def test_numpy_reference_large(n, length):
  rng = np.random.default_rng(n)
  arc, root, lens = _random_problem(rng, [length], n, std=1.0)
  a, r = arc[0, :length, :length], root[0, :length]
  for single_root in ROOT_MODES:
    log_z = LOG_Z(arc, root, lens, single_root=single_root)
    arc_m, root_m = MARGINALS(arc, root, lens, single_root=single_root)
    if single_root:
      ref = _numpy_single_root(a, r, sum_over_roots=n < 200)
    else:
      ref = _numpy_multi_root(a, r)
    np.testing.assert_allclose(log_z[0], ref[0], rtol=1e-10)
    np.testing.assert_allclose(arc_m[0, :length, :length], ref[1], atol=1e-9)
    np.testing.assert_allclose(root_m[0, :length], ref[2], atol=1e-9)
    assert np.all(arc_m[0, length:] == 0) and np.all(root_m[0, length:] == 0)


def test_cayley_formula():
  """Uniform potentials: n^(n-1) single-root trees, (n+1)^(n-1) multi-root trees; uniform marginals."""
  lengths = np.array([1, 2, 3, 5, 8, 12, 30, 40], np.int32)
  arc = jnp.zeros((len(lengths), 40, 40), jnp.float64)
  root = jnp.zeros((len(lengths), 40), jnp.float64)
  n = lengths.astype(np.float64)
  log_z = jax.jit(trees.log_partition)(arc, root, lengths)
  np.testing.assert_allclose(log_z, (n - 1) * np.log(n), rtol=1e-12, atol=1e-12)
  log_z = LOG_Z(arc, root, lengths, single_root=False)
  np.testing.assert_allclose(log_z, (n - 1) * np.log(n + 1), rtol=1e-12, atol=1e-12)
  # Single root: by symmetry every one of the n possible heads of a word has probability 1/n.
  arc_m, root_m = MARGINALS(arc, root, lengths)
  for i, length in enumerate(lengths):
    np.testing.assert_allclose(root_m[i, :length], 1 / length, rtol=1e-10)
    off = ~np.eye(length, dtype=bool)
    np.testing.assert_allclose(arc_m[i, :length, :length][off], 1 / length, rtol=1e-10)
  # Multi-root: trees on n+1 labelled nodes containing a given edge number 2 (n+1)^(n-2) out of
  # (n+1)^(n-1), so P(ROOT -> m) = 2 / (n + 1).
  _, root_m = MARGINALS(arc, root, lengths, single_root=False)
  for i, length in enumerate(lengths):
    np.testing.assert_allclose(root_m[i, :length], 2 / (length + 1), rtol=1e-10)


@pytest.mark.parametrize('single_root', MULTI_ROOT_QUICK)
def test_check_grads(single_root, lu_path_only):
  """Finite differences of log_partition and marginals (order 2, forward and reverse), padded batch.

  On the LU path alone (`lu_path_only`): these scores never take the exact fallback (its result would
  be NaN here), whose derivatives are checked on sharp scores (`test_sharp_scores_match_enumeration`,
  `test_linear_elimination_matches_enumeration`); with it the check's 29 compiles took 60 / 44 s in a
  full suite run (2 workers), without it 4.5 / 4.7 s (one core)."""
  rng = np.random.default_rng(1)
  arc, root, lens = _random_problem(rng, [4, 3], 4)
  arc[1, 3:, :] = 0.3  # moderate padding values so finite differences there stay meaningful
  arc[1, :, 3:] = -0.2
  root[1, 3:] = 0.1
  log_z = jax.jit(lambda a, r: trees.log_partition(a, r, lens, single_root=single_root))
  check_grads(log_z, (arc, root), order=2, modes=['rev'], eps=1e-4)
  check_grads(log_z, (arc, root), order=1, modes=['fwd'], eps=1e-4)
  # A scalar loss through the marginals, as structured attention uses them.
  weights = rng.normal(size=arc.shape)

  @jax.jit
  def loss(a, r):
    arc_m, root_m = trees.marginals(a, r, lens, single_root=single_root)
    return jnp.sum(weights * arc_m) + jnp.sum(jnp.cos(root_m))

  check_grads(loss, (arc, root), order=1, modes=['fwd', 'rev'], eps=1e-4)
  # The Hessian of log Z is the Jacobian of the marginals (off the ignored diagonal).
  hess = jax.jit(jax.hessian(lambda a: log_z(a, root).sum()))(arc)
  jac = jax.jit(jax.jacrev(lambda a: trees.marginals(a, root, lens, single_root=single_root)[0]))(arc)
  off = (1 - np.eye(4))[None, :, :, None, None, None]
  np.testing.assert_allclose(hess * off, jac * off, atol=1e-10)
  assert np.abs(jac * off).max() > 1e-3


@pytest.mark.parametrize('single_root', SINGLE_ROOT_QUICK)
def test_float32_stability(single_root):
  """N(0, 3^2) at n=200 and |scores| <= 60 at n=500 in float32: no overflow, sums within 1e-3."""
  rng = np.random.default_rng(2)
  with jax.debug_nans(True):
    arc, root, lens = _random_problem(rng, [200, 131], 200, std=3.0, dtype=np.float32)
    arc_m, root_m = jax.jit(trees.marginals, static_argnames='single_root')(
        arc, root, lens, single_root=single_root)
    assert arc_m.dtype == jnp.float32
    totals = np.asarray(arc_m.sum(-2) + root_m)
    np.testing.assert_allclose(totals[0], 1.0, atol=1e-3)
    np.testing.assert_allclose(totals[1, :131], 1.0, atol=1e-3)
    assert np.all(totals[1, 131:] == 0)
    if single_root:
      np.testing.assert_allclose(root_m.sum(-1), 1.0, atol=1e-3)
    arc = rng.uniform(-60, 60, size=(1, 500, 500)).astype(np.float32)
    root = rng.uniform(-60, 60, size=(1, 500)).astype(np.float32)
    log_z = LOG_Z(arc, root, single_root=single_root)
    arc_m, root_m = MARGINALS(arc, root, single_root=single_root)
  assert log_z.dtype == jnp.float32 and np.isfinite(log_z).all()
  log_z64 = LOG_Z(arc.astype(np.float64), root.astype(np.float64), single_root=single_root)
  np.testing.assert_allclose(log_z, log_z64, rtol=1e-5)
  np.testing.assert_allclose(arc_m.sum(-2) + root_m, 1.0, atol=1e-3)
  assert float(arc_m.min()) >= -1e-3 and float(root_m.min()) >= -1e-3


@pytest.mark.parametrize('single_root', SINGLE_ROOT_QUICK)
@pytest.mark.parametrize('dtype', quick_and_slow([np.float32], [np.float64]))
def test_sharp_scores_match_enumeration(single_root, dtype):
  """N(0, 30^2) and N(0, 60^2) scores (the LU path loses everything there): enumeration accuracy.

  Two words that are each other's best head make the shifted Laplacian singular to working
  precision; the error estimate must send them to the exact elimination.
  """
  rng = np.random.default_rng(11)
  lengths = [6, 5, 6, 4, 6, 3, 6, 2] * 2
  arc, root, lens = _random_problem(rng, lengths, 6)
  arc[:8] *= 30
  root[:8] *= 30
  arc[8:] *= 60
  root[8:] *= 60
  arc[2, 0, 1] = arc[2, 1, 0] = 5.0  # a 2-cycle far above everything else
  root[2, :2] = -100.0
  arc, root = arc.astype(dtype), root.astype(dtype)
  atol = 2e-5 if dtype == np.float32 else 1e-8  # see _needs_exact's bounds
  with jax.debug_nans(True):
    log_z = LOG_Z(arc, root, lens, single_root=single_root)
    arc_m, root_m = MARGINALS(arc, root, lens, single_root=single_root)
    ent = ENTROPY(arc, root, lens, single_root=single_root)
    grad_arc, grad_root = jax.jit(jax.grad(
        lambda a, r: trees.log_partition(a, r, lens, single_root=single_root).sum(), (0, 1)))(arc, root)
    through = jax.jit(jax.grad(
        lambda a: jnp.sum(trees.marginals(a, root, lens, single_root=single_root)[0] ** 2)))(arc)
  assert np.isfinite(through).all()
  for i, n in enumerate(lengths):
    ref_log_z, ref_arc, ref_root, _, _ = brute_force.reference(arc[i, :n, :n], root[i, :n], single_root)
    np.testing.assert_allclose(log_z[i], ref_log_z, rtol=1e-6 if dtype == np.float32 else 1e-11)
    np.testing.assert_allclose(arc_m[i, :n, :n] * (1 - np.eye(n)), ref_arc, atol=atol)
    np.testing.assert_allclose(root_m[i, :n], ref_root, atol=atol)
    np.testing.assert_allclose(grad_arc[i, :n, :n] * (1 - np.eye(n)), ref_arc, atol=atol)
    np.testing.assert_allclose(grad_root[i, :n], ref_root, atol=atol)
    ref_ent = _entropy_reference(arc[i, :n, :n], root[i, :n], single_root)
    np.testing.assert_allclose(ent[i], ref_ent, atol=1e-4 if dtype == np.float32 else 1e-9)
  # The marginals' own derivative on the exact path: finite differences (float64, scores x30).
  if dtype == np.float64:
    # Forward and reverse: the exact path's derivatives are products whose transposes use their
    # symmetry (`_hessian_product`), run by a while loop over the flagged elements that JAX never
    # transposes; in one root mode to the third derivative of log Z (the other mode's third
    # derivative: `test_linear_elimination_matches_enumeration`; each order 2 check adds ~25 s).
    check_grads(jax.jit(lambda a: trees.marginals(a, root[2:4], lens[2:4], single_root=single_root)[0]),
                (arc[2:4],), order=2 if single_root else 1, modes=['fwd', 'rev'], eps=1e-5)


@pytest.mark.parametrize('single_root', ROOT_MODES)
def test_exact_elimination_with_constraints(single_root):
  """The log-space elimination alone, with random forbidden arcs (incl. closed word sets), vs enumeration."""
  rng = np.random.default_rng(12)
  lengths = [6, 5, 4, 6, 3, 6, 1, 0]
  arc, root, lens = _random_problem(rng, lengths, 6)
  arc[:6] = np.where(rng.random(arc[:6].shape) < 0.4, -np.inf, arc[:6])
  root[:6] = np.where(rng.random(root[:6].shape) < 0.4, -np.inf, root[:6])
  # Words 0 and 1 of sentence 0 may only take each other or ROOT as head.
  arc[0, 2:, :2] = -np.inf
  root[0, :2] = 0.5
  mask = np.arange(6)[None, :] < lens[:, None]
  log_z, arc_m, root_m = jax.jit(_exact_path._exact_log_z_and_marginals, static_argnums=3)(
      arc, root, mask, single_root)
  for i, n in enumerate(lengths):
    trees_, probs = (brute_force.tree_probabilities(arc[i, :n, :n], root[i, :n], single_root)
                     if n else (None, None))
    if n == 0:
      assert log_z[i] == 0
      continue
    scores = brute_force.tree_scores(arc[i, :n, :n], root[i, :n], brute_force.all_trees(n, single_root))
    if not np.isfinite(scores).any():
      assert log_z[i] == -np.inf and np.isnan(arc_m[i]).all()
      continue
    ref_log_z, ref_arc, ref_root, _, _ = brute_force.reference(arc[i, :n, :n], root[i, :n], single_root)
    np.testing.assert_allclose(log_z[i], ref_log_z, rtol=1e-11)
    np.testing.assert_allclose(arc_m[i, :n, :n] * (1 - np.eye(n)), ref_arc, atol=1e-12)
    np.testing.assert_allclose(root_m[i, :n], ref_root, atol=1e-12)
    assert np.all(arc_m[i, n:] == 0) and np.all(root_m[i, n:] == 0)


def test_sharp_scores_no_nan_batch():
  """The reproduction of the stop-7 defect: 64 sentences of n <= 9, N(0, 30^2), float32: no NaN, sums 1."""
  rng = np.random.default_rng(13)
  lens = rng.integers(3, 10, size=64).astype(np.int32)
  arc = (rng.normal(size=(64, 9, 9)) * 30).astype(np.float32)
  root = (rng.normal(size=(64, 9)) * 30).astype(np.float32)
  for single_root in ROOT_MODES:
    arc_m, root_m = MARGINALS(arc, root, lens, single_root=single_root)
    exact = MARGINALS(arc.astype(np.float64), root.astype(np.float64), lens, single_root=single_root)
    mask = np.arange(9)[None, :] < lens[:, None]
    totals = np.asarray(arc_m.sum(-2) + root_m)
    # The LU path keeps what its error estimate bounds by ~1e-3 (see _needs_exact); before, NaN.
    np.testing.assert_allclose(totals[mask], 1.0, atol=1e-3)
    np.testing.assert_allclose(arc_m, exact[0], atol=1e-3)
    np.testing.assert_allclose(root_m, exact[1], atol=1e-3)


@pytest.mark.parametrize('single_root', ROOT_MODES)
def test_laplacian_column_abs_sums_without_a_pass_over_the_matrix(single_root):
  # The error estimate's ||L||_1 comes from [B, n] vectors; it must be that of the matrix itself,
  # on padding, empty sentences, -inf arcs and scores far apart too.
  rng = np.random.default_rng(8)
  arc = 5 * rng.normal(size=(7, 9, 9))
  root = 5 * rng.normal(size=(7, 9)) - 3
  arc[0, 2, 4] = arc[1, :, 3] = -np.inf
  arc[2] += 80 * np.eye(9)[::-1]
  lengths = np.array([9, 9, 9, 5, 1, 0, 3])
  a, r, _, mask = _lu_path._prepare(arc, root, lengths)
  arc_p, root_p = _lu_path._potentials(a, r, mask, single_root)[:2]
  lap = np.asarray(_lu_path._laplacian(arc_p, root_p, mask, single_root))
  got = np.asarray(_lu_path._laplacian_column_abs_sums(arc_p, root_p, mask, single_root))
  want = np.abs(lap).sum(axis=-2)
  np.testing.assert_allclose(got, want, rtol=1e-14, atol=1e-300)
  assert np.all(got[5] == 1.0)  # an empty sentence's Laplacian is the identity


def test_zero_pivot_batch_is_flagged_at_64x64():
  """The stop-30 defect (SNLI structured attention diverged at step 135): root scores ~0 under arc
  scores ~100 made every root potential underflow, so the LU met a zero pivot and its inverse was NaN.
  At B = 64, n = 64 XLA's vectorised max reduction on the CPU dropped those NaN from the error
  estimate's norms, nothing was flagged and NaN marginals came out. Built here without the root row
  shift (which now keeps row 0 from underflowing), the NaN inverses must be flagged by the estimate's
  sums; and the public function must give the float64 marginals, padded or not."""
  rng = np.random.default_rng(0)
  arc = (100 + 10 * rng.normal(size=(64, 64, 64))).astype(np.float32)
  root = np.zeros((64, 64), np.float32)
  lengths = np.where(np.arange(64) % 2 == 0, 64, 8).astype(np.int32)

  def unshifted_potentials(a, r, l):
    mask = _lu_path._prepare(a, r, l)[3]
    return (*_lu_path._potentials(a, r, mask, single_root=False)[:2], mask)  # row 0 not shifted

  arc_p, root_p, mask = jax.jit(unshifted_potentials)(arc, root, lengths)
  lap = _lu_path._laplacian(arc_p, root_p, mask, single_root=True)
  inverse = _lu_path._lu_logdet_and_inverse(lap)[1]
  assert not np.any(np.all(np.isfinite(np.asarray(inverse)), axis=(-2, -1)))  # the LU fails on all
  assert np.all(jax.jit(_flagged, static_argnums=(3, 4))(arc_p, root_p, mask, False, True))
  arc_m, root_m = MARGINALS(arc, root, lengths)
  exact = MARGINALS(arc.astype(np.float64), root.astype(np.float64), lengths)
  assert np.all(np.isfinite(arc_m)) and np.all(np.isfinite(root_m))
  np.testing.assert_allclose(arc_m, exact[0], atol=1e-4)
  np.testing.assert_allclose(root_m, exact[1], atol=1e-4)
  # A NaN row among finite (padded identity) rows, in one batch element of 64: flagged by itself.
  inverse = np.broadcast_to(np.eye(64, dtype=np.float32), (64, 64, 64)).copy()
  inverse[5, :3] = np.nan
  lap_column_sums = np.ones((64, 64), np.float32)  # those of the identity Laplacian
  flagged = np.asarray(jax.jit(_lu_path._needs_exact)(jnp.asarray(inverse), lap_column_sums))
  assert flagged[5] and not flagged[np.arange(64) != 5].any()


@pytest.mark.parametrize('offset', [5.0, 20.0, 100.0])
def test_root_row_shift_keeps_offset_scores_on_the_lu_path(offset):
  """Single root, arc scores `offset` above N(0, 1) root scores (a bilinear arc scorer next to a linear
  root scorer): with row 0 of L_bar shifted to a largest entry of 1 no sentence needs the exact path,
  log Z and the marginals match float64 (which the shift does not change: it is a row scaling); without
  the shift many sentences failed the error estimate (and ~100 below, the LU itself:
  test_zero_pivot_batch_is_flagged_at_64x64)."""
  rng = np.random.default_rng(1)
  arc = (offset + 3 * rng.normal(size=(64, 30, 30))).astype(np.float32)
  root = rng.normal(size=(64, 30)).astype(np.float32)
  lengths = rng.integers(1, 31, size=64).astype(np.int32)

  def flagged(shift_root_row):
    a, r, _, mask = _lu_path._prepare(arc, root, lengths)
    arc_p, root_p = _lu_path._potentials(a, r, mask, single_root=shift_root_row)[:2]
    return int(np.sum(_flagged(arc_p, root_p, mask, shift_root_row, laplacian_single_root=True)))

  assert flagged(True) == 0 and flagged(False) > 10  # 15 / 62 / 62 of 64 at the three offsets
  log_z = LOG_Z(arc, root, lengths)
  arc_m, root_m = MARGINALS(arc, root, lengths)
  arc64, root64 = arc.astype(np.float64), root.astype(np.float64)
  np.testing.assert_allclose(log_z, LOG_Z(arc64, root64, lengths), rtol=1e-6)
  exact = MARGINALS(arc64, root64, lengths)
  np.testing.assert_allclose(arc_m, exact[0], atol=1e-5)
  np.testing.assert_allclose(root_m, exact[1], atol=1e-5)
  for i in (0, 1):  # against the numpy float64 sum over root children (no first-row replacement)
    n = int(lengths[i])
    ref_log_z, ref_arc, ref_root = _numpy_single_root(arc64[i, :n, :n], root64[i, :n], sum_over_roots=True)
    np.testing.assert_allclose(log_z[i], ref_log_z, rtol=1e-6)
    np.testing.assert_allclose(arc_m[i, :n, :n], ref_arc, atol=1e-5)
    np.testing.assert_allclose(root_m[i, :n], ref_root, atol=1e-5)


def _flagged(arc_potentials, root_potentials, mask, single_root, laplacian_single_root=None):
  """`_needs_exact` as `trees` calls it: the LU inverse of the Laplacian and its column sums from the
  potentials (`_laplacian_column_abs_sums`). `laplacian_single_root`: the Laplacian's root mode when
  it differs from the potentials' (potentials without the root row shift)."""
  root_mode = single_root if laplacian_single_root is None else laplacian_single_root
  lap = _lu_path._laplacian(arc_potentials, root_potentials, mask, root_mode)
  return _lu_path._needs_exact(
      _lu_path._lu_logdet_and_inverse(lap)[1],
      _lu_path._laplacian_column_abs_sums(arc_potentials, root_potentials, mask, root_mode))


def _two_cycle_problem(rng, n, cycle_score, dtype):
  """N(0, 1) scores with words 0 and 1 each other's head at `cycle_score`: too sharp for the LU."""
  arc = rng.normal(size=(n, n))
  root = rng.normal(size=n)
  arc[0, 1] = arc[1, 0] = cycle_score
  return arc.astype(dtype), root.astype(dtype)


@pytest.mark.parametrize('single_root', ROOT_MODES)
@pytest.mark.parametrize('dtype', quick_and_slow([np.float32], [np.float64]))
def test_linear_elimination_matches_enumeration(single_root, dtype):
  """The linear elimination alone, on sharp problems it trusts (one 2-cycle scored 20 or 40, or two
  scored 30 and 25), vs enumeration: log Z, marginals, and the marginals' derivative vs finite
  differences."""
  rng = np.random.default_rng(21)
  mask = np.ones(6, bool)
  problems = [_two_cycle_problem(rng, 6, score, dtype) for score in (20.0, 40.0, 30.0)]
  problems[2][0][2, 3] = problems[2][0][3, 2] = 25.0
  linear = jax.jit(_elimination._linear_marginals, static_argnums=3)
  atol = 2e-6 if dtype == np.float32 else 1e-12
  for arc, root in problems:
    # The LU estimate rejects them: this is the exact path's work, not the LU's.
    assert bool(_flagged(*_lu_path._potentials(arc, root, mask, single_root)[:2], mask, single_root))
    log_z, arc_m, root_m, trusted = linear(arc, root, mask, single_root)
    assert bool(trusted)
    ref_log_z, ref_arc, ref_root, _, _ = brute_force.reference(arc, root, single_root)
    np.testing.assert_allclose(log_z, ref_log_z, rtol=1e-6 if dtype == np.float32 else 1e-13)
    np.testing.assert_allclose(arc_m * (1 - np.eye(6)), ref_arc, atol=atol)
    np.testing.assert_allclose(root_m, ref_root, atol=atol)
  if dtype == np.float64:
    arc, root = problems[0]
    # Jitted: run op by op, every call re-traces and re-compiles the elimination's scans.
    # Order 2 in reverse mode: the marginals' derivative is a Hessian-vector product whose transpose
    # is itself (`_hessian_product`); its own derivative, the third of log Z, is plain autodiff.
    check_grads(jax.jit(lambda a, r: LINEAR_SENTENCE(a, r, mask, single_root)[1:3]),
                (arc, root), order=2, modes=['fwd', 'rev'], eps=1e-5)
    # The whole Jacobian both ways: jacrev maps cotangents over a shared point (the product's batching
    # keeps the point unmapped), jacfwd maps tangents; both are the Hessian of log Z.
    arc_marginals = lambda a: LINEAR_SENTENCE(a, root, mask, single_root)[1]
    by_rows, by_columns = jax.jit(jax.jacrev(arc_marginals))(arc), jax.jit(jax.jacfwd(arc_marginals))(arc)
    np.testing.assert_allclose(by_rows, by_columns, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(by_rows.reshape(36, 36), by_rows.reshape(36, 36).T, rtol=1e-10, atol=1e-12)
    assert np.abs(by_rows).max() > 1e-3


@pytest.mark.parametrize('single_root', MULTI_ROOT_QUICK)
def test_linear_elimination_matches_float64_log_space_at_n_64(single_root):
  """float32 linear elimination vs the float64 log-space one at n = 64, 2-cycles scored 12 and 30
  among N(0, 3^2): log Z, marginals, and the gradient of a loss through the marginals."""
  rng = np.random.default_rng(22)
  n = 64
  mask = np.ones(n, bool)
  arc = rng.normal(scale=3.0, size=(n, n))
  root = rng.normal(scale=3.0, size=n)
  # Each 2-cycle costs its way out (~score - 7 nats) in P_indep; five at 15-45 were ~e^-150, untrusted.
  for i, score in zip(range(0, 16, 8), (12.0, 30.0)):
    arc[i, i + 1] = arc[i + 1, i] = score
  weights = rng.normal(size=(n, n))
  loss = lambda fn: jax.jit(jax.value_and_grad(
      lambda a, r: jnp.sum(weights * fn(a, r, mask, single_root)[1]), (0, 1)))
  arc32, root32 = arc.astype(np.float32), root.astype(np.float32)
  got = jax.jit(_elimination._linear_marginals, static_argnums=3)(arc32, root32, mask, single_root)
  assert bool(got[3])  # trusted
  want = jax.jit(_elimination._elimination_marginals, static_argnums=3)(arc, root, mask, single_root)
  np.testing.assert_allclose(got[0], want[0], rtol=1e-6)
  np.testing.assert_allclose(got[1], want[1], atol=2e-6)
  np.testing.assert_allclose(got[2], want[2], atol=2e-6)
  (value, grads), (want_value, want_grads) = (loss(LINEAR_SENTENCE)(arc32, root32),
                                              loss(LOG_SPACE_SENTENCE)(arc, root))
  np.testing.assert_allclose(value, want_value, rtol=1e-5, atol=1e-5)
  for g, w in zip(grads, want_grads):
    np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4 * np.abs(w).max())


def test_flat_and_segmented_sweeps_agree(monkeypatch):
  """Up to `_FLAT_UP_TO` words the eliminations' sweeps are flat scans; past it, checkpointed
  segments. Both ways, at n = 11 with a 2-cycle scored 25 among N(0, 2^2) (float64, single root):
  log Z, marginals, and value + gradient of a loss through them, for both eliminations."""
  rng = np.random.default_rng(23)
  n = 11
  arc, root, mask = rng.normal(scale=2.0, size=(n, n)), rng.normal(scale=2.0, size=n), np.ones(n, bool)
  mask[-2:] = False
  arc[3, 4] = arc[4, 3] = 25.0
  weights = rng.normal(size=(n, n))

  def results():
    out = []
    for fn in (LINEAR_SENTENCE, LOG_SPACE_SENTENCE):
      def loss(a, r, fn=fn):
        _, arc_m, root_m = fn(a, r, mask, True)[:3]
        return jnp.sum(weights * arc_m) + jnp.sum(root_m)

      out.append((jax.jit(lambda a, r, fn=fn: fn(a, r, mask, True)[:3])(arc, root),
                  jax.jit(jax.value_and_grad(loss, (0, 1)))(arc, root)))
    return out

  assert n <= _elimination._FLAT_UP_TO
  flat = results()
  monkeypatch.setattr(_elimination, '_FLAT_UP_TO', 0)
  segmented = results()
  for got, want in zip(jax.tree.leaves(segmented), jax.tree.leaves(flat)):
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)
  assert np.abs(flat[0][1][1][0]).max() > 1e-3  # the gradient is not trivially zero


@pytest.mark.parametrize('single_root', MULTI_ROOT_QUICK)
def test_untrusted_sentences_take_the_log_space_elimination(single_root):
  """Words 0 and 1 each other's head at 0 and every other head of theirs (ROOT too) at -100: every
  tree needs an arc e^-100 below its column's best, which underflows in float32, so the linear
  elimination is not trusted there (it is in float64) and the result comes from log space, exact."""
  n = 5
  arc = np.full((n, n), -1.0)
  root = np.full(n, -1.0)
  arc[:, :2] = -100.0
  root[:2] = -100.0
  arc[0, 1] = arc[1, 0] = 0.0
  mask = np.ones(n, bool)
  trusted = lambda a, r: bool(jax.jit(_elimination._linear_marginals, static_argnums=3)(a, r, mask, single_root)[3])
  assert not trusted(arc.astype(np.float32), root.astype(np.float32))
  assert trusted(arc, root)
  ref_log_z, ref_arc, ref_root, _, _ = brute_force.reference(arc, root, single_root)
  for dtype, atol in ((np.float32, 2e-6), (np.float64, 1e-12)):
    potentials = _lu_path._potentials(arc.astype(dtype), root.astype(dtype), mask, single_root)[:2]
    assert bool(_flagged(*potentials, mask, single_root))  # the exact path decides
    log_z = LOG_Z(arc[None].astype(dtype), root[None].astype(dtype), single_root=single_root)
    arc_m, root_m = MARGINALS(arc[None].astype(dtype), root[None].astype(dtype), single_root=single_root)
    np.testing.assert_allclose(log_z[0], ref_log_z, rtol=1e-6)
    np.testing.assert_allclose(arc_m[0] * (1 - np.eye(n)), ref_arc, atol=atol)
    np.testing.assert_allclose(root_m[0], ref_root, atol=atol)
  # The floor: n^3 tiny / eps.
  assert _elimination._linear_floor(np.float32, 200) == pytest.approx(-55.5, abs=0.1)
  assert _elimination._linear_floor(np.float64, 200) == pytest.approx(-656.5, abs=0.1)


@pytest.mark.parametrize('num_sharp,chunk_share', quick_and_slow([(3, None), (6, 1)], [(5, 16)]))
def test_few_sharp_elements_in_a_large_batch(num_sharp, chunk_share, monkeypatch):
  """Sharp sentences among 32 are gathered, recomputed exactly and written back: with the default
  chunks (one sentence each at this batch size), one chunk of all 32, and chunks of 2 sentences (5
  sharp: three chunks run, the last one half empty, the rest never); marginals and gradients match
  enumeration. Chunks run at the canonical length 8 (`_canonical_length`: words 6 and 7 padding)."""
  assert _exact_path._canonical_length(6) == 8
  if chunk_share is not None:
    monkeypatch.setattr(_exact_path, '_CHUNK_SHARE', chunk_share)
  assert _exact_path._chunk_size(32, 6) == {None: 1, 1: 32, 16: 2}[chunk_share]
  rng = np.random.default_rng(16)
  lengths = [6, 5, 4, 6, 3, 6, 2, 6] * 4
  arc, root, lens = _random_problem(rng, lengths, 6)
  sharp = rng.choice(32, num_sharp, replace=False)
  arc[sharp] *= 40.0
  root[sharp] *= 40.0
  arc, root = arc.astype(np.float32), root.astype(np.float32)
  # Fresh jits: the module-level ones would reuse a trace made with the other chunk size.
  arc_m, root_m = jax.jit(trees.marginals)(arc, root, lens)
  grad_arc = jax.jit(jax.grad(lambda a: trees.log_partition(a, root, lens).sum()))(arc)
  through = jax.jit(jax.grad(lambda a: jnp.sum(trees.marginals(a, root, lens)[0] ** 2)))(arc)
  assert np.isfinite(through).all()
  for i, n in enumerate(lengths):
    _, ref_arc, ref_root, _, _ = brute_force.reference(arc[i, :n, :n], root[i, :n], True)
    np.testing.assert_allclose(arc_m[i, :n, :n] * (1 - np.eye(n)), ref_arc, atol=2e-5)
    np.testing.assert_allclose(root_m[i, :n], ref_root, atol=2e-5)
    np.testing.assert_allclose(grad_arc[i, :n, :n] * (1 - np.eye(n)), ref_arc, atol=2e-5)


def test_exact_chunks_have_canonical_shapes(monkeypatch):
  """Below 32 words the exact path runs at a multiple of 4 words, in power-of-two chunks (a chunk may
  exceed the batch: its extra slots are dropped), so programs over other short lengths and batch
  sizes reuse one trace of it; the results are those at the real length (enumeration)."""
  assert [_exact_path._canonical_length(n) for n in (1, 7, 8, 9, 31, 32, 33, 200)] == \
      [4, 8, 8, 12, 32, 32, 33, 200]
  # At most 1/32 of the batch, at most 128k n^3 work, a power of two, and no more than the batch needs.
  assert [_exact_path._chunk_size(size, 5) for size in (1, 3, 64, 100, 300, 5000)] == [1, 1, 2, 2, 8, 128]
  assert [_exact_path._chunk_size(1000, n) for n in (9, 20, 31, 40, 80)] == [16, 16, 4, 2, 1]
  assert _exact_path._chunk_size(3, 5) == 1
  shapes = []
  real_chunk = _exact_path._exact_chunk
  monkeypatch.setattr(_exact_path, '_exact_chunk', lambda a, r, m, s, kernels=None: (
      shapes.append(a.shape), real_chunk(a, r, m, s))[1])
  rng = np.random.default_rng(21)
  for lengths, n in (([5, 3, 4], 5), ([7, 7, 2], 7)):
    arc, root, lens = _random_problem(rng, lengths, n)
    arc, root = 40.0 * arc, 40.0 * root  # sharp: the exact path decides
    arc_m, root_m = jax.jit(trees.marginals)(arc, root, lens)
    for i, length in enumerate(lengths):
      _, ref_arc, ref_root, _, _ = brute_force.reference(arc[i, :length, :length], root[i, :length], True)
      np.testing.assert_allclose(arc_m[i, :length, :length] * (1 - np.eye(length)), ref_arc, atol=1e-9)
      np.testing.assert_allclose(root_m[i, :length], ref_root, atol=1e-9)
  assert set(shapes) == {(1, 8, 8)}, shapes  # both programs: one chunk shape


def test_exact_fallback_under_a_user_vmap():
  """Under `jax.vmap` the fallback's loop keeps an unbatched predicate (a batched one would run the
  exact path's chunks for every call while any call has one left, with selects) and still picks the
  exact result per element: vmap results equal batched ones."""
  rng = np.random.default_rng(15)
  arc = rng.normal(size=(4, 6, 6)).astype(np.float32)
  root = rng.normal(size=(4, 6)).astype(np.float32)
  arc[1] *= 40.0  # only this element needs the exact path
  root[1] *= 40.0
  # The fallback's loop carries its chunk index (unbatched: i32[]) and the flat marginals
  # [4, 1, 6, 6] / heads [4, 1, 6] of the mapped batch; a batched predicate would batch the index.
  for fn, output in ((lambda a, r: trees.marginals(a, r), r'f32\[4,1,6,6\]'),
                     (lambda a, r: trees.sample(jax.random.key(0), a, r), r'i32\[4,1,6\]')):
    text = str(jax.make_jaxpr(jax.vmap(fn))(arc, root))
    assert re.search(r'i32\[\] [^\n]*' + output + r'[^\n]* = while\[', text), 'batched predicate under vmap'
  batched = MARGINALS(arc, root)
  mapped = jax.jit(jax.vmap(trees.marginals))(arc, root)
  for b, m in zip(batched, mapped):
    np.testing.assert_allclose(m, b, rtol=1e-6, atol=1e-7)
  loss = lambda a: jnp.sum(trees.marginals(a, root)[0] ** 2)
  per_call = jax.jit(jax.vmap(jax.grad(lambda a, r: jnp.sum(trees.marginals(a, r)[0] ** 2))))(arc, root)
  np.testing.assert_allclose(per_call, jax.jit(jax.grad(loss))(arc), rtol=1e-5, atol=1e-6)
  heads = jax.jit(jax.vmap(lambda k, a, r: trees.sample(k, a, r)))(
      jax.random.split(jax.random.key(1), 4), arc, root)
  assert all(brute_force._is_tree(tuple(h)) for h in np.asarray(heads))


def test_exact_modes_flag_in_program_and_outside():
  """`exact=`: 'flag' gives NaN for the flagged element only (never a silently wrong value), zero
  derivatives there and traces no exact path (no loop, no conditional); 'in_program' traces it and is
  exact; 'auto' on concrete arrays is exact through two separate programs (the same numbers), and
  inside a trace is 'flag'; `trees.exact_mode` sets the default; an unknown mode is an error."""
  rng = np.random.default_rng(16)
  arc = rng.normal(size=(3, 6, 6)).astype(np.float32)
  root = rng.normal(size=(3, 6)).astype(np.float32)
  arc[0, 0, 1] = arc[0, 1, 0] = 40.0  # a 2-cycle scored 40: the LU estimate flags element 0 only

  def statistics(exact):
    return lambda a, r: (trees.log_partition(a, r, exact=exact), trees.marginals(a, r, exact=exact),
                         trees.entropy(a, r, exact=exact))

  loops = r'= (cond|while)\['
  assert re.search(loops, str(jax.make_jaxpr(statistics('in_program'))(arc, root)))
  exact = jax.jit(statistics('in_program'))(arc, root)
  assert all(np.isfinite(x).all() for x in jax.tree.leaves(exact))
  for mode in ('flag', 'auto'):
    assert not re.search(loops, str(jax.make_jaxpr(statistics(mode))(arc, root))), mode
    flagged = jax.jit(statistics(mode))(arc, root)
    for e, w in zip(jax.tree.leaves(exact), jax.tree.leaves(flagged)):
      assert np.isnan(w[0]).all(), 'the flagged element must be NaN'
      np.testing.assert_allclose(w[1:], e[1:], rtol=1e-6, atol=1e-7)
  outside = statistics('auto')(arc, root)  # concrete arrays: exact, outside any program
  for e, o in zip(jax.tree.leaves(exact), jax.tree.leaves(outside)):
    np.testing.assert_allclose(o, e, rtol=1e-6, atol=1e-7)
  # 'flag': the flagged element's derivative is zero, never NaN, so a loss that drops it stays finite.
  keep = lambda m: jnp.sum(jnp.where(jnp.isnan(m), 0.0, m) ** 2)
  gradient = jax.jit(jax.grad(lambda a: keep(trees.marginals(a, root, exact='flag')[0])))(arc)
  assert np.isfinite(gradient).all() and not np.asarray(gradient[0]).any()
  with trees.exact_mode('auto'):  # this module runs under 'in_program' (in_program_exact)
    assert not re.search(loops, str(jax.make_jaxpr(statistics(None))(arc, root)))
  with trees.exact_mode('in_program'):
    assert re.search(loops, str(jax.make_jaxpr(statistics(None))(arc, root)))
    assert not re.search(loops, str(jax.make_jaxpr(statistics('flag'))(arc, root)))  # the keyword wins
  with pytest.raises(ValueError, match=r"exact='no': use one of \('auto', 'in_program', 'flag'\)"):
    trees.marginals(arc, root, exact='no')
  with pytest.raises(ValueError, match='exact=.outside.'):
    with trees.exact_mode('outside'):
      pass


def test_outside_path_on_many_flagged_elements_matches_the_program():
  """'auto' on concrete arrays with more flagged elements than one chunk of the exact program (n = 40:
  2 per chunk), a leading batch shape of two axes and padding: equal to the in-program results."""
  rng = np.random.default_rng(3)
  arc = rng.normal(size=(2, 4, 40, 40)).astype(np.float32)
  root = rng.normal(size=(2, 4, 40)).astype(np.float32)
  lengths = np.array([[40, 33, 12, 0], [5, 40, 39, 21]])
  for b, i in ((0, 0), (0, 1), (1, 1), (1, 2), (1, 3)):
    arc[b, i, 2, 3] = arc[b, i, 3, 2] = 60.0
  in_program = jax.jit(lambda a, r, l: trees.marginals(a, r, l, exact='in_program'))(arc, root, lengths)
  flagged = jax.jit(lambda a, r, l: trees.marginals(a, r, l, exact='flag'))(arc, root, lengths)[0]
  assert np.isnan(np.asarray(flagged)).any(axis=(-2, -1)).sum() == 5  # the five 2-cycles, nothing else
  outside = trees.marginals(arc, root, lengths, exact='auto')
  for o, p in zip(outside, in_program):
    assert np.isfinite(o).all()
    np.testing.assert_allclose(np.asarray(o), np.asarray(p), rtol=1e-6, atol=1e-7)


def test_exact_path_memory_is_that_of_the_lu_path():
  """Issue 15: value + gradient through `marginals` at B = 64, n = 200 keeps O(B n^2) memory.

  XLA assigns the buffers of every branch of a compiled program, so its `memory_analysis` is the
  peak with any number of sharp sentences, every one included. It must stay within a small factor
  of the same loss through the LU marginals alone (no exact path); differentiating the exact
  elimination of the whole batch kept n steps of [n, n] per sentence (584 MiB at n = 50 vs 3 MiB).
  Compiled only (abstract shapes), never run.
  """
  from launch.benchmarks import trees as trees_benchmark  # pylint: disable=g-import-not-at-top
  b, n = 64, 200
  shapes = (jax.ShapeDtypeStruct((b, n, n), jnp.float32), jax.ShapeDtypeStruct((b, n), jnp.float32)) * 2

  def peak_mib(marginals_fn):
    analysis = jax.jit(trees_benchmark._loss_and_grad(marginals_fn)).lower(*shapes).compile().memory_analysis()
    return (analysis.argument_size_in_bytes + analysis.output_size_in_bytes
            + analysis.temp_size_in_bytes) / 2**20

  ours = peak_mib(trees.marginals)
  lu_only = peak_mib(trees_benchmark.inverse_autodiff_marginals)
  assert ours < 4 * lu_only, (ours, lu_only)


@pytest.mark.parametrize('single_root', SINGLE_ROOT_QUICK)
def test_forbidden_arcs(single_root):
  """-inf arcs get exactly 0 marginal; everything else matches enumeration; gradients stay finite."""
  rng = np.random.default_rng(3)
  arc, root, lens = _random_problem(rng, [5, 4], 5)
  arc[0, 1, 2] = arc[0, 3, 2] = arc[0, 0, 4] = -np.inf
  arc[1, 2, 0] = -np.inf
  root[0, 1] = -np.inf
  with jax.debug_nans(True):
    arc_m, root_m = MARGINALS(arc, root, lens, single_root=single_root)
    ent = ENTROPY(arc, root, lens, single_root=single_root)
    grads = jax.jit(jax.grad(lambda a, r: trees.log_partition(a, r, lens, single_root=single_root).sum(),
                             (0, 1)))(arc, root)
    grad_through_marginals = jax.jit(jax.grad(
        lambda a: jnp.sum(trees.marginals(a, root, lens, single_root=single_root)[0] ** 2)))(arc)
  assert arc_m[0, 1, 2] == 0 and arc_m[0, 3, 2] == 0 and arc_m[0, 0, 4] == 0 and arc_m[1, 2, 0] == 0
  assert root_m[0, 1] == 0
  assert np.isfinite(grads[0]).all() and np.isfinite(grads[1]).all()
  assert np.isfinite(grad_through_marginals).all()
  for i, n in enumerate([5, 4]):
    ref_log_z, ref_arc, ref_root, _, _ = brute_force.reference(arc[i, :n, :n], root[i, :n], single_root)
    np.testing.assert_allclose(LOG_Z(arc[i], root[i], n, single_root=single_root),
                               ref_log_z, rtol=1e-10)
    np.testing.assert_allclose(arc_m[i, :n, :n], ref_arc, atol=1e-10)
    np.testing.assert_allclose(root_m[i, :n], ref_root, atol=1e-10)
    np.testing.assert_allclose(ent[i], _entropy_reference(arc[i, :n, :n], root[i, :n], single_root),
                               atol=1e-10)
  # q forbids an arc that p allows: KL(p || q) = +inf; the reverse stays finite.
  arc_q = arc.copy()
  arc_q[0, 2, 1] = -np.inf
  kl = KL(arc, root, arc_q, root, lens, single_root=single_root)
  assert kl[0] == np.inf
  np.testing.assert_allclose(kl[1], 0, atol=1e-12)
  assert np.isfinite(KL(arc_q, root, arc, root, lens, single_root=single_root)).all()


def test_non_finite_input_is_isolated():
  """NaN / +inf real scores: NaN; a word without allowed heads: log Z = -inf, NaN marginals; that element only."""
  rng = np.random.default_rng(4)
  arc, root, lens = _random_problem(rng, [4, 4, 4, 4, 3], 4)
  arc[1, 0, 2] = np.nan
  arc[2, 3, 1] = np.inf
  arc[3, :, 2] = -np.inf  # word 2 has no allowed head ...
  root[3, 2] = -np.inf  # ... not even ROOT
  arc[4, 3, :] = np.nan  # NaN in padding is never read
  arc[4, :, 3] = np.nan
  root[4, 3] = np.nan
  for single_root in ROOT_MODES:
    log_z = LOG_Z(arc, root, lens, single_root=single_root)
    arc_m, root_m = MARGINALS(arc, root, lens, single_root=single_root)
    ent = ENTROPY(arc, root, lens, single_root=single_root)
    grad = jax.jit(jax.grad(lambda a: trees.log_partition(a, root, lens, single_root=single_root).sum()))(arc)
    assert np.all(np.isnan(log_z[1:3])) and log_z[3] == -np.inf  # no tree at all: Z = 0
    assert np.all(np.isnan(ent[1:4])) and np.all(np.isnan(root_m[1:4]))
    assert np.all(np.isnan(arc_m[1:4, 0, 1]))
    for i in (0, 4):
      n = lens[i]
      clean_log_z = LOG_Z(arc[i, :n, :n], root[i, :n], single_root=single_root)
      clean_arc, clean_root = MARGINALS(arc[i, :n, :n], root[i, :n], single_root=single_root)
      np.testing.assert_allclose(log_z[i], clean_log_z, rtol=1e-12)
      np.testing.assert_allclose(arc_m[i, :n, :n], clean_arc, atol=1e-12)
      np.testing.assert_allclose(root_m[i, :n], clean_root, atol=1e-12)
      assert np.isfinite(ent[i]) and np.isfinite(grad[i]).all()
      np.testing.assert_allclose(grad[i, :n, :n] * (1 - np.eye(n)), clean_arc, atol=1e-12)


@pytest.mark.parametrize('single_root', SINGLE_ROOT_QUICK)
def test_score_and_log_prob(single_root):
  """Over all trees (n=4, padded to 5): score matches brute force and exp(log_prob) sums to 1."""
  rng = np.random.default_rng(5)
  arc, root, _ = _random_problem(rng, [4], 5)
  all_trees = brute_force.all_trees(4, single_root)
  heads = np.full((len(all_trees), 5), -1, np.int32)
  heads[:, :4] = all_trees
  heads[:, 4] = 2  # ignored: past the length
  batch_arc = np.broadcast_to(arc, (len(all_trees), 5, 5))
  batch_root = np.broadcast_to(root, (len(all_trees), 5))
  with jax.debug_nans(True):
    scores = jax.jit(trees.score)(batch_arc, batch_root, heads, 4)
    log_p = jax.jit(trees.log_prob, static_argnames='single_root')(
        batch_arc, batch_root, heads, 4, single_root=single_root)
    log_p_v = jax.vmap(lambda h: trees.log_prob(arc[0], root[0], h, 4, single_root=single_root))(heads)
  np.testing.assert_allclose(scores, brute_force.tree_scores(arc[0, :4, :4], root[0, :4], all_trees),
                             rtol=1e-12)
  _, probs = brute_force.tree_probabilities(arc[0, :4, :4], root[0, :4], single_root)
  np.testing.assert_allclose(np.exp(log_p), probs, rtol=1e-10)
  np.testing.assert_allclose(log_p_v, log_p, rtol=1e-12)
  np.testing.assert_allclose(np.exp(log_p).sum(), 1.0, rtol=1e-10)


def _chi_square_p_value(samples, single_root, arc, root, forbidden=None):
  """p-value of the sample counts against the enumerated tree probabilities (all trees in support)."""
  n = len(root)
  all_trees, probs = brute_force.tree_probabilities(arc, root, single_root)
  codes = ((all_trees + 1) * (n + 1) ** np.arange(n)).sum(-1)
  sample_codes = ((np.asarray(samples) + 1) * (n + 1) ** np.arange(n)).sum(-1)
  index = {c: i for i, c in enumerate(codes)}
  assert all(c in index for c in np.unique(sample_codes)), 'a sample is not a tree of this root mode'
  counts = np.bincount([index[c] for c in sample_codes], minlength=len(codes))
  support = probs > 0
  assert counts[~support].sum() == 0, 'a tree with a forbidden arc was sampled'
  expected = probs[support] * len(samples)
  counts = counts[support]
  # Trees expected fewer than 5 times are pooled into one cell (the chi-square approximation).
  rare = expected < 5
  if rare.any():
    expected = np.append(expected[~rare], expected[rare].sum())
    counts = np.append(counts[~rare], counts[rare].sum())
  stat = ((counts - expected) ** 2 / expected).sum()
  return scipy.stats.chi2.sf(stat, len(expected) - 1)


@pytest.mark.parametrize('single_root', MULTI_ROOT_QUICK)
def test_sample_frequencies(single_root):
  """20000 samples (fixed seed) of two padded sentences match the Gibbs distribution (chi-square)."""
  rng = np.random.default_rng(6)
  arc, root, lens = _random_problem(rng, [4, 3], 4)
  arc[1, 1, 0] = -np.inf  # never sampled
  num_samples = 20000
  with jax.debug_nans(True):
    heads = jax.jit(trees.sample, static_argnames=('single_root', 'num_samples'))(
        jax.random.key(0), arc, root, lens, single_root=single_root, num_samples=num_samples)
  assert heads.shape == (num_samples, 2, 4) and heads.dtype == jnp.int32
  assert np.all(heads[:, 1, 3] == -1)
  for i, n in enumerate([4, 3]):
    p_value = _chi_square_p_value(heads[:, i, :n], single_root, arc[i, :n, :n], root[i, :n])
    assert p_value > 1e-3, p_value
  # The test has power: samples drawn from the product of the marginals restricted to trees (a
  # plausible but wrong sampler) are rejected.
  all_trees, probs = brute_force.tree_probabilities(arc[0], root[0], single_root)
  arc_m, root_m = MARGINALS(arc[0], root[0], single_root=single_root)
  m = np.arange(4)
  wrong = np.where(all_trees == -1, root_m[m], arc_m[np.maximum(all_trees, 0), m]).prod(-1)
  wrong /= wrong.sum()
  draws = all_trees[np.random.default_rng(0).choice(len(all_trees), num_samples, p=wrong)]
  assert _chi_square_p_value(draws, single_root, arc[0], root[0]) < 1e-3
  # vmap over sentences gives valid samples too.
  heads_v = jax.jit(jax.vmap(lambda k, a, r, l: trees.sample(k, a, r, l, single_root=single_root)))(
      jax.random.split(jax.random.key(1), 2), arc, root, lens)
  assert heads_v.shape == (2, 4) and heads_v[1, 3] == -1


@pytest.mark.parametrize('dtype', quick_and_slow([np.float32], [np.float64]))
@pytest.mark.parametrize('single_root', SINGLE_ROOT_QUICK)
def test_sharp_sample_frequencies(single_root, dtype):
  """Sharp scores (a dominant 2-cycle: the LU inverse is useless there) still give exact samples.

  Such sentences draw from the exact elimination's conditionals; the LU conditionals drew cycles and
  second roots there, and frequencies far from the distribution.
  """
  rng = np.random.default_rng(13)
  arc, root, lens = _random_problem(rng, [5, 4], 5)
  arc[:, 0, 1] = arc[:, 1, 0] = 40.0  # each other's head, e^40 above everything else
  arc, root = arc.astype(dtype), root.astype(dtype)
  # Both sentences are beyond the LU path: the exact sampler is what is tested.
  a, r, _, mask = _lu_path._prepare(arc, root, lens)
  a_pot, r_pot, _, _ = _lu_path._potentials(a, r, mask, single_root)
  assert np.all(_flagged(a_pot, r_pot, mask, single_root))
  num_samples = 20000
  heads = SAMPLE(jax.random.key(4), arc, root, lens, single_root=single_root, num_samples=num_samples)
  for i, n in enumerate([5, 4]):
    all_trees, probs = brute_force.tree_probabilities(arc[i, :n, :n], root[i, :n], single_root)
    assert np.sort(probs)[-8:].sum() < 0.9  # the distribution is not nearly a point mass
    p_value = _chi_square_p_value(heads[:, i, :n], single_root, arc[i, :n, :n], root[i, :n])
    assert p_value > 1e-3, p_value


@pytest.mark.parametrize('single_root', MULTI_ROOT_QUICK)
def test_few_sharp_sentences_are_resampled_alone(single_root):
  """One sharp sentence among 128: its samples (1/128 of all, under the 1/64 bound) are redrawn
  by the exact sampler gathered on their own, and scattered back to their slots; both it and an
  ordinary sentence keep the Gibbs distribution (a wrong slot would give sentence 3 LU samples)."""
  rng = np.random.default_rng(16)
  lengths = np.full(128, 5)
  lengths[9] = 4
  arc, root, lens = _random_problem(rng, lengths, 5)
  arc[3, 0, 1] = arc[3, 1, 0] = 40.0  # sentence 3 only: a dominant 2-cycle, beyond the LU path
  a, r, _, mask = _lu_path._prepare(arc, root, lens)
  a_pot, r_pot, _, _ = _lu_path._potentials(a, r, mask, single_root)
  flagged = _flagged(a_pot, r_pot, mask, single_root)
  assert np.flatnonzero(flagged).tolist() == [3]
  num_samples = 4000
  fn = functools.partial(trees.sample, single_root=single_root, num_samples=num_samples)
  heads = jax.jit(fn)(jax.random.key(8), arc, root, lens)
  for i in (3, 9):
    n = lengths[i]
    p_value = _chi_square_p_value(heads[:, i, :n], single_root, arc[i, :n, :n], root[i, :n])
    assert p_value > 1e-3, (i, p_value)
  assert np.all(np.asarray(heads[:, 9, 4]) == -1)


@pytest.mark.parametrize('single_root', SINGLE_ROOT_QUICK)
def test_sharp_samples_are_trees(single_root):
  """64 sentences of 9 words, N(0, 10^2) and N(0, 30^2) float32 scores: every sample is a tree.

  The LU conditionals alone drew 10 (s = 10) and 1032 (s = 30) non-trees out of 12800.
  """
  rng = np.random.default_rng(14)
  for scale in (10.0, 30.0):
    arc = (scale * rng.standard_normal((64, 9, 9))).astype(np.float32)
    root = (scale * rng.standard_normal((64, 9))).astype(np.float32)
    heads = np.asarray(SAMPLE(jax.random.key(5), arc, root, single_root=single_root, num_samples=50))
    for h in heads.reshape(-1, 9):
      assert brute_force._is_tree(tuple(h)), (scale, h)
      assert not single_root or (h == -1).sum() == 1, (scale, h)


@pytest.mark.parametrize('single_root', MULTI_ROOT_QUICK)
def test_samples_are_trees_float32(single_root):
  """Float32 samples at n=40 with padding are valid trees of the right root mode."""
  rng = np.random.default_rng(7)
  arc, root, lens = _random_problem(rng, [40, 23], 40, std=3.0, dtype=np.float32)
  heads = np.asarray(SAMPLE(jax.random.key(2), arc, root, lens, single_root=single_root,
                                  num_samples=8))
  assert heads.shape == (8, 2, 40)
  for s in range(8):
    for i, n in enumerate([40, 23]):
      h = heads[s, i]
      assert np.all(h[n:] == -1)
      assert brute_force._is_tree(tuple(h[:n]))
      assert np.all((h[:n] >= -1) & (h[:n] < n) & (h[:n] != np.arange(n)))
      if single_root:
        assert (h[:n] == -1).sum() == 1
  single = SAMPLE(jax.random.key(3), arc[0], root[0], single_root=single_root)
  assert single.shape == (40,)


def test_bad_input_errors():
  arc = np.zeros((2, 3, 3))
  with pytest.raises(ValueError, match=r'arc_scores must have shape \[..., n, n\]'):
    trees.log_partition(np.zeros((3, 4)), np.zeros(3))
  with pytest.raises(ValueError, match='root_scores must have shape'):
    trees.marginals(arc, np.zeros((2, 4)))
  with pytest.raises(ValueError, match='lengths'):
    LOG_Z(arc, np.zeros((2, 3)), np.array([1, 2, 3]))
  with pytest.raises(ValueError, match='lengths must be integers'):
    LOG_Z(arc, np.zeros((2, 3)), np.array([1.0, 2.0]))
  with pytest.raises(ValueError, match='heads must have shape'):
    trees.score(arc, np.zeros((2, 3)), np.zeros((2, 4), np.int32))
  with pytest.raises(ValueError, match='num_samples'):
    trees.sample(jax.random.key(0), arc, np.zeros((2, 3)), num_samples=0)
  assert _matrix_tree.__all__ == ['entropy', 'kl_divergence', 'laplacian', 'log_partition', 'log_prob',
                                  'lu_logdet_and_inverse', 'marginals', 'marginals_from_inverse', 'score']
  assert (_sampling.__all__, _statistics.__all__) == (['sample'], ['exact_mode', 'EXACT_MODES'])


def test_benchmark_launcher_and_baselines(monkeypatch):
  """`python -m launch.benchmark` resolves modules generically; the trees baselines agree with ours."""
  from launch import benchmark  # pylint: disable=g-import-not-at-top
  from launch.benchmarks import trees as trees_benchmark  # pylint: disable=g-import-not-at-top
  # torch stays out of the test process (see test_torch_struct_baseline_in_a_subprocess).
  monkeypatch.setattr(trees_benchmark, '_torch_struct_calls', lambda *args: None)
  assert 'trees' in benchmark.known_benchmarks()
  assert benchmark.load_benchmark('trees') is trees_benchmark
  with pytest.raises(ValueError, match=r"unknown benchmark 'nope'; known benchmarks: .*trees"):
    benchmark.load_benchmark('nope')
  assert benchmark._benchmark_name(['prog', '--repeats=2', 'trees', '--sizes=2x3']) == 'trees'
  assert trees_benchmark.parse_sizes('512x32, 4x200') == [(512, 32), (4, 200)]
  with pytest.raises(ValueError, match="--sizes item '4x' is not BATCHxLENGTH"):
    trees_benchmark.parse_sizes('2x3,4x')
  rng = np.random.default_rng(8)
  arc, root, lens = _random_problem(rng, [5, 2], 5)
  expected = trees.marginals(arc, root, lens)
  for baseline in (trees_benchmark.naive_marginals, trees_benchmark.inverse_autodiff_marginals):
    got = jax.jit(baseline)(arc, root, lens)
    np.testing.assert_allclose(got[0] * (1 - np.eye(5)), expected[0], atol=1e-10)
    np.testing.assert_allclose(got[1], expected[1], atol=1e-10)
  # Every column at n > 1 is timed for real by test_quick_report_runs_every_family_for_real (4x8);
  # here the one-word case, which has no arcs to sharpen.
  (row,) = trees_benchmark.run([(2, 1)], repeats=1, dtype='float64')
  assert row['size'] == '2x1' and isinstance(row['ours +grad'], float) and isinstance(row['sample'], float)
  for column in ('marg 1 sharp', '+grad 1 sharp', 'marg all sharp', '+grad all sharp', 'sample 1 sharp'):
    assert column not in row
  # The 2-word sentence is not sharp even with its two arcs at 40: both of its trees use one of them,
  # and with row 0 shifted (root potentials e^-40 scaled up to 1) its Laplacian is well conditioned.
  for sharpen, expected in ((trees_benchmark.one_sharp_sentence, [True, False]),
                            (trees_benchmark.all_sharp, [True, False])):
    a, r, _, mask = _lu_path._prepare(sharpen(jnp.asarray(arc)), root, lens)
    flagged = _flagged(*_lu_path._potentials(a, r, mask, True)[:2], mask, True)
    assert flagged.tolist() == expected  # the benchmark's sharp sentences take the exact path
  table = trees_benchmark.format_table([row])
  assert table.splitlines()[0].split()[:3] == ['size', 'ours', 'marg']


_TORCH_STRUCT_SCRIPT = r"""
import json, sys
import numpy as np
import torch, torch_struct
from jax_structured import trees
from launch.benchmarks import trees as trees_benchmark
problem = json.load(sys.stdin)
arc, root = np.asarray(problem['arc']), np.asarray(problem['root'])
calls = trees_benchmark._torch_struct_calls(arc.shape[0], arc.shape[-1], arc, root)
assert sorted(calls) == ['ts +grad', 'ts marg', 'ts proj', 'ts proj top-16', 'ts proj top-5'], sorted(calls)
n = 330  # 330^3 > TS_PROJECTIVE_MAX_WORK: the projective CRF's memory would pass 9 GB at 32x200
assert n**3 > trees_benchmark.TS_PROJECTIVE_MAX_WORK >= 512 * 32**3
big = trees_benchmark._torch_struct_calls(1, n, np.zeros((1, n, n)), np.zeros((1, n)))
assert sorted(big) == ['ts +grad', 'ts marg'], sorted(big)
for call in calls.values():
  call()
x = torch.tensor(np.asarray(trees.to_torch_struct(arc, root)))
lengths = torch.full((arc.shape[0],), arc.shape[-1], dtype=torch.long)
m = torch_struct.NonProjectiveDependencyCRF(x, lengths, multiroot=False).marginals.numpy()
json.dump(m.tolist(), sys.stdout)
"""


def test_torch_struct_baseline_in_a_subprocess():
  """The benchmark's torch-struct columns run, and torch-struct's marginals on our layout are ours.

  In a child process: torch and XLA's CPU compiler loaded in one long-lived test worker aborted
  twice in XLA compiles of later tests (CI, stop 25), so no test imports torch in the worker.
  """
  if importlib.util.find_spec('torch_struct') is None:
    pytest.skip('torch-struct not installed (pip install -e ".[bench]" adds the baseline)')
  rng = np.random.default_rng(3)
  arc, root = rng.normal(size=(2, 5, 5)), rng.normal(size=(2, 5))
  done = subprocess.run([sys.executable, '-c', _TORCH_STRUCT_SCRIPT], input=json.dumps(
      {'arc': arc.tolist(), 'root': root.tolist()}), capture_output=True, text=True, cwd=pathlib.Path(__file__).resolve().parents[1],
      env=dict(os.environ, JAX_PLATFORMS='cpu'), check=False, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  theirs = np.asarray(json.loads(done.stdout.strip().splitlines()[-1]))
  arc_m, root_m = trees.marginals(arc, root)
  np.testing.assert_allclose(theirs * (1 - np.eye(5)), arc_m, atol=1e-5)
  np.testing.assert_allclose(np.diagonal(theirs, axis1=-2, axis2=-1), root_m, atol=1e-5)
