r"""Timing of the `trees` functions against baselines and published reference figures.

  python -m launch.benchmark trees [--sizes=512x32,64x64,32x200] [--repeats=20] [--dtype=float32]
      [--memory] [--profile="ours marg,ours +grad"]

`--sizes` lists `BATCHxLENGTH` problems (random N(0, 1) scores, every sentence full length). One table
per run, median milliseconds over `--repeats` jitted calls after a warm-up (compile) call, each
ended with `block_until_ready`; the columns of a size are timed interleaved (each round calls every
column once, in its own order), so load changes on a shared machine hit all columns alike; a column
whose timed calls have taken `COLUMN_BUDGET_S` in all sits out the later rounds (the row's `timed
calls` lists it). The torch-struct columns are interleaved among themselves, after the JAX ones: in one
interleaving with them (2-core CPU, 2026-11-29), the JAX calls that ran after a torch call were
slowed (512x32 `mst` 1.19x its time without torch-struct installed; the first column, `ours marg`, 1.50x
inv-AD at 64x64 while it always followed torch calls, 1.09x without them), two runtimes' thread
pools contending for the cores they had just used:

* `ours marg` / `ours +grad`: `trees.marginals` (single root) with the exact path in the program
  (`exact='in_program'`) / value and gradient of a scalar loss `sum(W * marginals)` through them.
* `model marg` / `model +grad`: the same as models now run them (`nn.exactness`, `training.steps`):
  the program with the LU path only (`exact='flag'`), and for `+grad` (`SplitLossAndGrad`) the flags
  read on the host and, when any sentence is flagged, a second program with the exact path over those
  alone; `model marg 1 sharp` is `trees.marginals` on concrete arrays (`exact='auto'`: the LU program,
  then the exact elimination over the flagged sentence), `model +grad 1 sharp` / `all sharp` the split
  value and gradient on the sharp scores below.
* `model +grad prog`: the program of `model +grad` alone, the flags not read on the host (`model +grad`
  minus it is the host read, and the exact program when a sentence is flagged).
* `kernel marg` / `kernel +grad` / `kernel +grad prog` / `kernel +grad 1 sharp` / `kernel marg 1 sharp`:
  the `model` columns with the fused kernels (`trees.use_kernels('on')`: one Pallas launch for the
  forward pass, one for the gradient; `kernel marg 1 sharp` also runs the exact path's linear
  elimination as one launch, `_exact_kernel`; the exact path's derivatives stay on XLA). On a GPU;
  elsewhere only with `--kernel_columns=always` and at tiny sizes (`KERNEL_INTERPRET_MAX`), where the
  Pallas interpreter runs them to check that the columns work (its times mean nothing). `kernel err
  marg` / `kernel err +grad`: the largest absolute difference from the `model` programs' results
  (sentences flagged by both left out); `kernel flags differ`: sentences of the one-sharp batch flagged by one path
  only; `compile s ...`: seconds to trace, lower and compile the `model` / `kernel` programs (fresh).
* `inv-AD ...`: the same closed-form marginals with `jnp.linalg.inv` and plain autodiff (no custom
  JVP), i.e. the alternative the custom rule replaces.
* `naive ...`: `jnp.linalg.slogdet` of the same masked, column-shifted Laplacian and `jax.grad` for
  the marginals (and grad-of-grad for `+grad`).
* `mst`, `proj marg`: `trees.mst` and `trees.projective_marginals`.
* `k-best 5` / `k-best 16`, `proj k-best 5` / `proj k-best 16`: `trees.k_best` / `trees.projective_k_best`
  (single root) at k = 5 and 16; `max-marg` / `proj max-marg`: `trees.max_marginals` /
  `trees.projective_max_marginals` (single root). The k-best and non-projective max-marginals run
  many constrained decodings per sentence (1 + (k - 1) n, and n (n + 1)), so each is timed only where
  its work is at most `STRUCTURED_MAX_WORK` (the row says "not timed" otherwise); `ts proj top-5` /
  `ts proj top-16`: torch-struct's `DependencyCRF.topk` (K-max semiring over Eisner's chart) up to
  `TS_TOPK_MAX_WORK`.
* `sample`: `trees.sample`, one tree per sentence (these N(0, 1) scores stay on its fast path: largest
  conditional-sum error 1e-4 / 1e-4 / 5e-4 at the three default sizes, threshold 2e-3).
* `marg 1 sharp` / `+grad 1 sharp` / `sample 1 sharp`: `trees.marginals` / its value and gradient /
  `trees.sample` on the same scores with ONE sentence made too sharp for the LU path
  (`one_sharp_sentence`): the cost of the exact fallback, which runs on the chunk holding the flagged
  sentence only (compare with `ours marg` / `ours +grad` / `sample`; "-" for length 1).
* `marg all sharp` / `+grad all sharp`: the same with EVERY sentence sharp (`all_sharp`), so the
  exact elimination runs on the whole batch, chunk after chunk.
* `--memory` adds `MiB ...` columns: arguments + outputs + temporaries of the compiled function
  (XLA `memory_analysis`). A compiled program's buffers are assigned once for all its branches, so
  `MiB ours +grad` is the peak with any number of sharp sentences, all of them included; compare
  with `MiB inv-AD +grad` (the same LU without an exact path).
* `ts ...`: torch-struct's `NonProjectiveDependencyCRF` / `DependencyCRF` when `torch_struct` is
  importable (skipped with a note otherwise); `ts proj` only up to batch x n^3 = 2^25
  (`TS_PROJECTIVE_MAX_WORK`: at 32x200 it needs more than 9 GB of host memory).
* `ref ...`: the figures quoted in the issue (H100, float32) for comparison, not measured here.
* `--profile` runs the named columns under the JAX profiler after the timings and prints, per call,
  the kernels launched, their summed time against the wall time, and the costliest kernels
  (`benchmarks.kernel_profile`): on a GPU the gap between the two is mostly host round trips.

On a small shared CPU set `OPENBLAS_NUM_THREADS=1`: JAX's CPU LU / triangular solves call LAPACK,
and OpenBLAS threads on an oversubscribed machine made them ~30x slower in our measurements.
"""
import functools
import os
import time
from typing import Any, Callable

