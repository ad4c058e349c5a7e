r"""Every benchmark table of the issues in one run: `python -m launch.benchmark report`.

  python -m launch.benchmark report --out=DIR [--budget_s=480] [--quick [--jobs=N]]
      [--families=trees,lstmn] [--repeats=N] [--dtype=float32]

Runs each benchmark family of `FAMILIES` in order, with the baselines each family times side by side,
and writes `DIR/report.md` (one section per family: its tables with absolute times AND ratios, the
goals with the measured value, what was skipped) and `DIR/report.json` (the same numbers), headed by
the device, jax / jaxlib versions, dtype and the baseline packages found. Both files are rewritten
after every table, so a run killed from outside (the device machine's 10-minute command limit) still
leaves a valid, partial report (`"complete": false`).

* `--budget_s` (default 480): wall seconds for the whole run. Families check it between their units
  of work (a size, a group of variants); a unit started before the budget ran out is finished, the
  ones after are skipped and listed under "Skipped for the budget", and a family not reached is marked
  "skipped (budget)".
* `--quick`: tiny sizes and models, 2 repeats: the CPU smoke run of every family. It is compile-bound,
  so it compiles with LLVM at -O0 and XLA's older fusion emitter (`launch/_fast_compile.py`, named in
  the report's header); README "Benchmarks" has its seconds per family.
* `--jobs`: families run at the same time, each in a worker process (with --quick only; its default
  there is one per CPU core, at most 4): the smoke run is CPU-bound, so it gains about the core count.
* `--repeats`: timed calls per measurement (default 10; 2 with --quick).
* `--families`: a comma-separated subset of the names below, run in the order named (default: all).

Families (a new one joins with one line in `FAMILIES` and a generator
`report_tables(report_run: benchmarks.ReportRun) -> Iterator[benchmarks.Table]` in its module; a family whose
module or function does not exist yet is reported as "not available"):
  trees            the `trees` core at (512, 32), (64, 64), (32, 200) vs slogdet autodiff, inverse
                   autodiff, torch-struct (when importable) and the issue's reference figures
                   (`trees_tables` below: launch/benchmarks/trees.py's `run` is its programmatic API)
  liu_lapata       Table 2 (SNLI), the Yelp epoch, where a structured attention layer's time goes
  lstmn            LSTMN vs LSTM training tokens/s (Cheng et al. 2016, PTB size)
  parser           sentences/s of a freshly initialised biaffine parser of the EWT size
  relation_networks, tree_lstm, mhs_rnn: the later paper families

On the CPU (`OPENBLAS_NUM_THREADS=1` on a small shared machine) only the ratios mean much; the goals
of the issues are stated for a GPU and each goal line names the device it was measured on.
"""
import concurrent.futures
import dataclasses
import datetime
import functools
import importlib
import importlib.metadata
import json
import math
import multiprocessing
import os
import platform
import subprocess
import time
import traceback
from typing import Any, Callable, Iterator, Optional, Sequence

from absl import flags
from absl import logging
import jax

from launch import _fast_compile
from launch import benchmarks

OUT = flags.DEFINE_string('out', None, 'Directory for report.md and report.json (created if missing).')
BUDGET_S = flags.DEFINE_float('budget_s', 480.0, 'Wall seconds for the whole report; families stop '
                              'starting new units of work once it is spent.')
QUICK = flags.DEFINE_bool('quick', False, 'Tiny sizes and models, 2 repeats (CPU smoke run).')
JOBS = flags.DEFINE_integer('jobs', None, 'Families run at the same time (processes); only with --quick '
                            '(default there: the CPU count, at most 4), else 1.')
FAMILIES_FLAG = flags.DEFINE_string('families', None, 'Comma-separated families to run (default all).')

DEFAULT_REPEATS = 10
QUICK_REPEATS = 2


@dataclasses.dataclass(frozen=True)
class Family:
  """One benchmark family of the report.

  Attributes:
    name: short name (`--families`), by convention the module `launch.benchmarks.<name>`.
    title: what the family measures (the section heading).
    entry: 'module:function' of its `report_tables(run)`; None means
      'launch.benchmarks.<name>:report_tables'.
  """
  name: str
  title: str
  entry: Optional[str] = None
  quick_seconds: float = 10.0  # its seconds in a --quick run; the --jobs queue starts the longest

  def target(self) -> tuple[str, str]:
    module, _, function = (self.entry or f'launch.benchmarks.{self.name}:report_tables').partition(':')
    return module, function


