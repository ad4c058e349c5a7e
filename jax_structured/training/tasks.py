"""Tasks: how model outputs and a batch become the training objective and evaluation metrics.

The training loop is generic over a task looked up by `config.task` (default: the data `kind`).
A task class is registered with `@tasks.register('name')` and instantiated with the config. It provides

* `loss_and_metrics(outputs, batch) -> (loss, {name: (sum, count)})`: `loss` is the mean objective over
  the real examples/tokens of the batch (padding examples have `example_mask = 0`); the metrics dict
  MUST contain `'loss': (loss_sum, count)` with `loss == loss_sum / max(count, 1)` -- data parallelism
  uses `count` to weight each shard, so the averaged gradient is exactly the one of the global batch.
* `eval_metrics(outputs, batch, intermediates) -> {name: (sum, count)}`: extra evaluation metrics. The
  default reports the UAS of `trees.mst` trees decoded from sown `arc_scores` / `root_scores` /
  `lengths` against gold `heads` when both exist (`tree_uas_metrics`).
* `summarize({name: (sum, count)}) -> {name: float}`: default `sum / count`.
* `dev_metric` (a key of the summary) and `higher_is_better`.

All functions run inside jit / shard_map / pmap on one shard of the batch; sums and counts are
then added over shards, so they must be plain sums (never means).
"""
from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Mapping

from flax import traverse_util
import jax
import jax.numpy as jnp

from jax_structured import trees
from jax_structured import config as config_lib

Metrics = dict[str, tuple[jax.Array, jax.Array]]

_TASKS: dict[str, type] = {}


def register(name: str) -> Callable[[type], type]:
  """Class decorator registering a task under `name` (an error if the name is taken)."""
  def wrap(cls):
    if name in _TASKS and _TASKS[name] is not cls:
      raise ValueError(f'task {name!r} registered twice ({_TASKS[name].__name__}, {cls.__name__})')
    _TASKS[name] = cls
    return cls
  return wrap


def names() -> list[str]:
  """The registered task names (values of `config.task`), sorted."""
  return sorted(_TASKS)


def get(name: str) -> type:
  """The task class registered as `name` (model families register theirs when imported)."""
  if name not in _TASKS:
    from jax_structured.models import registry as model_registry  # pylint: disable=g-import-not-at-top
    model_registry.names()  # imports the model families, which register their tasks
  if name not in _TASKS:
    raise KeyError(f'unknown task {name!r} (config.task or the data kind); known: {names()}')
  return _TASKS[name]


def build(config: config_lib.ResolvedConfig, kind: str, task_data: Any = None) -> 'Task':
  """The task of `config.task` (a resolved config), or of the data `kind` when `config.task` is empty.

  Task classes are constructed as `cls(config)`, or `cls(config, task_data=task_data)` when their
  constructor takes `task_data` (e.g. for vocabularies in `task_data.extras`).
  """
  cls = get(config.task or kind)
  if 'task_data' in inspect.signature(cls).parameters:
    return cls(config, task_data=task_data)
  return cls(config)