from absl import flags
from absl import logging
import jax
import jax.numpy as jnp
import numpy as np

from jax_structured import trees
from launch import benchmarks

DEFAULT_SIZES = '512x32,64x64,32x200'
# A column whose timed calls took this long in all sits out the later rounds (median of fewer calls,
# listed in the row's 'timed calls'): e.g. one exactly sampled sharp sentence at 32x200 (~50-110 s per
# call on one CPU core).
COLUMN_BUDGET_S = 60.0
# torch-struct's projective `DependencyCRF` (Eisner's chart with autograd) is timed only up to this much
# work, batch x n^3: at 32x200 (2^28) it passed 9 GB of host memory within its first call on the CPU
# (its resident memory grows superlinearly with the batch: 1.24 GB peak at 8x200), and an earlier
# run of this benchmark was killed by the kernel's OOM killer at 23.7 GB there. 512x32 and 64x64 are
# 2^24 each; the issue quotes its figure at 512x32 only.
TS_PROJECTIVE_MAX_WORK = 2**25
# Off a GPU the `kernel ...` columns run in the Pallas interpreter (with --kernel_columns=always), only up to
# this batch x n^2 (the report's --quick size, 4x8): a check that they run, not a timing. (Their traces
# and compiles added ~20 s to a 2x1 run on the CPU, so they are not on by default there.)
KERNEL_INTERPRET_MAX = 4096

