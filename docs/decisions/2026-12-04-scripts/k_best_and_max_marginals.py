"""k-best / max-marginal columns beside trees.mst (record 2026-12-04-k-best-and-max-marginals.md).

OPENBLAS_NUM_THREADS=1 taskset -c 1 python k_best_and_max_marginals.py 64x64,512x32,32x200 REPEATS

Times the benchmark's own programs (launch/benchmarks/trees.py: `_Programs().structured`, gated by
`structured_calls`) interleaved with `trees.mst`, and prints each column's median ms, its ratio to mst,
its first call and its compiled peak memory.
"""
import sys

import jax
from absl import flags
flags.FLAGS(['measure'])
from launch import benchmarks
from launch.benchmarks import trees as tb
sizes = tb.parse_sizes(sys.argv[1])
repeats = int(sys.argv[2])
programs = tb._Programs()
key = jax.random.key(0)
for batch, length in sizes:
  keys = jax.random.split(jax.random.fold_in(key, batch * 100003 + length), 4)
  arc = jax.random.normal(keys[0], (batch, length, length))
  root = jax.random.normal(keys[1], (batch, length))
  row = {}
  calls = {'mst': lambda: programs.mst(arc, root)}
  calls.update(tb.structured_calls(programs, arc, root, row))
  timings = benchmarks.interleaved_medians(calls, repeats, column_budget_s=tb.COLUMN_BUDGET_S)
  fns = dict(programs.structured, mst=programs.mst)
  mst_ms = 1e3 * timings['mst'][0]
  mst_mib = tb.peak_bytes(fns['mst'], (arc, root)) / 2**20
  print(f'== {batch}x{length} (repeats {repeats}); mst {mst_ms:.1f} ms, first call {timings["mst"][1]:.1f} s, '
        f'{mst_mib:.1f} MiB', flush=True)
  for column, (seconds, first, count) in timings.items():
    if column == 'mst':
      continue
    mib = tb.peak_bytes(fns[column], (arc, root)) / 2**20
    print(f'{batch}x{length} {column:15s} {1e3 * seconds:10.1f} ms  x{1e3 * seconds / mst_ms:7.1f} mst  '
          f'first call {first:6.1f} s  timed calls {count}  peak {mib:8.1f} MiB  x{mib / mst_mib:6.1f} mst', flush=True)
  for column, note in row.items():
    print(f'{batch}x{length} {column:15s} {note}', flush=True)
