"""`python -m launch.benchmark mhs_rnn` at a tiny size: every model trains a step and the table prints."""
from launch.benchmarks import mhs_rnn


def test_benchmark_rows_and_table():
  rows = mhs_rnn.run([(2, 24, 4)], repeats=1)
  assert len(rows) == 1
  for name, *_ in mhs_rnn.MODELS:
    assert rows[0][f'{name} tok/s'] > 0
  assert rows[0]['MHS-RNN/LSTM'] > 0
  assert 'MHS-RNN+att tok/s' in mhs_rnn.format_table(rows)
  assert mhs_rnn.parse_sizes('8x50,2x3x4') == [(8, 50, 50), (2, 3, 4)]
