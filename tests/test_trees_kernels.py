"""The fused matrix-tree kernels (jax_structured/trees/_kernels.py), run by the Pallas interpreter.

References: brute-force enumeration of all trees in float64 (tests/brute_force.py) for log Z and the
marginals, central finite differences of the enumerated loss for the gradient, and today's LU path
(`use_kernels('off')`) for flags, padding, forbidden arcs and the exact path of flagged sentences. The
interpreter is slow, so the default tests use few shapes and small n; the CUDA lowering test checks that
every operation of the kernels has a Triton lowering (see the test's docstring for what it proves).
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import brute_force
from jax_structured import trees
from jax_structured.trees import _kernels

ROOT_MODES = [True, False]
BIG = 1e4  # garbage in padded entries: never read


def _batch(rng, lengths, n, scale=1.0, dtype=np.float64):
  """Scores [B, n, n] / [B, n] with garbage past each length and one forbidden arc in sentence 0."""
  arc = rng.normal(scale=scale, size=(len(lengths), n, n))
  root = rng.normal(scale=scale, size=(len(lengths), n))
  for b, length in enumerate(lengths):
    arc[b, length:, :] = BIG
    arc[b, :, length:] = -BIG
    root[b, length:] = BIG
  arc[0, 1, 2] = -np.inf
  return arc.astype(dtype), root.astype(dtype)


def _interpret():
  """The kernels as `use_kernels('on')` runs them here: interpreted, or compiled on a GPU
  (launch/benchmarks/gpu_session.sh runs these tests there)."""
  with trees.use_kernels('on'):
    return _kernels.selected(8)


def _kernel_call(fn, *args, **kwargs):
  with trees.use_kernels('on'):
    return fn(*args, **kwargs)


def _loss(arc_weights, root_weights):
  """A scalar through every output: sum(W mu) + sum(w mu_root) + 0.3 sum(log Z), flagged ones dropped."""
  def loss(arc, root, lengths, single_root, exact):
    log_z = trees.log_partition(arc, root, lengths, single_root=single_root, exact=exact)
    arc_m, root_m = trees.marginals(arc, root, lengths, single_root=single_root, exact=exact)
    total = (jnp.sum(jnp.where(jnp.isnan(arc_m), 0.0, arc_m) * arc_weights)
             + jnp.sum(jnp.where(jnp.isnan(root_m), 0.0, root_m) * root_weights))
    return total + 0.3 * jnp.sum(jnp.where(jnp.isnan(log_z), 0.0, log_z))
  return loss


def _enumerated_loss(arc, root, lengths, single_root, arc_weights, root_weights):
  """`_loss` by enumeration of all trees of each sentence (float64)."""
  total = 0.0
  for b, length in enumerate(lengths):
    if length == 0:
      continue
    log_z, arc_m, root_m, _, _ = brute_force.reference(arc[b, :length, :length], root[b, :length],
                                                       single_root)
    total += (np.sum(arc_m * arc_weights[b, :length, :length]) + np.sum(root_m * root_weights[b, :length])
              + 0.3 * log_z)
  return total


@pytest.mark.parametrize('single_root', ROOT_MODES)
def test_kernels_match_enumeration_float64(single_root):
  rng = np.random.default_rng(0)
  lengths = np.array([5, 3, 0])
  arc, root = _batch(rng, lengths, 5)
  log_z, arc_m, root_m, flagged = _kernels.fused_statistics(jnp.asarray(arc), jnp.asarray(root),
                                                            jnp.asarray(lengths), single_root, _interpret())
  assert not np.asarray(flagged).any()
  for b, length in enumerate(lengths):
    if length == 0:
      np.testing.assert_allclose(log_z[b], 0.0, atol=1e-12)
      continue
    ref_z, ref_arc, ref_root, _, _ = brute_force.reference(arc[b, :length, :length], root[b, :length],
                                                           single_root)
    np.testing.assert_allclose(log_z[b], ref_z, rtol=1e-12)
    np.testing.assert_allclose(arc_m[b, :length, :length], ref_arc, atol=1e-12)
    np.testing.assert_allclose(root_m[b, :length], ref_root, atol=1e-12)
  # Exactly 0 on padding, the diagonal and the forbidden arc.
  assert float(arc_m[0, 1, 2]) == 0.0
  assert not np.asarray(arc_m[1, 3:]).any() and not np.asarray(arc_m[1, :, 3:]).any()
  assert not np.asarray(root_m[1, 3:]).any() and not np.asarray(arc_m[2]).any()
  assert not np.diagonal(np.asarray(arc_m), axis1=-2, axis2=-1).any()


@pytest.mark.parametrize('single_root', ROOT_MODES)
def test_kernel_gradient_matches_finite_differences_and_lu_path(single_root):
  """The backward kernel (the Hessian-vector product of log Z) against central differences of the
  enumerated loss along a random direction, and against the LU path's custom JVP under `jax.grad`."""
  rng = np.random.default_rng(1)
  lengths = np.array([4, 3])
  arc, root = _batch(rng, lengths, 4)
  arc_weights, root_weights = rng.normal(size=arc.shape), rng.normal(size=root.shape)
  grad = jax.jit(jax.grad(_loss(arc_weights, root_weights), argnums=(0, 1)), static_argnums=(3, 4))
  d_arc, d_root = _kernel_call(grad, arc, root, lengths, single_root, 'flag')
  lu_arc, lu_root = grad(arc, root, lengths, single_root, 'flag')
  np.testing.assert_allclose(d_arc, lu_arc, atol=1e-10)
  np.testing.assert_allclose(d_root, lu_root, atol=1e-10)
  direction_arc = np.where(np.isfinite(arc) & (np.abs(arc) < BIG), rng.normal(size=arc.shape), 0.0)
  direction_root = np.where(np.abs(root) < BIG, rng.normal(size=root.shape), 0.0)
  step = 1e-5
  enumerated = lambda t: _enumerated_loss(arc + t * direction_arc, root + t * direction_root, lengths,
                                          single_root, arc_weights, root_weights)
  numeric = (enumerated(step) - enumerated(-step)) / (2 * step)
  analytic = np.sum(np.where(direction_arc != 0, d_arc * direction_arc, 0.0)) + np.sum(d_root * direction_root)
  np.testing.assert_allclose(analytic, numeric, rtol=1e-6)


