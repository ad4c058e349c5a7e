"""What a training run tells its user: the console, the progress line, out-of-memory errors, and the
training figures of metrics.json."""
import json
import os
import pathlib
import re
import subprocess
import sys

import jax
import pytest

import test_training_support as support
from jax_structured import training
from jax_structured.training import metrics as metrics_lib
from jax_structured.training import parallel

OOM = 'RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1073741824 bytes.'


def test_progress_line_shows_this_steps_dev_metric(tmp_path, capsys):
  config = support.make_config(**{'train.num_steps': 4, 'train.eval_every_steps': 2,
                                  'train.log_every_steps': 2})
  results = training.train_and_evaluate(config, str(tmp_path / 'run'))
  lines = capsys.readouterr().out.splitlines()
  progress = {int(m.group(1)): line for line in lines if (m := re.match(r'step (\d+)/4 ', line))}
  assert sorted(progress) == [2, 4]
  for h in results['history']:  # the evaluation of that very step, not the previous one
    assert f'dev accuracy {h["accuracy"]:.4f} (step {h["step"]})' in progress[h['step']]
    assert any(line.startswith(f'step {h["step"]}: dev accuracy {h["accuracy"]:.4f}') for line in lines)
  # Step 2's interval compiled the eval step: said, and left out of steps/s.
  assert 'compiling steps for new batch shapes' in progress[2]


def test_progress_rate_leaves_out_compilation():
  compiled = [0.0]
  writer = type('W', (), {'write_scalars': lambda self, step, scalars: written.append(scalars)})()
  written = []
  report = metrics_lib.ProgressReport(num_train_steps=12, writer=writer, every_steps=2,
                                      compile_seconds=lambda: compiled[0])
  compiled[0] = 3.0  # before the first call (the first step's compilation): never counted
  assert not report(1, t=0.0)
  compiled[0] = 7.0  # 4 s compiling a new batch shape during steps 2
  assert report(2, t=5.0)
  assert written[-1]['steps_per_sec'] == pytest.approx(1.0)  # 1 step in 5 - 4 s
  assert not report(3, t=5.5)
  assert report(4, t=6.0)
  assert written[-1]['steps_per_sec'] == pytest.approx(2.0)


def test_runner_counts_compilation_once_per_batch_shape():
  batches = support.global_batches(3)  # one shape: compiled by the first train and the eval call
  state, _, _, runner = support.run_steps('none', batches, {})
  first = runner.compile_seconds
  assert first > 0 and len(runner._compiled) == 2  # pylint: disable=protected-access
  runner.evaluate(runner.place(state), runner.shard_batch(batches[1]))
  assert runner.compile_seconds == first
  runner.evaluate(runner.place(state), runner.shard_batch({k: v[:8] for k, v in batches[1].items()}))
  assert runner.compile_seconds > first  # a new batch shape


def test_rerunning_a_finished_workdir_keeps_the_training_figures(tmp_path):
  workdir = str(tmp_path / 'run')
  config = support.make_config(**{'train.num_steps': 3})
  first = training.train_and_evaluate(config, workdir)
  assert first['train_seconds'] > 0 and first['steps_per_second'] > 0
  again = training.train_and_evaluate(config, workdir)  # nothing left to train
  on_disk = json.load(open(os.path.join(workdir, 'metrics.json')))
  for key in ('train_seconds', 'steps_per_second', 'steps', 'test'):
    assert again[key] == first[key] == on_disk[key], key
  # A workdir whose checkpoints predate the saved training time keeps metrics.json's figures.
  meta = os.path.join(workdir, 'checkpoints', '3', 'meta', 'metadata')
  saved = json.load(open(meta))
  del saved['loop']['train_seconds']
  json.dump(saved, open(meta, 'w'))
  assert training.train_and_evaluate(config, workdir)['train_seconds'] == first['train_seconds']


def _raise_at(call, error):
  count = [0]

  def wrapped(original):
    def fn(*args, **kwargs):
      count[0] += 1
      if count[0] == call:
        raise error
      return original(*args, **kwargs)
    return fn
  return wrapped


@pytest.mark.parametrize('where, target, call, message', [
    ('train step', (parallel.Runner, 'start_train'), 2, r'in the train step 2; its batch: tokens \[8, 6\]'),
    ('deferred', (metrics_lib.Accumulator, 'add'), 1, r'in the train steps 1-2; its batch: tokens \[8, 6\]'),
    ('eval', (parallel.Runner, 'evaluate'), 1,
     r'in the evaluation of validation batch 0; its batch: tokens \[8, 6\].*train.eval_batch_size=0'),
])
def test_out_of_memory_names_the_batch_shape_and_the_config_keys(tmp_path, monkeypatch, where, target,
                                                                  call, message):
  del where
  owner, name = target
  monkeypatch.setattr(owner, name, _raise_at(call, jax.errors.JaxRuntimeError(OOM))(getattr(owner, name)))
  config = support.make_config(**{'train.num_steps': 4, 'train.eval_every_steps': 2})
  with pytest.raises(training.DeviceMemoryError, match=message) as info:
    training.train_and_evaluate(config, str(tmp_path / 'run'))
  text = str(info.value)
  assert 'XLA RESOURCE_EXHAUSTED' in text and 'data.batch_size=8' in text and OOM in text


