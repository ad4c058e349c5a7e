"""The training task 'translation' of `models.translation` (Yu et al. 2018, Table 2b).

Loss: the mean token cross-entropy of the teacher-forced decoder over the real target tokens
(y_1 .. y_m and </s> of every real example). Metrics: 'loss', 'nll' (per token) and 'perplexity'
(exp of the per-token NLL); in evaluation, when the model translates (`config.model.eval_beam_size
> 0`), corpus BLEU of the beam-search translations against the batch's targets: the per-sentence
sufficient statistics (`models.translation.bleu_statistics`) are summed over every batch and shard,
and sacrebleu's `BLEU.compute_bleu` (standard BLEU-4, 'exp' smoothing as `sacrebleu.corpus_bleu`)
turns the sums into the score: equal to sacrebleu on the whitespace-joined tokenised text
(`tokenize='none'`, the tokenised BLEU of Luong & Manning 2015 and Yu et al.). Target words outside
the training vocabulary stay <unk> in the references and match nothing.

The dev metric is the perplexity (appendix A.1: "hyperparameters are optimised via ... perplexity of
the validation set"); BLEU is reported beside it. `training/__init__.py` imports this module, which
registers the task.
"""
from __future__ import annotations

import math

import jax.numpy as jnp

from jax_structured.models import translation
from jax_structured.training import tasks

_STATS = tuple(f'{kind}_{n}' for n in range(1, translation.NGRAM_ORDER + 1)
               for kind in ('correct', 'total')) + ('sys_len', 'ref_len')


def corpus_bleu(sums) -> float:
  """BLEU (0-100) from summed statistics {'bleu_correct_1': (sum, _), ...} (sacrebleu's formula)."""
  from sacrebleu.metrics import BLEU  # pylint: disable=g-import-not-at-top
  order = translation.NGRAM_ORDER
  value = lambda key: int(round(float(sums[f'bleu_{key}'][0])))  # noqa: E731
  return float(BLEU.compute_bleu([value(f'correct_{n}') for n in range(1, order + 1)],
                                 [value(f'total_{n}') for n in range(1, order + 1)],
                                 value('sys_len'), value('ref_len'), smooth_method='exp').score)


@tasks.register('translation')
class TranslationTask(tasks.Task):
  """Token cross-entropy, perplexity and (in evaluation) corpus BLEU; see the module docstring."""
  dev_metric = 'perplexity'
  higher_is_better = False

  def loss_and_metrics(self, outputs, batch):
    """Target-token NLL of `logits` against `target[:, 1:]`; metrics `loss`, `nll`."""
    logits = outputs['logits']
    targets = jnp.asarray(batch['target'], jnp.int32)[:, 1:]
    mask = (jnp.arange(targets.shape[1])[None] < batch['target_lengths'][:, None] - 1)
    mask = mask.astype(jnp.float32) * tasks.example_weights(batch)[:, None]
    nll_sum, count = translation.token_nll(logits, targets, mask)
    return nll_sum / jnp.maximum(count, 1.0), {'loss': (nll_sum, count), 'nll': (nll_sum, count)}

  def eval_metrics(self, outputs, batch, intermediates):
    """The base metrics plus BLEU n-gram statistics when the outputs hold beam-search `hypotheses`."""
    out = dict(super().eval_metrics(outputs, batch, intermediates))
    if 'hypotheses' not in outputs:
      return out
    target = jnp.asarray(batch['target'], jnp.int32)
    stats = translation.bleu_statistics(outputs['hypotheses'], outputs['hypothesis_lengths'],
                                        target[:, 1:], batch['target_lengths'] - 2)
    w = tasks.example_weights(batch)
    for key, value in stats.items():
      out[f'bleu_{key}'] = ((value * w).sum(), w.sum())
    return out

  def summarize(self, sums):
    """Averages plus `perplexity` and, when the BLEU statistics are present, corpus `bleu` (0-100)."""
    raw = {k: v for k, v in sums.items() if not k.startswith('bleu_')}
    out = super().summarize(raw)
    s, c = sums['nll']
    out['perplexity'] = math.exp(min(float(s) / float(c), 700.0)) if c else float('nan')
    if all(f'bleu_{k}' in sums for k in _STATS):
      out['bleu'] = corpus_bleu(sums)
    return out
