"""Benchmarks run by `python -m launch.benchmark <name>`; each module here has `main(argv)`.

The flags below are shared by every benchmark (each module documents how it reads `--sizes`).
`Table`, `Budget` and `ReportRun` are what a benchmark family hands to, and reads from,
`python -m launch.benchmark report` (launch/benchmarks/report.py): a family module joins the report
with a generator `report_tables(run: ReportRun) -> Iterator[Table]` and one line in
`report.FAMILIES`.
"""
import collections
import dataclasses
import glob
import random
import statistics
import tempfile
import time
from typing import Any, Callable, Mapping, Optional

from absl import flags
import jax

SIZES = flags.DEFINE_string(
    'sizes', None, 'Comma-separated problem sizes, e.g. "512x32,64x64" (batch x length for trees); '
    'None means the benchmark\'s defaults.')
REPEATS = flags.DEFINE_integer('repeats', 20, 'Timed calls per measurement (after one warm-up/compile).',
                               lower_bound=1)
DTYPE = flags.DEFINE_enum('dtype', 'float32', ['float32', 'float64'], 'Floating point dtype of the inputs.')
MEMORY = flags.DEFINE_bool('memory', False,
                           'Also print the compiled peak memory (XLA memory_analysis) of each function.')
KERNEL_COLUMNS = flags.DEFINE_enum(
    'kernel_columns', 'gpu', ['gpu', 'always'], 'Where the trees benchmark times its `kernel ...` columns '
    '(the fused Pallas kernels): on a GPU only, or also elsewhere in the Pallas interpreter (a check that '
    'they run; slow, so at tiny sizes only: launch/benchmarks/trees.py).')
PROFILE = flags.DEFINE_string(
    'profile', None, 'Comma-separated columns (e.g. "ours marg,ours +grad") to run under the JAX '
    'profiler after the timings: per call, the kernels launched, their summed time and the costliest '
    'kernels (benchmarks that support it: trees).')


def parse_sizes(text: str, axes: tuple[str, ...], default: Optional[int] = None,
                minimum: Optional[dict[str, int]] = None) -> list[tuple[int, ...]]:
  """A `--sizes` value -> one tuple of positive integers per comma-separated item.

  E.g. `parse_sizes('32x16, 8x64x100', ('BATCH', 'N', 'HIDDEN'), default=300)` ->
  `[(32, 16, 300), (8, 64, 100)]`.

  Args:
    text: 'AxB,...', items separated by commas, axes by 'x'.
    axes: the names of the axes, in order (they spell the expected form in the error).
    default: when given, an item may leave out the last axis, which then takes this value.
    minimum: smallest allowed value per axis name (default 1 for every axis).

  Raises:
    ValueError naming the bad item, the expected forms and the whole value.
  """
  minimum = minimum or {}
  forms = ['x'.join(axes[:-1]), 'x'.join(axes)] if default is not None else ['x'.join(axes)]
  sizes = []
  for item in text.split(','):
    item = item.strip()
    parts = item.lower().split('x')
    values = [int(p) if p.isdigit() else 0 for p in parts]
    if (len(parts) not in (len(axes) - (default is not None), len(axes))
        or not all(v >= max(1, minimum.get(axis, 1)) for v, axis in zip(values, axes))):
      bounds = ''.join(f' and {axis} >= {low}' for axis, low in minimum.items())
      raise ValueError(f'--sizes item {item!r} is not {" or ".join(forms)} with positive integers'
                       f'{bounds} (in {text!r})')
    sizes.append(tuple(values) + ((default,) if len(values) < len(axes) else ()))
  return sizes


def timed_call(call: Callable[[], Any]) -> float:
  """Wall seconds of `call()`, ended with `jax.block_until_ready` on its result (None is fine)."""
  start = time.perf_counter()
  jax.block_until_ready(call())
  return time.perf_counter() - start


