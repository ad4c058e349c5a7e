"""`python -m launch.benchmark mhs_rnn` at a tiny size (one model: compiling all five takes minutes on a
loaded 2-core box; `run` is the same loop over `MODELS`)."""
from launch.benchmarks import mhs_rnn


def test_benchmark_measures_a_training_step():
  seconds, rate = mhs_rnn.measure('mhs_rnn', {'attention': True}, 'encoder', 2, 24, 4, repeats=1)
  assert seconds > 0 and rate == 2 * 24 / seconds
  assert mhs_rnn.parse_sizes('8x50,2x3x4') == [(8, 50, 50), (2, 3, 4)]