def test_other_device_errors_pass_through(tmp_path, monkeypatch):
  error = jax.errors.JaxRuntimeError('INTERNAL: something else')
  monkeypatch.setattr(parallel.Runner, 'start_train', _raise_at(1, error)(parallel.Runner.start_train))
  with pytest.raises(jax.errors.JaxRuntimeError, match='INTERNAL: something else'):
    training.train_and_evaluate(support.make_config(**{'train.num_steps': 2}), str(tmp_path / 'run'))


_TINY_JOB = '''
import sys
from absl import app


def main(argv):
  sys.path.insert(0, argv[1])  # tests/: the tiny data set and model register themselves
  import test_training_support as support
  from jax_structured import analysis, training
  config = support.make_config(**{'train.num_steps': 2, 'train.eval_every_steps': 2,
                                  'train.log_every_steps': 1, 'train.render_trees': 1})
  training.train_and_evaluate(config, argv[2], induce_trees=analysis.induce_trees)


app.run(main)
'''


def test_the_console_shows_our_progress_not_library_noise(tmp_path):
  """A run under absl (as `launch.train`): no Orbax / clu / jax INFO lines, no harmless warnings (the
  trees drawn after training restore the checkpoint read-only), no terminal control codes; our
  progress and results are there. (Before: ~150 log lines per run of the default job.)"""
  repo = pathlib.Path(__file__).resolve().parents[1]
  script = tmp_path / 'job.py'
  script.write_text(_TINY_JOB)
  proc = subprocess.run([sys.executable, str(script), str(repo / 'tests'), str(tmp_path / 'run')],
                        cwd=repo, capture_output=True, text=True, timeout=600, check=False,
                        env={**os.environ, 'JAX_PLATFORMS': 'cpu'})
  assert proc.returncode == 0, proc.stderr[-3000:]
  log_lines = [line for line in proc.stderr.splitlines() if line.strip()]
  assert not log_lines, '\n'.join(log_lines[:20])
  for stream in (proc.stdout, proc.stderr):
    assert '\x1b[' not in stream and '\r' not in stream
  assert re.search(r'^step 2/2 \(100\.0%\), .* dev accuracy', proc.stdout, re.M), proc.stdout
  assert os.path.exists(tmp_path / 'run' / 'trees_test' / 'sentence' / 'index.html')


def test_building_a_local_dataset_prints_no_download_banner_nor_progress_bars(tmp_path, fixtures_dir,
                                                                               capfd):
  """TFDS's 'Downloading and preparing dataset Unknown size' banner and its tqdm bars (control codes
  in log files) are replaced by one log line each way; a log file is not a terminal."""
  from jax_structured.data import builders  # pylint: disable=g-import-not-at-top
  builders.builder('sst', manual_dir=fixtures_dir / 'sst', data_dir=tmp_path / 'tfds')
  out, err = capfd.readouterr()
  assert 'Downloading and preparing' not in out + err and 'Subsequent calls' not in out + err
  assert '\r' not in out + err and '\x1b[' not in out + err


def test_word2vec_and_tfds_builder_chatter_stay_off_the_console():
  """gensim logs ~20 INFO lines per word2vec training (vocabulary, lifecycle events, every epoch),
  which absl's handler printed in every `data.embeddings='word2vec'` run; its warnings still show.
  TFDS's harmless 'Using custom data configuration' warning is dropped too."""
  import logging as std_logging  # pylint: disable=g-import-not-at-top
  import gensim  # pylint: disable=g-import-not-at-top
  from absl import logging  # pylint: disable=g-import-not-at-top
  metrics_lib.quiet_library_logs()
  inside = os.path.join(os.path.dirname(gensim.__file__), 'models', 'word2vec.py')
  record = lambda level: std_logging.LogRecord('gensim.models.word2vec', level, inside, 1,
                                               'EPOCH 0: training on 56042 raw words', None, None)
  handler = logging.get_absl_handler()
  assert not handler.filter(record(std_logging.INFO))
  assert handler.filter(record(std_logging.WARNING))
  # TFDS warns on every build of a builder given a BuilderConfig object (the UD loader's en_ewt).
  import tensorflow_datasets  # pylint: disable=g-import-not-at-top
  tfds_file = os.path.join(os.path.dirname(tensorflow_datasets.__file__), 'core', 'dataset_builder.py')
  custom = std_logging.LogRecord('absl', std_logging.WARNING, tfds_file, 1,
                                 'Using custom data configuration: %s', ('en_ewt',), None)
  assert not handler.filter(custom)
