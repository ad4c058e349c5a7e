"""The baseline a practitioner tries first, beside every encoder comparison: TF-IDF + logistic regression.

`fit(task_data)` trains it on a sentence or pair classification task's train split (the words the
loader tokenised, `data.Split.words`: rare words intact, not the vocabulary ids) and reports like a
training run (`train_and_evaluate`'s results): dev and test accuracy and loss (mean NLL), the number of
parameters, blank training steps/s and the measured inference examples/s; the encoder comparison
(`comparison.train_variants`, and single runs with `config.train.linear_baseline`) puts it in
comparison.md / comparison.json as the row `linear_baseline`.

Features: TF-IDF (sublinear tf) of word 1-2-grams, or of word 1-2-grams and character 2-5-grams
within word boundaries (`char_wb`); classifier: L2-regularised multinomial logistic regression
(scikit-learn). Tuned on dev as a practitioner would: every (features, C) of `FEATURES` x `C_VALUES` is
fitted on train and the best dev accuracy wins (ties: the earlier entry, the simpler features and the
stronger regularisation).

Pairs (premise p, hypothesis h; one vectoriser fitted on both sides of train): the features are
[p; h; p * h; |p - h|], the interaction the comparison's pair head gives every encoder (Yu et al. 2018
sec. 4.1, q = [u; v; u * v; |u - v|]), so that the baseline differs from the encoders only in the
encoder. The concatenation [p; h] alone is no baseline for pairs: a linear model scores each text on
its own and cannot see what the two share (word overlap, p * h) or where they differ (|p - h|),
which is what entailment and paraphrase turn on. Measured (configs/encoders/compare.py:snli data: SNLI
dev as train, 984 held out; word+char, C=1): dev accuracy 0.584 with these features, 0.509 with
[p; h] (test 0.658 with these; the grid's 6 fits take 37 s on one core).

Parameters: the size of the weight matrix and biases, features x classes + classes (one row for two
classes), counted as the encoders' parameters are (every weight, zero or not; with L2 regularisation
all are non-zero).
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Sequence

import numpy as np

NAME = 'linear_baseline'  # its row in comparison.md / comparison.json
KINDS = ('sentence', 'pair')
FEATURES = ('word', 'word+char')
C_VALUES = (1.0, 10.0, 100.0)  # the inverse L2 strength
PAIR_FEATURES = '[p; h; p * h; |p - h|]'
# The exact multinomial optimum in a few Newton steps: on TREC's 78k n-gram features, 0.6-1.6 s a fit
# where lbfgs (scikit-learn's default) takes 3-5 s for the same dev accuracy.
SOLVER = 'newton-cg'


@dataclasses.dataclass
class _Model:
  """A fitted baseline: the vectorisers of `features` and the classifier."""
  features: str
  vectorizers: list
  classifier: Any
  pair: bool


def applies(task_data) -> str | None:
  """None when `fit` can run on `task_data`, else the reason it cannot (for the console)."""
  if task_data.kind not in KINDS:
    return f'the baseline classifies sentences or pairs, not {task_data.kind!r} examples'
  for name in ('train', 'validation'):
    split = task_data.splits.get(name)
    if split is None or split.words is None:
      return f'the {name} split keeps no words (data.Split.words)'
  if len({int(e['label']) for e in task_data.splits['train'].examples}) < 2:
    return 'train holds one label only'
  return None


def _texts(words: Sequence) -> list[str]:
  return [' '.join(w) for w in words]


def _vectorizers(features: str) -> list:
  """Fresh TF-IDF vectorisers of `features` ('word' or 'word+char')."""
  from sklearn.feature_extraction import text  # pylint: disable=g-import-not-at-top
  out = [text.TfidfVectorizer(analyzer='word', ngram_range=(1, 2), sublinear_tf=True,
                              tokenizer=str.split, token_pattern=None, dtype=np.float32)]
  if features == 'word+char':
    out.append(text.TfidfVectorizer(analyzer='char_wb', ngram_range=(2, 5), sublinear_tf=True,
                                    dtype=np.float32))
  return out


def _featurize(vectorizers: list, words: Sequence, pair: bool, *, fit: bool = False):
  """The sparse feature matrix of `words` (sentences, or (premise, hypothesis) pairs)."""
  from scipy import sparse  # pylint: disable=g-import-not-at-top
  if not pair:
    texts = _texts(words)
    return sparse.hstack([v.fit_transform(texts) if fit else v.transform(texts)
                          for v in vectorizers]).tocsr()
  premises, hypotheses = _texts([p for p, _ in words]), _texts([h for _, h in words])
  if fit:
    for v in vectorizers:
      v.fit(premises + hypotheses)
  p = sparse.hstack([v.transform(premises) for v in vectorizers]).tocsr()
  h = sparse.hstack([v.transform(hypotheses) for v in vectorizers]).tocsr()
  return sparse.hstack([p, h, p.multiply(h), abs(p - h)]).tocsr()


def _grid(train, dev, pair: bool, num_classes: int, seed: int) -> tuple[_Model, float, list[dict]]:
  """Fits every (features, C) of `FEATURES` x `C_VALUES` on `train`; (the best on dev, its C, every dev accuracy)."""
  from sklearn import linear_model  # pylint: disable=g-import-not-at-top
  labels = np.asarray([int(e['label']) for e in train.examples])
  grid, best = [], None
  for features in FEATURES:
    vectorizers = _vectorizers(features)
    x = _featurize(vectorizers, train.words, pair, fit=True)
    for c in C_VALUES:
      classifier = linear_model.LogisticRegression(C=c, solver=SOLVER, max_iter=1000, random_state=seed)
      classifier.fit(x, labels)
      model = _Model(features, vectorizers, classifier, pair)
      accuracy = _scores(model, dev, num_classes)['accuracy']
      grid.append({'features': features, 'C': c, 'validation_accuracy': accuracy})
      if best is None or accuracy > best[0]:
        best = (accuracy, model, c)
  return best[1], best[2], grid


def _scores(model: _Model, split, num_classes: int) -> dict[str, float]:
  """{'accuracy', 'loss'} of `model` on `split` (loss: mean NLL, as the encoders report it)."""
  labels = np.asarray([int(e['label']) for e in split.examples])
  probs = _probabilities(model, split.words, num_classes)
  nll = -np.log(np.clip(probs[np.arange(len(labels)), labels], 1e-12, None))
  return {'accuracy': float(np.mean(probs.argmax(-1) == labels)), 'loss': float(np.mean(nll))}


def _probabilities(model: _Model, words: Sequence, num_classes: int) -> np.ndarray:
  """float[n, num_classes]: the classifier's probabilities, 0 for classes absent from train."""
  x = _featurize(model.vectorizers, words, model.pair)
  probs = np.zeros((x.shape[0], num_classes))
  probs[:, model.classifier.classes_] = model.classifier.predict_proba(x)
  return probs


