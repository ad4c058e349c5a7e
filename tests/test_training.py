"""Training loop end to end on the tiny job: metrics, event files, evaluation, load_trained, variants."""
import json
import math
import os
import threading

import jax
import ml_collections
import numpy as np
import pytest

import test_training_support as support
from jax_structured import analysis
from jax_structured import config as config_lib
from jax_structured import training
from jax_structured import trees
from jax_structured.training import tasks


# --- tasks against numpy references -----------------------------------------------------------------

def _np_log_softmax(x):
  x = x - x.max(-1, keepdims=True)
  return x - np.log(np.exp(x).sum(-1, keepdims=True))


def test_classification_loss_and_metrics_match_numpy_under_jit():
  rng = np.random.default_rng(0)
  logits = rng.normal(size=(6, 3)).astype(np.float32)
  labels = np.asarray([0, 2, 1, 1, 0, 2], np.int32)
  mask = np.asarray([1, 1, 1, 1, 0, 0], np.float32)
  batch = {'label': labels, 'example_mask': mask}
  loss, metrics = jax.jit(tasks.Classification().loss_and_metrics)(logits, batch)
  nll = -_np_log_softmax(logits.astype(np.float64))[np.arange(6), labels]
  np.testing.assert_allclose(loss, (nll * mask).sum() / 4, rtol=1e-6)
  np.testing.assert_allclose(metrics['loss'][0], (nll * mask).sum(), rtol=1e-6)
  assert float(metrics['loss'][1]) == 4
  correct = ((logits.argmax(-1) == labels) * mask).sum()
  assert float(metrics['accuracy'][0]) == correct and float(metrics['accuracy'][1]) == 4


