"""configs/chen/sst.py: every Table 1 row builds and runs a step; the tiny option trains in-process; options."""
import importlib.util
import math
import pathlib

import pytest

from jax_structured import models
from jax_structured import training
from jax_structured import config as config_lib

CONFIG = pathlib.Path(__file__).resolve().parents[1] / 'configs' / 'chen' / 'sst.py'


def _module():
  spec = importlib.util.spec_from_file_location('chen_sst_config', CONFIG)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_every_row_builds_with_the_papers_settings():
  module = _module()
  config = module.get_config('')
  assert sorted(config.variants) == sorted(module.ROWS)
  assert config.data.binary_trees and config.data.batch_size == 50
  assert (config.optimizer.name, config.optimizer.learning_rate, config.optimizer.weight_decay) == (
      'adadelta', 0.05, 1e-4)
  assert config.model.dropout_rate == 0.5 and config.model.mlp_hidden == 0
  tiny = module.get_config('tiny,binary')
  assert tiny.data.config == 'binary'
  for name, overrides in tiny.variants.items():
    child = config_lib.with_overrides(tiny, config_lib.flatten(overrides.to_dict()))
    model = models.build(child.model, vocab_size=20, num_classes=2)
    assert type(model).__name__ == 'SentenceClassifier', name
    assert child.model.encoder.name == module.ROWS[name][0]['name']
  assert module.get_config('dcnn').variants.to_dict() == {}
  assert not config.data.train_phrases and module.get_config('dcnn,phrases').data.train_phrases
  for bad, message in (('trek', "unknown or repeated option 'trek'"),
                       ('dcnn,lstm', "unknown or repeated option 'lstm'"),
                       ('embeddings=', "unknown or repeated option 'embeddings='.*embeddings=VALUE")):
    with pytest.raises(ValueError, match=message):
      module.get_config(bad)


@pytest.mark.parametrize('row', ['ap_dcnn_phrases', 'tree_lstm'])  # max-norm + phrases; phrases
def test_tiny_config_trains(fixtures_dir, tmp_path, row):
  config = _module().get_config(f'tiny,{row}')
  config.data.manual_dir = str(fixtures_dir / 'sst')
  config.data.data_dir = str(tmp_path / 'tfds')
  config.data.bucket_boundaries = ()  # one padded shape per split: one compile
  config.parallel = 'none'
  config.train.num_steps = 3
  config.train.eval_every_steps = 3
  config.train.log_every_steps = 3
  results = training.train_and_evaluate(config, str(tmp_path / 'workdir'))
  assert results['steps'] == 3
  for split in ('validation', 'test'):
    assert math.isfinite(results[split]['loss']) and 0.0 <= results[split]['accuracy'] <= 1.0


@pytest.mark.slow  # a benchmark run of every column; the tiny configs train quick
def test_tree_lstm_benchmark_measures_every_column(monkeypatch):
  from launch.benchmarks import tree_lstm as bench  # pylint: disable=g-import-not-at-top
  assert bench.parse_sizes('50x32,8x16x64') == [(50, 32, 150), (8, 16, 64)]
  with pytest.raises(ValueError, match="'8x1'"):
    bench.parse_sizes('8x1')
  monkeypatch.setattr(bench, 'VOCAB_SIZE', 30)
  monkeypatch.setattr(bench, 'EMBEDDING_DIM', 4)
  row = bench.measure(2, 2, 3, repeats=1)  # sentences of 2 words: one length for the loop to compile
  for phase in ('infer', 'train'):
    for name in ('tree-LSTM', 'BiLSTM', 'one-at-a-time'):
      assert math.isfinite(row[f'{name} {phase} sent/s']) and row[f'{name} {phase} sent/s'] > 0
    assert row[f'batched/loop {phase}'] == pytest.approx(
        row[f'tree-LSTM {phase} sent/s'] / row[f'one-at-a-time {phase} sent/s'])
  assert 'batched/loop' in bench.format_table([row])