def fit(task_data, *, seed: int = 0) -> dict[str, Any]:
  """Fits the baseline on `task_data`'s train split, picks (features, C) on dev, scores dev and test.

  Args:
    task_data: a `data.TaskData` of kind 'sentence' or 'pair' whose splits keep their words.
    seed: the classifier's random state.

  Returns:
    Results shaped like a training run's: {'validation': {'accuracy', 'loss'}, 'test': {...} (when
    there is a test split), 'num_parameters', 'steps_per_second': None,
    'inference_examples_per_second', 'best_step': None, 'dev_metric': 'accuracy', 'train_seconds',
    'linear_baseline': {'features', 'C', 'pair_features', 'grid': [{features, C, dev accuracy}]}}.

  Raises:
    ValueError naming the reason when `applies(task_data)` gives one.
  """
  reason = applies(task_data)
  if reason:
    raise ValueError(f'linear baseline: {reason}')
  pair, n = task_data.kind == 'pair', task_data.num_classes
  start = time.perf_counter()
  model, c, grid = _grid(task_data.splits['train'], task_data.splits['validation'], pair, n, seed)
  dev = task_data.splits['validation']
  results: dict[str, Any] = {
      'validation': _scores(model, dev, n), 'best_step': None, 'dev_metric': 'accuracy',
      'train_seconds': time.perf_counter() - start, 'steps_per_second': None,
      'num_parameters': int(model.classifier.coef_.size + model.classifier.intercept_.size),
      'linear_baseline': {'features': model.features, 'C': c, 'grid': grid,
                          **({'pair_features': PAIR_FEATURES} if pair else {})}}
  test = task_data.splits.get('test')
  if test is not None and test.words is not None:
    results['test'] = _scores(model, test, n)
    start = time.perf_counter()  # inference: words -> features -> labels, timed on test
    _probabilities(model, test.words, n)
    seconds = time.perf_counter() - start
    results['inference_examples_per_second'] = len(test) / seconds if seconds > 0 else None
  return results


def describe(results: dict[str, Any]) -> str:
  """One line for the console and comparison.md: what the baseline chose and its scores."""
  chosen = results['linear_baseline']
  pair = f', pairs as {chosen["pair_features"]}' if 'pair_features' in chosen else ''
  test = results.get('test', {}).get('accuracy')
  return (f'{NAME}: TF-IDF {chosen["features"]} n-grams (word 1-2' +
          (', char_wb 2-5' if chosen['features'] == 'word+char' else '') + f'){pair}, logistic '
          f'regression C={chosen["C"]:g} (best dev accuracy of {len(chosen["grid"])} fits); dev '
          f'accuracy {results["validation"]["accuracy"]:.4f}'
          + (f', test accuracy {test:.4f}' if test is not None else '')
          + f'; fitted in {results["train_seconds"]:.1f} s')