# quick_seconds: the family's seconds in `report --quick --jobs=2` on an idle 2-core CPU (measured;
# 50 s in all, 94 s of family time).
FAMILIES = (
    Family('trees', 'trees core: marginals, +grad, MST, projective marginals, sampling',
           entry='launch.benchmarks.report:trees_tables', quick_seconds=9),
    Family('liu_lapata', 'Liu & Lapata (2018): Table 2 (SNLI), Yelp epoch, attention breakdown',
           quick_seconds=28),
    Family('lstmn', 'Cheng et al. (2016): LSTMN vs LSTM training tokens/s', quick_seconds=2),
    Family('parser', 'Biaffine tree-CRF parser (EWT size): sentences/s', quick_seconds=15),
    Family('relation_networks', 'Relation networks', quick_seconds=20),
    Family('tree_lstm', 'Tree-LSTM', quick_seconds=10),
    Family('mhs_rnn', 'MHS-RNN', quick_seconds=10),
)


class FamilyUnavailable(Exception):
  """The family's module or `report_tables` does not exist (yet)."""


def load_family(family: Family) -> Callable[[benchmarks.ReportRun], Iterator[benchmarks.Table]]:
  """The family's `report_tables`; FamilyUnavailable when its module or function does not exist.

  An import error inside an existing module (a missing dependency, a bug) propagates: that family
  is reported as failed, not as not available.
  """
  module_name, function = family.target()
  try:
    module = importlib.import_module(module_name)
  except ModuleNotFoundError as e:
    if e.name == module_name or module_name.startswith(f'{e.name}.'):
      raise FamilyUnavailable(f'{module_name.replace(".", "/")}.py does not exist yet') from None
    raise
  if not hasattr(module, function):
    raise FamilyUnavailable(f'{module_name.replace(".", "/")}.py has no {function}(run) yet')
  return getattr(module, function)


def select_families(names: Optional[str]) -> list[Family]:
  """The families named in the comma-separated `names` (all when None, in `FAMILIES` order), in the
  order named (first named, first run: with a budget, the order says what matters most), each once.

  Raises:
    ValueError naming unknown families and listing the known ones.
  """
  if names is None:
    return list(FAMILIES)
  wanted = [n.strip() for n in names.split(',') if n.strip()]
  known = [f.name for f in FAMILIES]
  unknown = [n for n in wanted if n not in known]
  if unknown or not wanted:
    raise ValueError(f'--families={names!r}: unknown {unknown}; known families: {", ".join(known)}')
  by_name = {f.name: f for f in FAMILIES}
  return [by_name[n] for n in dict.fromkeys(wanted)]


# ------------------------------------------------------------------------------------------------
# The trees family (launch/benchmarks/trees.py is timed through its `run`).

TREES_SIZES = ((512, 32), (64, 64), (32, 200))
TREES_QUICK_SIZES = ((4, 8),)
# The goals (GPU): ours at least 2x faster than the slogdet baseline and torch-struct; mst at
# least 10x faster than TurboParser's C++ CLE on the CPU; projective marginals under 10 ms at 512x32.
TREES_SPEEDUP_GOAL = 2.0
TREES_MST_GOAL = 10.0
TREES_PROJECTIVE_GOAL_MS = 10.0
# Issue 60: k-best trees at k = 16 within 20x one `trees.mst` of the same scores; max-marginals within 20x
# one MST at 64x64.
TREES_KBEST_GOAL = 20.0
# "Exact must not mean slow" (CPU ratios, and the same on a GPU): with no sharp sentence ours within
# 1.2x of inv-AD and at most 1.0x naive and torch-struct; one sharp sentence at most 2x none.
TREES_INV_AD_GOAL = 1.2
TREES_BASELINE_GOAL = 1.0
TREES_ONE_SHARP_GOAL = 2.0
# Issue 61 (fused kernels, GPU): kernel value + gradient at most 0.5x naive at 512x32 and 64x64, 1x at
# 32x200.
TREES_KERNEL_GOALS = {'512x32': 0.5, '64x64': 0.5, '32x200': 1.0}


