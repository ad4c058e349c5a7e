"""IWSLT 2015 English-Vietnamese (TED talks), the Stanford NMT release (Luong & Manning 2015).

Upstream files: `train.{en,vi}` (133k pairs), `tst2012.{en,vi}` (validation, 1553) and
`tst2013.{en,vi}` (test, 1268): tokenised, one sentence a line, line `i` of `.en` aligned with
line `i` of `.vi`. Lines are kept as is (the release escapes e.g. `&apos;`).
"""
from __future__ import annotations

import collections
import pathlib
from typing import Iterator, Sequence

import tensorflow_datasets as tfds

from jax_structured.data.builders import _base

_STEMS = {'train': 'train', 'validation': 'tst2012', 'test': 'tst2013'}


class Iwslt15EnVi(_base.ManualBuilder, skip_registration=True):
  """Aligned English/Vietnamese sentence pairs."""

  name = 'iwslt15_en_vi'
  DESCRIPTION = __doc__
  HOMEPAGE = 'https://nlp.stanford.edu/projects/nmt/'
  CITATION = ('Luong and Manning 2015. Stanford Neural Machine Translation Systems for Spoken '
              'Language Domains. IWSLT.')
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Download train.en, train.vi, tst2012.en, tst2012.vi, tst2013.en, tst2013.vi from
  https://nlp.stanford.edu/projects/nmt/ (IWSLT'15 English-Vietnamese) into manual_dir.
  """

  @classmethod
  def features(cls):
    return {'en': tfds.features.Text(), 'vi': tfds.features.Text()}

  @classmethod
  def source_files(cls, manual_dir, config_name):
    manual_dir = pathlib.Path(manual_dir)
    files = {}
    for split, stem in _STEMS.items():
      en, vi = manual_dir / f'{stem}.en', manual_dir / f'{stem}.vi'
      if en.is_file() != vi.is_file():
        present, absent = (en, vi) if en.is_file() else (vi, en)
        raise FileNotFoundError(f'iwslt15_en_vi: {present} has no counterpart: {absent} is missing')
      if en.is_file():
        files[split] = [en, vi]
    if not files:
      raise _base.missing_files_error(
          'iwslt15_en_vi', manual_dir, [f'{s}.{l}' for s in _STEMS.values() for l in ('en', 'vi')],
          cls.MANUAL_DOWNLOAD_INSTRUCTIONS)
    return files

  def _examples(self, split: str, files: Sequence[pathlib.Path],
                dropped: collections.Counter) -> Iterator[dict]:
    en_path, vi_path = files
    en_lines = [line for _, line in _base.read_lines(en_path)]
    vi_lines = [line for _, line in _base.read_lines(vi_path)]
    if len(en_lines) != len(vi_lines):
      raise ValueError(f'misaligned parallel files: {en_path} has {len(en_lines)} lines but '
                       f'{vi_path} has {len(vi_lines)}')
    for en, vi in zip(en_lines, vi_lines):
      yield {'en': en, 'vi': vi}
