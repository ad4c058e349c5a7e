"""Comparing runs: the variants of one config side by side, beside the linear baseline.

`train_variants(config, workdir, train_one)` trains every `config.variants` entry into `<workdir>/<name>`
and writes comparison.json / comparison.md (`write_comparison`): one row per variant, one column per
(split, metric) and the cost columns (`COST_COLUMNS`), with the row of `training.linear_baseline` for
sentence and pair classification (`linear_baseline_row`). A single run with
`config.train.linear_baseline` gets the same files with its row and the baseline's
(`write_run_and_baseline`). `trainer.train_and_evaluate` calls these; the loop itself is `trainer`'s.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Mapping, Sequence

from absl import logging
import jax
import ml_collections

from jax_structured import config as config_lib
from jax_structured.training import metrics as metrics_lib
from jax_structured.training.assembly import EVAL_SPLITS


def train_variants(config: config_lib.ResolvedConfig, workdir: str,
                   train_one: Callable[[config_lib.ResolvedConfig, str], dict[str, Any]]) -> dict[str, Any]:
  """Trains every `config.variants` entry into `<workdir>/<name>`; writes comparison.json / .md, with
  the row of the linear baseline (`training.linear_baseline`) for sentence and pair classification.

  Each variant is one resolved config (`jax_structured.config.variants`): `config` with its overrides
  applied and no variants of its own. Overrides are nested (`{'model': {'attention': 'none'}}`,
  overridable from the command line as `--config.variants.none.model.attention=...`) or dotted keys
  (`{'model.attention': 'none'}`, which needs `ml_collections.ConfigDict(..., allow_dotted_keys=True)`).

  `train_one(variant_config, variant_workdir)` trains one variant (the training loop, `trainer`, passes
  its own one-run function: this module does not import the loop).

  Returns:
    {name: results of train_one}.
  """
  os.makedirs(workdir, exist_ok=True)
  results = {}
  for name, child in config_lib.variants(config).items():
    logging.info('variant %s: %s', name, config.variants[name].to_dict())
    results[name] = train_one(child, os.path.join(workdir, name))
  write_comparison(config, workdir, results, {name: v.to_dict() for name, v in config.variants.items()})
  return results


def write_run_and_baseline(config: config_lib.ResolvedConfig, workdir: str,
                           results: Mapping[str, Any]) -> None:
  """comparison.json / .md of a single run with `config.train.linear_baseline`: the run's row (named by
  its encoder, else its model) and the linear baseline's."""
  model = config.model or {}
  encoder = model.get('encoder')
  name = (encoder.get('name') if hasattr(encoder, 'get') else None) or model.get('name')
  write_comparison(config, workdir, {name or 'run': results}, {})


def write_comparison(config: config_lib.ResolvedConfig, workdir: str,
                     results: Mapping[str, Mapping[str, Any]], overrides: Mapping[str, Any]) -> None:
  """comparison.json and comparison.md (process 0) of `results` {row: a run's results}, with the linear
  baseline's row (`linear_baseline_row`) when it applies; the table also goes to the console."""
  from jax_structured.training import linear_baseline  # pylint: disable=g-import-not-at-top
  rows, notes = dict(results), []
  baseline = linear_baseline_row(config)
  if baseline is not None:
    rows[linear_baseline.NAME] = baseline
    notes.append(linear_baseline.describe(baseline))
  comparison = comparison_table(rows, metrics=config.train.comparison_metrics)
  costs = [key for key, _, _ in COST_COLUMNS]
  metrics_lib.write_json(os.path.join(workdir, 'comparison.json'), {
      name: {split: r.get(split) for split in EVAL_SPLITS}
      | {key: r.get(key) for key in ('best_step', 'dev_metric', *costs)}
      | ({'overrides': overrides.get(name, {})} if name in results else {})
      | ({'linear_baseline': r['linear_baseline']} if 'linear_baseline' in r else {})
      for name, r in rows.items()})
  text = comparison + ''.join(f'\n{note}\n' for note in notes)
  if jax.process_index() == 0:
    with open(os.path.join(workdir, 'comparison.md'), 'w', encoding='utf-8') as f:
      f.write(text)
  metrics_lib.console(text)


def linear_baseline_row(config: config_lib.ResolvedConfig) -> dict[str, Any] | None:
  """The results of `training.linear_baseline` on `config.data` (sentence and pair classification),
  or None (the console says why)."""
  from jax_structured import data  # pylint: disable=g-import-not-at-top
  from jax_structured.training import linear_baseline  # pylint: disable=g-import-not-at-top
  if config.task not in ('', *linear_baseline.KINDS):
    metrics_lib.console(f'{linear_baseline.NAME}: not fitted: task {config.task!r} is not sentence or pair '
                        'classification')
    return None
  data_config = ml_collections.ConfigDict(config.data.to_dict())
  if 'embeddings' in data_config:  # its features are words: no vectors to read
    data_config.embeddings = ''
  task_data = data.load(data_config)
  reason = linear_baseline.applies(task_data)
  if reason:
    metrics_lib.console(f'{linear_baseline.NAME}: not fitted: {reason}')
    return None
  try:
    return linear_baseline.fit(task_data, seed=config.seed)
  except (ValueError, MemoryError) as e:  # the encoders' rows are written all the same
    metrics_lib.console(f'{linear_baseline.NAME}: not fitted: {type(e).__name__}: {e}')
    return None


COST_COLUMNS = (('num_parameters', 'parameters', '{:,}'), ('steps_per_second', 'train steps/s', '{:.2f}'),
                ('inference_examples_per_second', 'inference examples/s', '{:.1f}'))


def comparison_table(results: Mapping[str, Mapping[str, Any]], metrics: Sequence[str] = ()) -> str:
  """A Markdown table: one row per variant, one column per (split, metric); only the `metrics` named
  (in that order, each split) when given, else every metric any variant reports."""
  columns = []
  for split in EVAL_SPLITS:
    for r in results.values():
      for metric in (metrics or (r.get(split) or {})):
        if (split, metric) not in columns and (not metrics or any(
            metric in (other.get(split) or {}) for other in results.values())):
          columns.append((split, metric))
  # Cost columns (when the runs report them): parameters, training steps/s (compilation excluded),
  # inference examples/s (a compiled pass over test).
  costs = [(key, title, fmt) for key, title, fmt in COST_COLUMNS
           if any(r.get(key) is not None for r in results.values())]
  head = ('| variant | ' + ' | '.join([f'{s} {m}' for s, m in columns] + [t for _, t, _ in costs])
          + ' |')
  rule = '|---|' + '---:|' * (len(columns) + len(costs))
  rows = []
  for name, r in results.items():
    cells = [f'{r[s][m]:.4f}' if r.get(s) and m in r[s] else '' for s, m in columns]
    cells += [fmt.format(r[key]) if r.get(key) is not None else '' for key, _, fmt in costs]
    rows.append(f'| {name} | ' + ' | '.join(cells) + ' |')
  return '\n'.join([head, rule] + rows) + '\n'
