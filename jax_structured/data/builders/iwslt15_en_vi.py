"""IWSLT 2015 English-Vietnamese (TED talks), the Stanford NMT release (Luong & Manning 2015).

Upstream files: `train.{en,vi}` (133k pairs), `tst2012.{en,vi}` (validation, 1553) and
`tst2013.{en,vi}` (test, 1268): tokenised, one sentence a line, line `i` of `.en` aligned with
line `i` of `.vi`. Lines are kept as is (the release escapes e.g. `&apos;`).

Splits: `train` <- `train.*`, `validation` <- `tst2012.*`, `test` <- `tst2013.*`; whichever pairs of
files exist are built (we hold only tst2012 / tst2013 in ../shared/data/iwslt15_en_vi). The loader
`iwslt15_en_vi` (data/loaders/translation.py) says which built split it trains, validates and tests on.

Errors (`FormatError`, message `file:line: ...`): the two files of a split have different numbers of
lines (at the first line one of them lacks); an empty (blank) line on either side (the first one,
with the count and the first few line numbers). One file of a pair without the other is a
FileNotFoundError naming both.
"""
from __future__ import annotations

import collections
import pathlib
from typing import Iterator, Sequence

import tensorflow_datasets as tfds

from jax_structured.data.builders import _base

STEMS = {'train': 'train', 'validation': 'tst2012', 'test': 'tst2013'}


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
    for split, stem in STEMS.items():
      en, vi = manual_dir / f'{stem}.en', manual_dir / f'{stem}.vi'
      if en.is_file() != vi.is_file():
        present, absent = (en, vi) if en.is_file() else (vi, en)
        raise FileNotFoundError(f'iwslt15_en_vi: {present} has no counterpart: {absent} is missing')
      if en.is_file():
        files[split] = [en, vi]
    if not files:
      raise _base.missing_files_error(
          'iwslt15_en_vi', manual_dir, [f'{s}.{l}' for s in STEMS.values() for l in ('en', 'vi')],
          cls.MANUAL_DOWNLOAD_INSTRUCTIONS)
    return files

  def _examples(self, split: str, files: Sequence[pathlib.Path],
                dropped: collections.Counter) -> Iterator[dict]:
    en_path, vi_path = files
    en_lines = [line for _, line in _base.read_lines(en_path)]
    vi_lines = [line for _, line in _base.read_lines(vi_path)]
    _check_aligned(en_path, en_lines, vi_path, vi_lines)
    for en, vi in zip(en_lines, vi_lines):
      yield {'en': en, 'vi': vi}


def _check_aligned(en_path: pathlib.Path, en_lines: Sequence[str], vi_path: pathlib.Path,
                  vi_lines: Sequence[str]) -> None:
  """Raises `FormatError` (`file:line:`) unless both files have as many lines, none of them blank."""
  if len(en_lines) != len(vi_lines):
    (short, n), (long, m) = sorted([(en_path, len(en_lines)), (vi_path, len(vi_lines))],
                                   key=lambda x: x[1])
    raise _base.FormatError(
        long, n + 1, f'line-count mismatch: {en_path} has {len(en_lines)} lines, {vi_path} has '
        f'{len(vi_lines)}; this line has no counterpart in {short} (the files must be aligned line '
        'by line)')
  for path, lines in ((en_path, en_lines), (vi_path, vi_lines)):
    empty = [i for i, line in enumerate(lines, start=1) if not line.strip()]
    if empty:
      raise _base.FormatError(
          path, empty[0], 'empty line: every line must hold a sentence (remove the pair from both '
          'files)' + _base._bad_lines_summary(len(empty), empty[:_base.FIRST_BAD_LINES], 'are empty'))
