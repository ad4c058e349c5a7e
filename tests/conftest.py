"""Test-wide JAX settings: 8 simulated CPU devices, fast compiles, float64 available."""
import contextlib
import os
import pathlib
import shutil
import sys
import tempfile

# Batched LU / triangular solves on a small CPU box run far faster single-threaded (OpenBLAS threads
# otherwise contend with XLA's and pytest-xdist's); must be set before the BLAS library loads.
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')
# One persistent compilation cache for the run (launch/_compilation_cache.py): this process, the
# pytest-xdist workers and the launched `python -m launch.*` children load a program another of them
# compiled; never the user's ~/.cache (the suite compiles at -O0). Within one module it gains nothing
# measurable (tests/test_relation_networks.py -n 2: 67.5 CPU s with it, 65.6 s without; only 9 of
# its programs compile in over a second at -O0); its point is that the children run as users do.
# The process that creates it (the xdist controller, or a plain run) removes it at the end.
_SUITE_CACHE_VARIABLE = 'JAX_STRUCTURED_SUITE_COMPILATION_CACHE'
_OWNS_SUITE_CACHE = _SUITE_CACHE_VARIABLE not in os.environ
if _OWNS_SUITE_CACHE:
  os.environ[_SUITE_CACHE_VARIABLE] = tempfile.mkdtemp(prefix='jax_structured_suite_xla_')
os.environ['JAX_COMPILATION_CACHE_DIR'] = os.environ[_SUITE_CACHE_VARIABLE]
# Capped, so that JAX locks every read and write (filelock): concurrent workers never read a half-written
# entry.
os.environ['JAX_COMPILATION_CACHE_MAX_SIZE'] = str(8 * 2**30)

import jax  # noqa: E402

from launch import _fast_compile  # noqa: E402

# Must happen before any JAX operation (multi-device tests rely on 8 CPU devices). The suite is
# compile-bound: LLVM at -O0 and XLA's older fusion emitter (launch/_fast_compile.py).
jax.config.update('jax_num_cpu_devices', 8)
_fast_compile.use_fast_cpu_compiles()
jax.config.update('jax_enable_x64', True)

import pytest  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))  # for tests/brute_force.py

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / 'shared' / 'data'
FIXTURES = pathlib.Path(__file__).resolve().parent / 'fixtures'


@pytest.fixture
def shared_data():
  """Path of ../shared/data; skips (with the reason) in a user's clone without it."""
  if not SHARED_DATA.is_dir():
    pytest.skip(f'real datasets not present: {SHARED_DATA} is missing (only CI and dev machines have it)')
  return SHARED_DATA


@pytest.fixture
def fixtures_dir():
  return FIXTURES


# A worker clears JAX's caches after a test module once its resident memory passes this: kept
# caches let later modules reuse traces (the exact path of `trees.marginals` is traced once per
# chunk shape, not once per program), cleared ones bound the memory of a long-lived worker.
_CLEAR_CACHES_ABOVE_BYTES = 3 * 2**30
# Or over this many memory mappings: XLA's CPU maps every compiled program's kernels separately
# (a `trees.mst` program: ~320 mappings), and Linux's default vm.max_map_count is 65,530, past which
# the next compile fails with "LLVM compilation error: Cannot allocate memory" (seen in an ad-hoc
# script that compiled ~200 mst programs in one process at 2.3 GB resident).
_CLEAR_CACHES_ABOVE_MAPPINGS = 30_000


def _resident_bytes():
  try:
    with open('/proc/self/statm') as f:
      return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')
  except (OSError, ValueError, IndexError):
    return None  # not Linux: always clear


def _memory_mappings():
  try:
    with open('/proc/self/maps') as f:
      return sum(1 for _ in f)
  except OSError:
    return None


@contextlib.contextmanager
def _trees_exact_mode(mode):
  """`trees.exact_mode(mode)` inside. JAX's caches are cleared on the way in and out: the mode is read
  when a function is traced, and `jax.jit(trees.marginals)` in two modules shares one trace cache."""
  from jax_structured import trees  # pylint: disable=g-import-not-at-top
  jax.clear_caches()
  try:
    with trees.exact_mode(mode):
      yield
  finally:
    jax.clear_caches()


@pytest.fixture(scope='module')
def in_program_exact():
  """The exact path inside the traced programs (`trees.exact_mode('in_program')`) for a whole module
  (`pytestmark = pytest.mark.usefixtures('in_program_exact')`): the modules that test the exact path
  through jitted functions."""
  with _trees_exact_mode('in_program'):
    yield


@pytest.fixture
def lu_path_only():
  """One test of an `in_program_exact` module with the LU path only ('flag'): for checks on scores that
  never take the exact path (NaN would show if one did), where it only adds compile time."""
  with _trees_exact_mode('flag'):
    yield


@pytest.fixture(autouse=True, scope='module')
def _drop_compiled_programs():
  """Frees JAX's compilation caches after a test module when the worker holds over 3 GiB (or maps).

  One xdist worker runs hundreds of tests; without this, every program it compiled stays cached
  (host memory of a long-lived worker grows with the suite, on a 24 GiB CI box).
  """
  yield
  resident, mappings = _resident_bytes(), _memory_mappings()
  if (resident is None or resident > _CLEAR_CACHES_ABOVE_BYTES
      or mappings is None or mappings > _CLEAR_CACHES_ABOVE_MAPPINGS):
    jax.clear_caches()


def pytest_sessionfinish(session, exitstatus):  # pylint: disable=unused-argument
  """Removes the run's compilation cache in the process that created it."""
  if _OWNS_SUITE_CACHE:
    shutil.rmtree(os.environ[_SUITE_CACHE_VARIABLE], ignore_errors=True)
