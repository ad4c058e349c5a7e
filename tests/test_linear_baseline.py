"""The linear baseline of the encoder comparison (training/linear_baseline.py) and its comparison row.

TF-IDF n-grams + logistic regression tuned on dev: sensible accuracy on real TREC questions (far above
the majority class), the pair features see what the two texts share, and a one-row run of
configs/encoders/compare.py writes comparison.md / .json with its row beside the baseline's (and says
when the step cap stopped a run whose dev accuracy was still improving).
"""
import json
import os
import pathlib

import numpy as np
import pytest

from jax_structured import config as config_lib
from jax_structured import data
from jax_structured.data import core
from jax_structured.data.loaders import options
from jax_structured.training import linear_baseline
from jax_structured.training import trainer

REPO = pathlib.Path(__file__).resolve().parents[1]
TREC = REPO.parent / 'shared' / 'data' / 'trec'
needs_trec = pytest.mark.skipif(not (TREC / 'train_5500.label').exists(),
                                reason=f'the TREC files are not in {TREC} (../shared/data/trec)')


@pytest.fixture(scope='module')
def trec():
  config = options.default_config('trec')
  config.update({'manual_dir': str(TREC), 'validation_fraction': 500 / 5452})
  return data.load(config)


@needs_trec
def test_trec_accuracy_is_far_above_the_majority_class(trec):
  results = linear_baseline.fit(trec)
  test_labels = np.asarray([e['label'] for e in trec.splits['test'].examples])
  majority = np.bincount(test_labels).max() / len(test_labels)
  assert majority < 0.3 and results['test']['accuracy'] > max(0.8, majority + 0.5), (majority, results['test'])
  chosen = results['linear_baseline']
  assert len(chosen['grid']) == len(linear_baseline.FEATURES) * len(linear_baseline.C_VALUES)
  best = max(g['validation_accuracy'] for g in chosen['grid'])
  assert results['validation']['accuracy'] == best
  assert results['steps_per_second'] is None and results['inference_examples_per_second'] > 0
  assert results['num_parameters'] % (trec.num_classes) == 0 and results['train_seconds'] < 60


def test_pair_features_see_what_the_texts_share():
  """Label: does the hypothesis repeat the premise's word? [p; h] alone cannot tell (each text is
  scored on its own); p * h can."""
  rng = np.random.default_rng(0)
  words = [f'w{i}' for i in range(30)]

  def split(name, n):
    pairs, examples = [], []
    for _ in range(n):
      p = rng.choice(words)
      same = rng.random() < 0.5
      h = p if same else rng.choice([w for w in words if w != p])
      pairs.append(([p, 'is', 'here'], [h, 'is', 'there']))
      examples.append({'premise': np.zeros(3, np.int32), 'hypothesis': np.zeros(3, np.int32),
                       'label': int(same)})
    return core.Split(name, 'pair', examples, words=pairs)

  task = core.TaskData('pair', core.Vocabulary([]), ['different', 'same'],
                       {s: split(s, n) for s, n in (('train', 400), ('validation', 100), ('test', 100))})
  results = linear_baseline.fit(task)
  assert results['test']['accuracy'] > 0.9, results['linear_baseline']['grid']
  assert results['linear_baseline']['pair_features'] == '[p; h; p * h; |p - h|]'


def test_applies_says_why_not():
  train = core.Split('train', 'sentence', [{'tokens': np.ones(2), 'label': 0}])
  task = core.TaskData('sentence', core.Vocabulary([]), ['a', 'b'], {'train': train})
  assert linear_baseline.applies(task) == 'the train split keeps no words (data.Split.words)'
  train.words = [['a', 'b']]
  assert 'validation split' in linear_baseline.applies(task)
  task.kind = 'lm'
  assert 'lm' in linear_baseline.applies(task)


@pytest.mark.slow  # a comparison run end to end; the baseline's accuracy is checked quick
@needs_trec
def test_one_row_comparison_run_writes_its_row_and_the_baseline(tmp_path, monkeypatch, capsys):
  from configs.encoders import compare  # pylint: disable=g-import-not-at-top
  monkeypatch.chdir(REPO)
  config = compare.get_config('bow,tiny')
  assert config.train.linear_baseline and not config.variants
  results = trainer.train_and_evaluate(config, str(tmp_path))
  table = (tmp_path / 'comparison.md').read_text()
  lines = table.splitlines()
  assert lines[0].startswith('| variant | validation accuracy |') and 'inference examples/s' in lines[0]
  assert lines[2].startswith('| bow |') and lines[3].startswith('| linear_baseline |')
  assert lines[3].split('|')[-3].strip() == ''  # train steps/s: blank for the baseline
  assert 'linear_baseline: TF-IDF' in table
  comparison = json.load(open(tmp_path / 'comparison.json'))
  assert set(comparison) == {'bow', 'linear_baseline'}
  assert comparison['bow']['test'] == results['test']
  assert comparison['linear_baseline']['test']['accuracy'] > 0.8
  assert comparison['linear_baseline']['steps_per_second'] is None
  # 30 steps (tiny), one evaluation, the best: the cap stopped a run still improving.
  assert 'stopped at the cap train.num_steps=30 (step 30) while dev accuracy was still improving' in (
      capsys.readouterr().out)
  saved = json.load(open(tmp_path / 'config.json'))
  assert saved['data']['embedding_dim'] == saved['model']['embedding_dim'] == 16


def test_linear_baseline_is_a_train_key_off_by_default():
  assert config_lib.TRAIN_DEFAULTS['linear_baseline'] is False


def test_a_loader_without_vectors_gets_no_baseline_and_no_error():
  """configs/default.py's synthetic data has no `embeddings` key (nor words): the comparison still
  finishes, the console saying why there is no baseline row (the default job ended with rc 2 before)."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  from jax_structured.training import comparison  # pylint: disable=g-import-not-at-top
  path = pathlib.Path(__file__).resolve().parents[1] / 'configs' / 'default.py'
  spec = importlib.util.spec_from_file_location('default_config', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config()
  config.data.update({'num_train': 200, 'num_dev': 40, 'num_test': 40})
  assert 'embeddings' not in config.data
  assert comparison.linear_baseline_row(config_lib.resolve(config)) is None