def _ratio(numerator: Any, denominator: Any) -> Any:
  """numerator / denominator when both are positive numbers, else '-'."""
  numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (numerator, denominator))
  return numerator / denominator if numbers and denominator > 0 else '-'


def package_version(distribution: str) -> str:
  """The installed version of the pip distribution (e.g. 'torch-struct'), or 'not installed'.

  Read from the package metadata, without importing it (importing torch costs seconds)."""
  try:
    return importlib.metadata.version(distribution)
  except importlib.metadata.PackageNotFoundError:
    return 'not installed'


def goal_note(goal: str, measured: str, ok: bool, device_kind: str, goal_device: str = 'GPU') -> str:
  """'goal: ...: measured, met/missed on DEVICE' (with the goal's device when it is another)."""
  on_goal_device = (goal_device.lower() in device_kind.lower()
                    or (goal_device == 'GPU' and jax.devices()[0].platform == 'gpu'))
  where = f'on {device_kind}' + ('' if on_goal_device else f' (the goal is for a {goal_device})')
  return f'goal: {goal}: {measured}, {"met" if ok else "missed"} {where}'


def _trees_rows(report_run: benchmarks.ReportRun) -> list[dict]:
  """The trees benchmark's rows (`launch.benchmarks.trees.run`) at the report's sizes (or `--sizes`)."""
  from launch.benchmarks import trees as trees_benchmark  # pylint: disable=g-import-not-at-top
  rows = []
  sizes = TREES_QUICK_SIZES if report_run.quick else TREES_SIZES
  if flags.FLAGS.is_parsed() and benchmarks.SIZES.value:  # --sizes=32x200: a part of the report (e.g. what a budget left out)
    sizes = trees_benchmark.parse_sizes(benchmarks.SIZES.value)
  for batch, length in sizes:
    if report_run.unit(f'trees {batch}x{length}'):
      rows += trees_benchmark.run([(batch, length)], repeats=report_run.repeats, dtype=report_run.dtype)
  return rows


def _trees_absolute_table(rows: list[dict], dtype: str, torch_struct: str) -> benchmarks.Table:
  """The table of median ms per column (the reference figures left out)."""
  synjax = package_version('synjax')
  absolute = [{k: v for k, v in row.items() if not k.startswith('ref ')} for row in rows]
  return benchmarks.Table(
      f'median ms per call (B x n: batch x sentence length, N(0, 1) scores, {dtype}); "ours" = '
      'trees.marginals with the exact path in the program, "model" = as models run it (LU-only program, '
      'flagged sentences by a second program), "inv-AD" = inverse + plain autodiff, "naive" = slogdet + autodiff, "+grad" = '
      'value and gradient of a loss through the marginals, "ts" = torch-struct',
      absolute,
      [f'torch-struct: {torch_struct}' + ('' if any('ts marg' in r for r in rows) else
                                           ' (its columns are absent)'),
       f'SynJax: {synjax}' + ('' if synjax == 'not installed' else
                              ' (not timed by launch/benchmarks/trees.py)')])