def test_flagged_sentence_is_flagged_like_the_lu_path():
  """A sharp multi-root sentence (float32) is flagged by the kernel exactly where the LU path flags it:
  under 'flag' NaN with zero gradient (the exact path itself: `test_flagged_sentence_exact_path`)."""
  rng = np.random.default_rng(2)
  lengths = np.array([6, 6, 4])
  arc, root = _batch(rng, lengths, 6, dtype=np.float32)
  arc[1] *= 20  # estimate 0.27 (threshold 2e-3), the inverse finite
  stats_on = _kernel_call(trees.marginals, arc, root, lengths, single_root=False, exact='flag')
  stats_off = trees.marginals(arc, root, lengths, single_root=False, exact='flag')
  nan_on = np.isnan(np.asarray(stats_on[0])).any(axis=(1, 2))
  nan_off = np.isnan(np.asarray(stats_off[0])).any(axis=(1, 2))
  assert list(nan_on) == [False, True, False] and list(nan_off) == list(nan_on)
  arc_weights, root_weights = rng.normal(size=arc.shape), rng.normal(size=root.shape)
  grad = jax.jit(jax.grad(_loss(arc_weights, root_weights), argnums=(0, 1)), static_argnums=(3, 4))
  flag_grad = _kernel_call(grad, arc, root, lengths, False, 'flag')
  assert not np.asarray(flag_grad[0][1]).any() and not np.asarray(flag_grad[1][1]).any()
  assert np.asarray(flag_grad[0][0]).any()