def interleaved_medians(calls: Mapping[Any, Callable[[], Any]], repeats: int, *,
                        column_budget_s: Optional[float] = None) -> dict[Any, tuple[float, float, int]]:
  """{name: (median wall seconds of its timed calls, seconds of its first call, number of timed calls)}.

  Every call runs once to compile / warm up; then each of the `repeats` rounds calls every entry once,
  so a change of machine load during the run hits all of them alike and the ratios between them stay
  fair on a shared machine. Each round calls the entries in its own order (a permutation seeded by the
  round), so no entry always follows the same one. A rotation of one fixed order (before 2026-11-29)
  did not achieve that: every entry but the round's first followed the same one every round, and the
  first column of the trees benchmark, `trees.marginals`, always ran right after torch-struct's
  calls. On a 2-core CPU it then took 1.20x the time of the same jitted function with one sharp
  sentence (strictly more work) at 64x64, and 1.50x inv-AD where a run without torch-struct
  installed gave 1.09x; on an H200 (2026-11-27) 6.6-9.3x the plain LU at 512x32 / 64x64 but 1.5x at
  32x200 where torch-struct's projective CRF is not timed (README, GPU report). With
  `column_budget_s`, an entry whose timed calls have taken
  that many seconds in all is left out of the later rounds (it keeps at least one timed
  call): a baseline that needs minutes per call (torch-struct's projective CRF at n = 200 on a CPU)
  does not hold up the others for an hour.
  """
  first = {name: timed_call(call) for name, call in calls.items()}
  times = {name: [] for name in calls}
  names = list(calls)
  for round_index in range(repeats):
    order = list(names)
    random.Random(round_index).shuffle(order)
    for name in order:
      call = calls[name]
      if times[name] and column_budget_s is not None and sum(times[name]) >= column_budget_s:
        continue
      times[name].append(timed_call(call))
  return {name: (statistics.median(t), first[name], len(t)) for name, t in times.items()}


# ------------------------------------------------------------------------------------------------
# What a benchmark family gives `python -m launch.benchmark report` (launch/benchmarks/report.py).


@dataclasses.dataclass
class Table:
  """One table of the report.

  Attributes:
    title: one line saying what is measured (shapes, units, what the baselines are).
    rows: one dict per row, {column: float | int | str}; columns appear in first-seen order. Absolute
      times and the ratios to the baselines go side by side; '-' marks a cell with nothing to show,
      'not installed' a baseline whose package is missing.
    notes: lines printed under the table (goals with the measured value, provenance of references).
  """
  title: str
  rows: list[dict[str, Any]]
  notes: list[str] = dataclasses.field(default_factory=list)

  def columns(self) -> list[str]:
    columns = []
    for row in self.rows:
      columns += [c for c in row if c not in columns]
    return columns


class Budget:
  """Wall-clock budget of one report run, checked by the families between their units of work.

  A unit is a size, a group of variants, a part: whatever one family measures in one go (tens of
  seconds on the CPU at the default sizes). `exhausted()` is asked before each unit (`ReportRun.unit`,
  which records the units it skips).
  """

  def __init__(self, seconds: float, clock: Optional[Callable[[], float]] = None):
    """`seconds` from now by `clock` (default `time.monotonic`)."""
    if not seconds > 0:
      raise ValueError(f'--budget_s must be > 0 seconds, got {seconds}')
    self.seconds = float(seconds)
    self._clock = clock or time.monotonic
    self._start = self._clock()

  def elapsed(self) -> float:
    return self._clock() - self._start

  def left(self) -> float:
    return self.seconds - self.elapsed()

  def exhausted(self) -> bool:
    return self.left() <= 0


@dataclasses.dataclass
class ReportRun:
  """Settings a family's `report_tables(run)` reads.

  Attributes:
    quick: tiny sizes and models (the CPU smoke run of the report; compile-bound, minutes on a CPU).
    repeats: timed calls per measurement (after one warm-up / compile call).
    dtype: 'float32' (the goals' dtype) or 'float64'.
    budget: the shared `Budget` (ask `unit(...)` before each unit of work).
    skipped: the units `unit` said no to (e.g. 'trees 32x200'), listed in the report.
  """
  quick: bool
  repeats: int
  dtype: str
  budget: Budget
  skipped: list[str] = dataclasses.field(default_factory=list)

  def unit(self, what: str) -> bool:
    """True when there is budget left for the unit `what`; otherwise records it as skipped."""
    if self.budget.exhausted():
      self.skipped.append(what)
      return False
    return True

  def rows(self, family: str, sizes, run_size: Callable[[tuple], list]) -> list:
    """`run_size(size)`'s rows for each size whose unit '<family> AxBxC' the budget still allows."""
    rows = []
    for size in sizes:
      if self.unit(f'{family} ' + 'x'.join(map(str, size))):
        rows += run_size(tuple(size))
    return rows


