"""TREC question classification (Li & Roth 2002), cogcomp release.

Upstream files: `train_5500.label` (train) and `TREC_10.label` (test), ISO-8859-1, one question a
line: `COARSE:fine question words ...`, e.g. `DESC:manner How did serfdom develop in ... ?`.
There is no validation file (the split is not offered).
"""
from __future__ import annotations

import collections
import pathlib
from typing import Iterator, Sequence

import tensorflow_datasets as tfds

from jax_structured.data.builders import _base

_FILES = {'train': 'train_5500.label', 'test': 'TREC_10.label'}
ENCODING = 'iso-8859-1'
COARSE_LABELS = ('ABBR', 'DESC', 'ENTY', 'HUM', 'LOC', 'NUM')


def parse_line(line: str) -> dict[str, str]:
  """Parses `COARSE:fine words...` into `{'text', 'label_coarse', 'label_fine'}`.

  `label_fine` keeps the coarse prefix (`'DESC:manner'`), as in the upstream files, so fine labels
  of different coarse classes never collide (`ENTY:other` vs `NUM:other`).

  Raises:
    ValueError: no label, a label without `COARSE:fine`, an unknown coarse class, or no question.
  """
  label, _, text = line.strip().partition(' ')
  coarse, colon, fine = label.partition(':')
  if not colon or not fine:
    raise ValueError(f'expected "COARSE:fine question", got label {label!r}')
  if coarse not in COARSE_LABELS:
    raise ValueError(f'unknown coarse label {coarse!r}; expected one of {COARSE_LABELS}')
  text = text.strip()
  if not text:
    raise ValueError(f'label {label!r} without a question')
  return {'text': text, 'label_coarse': coarse, 'label_fine': label}


class Trec(_base.ManualBuilder, skip_registration=True):
  """TREC-6 / TREC-50 questions."""

  name = 'trec'
  DESCRIPTION = __doc__
  HOMEPAGE = 'https://cogcomp.seas.upenn.edu/Data/QA/QC/'
  CITATION = 'Li and Roth 2002. Learning Question Classifiers. COLING.'
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Download train_5500.label and TREC_10.label from https://cogcomp.seas.upenn.edu/Data/QA/QC/
  into manual_dir (keep them byte-for-byte: they are ISO-8859-1).
  """

  @classmethod
  def features(cls):
    text = tfds.features.Text
    return {'text': text(), 'label_coarse': text(), 'label_fine': text()}

  @classmethod
  def source_files(cls, manual_dir, config_name):
    return _base.split_files('trec', manual_dir, {s: [n] for s, n in _FILES.items()},
                             cls.MANUAL_DOWNLOAD_INSTRUCTIONS)

  def _examples(self, split: str, files: Sequence[pathlib.Path],
                dropped: collections.Counter) -> Iterator[dict]:
    for path in files:
      for _, example in self.parse_lines(path, parse_line, dropped, ENCODING):
        yield example