def _trees_ratios(row: dict, torch_struct: str) -> dict:
  """One size's ratios of the columns to each other and to the baselines ('-' where a column is absent)."""
  ts = 'not installed' if torch_struct == 'not installed' else '-'
  return {'size': row['size'],
          'ours/naive marg': _ratio(row.get('ours marg'), row.get('naive marg')),
          'ours/naive +grad': _ratio(row.get('ours +grad'), row.get('naive +grad')),
          'ours/inv-AD marg': _ratio(row.get('ours marg'), row.get('inv-AD marg')),
          'ours/inv-AD +grad': _ratio(row.get('ours +grad'), row.get('inv-AD +grad')),
          'model/inv-AD marg': _ratio(row.get('model marg'), row.get('inv-AD marg')),
          'model/inv-AD +grad': _ratio(row.get('model +grad'), row.get('inv-AD +grad')),
          'model +grad 1 sharp/model +grad': _ratio(row.get('model +grad 1 sharp'), row.get('model +grad')),
          'model +grad host read ms': (row['model +grad'] - row['model +grad prog']
                                       if _ratio(row.get('model +grad'), row.get('model +grad prog')) != '-'
                                       else '-'),
          'kernel/model marg': _ratio(row.get('kernel marg'), row.get('model marg')),
          'kernel/model +grad': _ratio(row.get('kernel +grad'), row.get('model +grad')),
          'kernel/naive +grad': _ratio(row.get('kernel +grad'), row.get('naive +grad')),
          'kernel +grad 1 sharp/kernel +grad': _ratio(row.get('kernel +grad 1 sharp'), row.get('kernel +grad')),
          'ours/ts marg': (_ratio(row['ours marg'], row['ts marg']) if 'ts marg' in row else ts),
          'ours/ts +grad': (_ratio(row['ours +grad'], row['ts +grad']) if 'ts +grad' in row else ts),
          'mst/TurboParser': _ratio(row.get('mst'), row.get('ref turbo CLE (cpu)')),
          'marg 1 sharp/marg': _ratio(row.get('marg 1 sharp'), row.get('ours marg')),
          '+grad 1 sharp/+grad': _ratio(row.get('+grad 1 sharp'), row.get('ours +grad')),
          'sample 1 sharp/sample': _ratio(row.get('sample 1 sharp'), row.get('sample')),
          'proj marg ms': row.get('proj marg', '-'),
          **{f'{c}/mst': _ratio(row.get(c), row.get('mst'))
             for c in ('k-best 5', 'k-best 16', 'max-marg', 'proj k-best 5', 'proj k-best 16', 'proj max-marg')},
          **{f'proj k-best {k}/ts top-{k}': _ratio(row.get(f'proj k-best {k}'), row.get(f'ts proj top-{k}'))
             for k in (5, 16)}}


def _trees_goal_notes(row: dict, out: dict, device_kind: str) -> list[str]:
  """The goals of one size's ratios `out` (`_trees_ratios`), met or not, as report notes."""
  notes = []
  for baseline in ('naive', 'ts'):
    for what in ('marg', '+grad'):
      ratio = out[f'ours/{baseline} {what}']
      if isinstance(ratio, float):
        notes.append(goal_note(f'ours {what} >= {TREES_SPEEDUP_GOAL:g}x faster than {baseline} '
                               f'({row["size"]})', f'{1 / ratio:.2f}x', 1 / ratio >= TREES_SPEEDUP_GOAL,
                               device_kind))
  for column, limit, goal in (
      ('ours/inv-AD marg', TREES_INV_AD_GOAL, 'ours marg within {:g}x of inv-AD'),
      ('ours/inv-AD +grad', TREES_INV_AD_GOAL, 'ours +grad within {:g}x of inv-AD'),
      ('model/inv-AD marg', TREES_INV_AD_GOAL, 'model marg (as models run it) within {:g}x of inv-AD'),
      ('model/inv-AD +grad', TREES_INV_AD_GOAL, 'model +grad (as models run it) within {:g}x of inv-AD'),
      ('ours/naive marg', TREES_BASELINE_GOAL, 'ours marg at most {:g}x naive'),
      ('ours/naive +grad', TREES_BASELINE_GOAL, 'ours +grad at most {:g}x naive'),
      ('ours/ts marg', TREES_BASELINE_GOAL, 'ours marg at most {:g}x torch-struct'),
      ('ours/ts +grad', TREES_BASELINE_GOAL, 'ours +grad at most {:g}x torch-struct'),
      ('marg 1 sharp/marg', TREES_ONE_SHARP_GOAL, 'marg with 1 sharp sentence at most {:g}x none'),
      ('+grad 1 sharp/+grad', TREES_ONE_SHARP_GOAL, '+grad with 1 sharp sentence at most {:g}x none')):
    if isinstance(out[column], float):
      notes.append(goal_note(f'{goal.format(limit)} ({row["size"]})', f'{out[column]:.2f}x',
                             out[column] <= limit, device_kind,
                             goal_device=device_kind))  # these goals hold on any device
  kernel_goal = TREES_KERNEL_GOALS.get(row['size'])
  if kernel_goal is not None and isinstance(out['kernel/naive +grad'], float):
    notes.append(goal_note(f'kernel +grad at most {kernel_goal:g}x naive +grad ({row["size"]})',
                           f'{out["kernel/naive +grad"]:.2f}x', out['kernel/naive +grad'] <= kernel_goal,
                           device_kind))
  if isinstance(out['kernel +grad 1 sharp/kernel +grad'], float):
    notes.append(goal_note(f'kernel +grad with 1 sharp sentence at most {TREES_ONE_SHARP_GOAL:g}x none '
                           f'({row["size"]})', f'{out["kernel +grad 1 sharp/kernel +grad"]:.2f}x',
                           out['kernel +grad 1 sharp/kernel +grad'] <= TREES_ONE_SHARP_GOAL, device_kind))
  if isinstance(out['mst/TurboParser'], float):
    speedup = 1 / out['mst/TurboParser']
    notes.append(goal_note(f'mst >= {TREES_MST_GOAL:g}x faster than TurboParser CLE on the CPU '
                           f'({row["ref turbo CLE (cpu)"]} ms, {row["size"]})', f'{speedup:.2f}x',
                           speedup >= TREES_MST_GOAL, device_kind))
  if row['size'] == '512x32' and isinstance(row.get('proj marg'), float):
    notes.append(goal_note(f'projective marginals < {TREES_PROJECTIVE_GOAL_MS:g} ms (512x32)',
                           f'{row["proj marg"]:.2f} ms', row['proj marg'] < TREES_PROJECTIVE_GOAL_MS,
                           device_kind))
  for column, sizes in (('k-best 16/mst', None), ('max-marg/mst', ('64x64',))):
    if isinstance(out[column], float) and (sizes is None or row['size'] in sizes):
      notes.append(goal_note(f'{column.split("/")[0]} within {TREES_KBEST_GOAL:g}x one mst ({row["size"]})',
                             f'{out[column]:.1f}x', out[column] <= TREES_KBEST_GOAL, device_kind,
                             goal_device=device_kind))  # on any device
  return notes