# Reference figures from the issue: H100, float32, median ms, by (batch, length).
REFERENCE = {
    'ref naive marg': {(512, 32): 0.54, (64, 64): 0.57, (32, 200): 2.24},
    'ref naive +grad': {(512, 32): 0.74, (64, 64): 0.84, (32, 200): 2.72},
    'ref ts marg': {(512, 32): 1.28, (64, 64): 1.83, (32, 200): 3.29},
    'ref ts +grad': {(512, 32): 3.51, (64, 64): 3.72, (32, 200): 4.99},
    'ref ts proj': {(512, 32): 244.0},
    'ref synjax mst': {(512, 32): 205.0},
    'ref turbo CLE (cpu)': {(512, 32): 38.6, (64, 64): 19.2, (32, 200): 96.6},
}


# The k-best and max-marginal columns (issue 60) are timed only up to this much work per call:
# batch x constrained decodings per sentence (k-best: `2k - 2` oracle passes) x n^2 (x n more for the
# projective ones, Eisner being O(n^3)). At these limits a call takes minutes on one CPU core (one core, 2026-12-04: 64x64 max-marg 152 s,
# proj k-best 5 78 s; 512x32 proj k-best 16, work 8.1e9, took 123 s a call after a 427 s first call).
STRUCTURED_MAX_WORK = {'mst': 2**31, 'eisner': 5 * 2**30}
# torch-struct's projective top-k up to batch x n^3 x k (64x64 at k = 5: 33 s and 1.7 GB on one CPU core).
TS_TOPK_MAX_WORK = 2**27


def structured_work(batch, length, column):
  """The work measure of a k-best / max-marginal column (`STRUCTURED_MAX_WORK`) and its decoder."""
  if 'max-marg' in column:
    decodings = 1 if column.startswith('proj') else length * (length + 1)
  else:
    decodings = max(1, 2 * int(column.rsplit(' ', 1)[1]) - 2)
  decoder = 'eisner' if column.startswith('proj') else 'mst'
  return batch * decodings * length**(3 if decoder == 'eisner' else 2), decoder


def structured_calls(programs, arc, root, row):
  """The k-best and max-marginal columns timed at this size (none for one-word sentences); the others get a
  'not timed' note in `row`."""
  batch, length = arc.shape[:2]
  calls = {}
  if length < 2:  # one word, one tree: nothing to rank
    return calls
  for column, fn in programs.structured.items():
    work, decoder = structured_work(batch, length, column)
    if work <= STRUCTURED_MAX_WORK[decoder]:
      calls[column] = functools.partial(fn, arc, root)
    else:
      row[column] = f'not timed (work {work:.1e} > {STRUCTURED_MAX_WORK[decoder]:.1e})'
  return calls


def parse_sizes(text):
  """'512x32,64x64' -> [(512, 32), (64, 64)]; raises ValueError naming the bad item."""
  return benchmarks.parse_sizes(text, ('BATCH', 'LENGTH'))


# ----------------------------------------------------------------------------------------------
# Baselines (same masking and column shift as ours, so only the linear algebra differs).


def naive_log_partition(arc_scores, root_scores, lengths=None):
  """log Z by `jnp.linalg.slogdet` (single root)."""
  lap, _, _, log_scale = trees.laplacian(arc_scores, root_scores, lengths, single_root=True)
  return jnp.linalg.slogdet(lap)[1] + log_scale


def naive_marginals(arc_scores, root_scores, lengths=None):
  """Marginals as `jax.grad` of the slogdet log Z."""
  return jax.grad(lambda a, r: naive_log_partition(a, r, lengths).sum(), (0, 1))(arc_scores, root_scores)


def inverse_autodiff_marginals(arc_scores, root_scores, lengths=None):
  """Closed-form marginals (Liu & Lapata eq. 15) from `jnp.linalg.inv`, differentiated by plain autodiff."""
  lap, arc_potentials, root_potentials, _ = trees.laplacian(arc_scores, root_scores, lengths, single_root=True)
  return trees.marginals_from_inverse(arc_potentials, root_potentials, jnp.linalg.inv(lap), single_root=True)


