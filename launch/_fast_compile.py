"""Faster XLA:CPU compiles for runs whose numbers do not matter: the test suite and `report --quick`.

Both are compile-bound on the CPU (a test compiles its program once and runs it once or twice; the
quick report's tiny sizes run in microseconds). Two settings cut what XLA:CPU spends per program:

* `jax_disable_most_optimizations`: LLVM at -O0 without its expensive passes (HLO optimisations stay).
* `--xla_cpu_use_fusion_emitters=false`: fusions are emitted by XLA's older elemental IR emitter
  instead of the MLIR fusion emitters, which at -O0 are most of the compile time. Measured
  (`jax.jit(...).lower(...).compile()`, CPU seconds, one core, -O0): `trees.marginals` at 4 x 8
  1.29 -> 0.44 s, its value + gradient through a loss 2.87 -> 1.92 s, the tiny EWT parser's first
  train step 8.8 -> 5.1 s, with the same run time of the compiled programs (4.4 vs 4.6 ms a step).
  With optimisations on it gains nothing (parser 14.6 -> 14.2 s), so it is only set with -O0.

The XLA flag must reach `XLA_FLAGS` before JAX starts its backend, and an XLA build that does not know
it aborts the process; so it is first tried in a child process, and left out (compiles are then
slower, results the same) where that child fails. Production runs never call this.
"""
from __future__ import annotations

import os
import subprocess
import sys

FAST_CPU_FLAGS = ('--xla_cpu_use_fusion_emitters=false',)


def _flags_work(flags: str) -> bool:
  """Whether a fresh interpreter starts JAX's CPU backend with `XLA_FLAGS=flags`."""
  env = dict(os.environ, XLA_FLAGS=flags, JAX_PLATFORMS='cpu')
  try:
    probe = subprocess.run([sys.executable, '-c', 'import jax; jax.devices("cpu")'], env=env,
                           capture_output=True, timeout=120, check=False)
  except (OSError, subprocess.TimeoutExpired):
    return False
  return probe.returncode == 0


def use_fast_cpu_compiles() -> list[str]:
  """Sets both settings for this process and, through the environment, for the processes it starts
  (a test's `python -m launch.train ...` compiles like the suite); call before any JAX op.

  Returns:
    the XLA flags now in effect among `FAST_CPU_FLAGS` (empty where this XLA build lacks them).

  Raises:
    RuntimeError: JAX's backend is already running (the XLA flag would be silently ignored).
  """
  import jax  # pylint: disable=g-import-not-at-top
  from jax._src import xla_bridge  # pylint: disable=g-import-not-at-top
  if xla_bridge.backends_are_initialized():
    raise RuntimeError('use_fast_cpu_compiles() must run before the first JAX operation: XLA read '
                       'XLA_FLAGS when its backend started')
  jax.config.update('jax_disable_most_optimizations', True)
  os.environ['JAX_DISABLE_MOST_OPTIMIZATIONS'] = 'true'  # for the processes it starts, as XLA_FLAGS
  current = os.environ.get('XLA_FLAGS', '')
  missing = [flag for flag in FAST_CPU_FLAGS if flag.split('=')[0] not in current]
  if missing:
    candidate = ' '.join([current, *missing]).strip()
    if _flags_work(candidate):
      os.environ['XLA_FLAGS'] = candidate
  current = os.environ.get('XLA_FLAGS', '')
  return [flag for flag in FAST_CPU_FLAGS if flag in current.split()]
