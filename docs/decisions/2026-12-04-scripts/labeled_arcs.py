"""Labeled arcs (issue 60): the labeled functions beside the unlabeled ones of the same scores, on a CPU.

  taskset -c 1 python docs/decisions/2026-12-04-scripts/labeled_arcs.py [REPEATS] [SIZES]
SIZES: comma-separated BxN (default 512x32,64x64,32x200); L = 40 labels (a UD-like count), float32,
N(0, 1) labeled scores, full lengths. Unlabeled rows run on the label-summed scores (logsumexp over the
labels, the scores the labeled function hands them). Every pair is jitted (the 'flag' mode of the
matrix-tree functions, as inside a model); per pair: compile seconds, the median of REPEATS timed calls
(ms, after one warm-up call; the labeled and unlabeled calls alternate within each round) and the
compiled peak memory (XLA memory_analysis: arguments + outputs + temporaries, MiB; the labeled
arguments alone are L = 40 times the unlabeled ones) and its temporaries. Run from the repository root.
"""
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from jax_structured import trees

L = 40


def _pairs(projective):
  kw = dict(projective=True) if projective else {}
  lz = (lambda a, r: trees.labeled_log_partition(a, r, **kw).sum())
  uz = (lambda a, r: (trees.projective_log_partition if projective else trees.log_partition)(a, r).sum())
  return {
      'marginals': (lambda a, r: trees.labeled_marginals(a, r, **kw),
                    trees.projective_marginals if projective else trees.marginals),
      'log Z + grad': (jax.value_and_grad(lz, (0, 1)), jax.value_and_grad(uz, (0, 1))),
      'best tree': (lambda a, r: trees.labeled_mst(a, r, **kw),
                    trees.projective_mst if projective else trees.mst),
  }


def _peak_mib(compiled):
  """(arguments + outputs + temporaries, temporaries) in MiB."""
  analysis = compiled.memory_analysis()
  if analysis is None:
    return float('nan'), float('nan')
  temp = analysis.temp_size_in_bytes
  return (analysis.argument_size_in_bytes + analysis.output_size_in_bytes + temp) / 2 ** 20, temp / 2 ** 20


def _compile(fn, args):
  start = time.perf_counter()
  compiled = jax.jit(fn).lower(*args).compile()
  seconds = time.perf_counter() - start
  jax.block_until_ready(compiled(*args))  # warm-up
  return compiled, seconds


def main():
  repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
  sizes = sys.argv[2] if len(sys.argv) > 2 else '512x32,64x64,32x200'
  print(f'jax {jax.__version__}, {jax.devices()[0].platform}, L = {L}, {repeats} timed calls')
  print('| family | function | B x n | labeled compile s | unlabeled compile s | compile ratio | labeled ms '
        '| unlabeled ms | time ratio | labeled MiB | unlabeled MiB | memory ratio | labeled temp MiB '
        '| unlabeled temp MiB |')
  print('|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
  for size in sizes.split(','):
    b, n = (int(x) for x in size.split('x'))
    rng = np.random.default_rng(0)
    arc_l = jnp.asarray(rng.normal(size=(b, n, n, L)), jnp.float32)
    root_l = jnp.asarray(rng.normal(size=(b, n, L)), jnp.float32)
    arc_u, root_u = jax.nn.logsumexp(arc_l, -1), jax.nn.logsumexp(root_l, -1)
    for projective in (False, True):
      for name, (labeled, unlabeled) in _pairs(projective).items():
        lc, l_compile = _compile(labeled, (arc_l, root_l))
        uc, u_compile = _compile(unlabeled, (arc_u, root_u))
        times = {'l': [], 'u': []}
        for _ in range(repeats):
          for key, fn, args in (('l', lc, (arc_l, root_l)), ('u', uc, (arc_u, root_u))):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[key].append(time.perf_counter() - start)
        lt, ut = (1e3 * statistics.median(times[k]) for k in 'lu')
        (lm, ltemp), (um, utemp) = _peak_mib(lc), _peak_mib(uc)
        family = 'projective' if projective else 'non-projective'
        print(f'| {family} | {name} | {b} x {n} | {l_compile:.2f} | {u_compile:.2f} | '
              f'{l_compile / u_compile:.2f} | {lt:.1f} | {ut:.1f} | {lt / ut:.2f} | {lm:.1f} | {um:.1f} | '
              f'{lm / um:.2f} | {ltemp:.1f} | {utemp:.1f} |', flush=True)


if __name__ == '__main__':
  main()