def _loss_and_grad(marginals_fn):
  """value_and_grad of sum(W * arc_marginals) + sum(w * root_marginals) w.r.t. both score arrays."""

  def loss(arc_scores, root_scores, arc_weights, root_weights):
    arc_m, root_m = marginals_fn(arc_scores, root_scores)
    return jnp.sum(arc_weights * arc_m) + jnp.sum(root_weights * root_m)

  return jax.value_and_grad(loss, (0, 1))


class SplitLossAndGrad:
  """value_and_grad of the `_loss_and_grad` loss as models now train (`training.steps`): the program
  with the LU path only over the batch (`exact='flag'`; flagged sentences weigh 0), then, only when
  the flags read on the host show any, the exact path (`exact='in_program'`) in a second program over
  those sentences alone, gathered into a batch of a power of two; the two parts are added. `kernels`
  holds for both programs (the exact one then takes the derivative kernel, `_exact_kernel_grad`)."""

  def __init__(self, kernels='off'):
    def loss(exact):
      def fn(arc_scores, root_scores, arc_weights, root_weights):
        with trees.use_kernels(kernels):  # both programs, as `training.steps` under use_kernels
          arc_m, root_m = trees.marginals(arc_scores, root_scores, exact=exact)
        flagged = jnp.isnan(root_m).any(-1) | jnp.isnan(arc_m).any((-2, -1))
        arc_m = jnp.where(flagged[:, None, None], 0.0, arc_m)
        root_m = jnp.where(flagged[:, None], 0.0, root_m)
        return jnp.sum(arc_weights * arc_m) + jnp.sum(root_weights * root_m), flagged
      return fn

    self.hot = jax.jit(jax.value_and_grad(loss('flag'), (0, 1), has_aux=True))
    self.exact = jax.jit(jax.value_and_grad(lambda *args: loss('in_program')(*args)[0], (0, 1)))

  def __call__(self, arc_scores, root_scores, arc_weights, root_weights):
    (value, flagged), (d_arc, d_root) = self.hot(arc_scores, root_scores, arc_weights, root_weights)
    flagged = np.asarray(flagged)
    if not flagged.any():
      return value, (d_arc, d_root)
    rows = np.flatnonzero(flagged)
    slots = np.resize(rows, 1 << max(0, rows.size - 1).bit_length())
    keep = jnp.asarray(np.arange(slots.size) < rows.size, arc_weights.dtype)
    exact_value, (exact_arc, exact_root) = self.exact(
        arc_scores[slots], root_scores[slots], arc_weights[slots] * keep[:, None, None],
        root_weights[slots] * keep[:, None])
    return value + exact_value, (d_arc.at[rows].set(exact_arc[:rows.size]),
                                 d_root.at[rows].set(exact_root[:rows.size]))


def one_sharp_sentence(arc_scores):
  """`arc_scores` [B, n, n] (n >= 3) with arcs 0 -> 1 and 1 -> 0 of sentence 0 scored 40.

  That sentence's Laplacian is then too ill-conditioned for the LU path (`_needs_exact` flags it, in
  float32 and float64), as happens to a few sentences per batch once a model's scores sharpen; the
  other B - 1 sentences stay on the fast path.
  """
  return arc_scores.at[0, 0, 1].set(40.0).at[0, 1, 0].set(40.0)


def all_sharp(arc_scores):
  """`arc_scores` [B, n, n] (n >= 3) with arcs 0 -> 1 and 1 -> 0 of EVERY sentence scored 40 (a 2-word
  sentence is not sharp that way: both of its trees use one of the two arcs)."""
  return arc_scores.at[:, 0, 1].set(40.0).at[:, 1, 0].set(40.0)


# ----------------------------------------------------------------------------------------------
# Timing.


