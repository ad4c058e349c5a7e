"""The TensorFlow-free event writer: a session started in the same second of the same process (a run
resumed at once) writes a second file and never truncates the first session's events."""
import time

from jax_structured.training import event_writer
from jax_structured.training import metrics


def test_two_sessions_in_one_second_of_one_process_keep_both_histories(tmp_path, monkeypatch):
  monkeypatch.setattr(time, 'time', lambda: 1_700_000_000.25)
  first = event_writer.SummaryWriter(str(tmp_path))
  first.write_scalars(3, {'train/loss': 0.5})
  first.close()
  second = event_writer.SummaryWriter(str(tmp_path), purge_step=5)
  second.write_scalars(6, {'train/loss': 0.25})
  second.close()
  names = sorted(p.name for p in tmp_path.iterdir())
  assert len(names) == 2 and names[1] == names[0] + '.1'
  steps = [(e.step, v.tag) for e in metrics.read_events(str(tmp_path)) for v in e.summary.value]
  assert steps == [(3, 'train/loss'), (6, 'train/loss')]