class Task:
  """Base class: subclasses implement `loss_and_metrics` and set `dev_metric`/`higher_is_better`."""
  dev_metric: str = 'loss'
  higher_is_better: bool = False

  def __init__(self, config: config_lib.ResolvedConfig | None = None):
    self.config = config
    model = config.get('model') if config is not None else None
    self.single_root = bool(model.get('single_root', True)) if model is not None else True

  def loss_and_metrics(self, outputs: Any, batch: Mapping[str, jax.Array]) -> tuple[jax.Array, Metrics]:
    """The training objective and metric sums of one batch (shard).

    Args:
      outputs: the model's outputs (logits, or a dict of them).
      batch: the batch dict; `example_mask [B]` weights the examples (0 for padding examples).

    Returns:
      `(loss, metrics)`: `loss` the mean objective over the real examples; `metrics` maps names to
      `(sum, count)` and holds `'loss': (loss_sum, count)` with `loss == loss_sum / max(count, 1)`.
    """
    raise NotImplementedError(f'{type(self).__name__} must implement loss_and_metrics')

  def deferred_loss_and_metrics(self, outputs: Any, batch: Mapping[str, jax.Array],
                                flagged: jax.Array | None) -> tuple[jax.Array, Metrics, jax.Array | None]:
    """`loss_and_metrics` without the examples `flagged` (bool [B]: the model's trees there were
    flagged by the LU error estimate, `nn.exactness`; the training step recomputes them with a
    separate program): their `example_mask` is 0. `flagged` None: the model computes no trees.
    Returns (loss, metrics, flagged); a task whose loss computes trees itself (the parser's CRF) adds
    the examples it flags there (and returns flags even for None)."""
    if flagged is None:
      return (*self.loss_and_metrics(outputs, batch), None)
    return (*self.loss_and_metrics(outputs, without_examples(batch, flagged)), flagged)

  def eval_metrics(self, outputs: Any, batch: Mapping[str, jax.Array],
                   intermediates: Mapping[str, Any]) -> Metrics:
    """Extra evaluation metric sums `{name: (sum, count)}`.

    The default reports the UAS of `trees.mst` trees decoded from the sown `arc_scores` /
    `root_scores` / `lengths` against gold `heads` when both exist (`tree_uas_metrics`).
    """
    del outputs
    return tree_uas_metrics(intermediates, batch, single_root=self.single_root)

  def summarize(self, sums: Mapping[str, tuple[float, float]]) -> dict[str, float]:
    """Turns summed metrics `{name: (sum, count)}` into values `{name: sum / count}` (NaN for count 0)."""
    return {name: float(s) / float(c) if c else float('nan') for name, (s, c) in sums.items()}

  def is_better(self, value: float, best: float | None) -> bool:
    """Whether `value` of `dev_metric` improves on `best` (None or NaN: any non-NaN value does)."""
    if best is None or math.isnan(best):
      return not math.isnan(value)
    return value > best if self.higher_is_better else value < best


def example_weights(batch: Mapping[str, jax.Array], dtype=jnp.float32) -> jax.Array:
  """`example_mask [B]` as `dtype` (all ones when the batch has none, e.g. LM stream batches; B from
  the first array with a batch axis: scalars such as the train step 'step' are skipped)."""
  if 'example_mask' in batch:
    return batch['example_mask'].astype(dtype)
  first = next((v for v in batch.values() if jnp.ndim(v) > 0), None)
  if first is None:
    raise ValueError(f'the batch has no array with a batch axis (keys {sorted(batch)})')
  return jnp.ones(jnp.shape(first)[:1], dtype)


def without_examples(batch: Mapping[str, jax.Array], drop: jax.Array) -> dict[str, jax.Array]:
  """The batch with `example_mask` 0 where `drop` (bool [B]) is True (its dtype kept; float32 ones
  first when the batch has none)."""
  mask = batch['example_mask'] if 'example_mask' in batch else example_weights(batch)
  return {**batch, 'example_mask': jnp.where(drop, jnp.zeros_like(mask), mask)}


def _nll(logits: jax.Array, labels: jax.Array) -> jax.Array:
  logp = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
  return -jnp.take_along_axis(logp, labels[..., None].astype(jnp.int32), axis=-1)[..., 0]


