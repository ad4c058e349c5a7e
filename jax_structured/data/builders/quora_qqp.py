"""Quora Question Pairs, the partition of Wang et al. 2017 (BiMPM): 384k/10k/10k.

Two upstream layouts are accepted, detected per file from its first line (every line must then
follow it):
- `bimpm`: the BiMPM release (`Quora_question_pair_partition/{train,dev,test}.tsv`):
  `label<TAB>question1<TAB>question2<TAB>id`;
- `reformatted`: `question1<TAB>question2<TAB>label` (id dropped), as in our ../shared copy.
Files: `{train,dev,test}.tsv` or `.txt`. Labels are 0/1 (1 = duplicate).
"""
from __future__ import annotations

import collections
import pathlib
from typing import Iterator, Sequence

import numpy as np
import tensorflow_datasets as tfds

from jax_structured.data.builders import _base

_STEMS = {'train': 'train', 'validation': 'dev', 'test': 'test'}
_LABELS = {'0': 0, '1': 1}


def detect_layout(line: str) -> str:
  """`'bimpm'` (`label, q1, q2, id`) or `'reformatted'` (`q1, q2, label`) from one line.

  Raises:
    ValueError: the line follows neither layout.
  """
  fields = line.split('\t')
  if len(fields) == 4 and fields[0] in _LABELS:
    return 'bimpm'
  if len(fields) == 3 and fields[2] in _LABELS:
    return 'reformatted'
  raise ValueError(f'neither the BiMPM layout "label<TAB>q1<TAB>q2<TAB>id" nor '
                   f'"q1<TAB>q2<TAB>label" ({len(fields)} tab-separated fields)')


def parse_line(line: str, layout: str) -> dict:
  """Parses one line of the given `layout` into `{'question1', 'question2', 'label'}`.

  Raises:
    ValueError: wrong number of fields or a label other than 0/1.
  """
  fields = line.split('\t')
  if layout == 'bimpm':
    if len(fields) != 4:
      raise ValueError(f'expected 4 tab-separated fields (label, q1, q2, id), got {len(fields)}')
    label, q1, q2 = fields[0], fields[1], fields[2]
  else:
    if len(fields) != 3:
      raise ValueError(f'expected 3 tab-separated fields (q1, q2, label), got {len(fields)}')
    q1, q2, label = fields
  if label not in _LABELS:
    raise ValueError(f'label {label!r} is not 0 or 1')
  return {'question1': q1, 'question2': q2, 'label': _LABELS[label]}


class QuoraQqp(_base.ManualBuilder, skip_registration=True):
  """Quora duplicate-question pairs (Wang et al. 2017 split)."""

  name = 'quora_qqp'
  DESCRIPTION = __doc__
  HOMEPAGE = 'https://zhiguowang.github.io/'
  CITATION = ('Wang, Hamza and Florian 2017. Bilateral Multi-Perspective Matching for Natural '
              'Language Sentences. IJCAI.')
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Download Quora_question_pair_partition.zip (link in https://github.com/zhiguowang/BiMPM README,
  Google Drive) and put its train.tsv, dev.tsv, test.tsv into manual_dir.
  """

  @classmethod
  def features(cls):
    return {'question1': tfds.features.Text(), 'question2': tfds.features.Text(), 'label': np.int32}

  @classmethod
  def source_files(cls, manual_dir, config_name):
    return _base.split_files(
        'quora_qqp', manual_dir, {s: [f'{stem}.tsv', f'{stem}.txt'] for s, stem in _STEMS.items()},
        cls.MANUAL_DOWNLOAD_INSTRUCTIONS, expected=[f'{s}.tsv|.txt' for s in _STEMS.values()])

  def _examples(self, split: str, files: Sequence[pathlib.Path],
                dropped: collections.Counter) -> Iterator[dict]:
    for path in files:
      layout = None

      def parse(line):
        nonlocal layout
        try:
          if layout is None:
            layout = detect_layout(line)
          return parse_line(line, layout)
        except ValueError as e:
          raise ValueError(f'{e} (layout {layout or "undetected"})') from None

      for _, example in self.parse_lines(path, parse, dropped):
        yield example