def peak_bytes(fn, args):
  """Arguments + outputs + temporaries of the compiled `fn` (XLA memory_analysis), or None."""
  analysis = fn.lower(*args).compile().memory_analysis()
  if analysis is None:
    return None
  return (analysis.argument_size_in_bytes + analysis.output_size_in_bytes
          + analysis.temp_size_in_bytes)


class _Row(dict):
  """A dict that logs every measurement as it is stored (progress for slow devices)."""

  def __setitem__(self, column, value):
    if column != 'size' and not column.startswith('ref '):
      logging.info('%s %s: %s', self['size'], column, value)
    super().__setitem__(column, value)


def _torch_struct_calls(batch, length, arc, root):
  """torch-struct thunks (marginals, +grad, projective marginals), or None if it is not importable.

  The projective thunk only where `batch * length**3 <= TS_PROJECTIVE_MAX_WORK` (its memory).
  """
  try:
    import torch  # pylint: disable=g-import-not-at-top
    import torch_struct  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  device = 'cuda' if torch.cuda.is_available() else 'cpu'
  potentials = np.asarray(trees.to_torch_struct(arc, root), np.float32)  # ROOT -> m on [b, m, m]
  potentials = torch.tensor(potentials, device=device)
  lengths = torch.full((batch,), length, dtype=torch.long, device=device)
  weights = torch.randn_like(potentials)

  def synced(fn):
    def call():
      out = fn()
      if device == 'cuda':
        torch.cuda.synchronize()
      return None if out is None else 0  # nothing for JAX to block on
    return call

  def marg():
    with torch.no_grad():
      return torch_struct.NonProjectiveDependencyCRF(potentials, lengths, multiroot=False).marginals

  def marg_grad():
    x = potentials.detach().requires_grad_(True)
    m = torch_struct.NonProjectiveDependencyCRF(x, lengths, multiroot=False).marginals
    (m * weights).sum().backward()
    return x.grad

  def proj():
    x = potentials.detach().requires_grad_(True)
    return torch_struct.DependencyCRF(x, lengths, multiroot=False).marginals

  calls = {'ts marg': synced(marg), 'ts +grad': synced(marg_grad)}
  if batch * length**3 <= TS_PROJECTIVE_MAX_WORK:
    calls['ts proj'] = synced(proj)
  for k in (5, 16):
    if batch * length**3 * k <= TS_TOPK_MAX_WORK:
      calls[f'ts proj top-{k}'] = synced(functools.partial(
          lambda k: torch_struct.DependencyCRF(potentials, lengths, multiroot=False).topk(k), k))
  return calls