@pytest.mark.slow  # compiles the exact path's programs (~15 s)
def test_flagged_sentence_exact_path():
  """With the kernels, a flagged sentence gets the exact path's values on concrete arrays ('auto'), and
  its values and derivatives inside the program ('in_program'), as without them."""
  rng = np.random.default_rng(2)
  lengths = np.array([6, 6, 4])
  arc, root = _batch(rng, lengths, 6, dtype=np.float32)
  arc[1] *= 20  # estimate 0.27 (threshold 2e-3), the inverse finite
  exact = trees.marginals(arc, root, lengths, single_root=False, exact='auto')
  kernel_exact = _kernel_call(trees.marginals, arc, root, lengths, single_root=False, exact='auto')
  assert np.isfinite(np.asarray(kernel_exact[0])).all()
  for got, want in zip(kernel_exact, exact):
    np.testing.assert_allclose(got, want, atol=2e-6)
  arc_weights, root_weights = rng.normal(size=arc.shape), rng.normal(size=root.shape)
  grad = jax.jit(jax.grad(_loss(arc_weights, root_weights), argnums=(0, 1)), static_argnums=(3, 4))
  in_program = _kernel_call(grad, arc, root, lengths, False, 'in_program')
  reference = grad(arc, root, lengths, False, 'in_program')
  assert np.asarray(in_program[0][1]).any()
  for got, want in zip(in_program, reference):
    np.testing.assert_allclose(got, want, atol=2e-5)


def test_use_kernels_switch(monkeypatch):
  """'auto' keeps the LU path on the CPU and selects the compiled kernels on a GPU up to 32 words (where
  the H200 report measured them faster); 'on' selects the interpreter off a GPU and the compiled kernels
  on one; no mode takes a block over MAX_BLOCK (it does not fit on chip); a bad mode is one clear
  error."""
  assert 'cpu' not in _kernels.KERNEL_PLATFORMS
  assert _kernels.selected(8) is (False if jax.default_backend() == 'gpu' else None)
  with trees.use_kernels('on'):
    assert _kernels.selected(8) is (jax.default_backend() != 'gpu')
    assert _kernels.selected(_kernels.MAX_BLOCK) is not None
    assert _kernels.selected(_kernels.MAX_BLOCK + 1) is None
    with trees.use_kernels('off'):
      assert _kernels.selected(8) is None
  monkeypatch.setattr(jax, 'default_backend', lambda: 'gpu')
  assert [_kernels.selected(n) for n in (5, 32, 33, 200)] == [False, False, None, None]
  with trees.use_kernels('on'):
    assert [_kernels.selected(n) for n in (33, 128, 129)] == [False, False, None]
  with pytest.raises(ValueError, match=r"use_kernels\('fast'\): use one of"):
    with trees.use_kernels('fast'):
      pass


@pytest.mark.parametrize('single_root', ROOT_MODES)
def test_kernels_lower_for_cuda(single_root, monkeypatch):
  """Value and gradient with the kernels, and the exact path's kernel, lower for CUDA on a CPU-only jaxlib.

  Pallas's Triton lowering runs here: every operation of both kernels has a Triton lowering rule, the
  block shapes are accepted, and the program holds exactly one Triton call per kernel (forward and
  backward) and no LU. What it cannot prove without a GPU: that Triton compiles the IR to PTX, how many
  registers it takes, and the kernels' speed (the benchmark's `kernel ...` columns on a lent GPU).
  """
  arc = jnp.zeros((4, 20, 20), jnp.float32)
  root = jnp.zeros((4, 20), jnp.float32)

  def value_and_grad(arc, root):
    fn = lambda a, r: jnp.sum(trees.marginals(a, r, single_root=single_root, exact='flag')[0] ** 2)
    return jax.value_and_grad(fn, argnums=(0, 1))(arc, root)

  # `selected()` reads the default backend (cpu here): select the compiled kernels as on a GPU.
  monkeypatch.setattr(_kernels, 'selected', lambda n: False)
  text = jax.jit(value_and_grad).trace(arc, root).lower(lowering_platforms=('cuda',)).as_text()
  assert text.count('__gpu$xla.gpu.triton') == 2
  assert 'name = "matrix_tree_forward"' in text and 'name = "matrix_tree_backward"' in text
  assert 'cusolver' not in text.lower() and 'getrf' not in text.lower()
  from jax_structured.trees import _exact_kernel  # pylint: disable=g-import-not-at-top
  mask = jnp.ones((4, 20), bool)
  exact = lambda a, r: _exact_kernel.linear_marginals(a, r, mask, single_root, False)
  text = jax.jit(exact).trace(arc, root).lower(lowering_platforms=('cuda',)).as_text()
  assert text.count('__gpu$xla.gpu.triton') == 1 and 'name = "matrix_tree_exact_linear"' in text


