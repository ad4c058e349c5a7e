"""launch/_fast_compile.py: the compile settings of the suite and of `report --quick`."""
import os

import jax
import pytest

from launch import _fast_compile


def test_the_suite_runs_with_the_fast_settings():
  """conftest.py applied them before the first JAX op (this XLA build knows the flag)."""
  assert jax.config.read('jax_disable_most_optimizations')
  assert os.environ['JAX_DISABLE_MOST_OPTIMIZATIONS'] == 'true'  # the launchers tests start inherit it
  assert '--xla_cpu_use_fusion_emitters=false' in os.environ.get('XLA_FLAGS', '').split()


def test_an_unknown_xla_flag_is_left_out_not_fatal():
  """XLA aborts on a flag it does not know: the probe in a child process says no instead."""
  assert not _fast_compile._flags_work('--xla_cpu_no_such_flag_in_any_build=true')
  assert _fast_compile._flags_work(' '.join(_fast_compile.FAST_CPU_FLAGS))


def test_too_late_is_an_error():
  jax.numpy.zeros(1).block_until_ready()
  with pytest.raises(RuntimeError, match='before the first JAX operation'):
    _fast_compile.use_fast_cpu_compiles()