class _Programs:
  """The jitted functions timed in every row (compiled once per shape)."""

  def __init__(self):
    in_program = functools.partial(trees.marginals, exact='in_program')
    self.ours_marg = jax.jit(in_program)
    self.inv_marg = jax.jit(inverse_autodiff_marginals)
    self.naive_marg = jax.jit(naive_marginals)
    self.ours_grad = jax.jit(_loss_and_grad(in_program))
    self.model_marg = jax.jit(_with_kernels('off', functools.partial(trees.marginals, exact='flag')))
    self.model_grad = SplitLossAndGrad()
    self.kernel_marg = jax.jit(_with_kernels('on', functools.partial(trees.marginals, exact='flag')))
    self.kernel_grad = SplitLossAndGrad('on')
    self.inv_grad = jax.jit(_loss_and_grad(inverse_autodiff_marginals))
    self.naive_grad = jax.jit(_loss_and_grad(naive_marginals))
    self.mst = jax.jit(trees.mst)
    self.sample = jax.jit(trees.sample)
    self.projective = jax.jit(trees.projective_marginals)
    self.structured = {f'{name} {k}': jax.jit(functools.partial(fn, k=k))
                       for name, fn in (('k-best', trees.k_best), ('proj k-best', trees.projective_k_best))
                       for k in (5, 16)}
    self.structured.update({'max-marg': jax.jit(trees.max_marginals),
                            'proj max-marg': jax.jit(trees.projective_max_marginals)})

  def calls(self, key, arc, root, arc_w, root_w) -> dict[str, Callable[[], Any]]:
    """Column -> a call of its program on this size's scores (sharpened columns for n >= 2)."""
    grad_args = (arc, root, arc_w, root_w)
    calls = {
        'ours marg': lambda: self.ours_marg(arc, root),
        'inv-AD marg': lambda: self.inv_marg(arc, root),
        'naive marg': lambda: self.naive_marg(arc, root),
        'ours +grad': lambda: self.ours_grad(*grad_args),
        'model marg': lambda: self.model_marg(arc, root),
        'model +grad': lambda: self.model_grad(*grad_args),
        'model +grad prog': lambda: self.model_grad.hot(*grad_args),
        'inv-AD +grad': lambda: self.inv_grad(*grad_args),
        'naive +grad': lambda: self.naive_grad(*grad_args),
        'mst': lambda: self.mst(arc, root),
        'sample': lambda: self.sample(key, arc, root),
    }
    if arc.shape[-1] >= 2:  # a one-word sentence has no arcs to sharpen
      sharp, every = one_sharp_sentence(arc), all_sharp(arc)
      calls.update({
          'marg 1 sharp': lambda: self.ours_marg(sharp, root),
          '+grad 1 sharp': lambda: self.ours_grad(sharp, root, arc_w, root_w),
          'sample 1 sharp': lambda: self.sample(key, sharp, root),
          'marg all sharp': lambda: self.ours_marg(every, root),
          '+grad all sharp': lambda: self.ours_grad(every, root, arc_w, root_w),
          'model marg 1 sharp': lambda: trees.marginals(sharp, root, exact='auto'),
          'model +grad 1 sharp': lambda: self.model_grad(sharp, root, arc_w, root_w),
          'model +grad all sharp': lambda: self.model_grad(every, root, arc_w, root_w),
      })
    if kernels_timed(*arc.shape[:2]):
      calls.update({'kernel marg': lambda: self.kernel_marg(arc, root),
                    'kernel +grad': lambda: self.kernel_grad(*grad_args),
                    'kernel +grad prog': lambda: self.kernel_grad.hot(*grad_args)})
      if arc.shape[-1] >= 2:
        sharp = one_sharp_sentence(arc)
        calls['kernel +grad 1 sharp'] = lambda: self.kernel_grad(sharp, root, arc_w, root_w)
        calls['kernel marg 1 sharp'] = lambda: _with_kernels('on', trees.marginals)(sharp, root)
    calls['proj marg'] = lambda: self.projective(arc, root)
    return calls

  def peak_mib(self, arc, root, arc_w, root_w) -> dict[str, Any]:
    """'MiB <column>' -> the compiled peak memory of the main columns' programs."""
    grad_args = (arc, root, arc_w, root_w)
    programs = [('ours marg', self.ours_marg, (arc, root)), ('naive marg', self.naive_marg, (arc, root)),
                ('ours +grad', self.ours_grad, grad_args), ('model +grad', self.model_grad.hot, grad_args),
                ('inv-AD +grad', self.inv_grad, grad_args), ('naive +grad', self.naive_grad, grad_args)]
    return {f'MiB {name}': _mib(peak_bytes(fn, args)) for name, fn, args in programs}


  def kernel_checks(self, arc, root, arc_w, root_w) -> dict[str, Any]:
    """The kernels against the `model` programs (largest absolute differences, flags that differ) and
    the compile seconds of both (module docstring)."""
    grad_args = (arc, root, arc_w, root_w)
    checks = {}
    marg = lambda mode: jax.jit(_with_kernels(mode, functools.partial(trees.marginals, exact='flag')))
    # Fresh functions: nothing of the timed programs' traces, lowerings or executables is reused.
    for name, fn, args in (('model marg', marg('off'), (arc, root)), ('kernel marg', marg('on'), (arc, root)),
                           ('model +grad', SplitLossAndGrad().hot, grad_args),
                           ('kernel +grad', SplitLossAndGrad('on').hot, grad_args)):
      start = time.perf_counter()
      fn.lower(*args).compile()
      checks[f'compile s {name}'] = time.perf_counter() - start
    both = lambda x, y: np.isfinite(x) & np.isfinite(y)
    diff = lambda x, y: float(np.max(np.abs(np.where(both(x, y), x - y, 0.0)), initial=0.0))
    model = [np.asarray(x) for x in jax.tree.leaves(self.model_marg(arc, root))]
    kernel = [np.asarray(x) for x in jax.tree.leaves(self.kernel_marg(arc, root))]
    checks['kernel err marg'] = max(diff(x, y) for x, y in zip(kernel, model))
    floats = lambda out: [np.asarray(x) for x in jax.tree.leaves(out) if x.dtype != bool]  # not the flags
    model, kernel = floats(self.model_grad.hot(*grad_args)), floats(self.kernel_grad.hot(*grad_args))
    checks['kernel err +grad'] = max(diff(x, y) for x, y in zip(kernel, model))
    if arc.shape[-1] >= 2:
      sharp = one_sharp_sentence(arc)
      flags = [np.isnan(np.asarray(fn(sharp, root)[1])).any(-1) for fn in (self.model_marg, self.kernel_marg)]
      checks['kernel flags differ'] = int(np.sum(flags[0] != flags[1]))
    return checks