def trees_tables(report_run: benchmarks.ReportRun) -> Iterator[benchmarks.Table]:
  """The trees benchmark's columns (median ms) and its ratios to the baselines, with the goals."""
  rows = _trees_rows(report_run)
  if not rows:
    return
  torch_struct = package_version('torch-struct')
  yield _trees_absolute_table(rows, report_run.dtype, torch_struct)
  device_kind = jax.devices()[0].device_kind
  ratios, notes = [], []
  for row in rows:
    out = _trees_ratios(row, torch_struct)
    ratios.append(out)
    notes += _trees_goal_notes(row, out, device_kind)
  yield benchmarks.Table(
      'ratios (< 1: ours faster); mst/TurboParser against the C++ CPU figure quoted in the issue '
      '(38.6 / 19.2 / 96.6 ms at 512x32 / 64x64 / 32x200; "-" at other sizes); "1 sharp" = one '
      'sentence of the batch on the exact fallback path; "kernel" = the model columns with the fused kernels '
      '(trees.use_kernels), "host read" = model +grad minus its program alone', ratios, notes)


# ------------------------------------------------------------------------------------------------
# Running the families and writing the report.


def _git_commit() -> str:
  """The short hash of this checkout's HEAD, or 'unknown'."""
  try:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=root, capture_output=True,
                          text=True, timeout=10, check=True).stdout.strip() or 'unknown'
  except (OSError, subprocess.SubprocessError):
    return 'unknown'


def environment() -> dict[str, Any]:
  """Device, versions and baseline packages of this run."""
  import jaxlib  # pylint: disable=g-import-not-at-top
  device = jax.devices()[0]
  # The device tool's copy of a working tree keeps the git metadata of the session's start: the caller
  # names the code it sends in JAX_STRUCTURED_COMMIT (e.g. 'abc1234+' for uncommitted changes).
  commit = os.environ.get('JAX_STRUCTURED_COMMIT') or _git_commit()
  return {
      'device': device.device_kind, 'platform': device.platform, 'device_count': jax.device_count(),
      'jax': jax.__version__,
      'jaxlib': getattr(jaxlib, '__version__', None) or jaxlib.version.__version__,
      'python': platform.python_version(), 'cpu_count': os.cpu_count(),
      'OPENBLAS_NUM_THREADS': os.environ.get('OPENBLAS_NUM_THREADS', 'unset'),
      'XLA_FLAGS': os.environ.get('XLA_FLAGS', ''),
      # glibc's huge pages for large host allocations (launch/_huge_pages.py): page faults per call.
      'GLIBC_TUNABLES': os.environ.get('GLIBC_TUNABLES', 'unset'),
      'compile': ('fast: LLVM -O0 (jax_disable_most_optimizations)'
                  if jax.config.read('jax_disable_most_optimizations') else 'optimised'),
      'commit': commit,
      'date': datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%d %H:%M UTC'),
      'baselines': {name: package_version(name) for name in ('torch', 'torch-struct', 'synjax')},
  }