def test_report_kernel_ratios_and_goals(monkeypatch):
  """The trees report's kernel ratios, the host read of `model +grad` and the issue's kernel goals, from
  known timings (ms)."""
  from launch import benchmarks  # pylint: disable=g-import-not-at-top
  from launch.benchmarks import report  # pylint: disable=g-import-not-at-top
  from launch.benchmarks import trees as trees_benchmark  # pylint: disable=g-import-not-at-top
  timings = {'naive +grad': 1.0, 'model marg': 0.5, 'model +grad': 0.8, 'model +grad prog': 0.6,
             'kernel marg': 0.1, 'kernel +grad': 0.4, 'kernel +grad 1 sharp': 1.2}
  monkeypatch.setattr(trees_benchmark, 'run', lambda sizes, repeats, dtype: [
      dict(size=f'{b}x{n}', **timings, **{k: v.get((b, n), '-') for k, v in trees_benchmark.REFERENCE.items()})
      for b, n in sizes])
  monkeypatch.setattr(report, 'package_version', lambda name: 'not installed')
  _, ratios = report.trees_tables(benchmarks.ReportRun(False, 1, 'float32', benchmarks.Budget(100.0)))
  first = ratios.rows[0]
  assert first['model +grad host read ms'] == pytest.approx(0.2)
  assert first['kernel/model marg'] == pytest.approx(0.2) and first['kernel/model +grad'] == pytest.approx(0.5)
  assert first['kernel/naive +grad'] == pytest.approx(0.4)
  assert first['kernel +grad 1 sharp/kernel +grad'] == pytest.approx(3.0)
  notes = '\n'.join(ratios.notes) + '\n'
  device = jax.devices()[0].device_kind
  assert f'goal: kernel +grad at most 0.5x naive +grad (512x32): 0.40x, met on {device}' in notes
  assert f'goal: kernel +grad at most 1x naive +grad (32x200): 0.40x, met on {device}' in notes
  assert f'goal: kernel +grad with 1 sharp sentence at most 2x none (64x64): 3.00x, missed on {device}' in notes


def _exact_kernel_against_xla(single_root, scale, lengths, n, seed, cycle=None):
  """The exact path's linear-elimination kernel against `_linear_marginals` (float64); `cycle` scores
  arcs 0 -> 1 and 1 -> 0 of every sentence (a tree must leave one out: P_indep ~ e^-cycle)."""
  from jax_structured.trees import _exact_kernel  # pylint: disable=g-import-not-at-top
  from jax_structured.trees import _elimination  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  arc, root = _batch(rng, lengths, n, scale=scale)
  if cycle is not None:
    arc[:, 0, 1] = arc[:, 1, 0] = cycle
  mask = jnp.arange(n)[None, :] < jnp.asarray(lengths)[:, None]
  got = _exact_kernel.linear_marginals(jnp.asarray(arc), jnp.asarray(root), mask, single_root, _interpret())
  linear = jax.vmap(lambda a, r, m: _elimination._linear_marginals(a, r, m, single_root))
  want = linear(*_elimination._forbid_padding(jnp.asarray(arc), jnp.asarray(root), mask), mask)
  np.testing.assert_array_equal(got[3], want[3])
  for g, w in zip(got[:3], want[:3]):
    np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
  return np.asarray(got[3])


def test_exact_kernel_matches_the_linear_elimination():
  assert _exact_kernel_against_xla(True, 20.0, np.array([5, 3]), 5, 3).all()


@pytest.mark.slow  # the interpreter: ~8 s per call
@pytest.mark.parametrize('single_root', ROOT_MODES)
def test_exact_kernel_matches_the_linear_elimination_exhaustive(single_root):
  assert _exact_kernel_against_xla(single_root, 1.0, np.array([6, 4, 1, 0]), 6, 4).all()
  # A 2-cycle scored 800 (float64 trusts down to P_indep ~ e^-656): the log-space elimination's case.
  assert not _exact_kernel_against_xla(single_root, 1.0, np.array([6, 6, 5]), 6, 5, cycle=800.0).any()