def _with_kernels(mode, fn):
  """`fn` traced under `trees.use_kernels(mode)`."""
  def wrapped(*args):
    with trees.use_kernels(mode):
      return fn(*args)
  return wrapped


def kernels_timed(batch, length):
  """Whether the `kernel ...` columns run at this size: on a GPU; elsewhere with
  `--kernel_columns=always` up to `KERNEL_INTERPRET_MAX`."""
  if jax.default_backend() == 'gpu':
    return True
  always = flags.FLAGS.is_parsed() and benchmarks.KERNEL_COLUMNS.value == 'always'
  return always and batch * length**2 <= KERNEL_INTERPRET_MAX


def _timed_row(row, calls, torch_struct_calls, repeats: int) -> None:
  """Times `calls` (and torch-struct's, in a group of their own: module docstring) into `row` (ms)."""
  timings = benchmarks.interleaved_medians(calls, repeats, column_budget_s=COLUMN_BUDGET_S)
  if torch_struct_calls:
    timings.update(benchmarks.interleaved_medians(torch_struct_calls, repeats,
                                                  column_budget_s=COLUMN_BUDGET_S))
  for column, (seconds, _, count) in timings.items():
    row[column] = 1e3 * seconds
  fewer = [f'{column} {count}' for column, (_, _, count) in timings.items() if count < repeats]
  if fewer:  # columns that used up COLUMN_BUDGET_S before the last round: median of fewer calls
    row['timed calls'] = ', '.join(fewer)