def run_family(family: Family, run: benchmarks.ReportRun, on_table: Optional[Callable] = None,
               ) -> dict[str, Any]:
  """Runs one family's `report_tables(run)`: its report entry's 'status', 'reason', 'seconds',
  'tables', 'skipped'. `on_table(result)` sees the entry so far after every table."""
  result = {'status': 'running', 'reason': '', 'seconds': 0.0, 'tables': [], 'skipped': []}
  try:
    report_tables = load_family(family)
  except FamilyUnavailable as e:
    return dict(result, status='not available', reason=str(e))
  if not run.unit(family.name):
    return dict(result, status='skipped (budget)', skipped=list(run.skipped))
  logging.info('report: family %s (%.0f s of the budget left)', family.name, run.budget.left())
  start = run.budget.elapsed()
  try:
    for table in report_tables(run):
      result['tables'].append(table_dict(table))
      result['seconds'] = run.budget.elapsed() - start
      if on_table:
        on_table(result)
    result['status'] = 'partial (budget)' if run.skipped else 'ok'
  except Exception as e:  # pylint: disable=broad-except
    logging.error('report: family %s failed:\n%s', family.name, traceback.format_exc())
    result['status'], result['reason'] = 'failed', f'{type(e).__name__}: {e}'
  result['seconds'] = run.budget.elapsed() - start
  result['skipped'] = list(run.skipped)
  return result


def _start_worker(quick: bool, dtype: str) -> None:
  """A `--jobs` worker process: the parent's compile settings (XLA_FLAGS came with the environment)."""
  if quick:
    _fast_compile.use_fast_cpu_compiles()
  if dtype == 'float64':
    jax.config.update('jax_enable_x64', True)


def _run_family_in_worker(family: Family, quick: bool, repeats: int, dtype: str, deadline: float,
                          ) -> dict[str, Any]:
  """`run_family` in a `--jobs` worker, with the budget left at the report's wall-clock `deadline`
  (a family waiting in the queue must not start with the budget of when it was queued)."""
  budget = benchmarks.Budget(max(deadline - time.time(), 1e-9))
  return run_family(family, benchmarks.ReportRun(quick=quick, repeats=repeats, dtype=dtype,
                                                 budget=budget))


