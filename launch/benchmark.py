r"""Runs one benchmark from launch/benchmarks/.

Usage:
  python -m launch.benchmark trees [--sizes=512x32,64x64,32x200] [--repeats=20] [--dtype=float32]
      [--memory]

The first positional argument names a module `launch.benchmarks.<name>`; its `main(argv)` runs under
`absl.app` (so flags shared by all benchmarks live in `launch/benchmarks/__init__.py`).
"""
import importlib
import pkgutil
import sys

import jax

from launch import _errors
from launch import benchmarks


def known_benchmarks():
  """Sorted names of the modules in launch/benchmarks/ (without private ones)."""
  return sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if not m.name.startswith('_'))


def load_benchmark(name):
  """Imports `launch.benchmarks.<name>`; raises ValueError listing the known names otherwise."""
  known = known_benchmarks()
  if name not in known:
    raise ValueError(f'unknown benchmark {name!r}; known benchmarks: {", ".join(known)} '
                     f'(modules in launch/benchmarks/)')
  return importlib.import_module(f'launch.benchmarks.{name}')


def _benchmark_name(argv):
  """The first positional argument of argv (flags start with '-'), or None."""
  for arg in argv[1:]:
    if arg == '--':
      continue
    if not arg.startswith('-'):
      return arg
  return None


def run(argv=None):
  argv = list(sys.argv if argv is None else argv)
  name = _benchmark_name(argv)
  if name is None:
    _errors.fail(f'usage: python -m launch.benchmark <name> [flags]; known benchmarks: '
                 f'{", ".join(known_benchmarks())}')
  try:
    module = load_benchmark(name)
  except ValueError as e:
    _errors.fail(str(e))
  # Compile columns time compiles: never load programs from a persistent cache that
  # $JAX_COMPILATION_CACHE_DIR would otherwise switch on (launch/_compilation_cache.py).
  jax.config.update('jax_enable_compilation_cache', False)
  _errors.run(module.main, argv=argv)


if __name__ == '__main__':
  run()