def phrase_terms(node_logits: jax.Array, tree_labels: jax.Array, lengths: jax.Array
                 ) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Per-sentence sums over the labelled non-root nodes of binary trees (phrase-level supervision).

  Node ids as `data.tree_batching`: 0..s-1 the leaves, s + j internal node j, the root 2s - 2 (its label
  is the sentence label, left to the sentence term). A node counts when its id < 2s - 1, it is not the
  root and its label is >= 0 (padding nodes and, for binary SST, neutral phrases are -1).

  Args:
    node_logits: float [B, N, C] logits of every node (N = 2T - 1, node-id order).
    tree_labels: int [B, N] class of every node (-1: no label).
    lengths: int [B] words s per sentence.

  Returns:
    (nll_sum [B], count [B], correct [B]) float32: the summed NLL, the number of labelled nodes and of
    those whose argmax is their label.
  """
  ids = jnp.arange(node_logits.shape[1])[None, :]
  s = jnp.asarray(lengths, jnp.int32)[:, None]
  labelled = (tree_labels >= 0) & (ids < 2 * s - 1) & (ids != 2 * s - 2)
  labels = jnp.where(labelled, tree_labels, 0)
  nll = jnp.where(labelled, _nll(node_logits, labels), 0.0)
  correct = labelled & (jnp.argmax(node_logits, -1) == labels)
  f32 = lambda a: a.sum(-1).astype(jnp.float32)
  return f32(nll), f32(labelled), f32(correct)


@register('sentence')
@register('document')
@register('pair')
class Classification(Task):
  """Cross-entropy classification of `label [B]` from logits `[B, C]`; dev metric accuracy.

  loss = sum_b w_b * -log softmax(logits_b)[label_b] / sum_b w_b, with w = `example_mask`.

  Phrase-level supervision (Tai et al. 2015 sec. 5.1; `config.train.phrase_loss_weight` = lambda > 0):
  in training the model returns {'logits', 'node_logits' [B, N, C]} (`SentenceClassifier` with
  `phrase_logits=True`) and each sentence's term becomes nll_b + lambda * P_b, with P_b the mean NLL
  over its labelled non-root nodes (`phrase_terms`; 0 for a sentence without any). Tai et al. average
  over all nodes of the training set; the mean per sentence keeps the loss a plain sum over examples
  (exact data-parallel weighting). Reported in training: 'phrase_nll' and 'phrase_accuracy' per node.
  Evaluation (plain logits) is sentence-level.
  """
  dev_metric = 'accuracy'
  higher_is_better = True

  def __init__(self, config: config_lib.ResolvedConfig | None = None):
    super().__init__(config)
    self.phrase_weight = config.train.phrase_loss_weight if config is not None else 0.0
    model = config.get('model') if config is not None else None
    if self.phrase_weight and not (model is not None and model.get('phrase_logits', False)):
      raise ValueError(f'config.train.phrase_loss_weight={self.phrase_weight} needs node logits: set '
                       "config.model.phrase_logits=True (head 'classifier.sentence' with a tree encoder, "
                       "e.g. 'tree_lstm', and data.binary_trees=True)")

  def loss_and_metrics(self, outputs, batch):
    """Weighted cross-entropy (plus the phrase term when enabled); metrics `loss`, `accuracy`."""
    logits = outputs['logits'] if isinstance(outputs, Mapping) else outputs
    w = example_weights(batch)
    nll = _nll(logits, batch['label'])
    count = w.sum()
    correct = ((jnp.argmax(logits, -1) == batch['label']) * w).sum()
    metrics = {}
    if self.phrase_weight and isinstance(outputs, Mapping) and 'node_logits' in outputs:
      if 'tree_labels' not in batch:
        raise KeyError('config.train.phrase_loss_weight > 0 needs batch key tree_labels: set '
                       f'config.data.binary_trees=True (the batch has {sorted(batch)})')
      node_nll, node_count, node_correct = phrase_terms(outputs['node_logits'], batch['tree_labels'],
                                                        batch['lengths'])
      nll = nll + self.phrase_weight * node_nll / jnp.maximum(node_count, 1.0)
      metrics = {'phrase_nll': ((node_nll * w).sum(), (node_count * w).sum()),
                 'phrase_accuracy': ((node_correct * w).sum(), (node_count * w).sum())}
    loss_sum = (nll * w).sum()
    loss = loss_sum / jnp.maximum(count, 1.0)
    return loss, {'loss': (loss_sum, count), 'accuracy': (correct, count), **metrics}


@register('lm')
class LanguageModel(Task):
  """Next-token NLL of `targets [B, T]` from logits `[B, T, V]` over `mask [B, T]` (x `example_mask`).

  Batches without `targets` use `tokens[:, 1:]` as targets of `logits[:, :-1]` with `lengths - 1`
  target positions. perplexity = exp(total NLL / tokens) (Cheng et al. 2016, Section 4.1). The
  training objective (`config.train.lm_loss`) is the mean NLL per token ('token'), or per row with
  at least one target ('sequence': summed over the row's tokens); 'nll' and the perplexity are per
  token either way.
  """
  dev_metric = 'perplexity'
  higher_is_better = False

  def __init__(self, config: config_lib.ResolvedConfig | None = None):
    super().__init__(config)
    self.per_row = config is not None and config.train.lm_loss == 'sequence'

  def loss_and_metrics(self, outputs, batch):
    """Token NLL (per token or per row, `config.train.lm_loss`); metrics `loss`, `nll`."""
    logits = outputs
    if 'targets' in batch:
      targets = batch['targets']
      if 'mask' in batch:
        mask = batch['mask'].astype(jnp.float32)
      else:
        mask = (jnp.arange(targets.shape[1])[None] < batch['lengths'][:, None]).astype(jnp.float32)
    else:
      targets, logits = batch['tokens'][:, 1:], logits[:, :-1]
      mask = (jnp.arange(targets.shape[1])[None] < batch['lengths'][:, None] - 1).astype(jnp.float32)
    mask = mask * example_weights(batch)[:, None]
    nll = _nll(logits, targets)
    count = mask.sum()
    nll_sum = (nll * mask).sum()
    loss_count = (mask.sum(-1) > 0).sum().astype(count.dtype) if self.per_row else count
    return (nll_sum / jnp.maximum(loss_count, 1.0),
            {'loss': (nll_sum, loss_count), 'nll': (nll_sum, count)})

  def summarize(self, sums):
    """The base summary plus `perplexity = exp(nll_sum / tokens)`."""
    out = super().summarize(sums)
    s, c = sums['nll']
    out['perplexity'] = math.exp(float(s) / float(c)) if c else float('nan')
    return out


def tree_uas_metrics(intermediates: Mapping[str, Any], batch: Mapping[str, jax.Array], *,
                     single_root: bool = True) -> Metrics:
  """Unlabelled attachment score of `trees.mst` trees from sown scores against gold `heads`.

  For every sown `<prefix>arc_scores [..., n, n]` with sibling `<prefix>root_scores [..., n]` and
  `<prefix>lengths [...]` (prefix `''`, `'sentence_'`, `'document_'`, ...), whose leading shape holds as
  many trees as the gold `<prefix>heads` (or `heads`) `[..., n]`, reports
  `<prefix>uas = (#real words whose predicted head == gold head, #real words)`; real words are
  `position < lengths` of real examples (`example_mask`). Heads follow the `trees` convention
  (-1 = ROOT). Nothing is reported when the batch has no gold heads or nothing was sown.

  Args:
    intermediates: the 'intermediates' collection returned by `model.apply(..., mutable=...)`.
    batch: the batch (gold `heads [B, T]` or `[B, S, T]` int32, `example_mask [B]`).
    single_root: decode with exactly one ROOT child (Koo et al. 2007) or any number.

  Returns:
    {'<prefix>uas': (correct, count)} float32 scalars.
  """
  if not intermediates:
    return {}
  flat = traverse_util.flatten_dict(dict(intermediates))
  flat = {k: (v[-1] if isinstance(v, (tuple, list)) else v) for k, v in flat.items()}
  out: Metrics = {}
  for key, arc_scores in sorted(flat.items(), key=lambda kv: kv[0]):
    name = key[-1]
    if not name.endswith('arc_scores'):
      continue
    prefix = name[:-len('arc_scores')]
    root_scores = flat.get(key[:-1] + (prefix + 'root_scores',))
    lengths = flat.get(key[:-1] + (prefix + 'lengths',))
    gold = batch.get(prefix + 'heads', batch.get('heads'))
    metric = prefix + 'uas'
    if root_scores is None or lengths is None or gold is None or metric in out:
      continue
    n = arc_scores.shape[-1]
    num_trees = math.prod(arc_scores.shape[:-2])
    if gold.shape[-1] != n or math.prod(gold.shape[:-1]) != num_trees:
      continue
    batch_size = gold.shape[0]
    arc_scores = arc_scores.reshape(num_trees, n, n)
    root_scores = root_scores.reshape(num_trees, n)
    lengths = lengths.reshape(num_trees).astype(jnp.int32)
    heads = trees.mst(arc_scores, root_scores, lengths, single_root=single_root)
    gold = gold.reshape(num_trees, n)
    w = jnp.repeat(example_weights(batch), num_trees // batch_size)
    real = (jnp.arange(n)[None] < lengths[:, None]) * w[:, None]
    correct = ((heads == gold) * real).sum()
    out[metric] = (correct.astype(jnp.float32), real.sum().astype(jnp.float32))
  return out