def run_report(out_dir: str, *, quick: bool = False, budget_s: float = 480.0,
               repeats: Optional[int] = None, dtype: str = 'float32',
               families: Optional[Sequence[Family]] = None,
               clock: Optional[Callable[[], float]] = None, jobs: int = 1) -> dict[str, Any]:
  """Runs the families, rewriting `out_dir`/report.{md,json} after each table; returns the report.

  Args:
    out_dir: created if missing.
    quick: tiny sizes (the CPU smoke run).
    budget_s: wall seconds for the whole run (checked between units of work).
    repeats: timed calls per measurement (None: 2 with quick, else 10).
    dtype: 'float32' or 'float64' (the caller enables jax_enable_x64 for float64).
    families: the families to run (default `FAMILIES`).
    clock: seconds clock of the budget (default `time.monotonic`; tests pass a fake one).
    jobs: families run at the same time, each in a worker process (longest `quick_seconds` first;
      the files are then rewritten after each family rather than each table). Only with `quick`:
      concurrent families disturb each other's timings. Threads gained less: tracing holds the GIL.

  Returns:
    The report dict written to report.json: 'environment', 'settings', 'families' (per family:
    'name', 'title', 'status' in {'ok', 'partial (budget)', 'skipped (budget)', 'not available',
    'failed'}, 'reason', 'seconds', 'tables', 'skipped'), 'skipped', 'elapsed_s', 'complete'.
  """
  if jobs < 1 or (jobs > 1 and not quick):
    raise ValueError(f'--jobs={jobs}: families run one at a time (1) except with --quick, whose '
                     'numbers are a smoke test (concurrent families disturb each other\'s timings)')
  families = list(FAMILIES if families is None else families)
  repeats = repeats or (QUICK_REPEATS if quick else DEFAULT_REPEATS)
  budget = benchmarks.Budget(budget_s, clock)
  os.makedirs(out_dir, exist_ok=True)
  report = {'environment': environment(),
            'settings': {'quick': quick, 'budget_s': budget_s, 'repeats': repeats, 'dtype': dtype,
                         'families': [f.name for f in families], 'jobs': jobs},
            'families': [{'name': f.name, 'title': f.title, 'status': 'pending', 'reason': '',
                          'seconds': 0.0, 'tables': [], 'skipped': []} for f in families],
            'skipped': [], 'elapsed_s': 0.0, 'complete': False}

  def save(entry=None, result=None):
    if entry is not None:
      entry.update(result)
      if result['status'] != 'running':
        report['skipped'] += result['skipped']
    report['elapsed_s'] = budget.elapsed()
    write_report(out_dir, report)

  save()
  if jobs == 1:
    for family, entry in zip(families, report['families']):
      run = benchmarks.ReportRun(quick=quick, repeats=repeats, dtype=dtype, budget=budget)
      save(entry, run_family(family, run, on_table=functools.partial(save, entry)))
  else:
    queue = sorted(zip(families, report['families']), key=lambda pair: -pair[0].quick_seconds)
    deadline = time.time() + budget.left()
    with concurrent.futures.ProcessPoolExecutor(
        jobs, mp_context=multiprocessing.get_context('spawn'), initializer=_start_worker,
        initargs=(quick, dtype)) as pool:
      running = {pool.submit(_run_family_in_worker, family, quick, repeats, dtype, deadline):
                 entry for family, entry in queue}
      for entry in running.values():
        entry['status'] = 'running'
      save()
      for future in concurrent.futures.as_completed(running):
        try:
          result = future.result()
        except Exception as e:  # pylint: disable=broad-except  (the worker process died)
          result = {'status': 'failed', 'reason': f'worker process: {type(e).__name__}: {e}',
                    'seconds': 0.0, 'tables': [], 'skipped': []}
        save(running[future], result)
  report['complete'] = True
  save()
  return report


def table_dict(table: benchmarks.Table) -> dict[str, Any]:
  """A `Table` as plain JSON data; non-finite numbers become the strings 'nan' / 'inf' / '-inf'."""
  def value(v):
    if hasattr(v, 'item') and not isinstance(v, (str, bytes)):
      v = v.item()  # numpy / jax scalars
    if isinstance(v, float) and not math.isfinite(v):
      return str(v)
    return v if isinstance(v, (int, float, str)) or v is None else str(v)
  return {'title': table.title, 'columns': table.columns(),
          'rows': [{k: value(v) for k, v in row.items()} for row in table.rows],
          'notes': list(table.notes)}


def format_cell(value: Any) -> str:
  """Numbers for the markdown tables: 3 significant digits below 1, 2 decimals to 100, then none."""
  if isinstance(value, bool) or not isinstance(value, (int, float)):
    return '-' if value is None else str(value).replace('|', '\\|')
  if isinstance(value, int):
    return f'{value:,}'
  if not math.isfinite(value):
    return str(value)
  if abs(value) >= 100:
    return f'{value:,.0f}'
  if abs(value) >= 1:
    return f'{value:.2f}'
  return f'{value:.3g}'


def markdown_table(table: dict[str, Any]) -> str:
  columns = table['columns']
  lines = ['| ' + ' | '.join(columns) + ' |',
           '|' + '|'.join('---:' if any(isinstance(r.get(c), (int, float)) for r in table['rows'])
                          else '---' for c in columns) + '|']
  for row in table['rows']:
    lines.append('| ' + ' | '.join(format_cell(row.get(c, '-')) for c in columns) + ' |')
  return '\n'.join(lines)


