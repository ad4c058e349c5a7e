"""Stanford Natural Language Inference corpus 1.0 (Bowman et al. 2015), jsonl release.

Upstream files: `snli_1.0_{train,dev,test}.jsonl` (or gzipped `.jsonl.gz`), one JSON object a
line with `gold_label`, `sentence1`, `sentence2`, `sentence{1,2}_binary_parse`, `pairID`, ...
Pairs whose `gold_label` is `-` (no annotator majority) are dropped, as in Bowman et al. 2015,
and counted in `info.metadata['dropped'][split]['no_gold_label']`.
"""
from __future__ import annotations

import collections
import pathlib
from typing import Iterator, Sequence

import tensorflow_datasets as tfds

from jax_structured.data.builders import _base

LABELS = ('entailment', 'neutral', 'contradiction')
NO_GOLD_LABEL = '-'
_STEMS = {'train': 'snli_1.0_train', 'validation': 'snli_1.0_dev', 'test': 'snli_1.0_test'}
_KEYS = ('gold_label', 'sentence1', 'sentence2', 'sentence1_binary_parse', 'sentence2_binary_parse',
         'pairID')


def parse_line(line: str) -> dict[str, str] | None:
  """Parses one SNLI jsonl record; returns None for a pair without gold label (`-`).

  Returns:
    `{'premise', 'hypothesis', 'label', 'premise_binary_parse', 'hypothesis_binary_parse',
    'pair_id'}` (all str), or None when `gold_label == '-'`.

  Raises:
    ValueError: invalid JSON, a missing or non-string field, or an unknown gold label.
  """
  record = _base.json_object(line)
  for key in _KEYS:
    if not isinstance(record.get(key), str):
      raise ValueError(f'missing or non-string field {key!r}')
  label = record['gold_label']
  if label == NO_GOLD_LABEL:
    return None
  if label not in LABELS:
    raise ValueError(f'unknown gold_label {label!r}; expected one of {LABELS} or "-"')
  return {
      'premise': record['sentence1'],
      'hypothesis': record['sentence2'],
      'label': label,
      'premise_binary_parse': record['sentence1_binary_parse'],
      'hypothesis_binary_parse': record['sentence2_binary_parse'],
      'pair_id': record['pairID'],
  }


class Snli(_base.ManualBuilder, skip_registration=True):
  """SNLI premise/hypothesis pairs with a gold label."""

  name = 'snli'
  DESCRIPTION = __doc__
  HOMEPAGE = 'https://nlp.stanford.edu/projects/snli/'
  CITATION = ('Bowman et al. 2015. A large annotated corpus for learning natural language '
              'inference. EMNLP.')
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Download https://nlp.stanford.edu/projects/snli/snli_1.0.zip and put
  snli_1.0_train.jsonl, snli_1.0_dev.jsonl, snli_1.0_test.jsonl (gzipped .jsonl.gz also works)
  into manual_dir.
  """

  @classmethod
  def features(cls):
    return {k: tfds.features.Text() for k in ('premise', 'hypothesis', 'label', 'premise_binary_parse',
                                               'hypothesis_binary_parse', 'pair_id')}

  @classmethod
  def source_files(cls, manual_dir, config_name):
    return _base.split_files(
        'snli', manual_dir, {s: [f'{stem}.jsonl', f'{stem}.jsonl.gz'] for s, stem in _STEMS.items()},
        cls.MANUAL_DOWNLOAD_INSTRUCTIONS, expected=[f'{s}.jsonl[.gz]' for s in _STEMS.values()])

  def _examples(self, split: str, files: Sequence[pathlib.Path],
                dropped: collections.Counter) -> Iterator[dict]:
    for path in files:
      for _, example in self.parse_lines(path, parse_line, dropped):
        if example is None:
          dropped['no_gold_label'] += 1
          continue
        yield example
