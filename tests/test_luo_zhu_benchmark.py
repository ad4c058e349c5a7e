"""`python -m launch.benchmark mhs_rnn` at a tiny size (one model, the MHS-RNN cell without attention:
compiling all five takes minutes on a loaded 2-core box; `run` is the same loop over `MODELS`)."""
import pytest

from launch.benchmarks import mhs_rnn


def test_benchmark_measures_a_training_step():
  seconds, rate = mhs_rnn.measure('mhs_rnn', {'attention': False}, 'encoder', 2, 12, 3, repeats=1)
  assert seconds > 0 and rate == 2 * 12 / seconds
  assert mhs_rnn.parse_sizes('8x50,2x3x4') == [(8, 50, 50), (2, 3, 4)]
  with pytest.raises(ValueError, match="'8x0'"):
    mhs_rnn.parse_sizes('8x0')