def test_lm_nll_and_perplexity_match_numpy():
  rng = np.random.default_rng(1)
  logits = rng.normal(size=(2, 5, 7)).astype(np.float32)
  targets = rng.integers(0, 7, size=(2, 5)).astype(np.int32)
  mask = np.asarray([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.float32)
  task = tasks.LanguageModel()
  loss, metrics = jax.jit(task.loss_and_metrics)(logits, {'targets': targets, 'mask': mask})
  nll = -np.take_along_axis(_np_log_softmax(logits.astype(np.float64)), targets[..., None], -1)[..., 0]
  total = (nll * mask).sum()
  np.testing.assert_allclose(loss, total / 8, rtol=1e-6)
  summary = task.summarize({k: (float(s), float(c)) for k, (s, c) in metrics.items()})
  np.testing.assert_allclose(summary['perplexity'], math.exp(total / 8), rtol=1e-6)
  # Without targets: next tokens of `tokens` over lengths - 1 positions.
  tokens = rng.integers(0, 7, size=(2, 6)).astype(np.int32)
  lengths = np.asarray([4, 6], np.int32)
  logits6 = rng.normal(size=(2, 6, 7)).astype(np.float32)
  loss2, m2 = task.loss_and_metrics(logits6, {'tokens': tokens, 'lengths': lengths})
  lp = _np_log_softmax(logits6.astype(np.float64))
  ref = [-lp[b, t, tokens[b, t + 1]] for b in range(2) for t in range(lengths[b] - 1)]
  np.testing.assert_allclose(loss2, np.mean(ref), rtol=1e-6)
  assert float(m2['nll'][1]) == 8
  # lm_loss='sequence': the same NLL summed per row, averaged over the rows that have targets (a
  # padding row does not count); 'nll' and the perplexity stay per token.
  config = config_lib.resolve(ml_collections.ConfigDict({'train': {'lm_loss': 'sequence'}}))
  row_task = tasks.LanguageModel(config)
  padded = {'targets': np.concatenate([targets, targets[:1]]),
            'mask': np.concatenate([mask, np.zeros((1, 5), np.float32)])}
  logits3 = np.concatenate([logits, logits[:1]])
  loss3, m3 = jax.jit(row_task.loss_and_metrics)(logits3, padded)
  np.testing.assert_allclose(loss3, total / 2, rtol=1e-6)
  assert float(m3['loss'][1]) == 2 and float(m3['nll'][1]) == 8
  grad_token = jax.grad(lambda x: task.loss_and_metrics(x, padded)[0])(logits3)
  grad_row = jax.grad(lambda x: row_task.loss_and_metrics(x, padded)[0])(logits3)
  np.testing.assert_allclose(grad_row, 4 * grad_token, rtol=1e-5, atol=1e-7)  # 8 tokens / 2 rows
  with pytest.raises(ValueError, match='config.train.lm_loss'):
    config_lib.resolve(ml_collections.ConfigDict({'train': {'lm_loss': 'words'}}))


def test_tree_uas_metrics_against_numpy():
  rng = np.random.default_rng(2)
  arc = rng.normal(size=(3, 5, 5)).astype(np.float32)
  root = rng.normal(size=(3, 5)).astype(np.float32)
  lengths = np.asarray([5, 3, 2], np.int32)
  gold = np.asarray([[-1, 0, 1, 2, 3], [1, -1, 1, -1, -1], [-1, 0, -1, -1, -1]], np.int32)
  mask = np.asarray([1, 1, 0], np.float32)
  inter = {'encoder': {'arc_scores': (arc,), 'root_scores': (root,), 'lengths': (lengths,)}}
  out = jax.jit(lambda i, b: tasks.tree_uas_metrics(i, b))(inter, {'heads': gold, 'example_mask': mask})
  pred = np.asarray(trees.mst(arc, root, lengths, single_root=True))
  real = (np.arange(5)[None] < lengths[:, None]) * mask[:, None]
  assert float(out['uas'][1]) == real.sum() == 8
  assert float(out['uas'][0]) == ((pred == gold) * real).sum()
  # Document layout: gold [B, S, T] against sown [B * S, T, T] -> 'sentence_uas'.
  inter = {'sentence_arc_scores': (arc,), 'sentence_root_scores': (root,), 'sentence_lengths': (lengths,)}
  out = tasks.tree_uas_metrics(inter, {'heads': gold.reshape(1, 3, 5), 'example_mask': np.ones(1)})
  assert float(out['sentence_uas'][1]) == lengths.sum()
  # Nothing sown or no gold heads: nothing reported.
  assert tasks.tree_uas_metrics({}, {'heads': gold}) == {}
  assert tasks.tree_uas_metrics(inter, {'label': np.zeros(1)}) == {}


def test_task_registry_errors():
  with pytest.raises(KeyError, match='unknown task'):
    tasks.get('no-such-task')

  @tasks.register('test_custom_task')
  class Custom(tasks.Task):
    dev_metric = 'uas'
    higher_is_better = True
  assert tasks.get('test_custom_task') is Custom
  with pytest.raises(ValueError, match='registered twice'):
    tasks.register('test_custom_task')(type('Other', (tasks.Task,), {}))


# --- the loop end to end ----------------------------------------------------------------------------

def test_train_and_evaluate_end_to_end(tmp_path):
  workdir = str(tmp_path / 'run')
  config = support.make_config(**{'train.num_epochs': 4, 'optimizer.name': 'adagrad',
                                  'optimizer.learning_rate': 0.3})
  results = training.train_and_evaluate(config, workdir)
  # 48 train examples / batch 8 = 6 steps per epoch.
  assert results['steps'] == 24 and results['epochs_completed'] == 4
  assert [h['step'] for h in results['history']] == [6, 12, 18, 24]
  # It learns: the tiny task is linearly separable by counts; chance is ~0.5.
  assert results['history'][0]['loss'] > results['history'][-1]['loss']
  assert results['validation']['accuracy'] >= 0.75
  assert 0 <= results['test']['uas'] <= 1
  best = max(results['history'], key=lambda h: h['accuracy'])
  assert results['best_step'] == best['step']
  assert results['validation']['accuracy'] == best['accuracy']
  on_disk = json.load(open(os.path.join(workdir, 'metrics.json')))
  assert on_disk['test'] == results['test']
  for name in ('config.json', 'config.py', 'vocab.json', 'labels.json', 'run.json', 'extras.json'):
    assert os.path.exists(os.path.join(workdir, name)), name
  # Event files: train loss / learning rate and dev metrics, readable as TensorBoard events.
  scalars = support.read_scalars(workdir)
  assert {'train/loss', 'train/learning_rate', 'dev/accuracy', 'final/test/accuracy'} <= set(scalars)
  assert [s for s, _ in scalars['dev/accuracy']] == [6, 12, 18, 24]
  np.testing.assert_allclose(scalars['train/learning_rate'][0][1], 0.3, rtol=1e-6)
  # evaluate() from the workdir alone reproduces the final test metrics and writes eval_test.json.
  evaluated = training.evaluate(workdir, 'test')
  assert evaluated['step'] == results['best_step']
  np.testing.assert_allclose(evaluated['accuracy'], results['test']['accuracy'])
  np.testing.assert_allclose(evaluated['loss'], results['test']['loss'], rtol=1e-6)
  assert json.load(open(os.path.join(workdir, 'eval_test.json')))['accuracy'] == evaluated['accuracy']
  # load_trained: model + variables + vocab + labels + extras; same logits as the evaluation.
  trained = training.load_trained(workdir)
  assert trained.label_names == ['negative', 'positive'] and len(trained.vocab) == 12
  assert trained.extras['tag_vocab'].tokens[2:] == ['NN', 'VB']
  assert trained.step == results['best_step']
  batch = next(support.tiny_sentences(config.data).splits['test'].batches(16, shuffle=False))
  logits = trained.model.apply(trained.variables, batch, train=False)
  acc = (np.asarray(logits).argmax(-1) == batch['label']).mean()
  np.testing.assert_allclose(acc, results['test']['accuracy'])
  latest = training.load_trained(workdir, 'latest')
  assert latest.step == 24


def test_variants_side_by_side(tmp_path):
  config = support.make_config(**{'train.num_steps': 3, 'train.eval_every_steps': 3})
  with config.unlocked():
    config.variants = {'small': {'model': {'dim': 4}},
                       'large': ml_collections.ConfigDict({'model.dim': 16, 'optimizer.learning_rate': 0.01},
                                                          allow_dotted_keys=True)}
  results = training.train_and_evaluate(config, str(tmp_path))
  assert set(results) == {'small', 'large'}
  comparison = json.load(open(tmp_path / 'comparison.json'))
  assert set(comparison) == {'small', 'large'}
  assert comparison['large']['test'] == results['large']['test']
  table = (tmp_path / 'comparison.md').read_text()
  assert '| small |' in table and '| large |' in table and 'test accuracy' in table
  saved = json.load(open(tmp_path / 'large' / 'config.json'))
  assert saved['model']['dim'] == 16 and not saved['variants']
  assert training.load_trained(str(tmp_path / 'small')).variables['params']['embed']['embedding'].shape == (12, 4)
  with config.unlocked():
    config.variants = {'bad': {'model': {'dimm': 3}}}
  with pytest.raises(KeyError, match=r'config.variants.bad: unknown config key config.model.dimm; did you mean config.model.dim'):
    training.train_and_evaluate(config, str(tmp_path / 'bad'))


def test_comparison_table_metrics():
  """`train.comparison_metrics` picks the table's columns (in that order, validation then test);
  a metric no variant reports gets no column; a variant without a metric gets an empty cell."""
  from jax_structured.training import comparison  # pylint: disable=g-import-not-at-top
  results = {'simple': {'validation': {'accuracy': 0.5, 'loss': 1.0, 'uas': 0.25},
                        'test': {'accuracy': 0.75, 'loss': 2.0, 'uas': 0.5}},
             'parser': {'validation': {'las': 0.9, 'uas': 0.95}, 'test': {'las': 0.8, 'uas': 1.0}}}
  every = comparison.comparison_table(results)
  assert every.splitlines()[0] == ('| variant | validation accuracy | validation loss | validation uas '
                                   '| validation las | test accuracy | test loss | test uas | test las |')
  picked = comparison.comparison_table(results, metrics=('uas', 'accuracy', 'bleu')).splitlines()
  assert picked[0] == ('| variant | validation uas | validation accuracy | test uas | test accuracy |')
  assert picked[2] == '| simple | 0.2500 | 0.5000 | 0.5000 | 0.7500 |'
  assert picked[3] == '| parser | 0.9500 |  | 1.0000 |  |'


def test_early_stopping_and_bad_labels(tmp_path):
  # A negligible lr -> the dev accuracy never improves after the first evaluation: the learning rate
  # halves after every later evaluation (plateau) and training stops after 1 + patience evaluations.
  config = support.make_config(**{'train.num_epochs': 10, 'train.eval_every_steps': 2,
                                  'train.early_stopping_patience': 2, 'optimizer.learning_rate': 1e-9,
                                  'optimizer.plateau_factor': 0.5})
  results = training.train_and_evaluate(config, str(tmp_path / 'es'))
  assert [h['step'] for h in results['history']] == [2, 4, 6]
  assert len({h['accuracy'] for h in results['history']}) == 1
  assert results['best_step'] == 2
  lrs = support.read_scalars(str(tmp_path / 'es'))['train/learning_rate']
  np.testing.assert_allclose([v for _, v in lrs], [1e-9, 1e-9, 5e-10], rtol=1e-5)
  bad = support.make_config(**{'data.label_offset': 1})
  with pytest.raises(ValueError, match=r'train epoch 0 batch 0: label 2 outside \[0, 2\)'):
    training.train_and_evaluate(bad, str(tmp_path / 'bad'))


def test_divergence_stops_before_saving(tmp_path):
  """A non-finite train loss stops the run with the steps named; the saved checkpoints stay finite."""
  workdir = str(tmp_path / 'run')
  # An absurd learning rate: step 1's update overflows the logits of step 2 (saved every step).
  config = support.make_config(**{'train.num_steps': 6, 'train.log_every_steps': 1,
                                  'train.checkpoint_every_steps': 1, 'optimizer.learning_rate': 1e30})
  threads_before = set(threading.enumerate())
  with pytest.raises(FloatingPointError, match=r'training diverged: train/loss = nan[^.]* over steps 2-2\. '
                                               r'Nothing after step 1 was saved') as raised:
    training.train_and_evaluate(config, workdir)
  assert training.load_trained(workdir, 'latest').step == 1
  # The failed run closed its event writer: step 1's loss is on disk, no writer thread is left.
  assert [s for s, _ in support.read_scalars(workdir)['train/loss']] == [1]
  assert not [t for t in set(threading.enumerate()) - threads_before
              if type(t).__module__.startswith('tensorboardX')]
  assert all(np.isfinite(x).all() for x in jax.tree.leaves(support.params_of(workdir, 'latest')))


def test_render_trees_hook(tmp_path):
  config = support.make_config(**{'train.num_steps': 2, 'train.render_trees': 2})
  with config.unlocked():
    config.variants = {'trees': {}, 'no_trees': {'model': {'sow_trees': False}}}
  with pytest.raises(ValueError, match=r'config.train.render_trees=2 draws induced trees after training, '
                                       r'which needs the analysis layer: pass induce_trees='):
    training.train_and_evaluate(config, str(tmp_path))  # before anything trains
  assert not os.path.exists(tmp_path / 'trees')
  results = training.train_and_evaluate(config, str(tmp_path), induce_trees=analysis.induce_trees)
  stats = results['trees']['induced_trees']
  assert 'skipped' not in stats and stats['step'] == results['trees']['best_step']
  assert json.load(open(tmp_path / 'trees' / 'metrics.json'))['induced_trees'] == stats
  # A variant whose model sows no tree scores has nothing to draw: recorded with the reason.
  assert 'skipped' in results['no_trees']['induced_trees']
  assert 'uas' not in results['no_trees']['test']