def print_device(details: str) -> Any:
  """Prints the device line of a family's command-line run (`details`: its sizes); returns the device."""
  device = jax.devices()[0]
  print(f'device: {device} ({device.device_kind}, platform {device.platform}), dtype {DTYPE.value}, '
        f'{details}, {REPEATS.value} timed calls per measurement', flush=True)
  return device


@dataclasses.dataclass
class KernelProfile:
  """What one function runs per call, from a `jax.profiler` trace (`kernel_profile`).

  Attributes:
    source: the trace lines the kernels were read from (a GPU's streams, or the CPU's XLA threads).
    kernels_per_call: kernel (XLA op) launches per call.
    kernel_ms_per_call: their summed duration per call (on a GPU: device time; idle gaps between
      kernels, e.g. host round trips for a `lax.cond` predicate, are the difference to the wall time).
    wall_ms_per_call: wall time per call inside the trace (profiling overhead included).
    top: [(kernel name, ms per call, launches per call)], costliest first.
  """
  source: str
  kernels_per_call: float
  kernel_ms_per_call: float
  wall_ms_per_call: float
  top: list[tuple[str, float, float]]

  def format(self, name: str) -> str:
    lines = [f'{name}: {self.kernels_per_call:.0f} kernels per call, {self.kernel_ms_per_call:.3f} ms of '
             f'kernels vs {self.wall_ms_per_call:.3f} ms wall per call ({self.source})']
    lines += [f'    {ms:9.4f} ms  x{count:<6.0f} {kernel[:110]}' for kernel, ms, count in self.top]
    return '\n'.join(lines)


# Host-side bookkeeping events of XLA's CPU runtime that wrap kernels rather than being kernels.
_NOT_KERNELS = ('ThunkExecutor', 'ThreadpoolListener', 'end: ', 'PjRt', 'Execute', 'TfrtCpu')


def kernel_profile(call: Callable[[], Any], calls: int = 5, top: int = 12) -> KernelProfile:
  """Runs `call()` (compiled already) `calls` times under the JAX profiler and sums its kernels.

  Reads the trace in-process (`jax.profiler.ProfileData`): on a GPU the events of the device planes'
  stream lines, on the CPU those of XLA's thread-pool lines. Meant to say where a function's time
  goes and how many launches it makes (a host round trip per `lax.cond` / loop predicate shows as the
  gap between kernel time and wall time), not to replace the medians of `interleaved_medians`.
  """
  jax.block_until_ready(call())
  with tempfile.TemporaryDirectory() as folder:
    jax.profiler.start_trace(folder)
    start = time.perf_counter()
    for _ in range(calls):
      jax.block_until_ready(call())
    wall = (time.perf_counter() - start) / calls
    jax.profiler.stop_trace()
    paths = glob.glob(f'{folder}/**/*.xplane.pb', recursive=True)
    if not paths:
      raise RuntimeError(f'the JAX profiler wrote no trace under {folder}')
    data = jax.profiler.ProfileData.from_file(paths[0])
    device_lines, cpu_lines = [], []
    for plane in data.planes:
      lines = list(plane.lines)
      if plane.name.startswith('/device:'):
        # Kernels and copies per stream; else the "XLA Ops" summary line; else whatever is there.
        device_lines += ([l for l in lines if 'stream' in l.name.lower()]
                         or [l for l in lines if l.name == 'XLA Ops'] or lines)
      elif plane.name.startswith('/host:CPU'):
        cpu_lines += [l for l in lines if l.name.startswith('tf_XLA')]
    totals, counts = collections.Counter(), collections.Counter()
    for line in device_lines or cpu_lines:
      for event in line.events:
        if not event.name.startswith(_NOT_KERNELS):
          totals[event.name] += event.duration_ns
          counts[event.name] += 1
  ranked = [(name, ns / 1e6 / calls, counts[name] / calls) for name, ns in totals.most_common(top)]
  return KernelProfile(
      source='device streams' if device_lines else 'CPU XLA threads',
      kernels_per_call=sum(counts.values()) / calls,
      kernel_ms_per_call=sum(totals.values()) / 1e6 / calls,
      wall_ms_per_call=1e3 * wall,
      top=ranked)