def run(sizes, repeats=20, dtype='float32', memory=False, seed=0, profile=None):
  """Measures every column for every (batch, length); returns a list of row dicts (ms).

  `profile`: columns to run under the profiler after the timings (`benchmarks.kernel_profile`),
  each printed as it is done.
  """
  dtype = jnp.dtype(dtype)
  programs = _Programs()
  rows = []
  key = jax.random.key(seed)
  for batch, length in sizes:
    keys = jax.random.split(jax.random.fold_in(key, batch * 100003 + length), 4)
    arc = jax.random.normal(keys[0], (batch, length, length), dtype)
    root = jax.random.normal(keys[1], (batch, length), dtype)
    weights = (jax.random.normal(keys[2], (batch, length, length), dtype),
               jax.random.normal(keys[3], (batch, length), dtype))
    row = _Row(size=f'{batch}x{length}')
    calls = programs.calls(keys[2], arc, root, *weights)
    calls.update(structured_calls(programs, arc, root, row))
    torch_struct_calls = _torch_struct_calls(batch, length, np.asarray(arc), np.asarray(root))
    if torch_struct_calls is not None and 'ts proj' not in torch_struct_calls:
      row['ts proj'] = f'not timed (memory: batch x n^3 > {TS_PROJECTIVE_MAX_WORK})'
    unknown = [column for column in profile or () if column not in calls]
    if unknown:
      raise ValueError(f'--profile columns {unknown} are not timed at {batch}x{length}; columns: '
                       f'{", ".join(calls)}')
    if kernels_timed(batch, length):
      try:  # before the timings: kernels that fail to compile (first run on a GPU) lose their columns only
        row.update(programs.kernel_checks(arc, root, *weights))
      except Exception as error:  # pylint: disable=broad-except
        row['kernel error'] = f'{type(error).__name__}: {(str(error).splitlines() or [""])[0][:300]}'
        calls = {column: call for column, call in calls.items() if not column.startswith('kernel ')}
    _timed_row(row, calls, torch_struct_calls, repeats)
    for column in profile or ():
      print(benchmarks.kernel_profile(calls[column]).format(f'{batch}x{length} {column}'), flush=True)
    if memory:
      row.update(programs.peak_mib(arc, root, *weights))
    for name, figures in REFERENCE.items():
      row[name] = figures.get((batch, length), '-')
    rows.append(row)
  return rows


def _mib(num_bytes):
  return 'n/a' if num_bytes is None else num_bytes / 2**20


def format_table(rows):
  """Rows of dicts -> one aligned text table (columns in first-seen order)."""
  columns = []
  for row in rows:
    columns += [c for c in row if c not in columns]
  cell = lambda v: (f'{v:.1e}' if 0 < abs(v) < 5e-3 else f'{v:.2f}') if isinstance(v, float) else str(v)
  table = [columns] + [[cell(row.get(c, '-')) for c in columns] for row in rows]
  widths = [max(len(line[i]) for line in table) for i in range(len(columns))]
  lines = ['  '.join(text.rjust(w) for text, w in zip(line, widths)) for line in table]
  lines.insert(1, '  '.join('-' * w for w in widths))
  return '\n'.join(lines)


def main(argv):
  extra = [a for a in argv[2:] if not a.startswith('-')]
  if extra:
    raise ValueError(f'unexpected positional arguments {extra}; usage: python -m launch.benchmark trees '
                     '[--sizes=...] [--repeats=...] [--dtype=...] [--memory] [--profile=COLUMNS]')
  if benchmarks.DTYPE.value == 'float64':
    jax.config.update('jax_enable_x64', True)
  sizes = parse_sizes(benchmarks.SIZES.value or DEFAULT_SIZES)
  logging.info('benchmarking trees at %s', sizes)
  profile = [c.strip() for c in (benchmarks.PROFILE.value or '').split(',') if c.strip()]
  rows = run(sizes, benchmarks.REPEATS.value, benchmarks.DTYPE.value, benchmarks.MEMORY.value,
             profile=profile)
  print(f'device: {jax.devices()[0]} ({jax.devices()[0].device_kind}), dtype: {benchmarks.DTYPE.value}, '
        f'repeats: {benchmarks.REPEATS.value}, jax {jax.__version__}, '
        f'GLIBC_TUNABLES={os.environ.get("GLIBC_TUNABLES", "unset")}; median ms (MiB for memory columns)')
  if not any('ts marg' in row for row in rows):
    print('torch-struct: not importable here, its columns are skipped (pip install torch-struct to add them)')
  if jax.devices()[0].platform == 'cpu' and 'OPENBLAS_NUM_THREADS' not in os.environ:
    print('note: on a small shared CPU, OPENBLAS_NUM_THREADS=1 avoids oversubscribed LAPACK threads')
  print('"ref ..." columns: figures quoted in the issue (H100, float32; TurboParser on CPU), not measured here')
  print(format_table(rows))