def format_markdown(report: dict[str, Any]) -> str:
  """report.md: the environment, a summary of the families, then one section per family."""
  env, settings = report['environment'], report['settings']
  baselines = ', '.join(f'{k} {v}' for k, v in env['baselines'].items())
  lines = ['# Benchmark report', '',
           f'- device: **{env["device"]}** ({env["platform"]}, {env["device_count"]} device(s)); '
           f'jax {env["jax"]}, jaxlib {env["jaxlib"]}, Python {env["python"]}; {env["cpu_count"]} CPU '
           f'cores, OPENBLAS_NUM_THREADS={env["OPENBLAS_NUM_THREADS"]}, '
           f'GLIBC_TUNABLES={env.get("GLIBC_TUNABLES", "unset")}',
           f'- dtype {settings["dtype"]}, {settings["repeats"]} timed calls per measurement (median, '
           f'after a warm-up/compile call), budget {settings["budget_s"]:g} s, used '
           f'{report["elapsed_s"]:.0f} s' + (', QUICK sizes (smoke run)' if settings['quick'] else ''),
           f'- baselines: {baselines}',
           f'- XLA compile: {env.get("compile", "optimised")}'
           + (f'; XLA_FLAGS={env["XLA_FLAGS"]}' if env.get('XLA_FLAGS') else ''),
           f'- commit {env["commit"]}, {env["date"]}'
           + ('' if report['complete'] else '; **INCOMPLETE: the run was still going or was killed**'),
           '']
  if env['platform'] == 'cpu':
    lines += ['Measured on the CPU: compare the ratios; the absolute times are CPU times (the goals '
              'are for a GPU).', '']
  lines += ['| family | status | seconds | tables |', '|---|---|---:|---:|']
  for family in report['families']:
    status = family['status'] + (f': {family["reason"]}' if family['reason'] else '')
    lines.append(f'| {family["name"]} | {status} | {family["seconds"]:.0f} | {len(family["tables"])} |')
  for family in report['families']:
    lines += ['', f'## {family["name"]}: {family["title"]}', '']
    if family['status'] not in ('ok',):
      lines += [f'Status: {family["status"]}' + (f' ({family["reason"]})' if family['reason'] else ''),
                '']
    for table in family['tables']:
      lines += [table['title'], '', markdown_table(table), '']
      lines += [f'- {note}' for note in table['notes']]
      if table['notes']:
        lines.append('')
    if family['skipped'] and family['status'] != 'skipped (budget)':
      lines += ['Skipped for the budget: ' + ', '.join(family['skipped']), '']
  if report['skipped']:
    lines += ['', '## Skipped for the budget', '', *[f'- {what}' for what in report['skipped']]]
  return '\n'.join(lines).rstrip() + '\n'


def write_report(out_dir: str, report: dict[str, Any]) -> None:
  """Writes report.json and report.md atomically (write to a temporary file, then rename)."""
  for name, text in (('report.json', json.dumps(report, indent=1, allow_nan=False)),
                     ('report.md', format_markdown(report))):
    path = os.path.join(out_dir, name)
    with open(path + '.tmp', 'w', encoding='utf-8') as f:
      f.write(text)
    os.replace(path + '.tmp', path)


def default_quick_jobs() -> int:
  """Families at a time for --quick: one per CPU core (compiles run in parallel), at most 4."""
  return max(1, min(4, os.cpu_count() or 1))


def main(argv):
  extra = [a for a in argv[2:] if not a.startswith('-')]
  if extra:
    raise ValueError(f'unexpected positional arguments {extra}; usage: python -m launch.benchmark report '
                     '--out=DIR [--budget_s=480] [--quick] [--families=...] [--repeats=N] [--dtype=...]')
  if not OUT.value:
    raise ValueError('--out=DIR is required: the directory that receives report.md and report.json')
  if QUICK.value:  # a compile-bound smoke run: cheaper compiles, the same programs
    _fast_compile.use_fast_cpu_compiles()
  if benchmarks.DTYPE.value == 'float64':
    jax.config.update('jax_enable_x64', True)
  families = select_families(FAMILIES_FLAG.value)
  repeats = benchmarks.REPEATS.value if flags.FLAGS['repeats'].present else None
  jobs = JOBS.value or (default_quick_jobs() if QUICK.value else 1)
  report = run_report(OUT.value, quick=QUICK.value, budget_s=BUDGET_S.value, repeats=repeats,
                      dtype=benchmarks.DTYPE.value, families=families, jobs=jobs)
  print(format_markdown(report))
  print(f'wrote {os.path.join(OUT.value, "report.md")} and report.json')
  failed = [f['name'] for f in report['families'] if f['status'] == 'failed']
  if failed:
    raise SystemExit(f'error: families failed: {", ".join(failed)} (see report.md and the log above)')
