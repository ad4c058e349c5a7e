"""Document classification sets of the structured-attention papers, in their published formats.

Configs and upstream formats:
- `yelp13`, `yelp14`, `yelp15`, `imdb`: Tang, Qin & Liu 2015 (EMNLP, "Document Modeling with
  Gated Recurrent Neural Network for Sentiment Classification"), files
  `yelp-20{13,14,15}-seg-20-20.{train,dev,test}.ss` and `imdb.{train,dev,test}.txt.ss`, one
  document a line: `user<TAB><TAB>product<TAB><TAB>rating<TAB><TAB>text`, sentences of `text`
  separated by ` <sssss> `; ratings 1-5 (Yelp) or 1-10 (IMDB, Diao et al. 2014). The 80/10/10
  partition of Tang et al. is the one Liu & Lapata (2018) report.
- `yahoo`, `amazon`: Zhang, Zhao & LeCun 2015 CSV (`yahoo_answers_csv/`, `amazon_review_full_csv/`
  or `amazon_review_polarity_csv/`): `train.csv`, `test.csv`, RFC-4180 quoting, columns
  `"class","question title","question content","best answer"` (Yahoo) or `"class","title",
  "content"` (Amazon); classes 1-based; newlines inside fields written as the two characters `\\n`
  (restored to real newlines here). No validation file.
- `csfd`: Czech CSFD movie reviews of Habernal, Ptacek & Steinberger 2013 (`csfd.zip` from
  https://corpora.kiv.zcu.cz/sentiment/): `positive.txt`, `neutral.txt`, `negative.txt`, one
  review a line, UTF-8. The corpus has no split (the papers use 10-fold cross-validation), so
  every review is in `train`; blank lines are dropped and counted (`empty_line`).
- `convote`: Thomas, Pang & Lee 2006 congressional floor debates (`convote_v1.1`),
  `data_stage_one/{training_set,development_set,test_set}/`, one speech segment a file named
  `###_@@@@@@_%%%%$$$_PMV.txt` (bill, speaker, page and index, party, mention, vote); the label is
  the vote `V` (`Y` = yea, `N` = nay).

Features: `sentences` (list of str: the sentences where the format splits them (Tang), else a
single element holding the whole text, for the pipeline to split) and `label` (str, as written
upstream: `'1'`..`'5'`, `'positive'`, `'Y'`, ...).

Every format is read as UTF-8 unless the user gives another encoding (`config.data.encoding`, for a
re-encoded copy); a byte-order mark (UTF-8, UTF-16) is removed and decides the encoding.
"""
from __future__ import annotations

import collections
import csv
import dataclasses
import io
import pathlib
import re
from typing import Iterator, Sequence

import tensorflow_datasets as tfds

from jax_structured.data.builders import _base

TANG_SENTENCE_SEPARATOR = '<sssss>'
_SPLIT_SUFFIXES = {'train': 'train', 'validation': 'dev', 'test': 'test'}
_CSFD_LABELS = ('negative', 'neutral', 'positive')
_CONVOTE_DIRS = {'train': 'training_set', 'validation': 'development_set', 'test': 'test_set'}
_CONVOTE_FILE = re.compile(r'^(?P<bill>\d+)_(?P<speaker>\d+)_(?P<page>\d+)_'
                           r'(?P<party>[A-Z])(?P<mention>[A-Z])(?P<vote>[YN])\.txt$')


@dataclasses.dataclass(eq=False)
class DocumentConfig(tfds.core.BuilderConfig):
  """A document classification set: its upstream `layout` and label range."""
  layout: str = 'tang'           # 'tang' | 'zhang_csv' | 'csfd' | 'convote'
  file_stem: str = ''            # Tang: file name before `.{split}`
  file_suffix: str = '.ss'       # Tang: after `.{split}` ('.ss' or '.txt.ss')
  num_columns: int = 0           # Zhang CSV: number of columns
  max_label: int = 0             # largest valid rating/class (0: no upper bound checked)


CONFIGS = [
    DocumentConfig(name='yelp13', description='Yelp 2013 (Tang et al. 2015), 5 ratings.',
                   layout='tang', file_stem='yelp-2013-seg-20-20', max_label=5),
    DocumentConfig(name='yelp14', description='Yelp 2014 (Tang et al. 2015), 5 ratings.',
                   layout='tang', file_stem='yelp-2014-seg-20-20', max_label=5),
    DocumentConfig(name='yelp15', description='Yelp 2015 (Tang et al. 2015), 5 ratings.',
                   layout='tang', file_stem='yelp-2015-seg-20-20', max_label=5),
    DocumentConfig(name='imdb', description='IMDB (Diao et al. 2014, Tang et al. 2015 format), 10 ratings.',
                   layout='tang', file_stem='imdb', file_suffix='.txt.ss', max_label=10),
    DocumentConfig(name='yahoo', description='Yahoo! Answers (Zhang et al. 2015), 10 topics.',
                   layout='zhang_csv', num_columns=4, max_label=10),
    DocumentConfig(name='amazon', description='Amazon reviews (Zhang et al. 2015), full (5) or polarity (2).',
                   layout='zhang_csv', num_columns=3, max_label=5),
    DocumentConfig(name='csfd', description='Czech CSFD movie reviews (Habernal et al. 2013), 3 classes.',
                   layout='csfd'),
    DocumentConfig(name='convote', description='Congressional floor debates (Thomas et al. 2006), yea/nay.',
                   layout='convote'),
]


def parse_tang_line(line: str, max_label: int) -> dict:
  """Parses `user\\t\\tproduct\\t\\trating\\t\\ttext` (Tang et al. 2015).

  Returns:
    `{'sentences': [...], 'label': rating as str}`; sentences split at `<sssss>` and stripped.

  Raises:
    ValueError: not 4 fields, a rating that is not an integer in 1..max_label, or no text.
  """
  fields = line.split('\t\t')
  if len(fields) != 4:
    raise ValueError(f'expected 4 fields separated by two tabs (user, product, rating, text), got {len(fields)}')
  rating = fields[2].strip()
  if not rating.isdigit() or not 1 <= int(rating) <= max_label:
    raise ValueError(f'rating {rating!r} is not an integer in 1..{max_label}')
  sentences = [s.strip() for s in fields[3].split(TANG_SENTENCE_SEPARATOR)]
  sentences = [s for s in sentences if s]
  if not sentences:
    raise ValueError('document without text')
  return {'sentences': sentences, 'label': str(int(rating))}


def parse_zhang_row(row: Sequence[str], num_columns: int, max_label: int) -> dict:
  """Parses one row `class, field, ...` of Zhang et al.'s CSV.

  Returns:
    `{'sentences': [text], 'label': class as str}`; `text` joins the non-empty fields with
    newlines, with the escaped newlines (`\\n`) restored.

  Raises:
    ValueError: wrong number of columns, or a class that is not an integer in 1..max_label.
  """
  if len(row) != num_columns:
    raise ValueError(f'expected {num_columns} comma-separated columns, got {len(row)}')
  label = row[0].strip()
  if not label.isdigit() or not 1 <= int(label) <= max_label:
    raise ValueError(f'class {label!r} is not an integer in 1..{max_label}')
  parts = [field.replace('\\n', '\n').strip() for field in row[1:]]
  text = '\n'.join(p for p in parts if p)
  if not text:
    raise ValueError('row without text')
  return {'sentences': [text], 'label': str(int(label))}


def convote_label(file_name: str) -> str:
  """The vote (`Y`/`N`) of a convote speech-segment file name `###_@@@@@@_%%%%$$$_PMV.txt`.

  Raises:
    ValueError: the name does not follow that pattern.
  """
  match = _CONVOTE_FILE.match(file_name)
  if not match:
    raise ValueError(f'convote file name {file_name!r} does not match ###_@@@@@@_%%%%$$$_PMV.txt')
  return match['vote']


class DocumentClassification(_base.ManualBuilder, skip_registration=True):
  """Documents (lists of sentences) with a class label; one config per corpus."""

  name = 'document_classification'
  BUILDER_CONFIGS = CONFIGS
  REQUIRE_CONFIG = True
  ENCODING_OPTION = True
  DESCRIPTION = __doc__
  CITATION = ('Tang, Qin and Liu 2015 (EMNLP); Zhang, Zhao and LeCun 2015 (NeurIPS); Habernal, '
              'Ptacek and Steinberger 2013 (WASSA); Thomas, Pang and Lee 2006 (EMNLP).')
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Put the files of the chosen config in manual_dir:
  - yelp13/yelp14/yelp15/imdb: Tang et al. 2015, http://ir.hit.edu.cn/~dytang/paper/emnlp2015/emnlp-2015-data.7z
    (mirrored by many repositories): yelp-2013-seg-20-20.{train,dev,test}.ss (same for 2014, 2015),
    imdb.{train,dev,test}.txt.ss.
  - yahoo / amazon: Zhang et al. 2015 (https://github.com/zhangxiangxiao/Crepe, Google Drive
    "text classification datasets"): the train.csv and test.csv of yahoo_answers_csv.tar.gz /
    amazon_review_full_csv.tar.gz (or amazon_review_polarity_csv.tar.gz).
  - csfd: https://corpora.kiv.zcu.cz/sentiment/ , "CSFD CZ -- 91,381 movie reviews": positive.txt,
    neutral.txt, negative.txt (directly in manual_dir or in manual_dir/csfd).
  - convote: http://www.cs.cornell.edu/home/llee/data/convote.html , convote_v1.1.tar.gz, extracted:
    manual_dir/convote_v1.1/data_stage_one/{training_set,development_set,test_set}/*.txt
    (manual_dir may also be convote_v1.1 or data_stage_one itself).
  """

  @classmethod
  def features(cls):
    return {'sentences': _base.string_list(), 'label': tfds.features.Text()}

  @classmethod
  def _config(cls, config_name: str | None) -> DocumentConfig:
    for config in CONFIGS:
      if config.name == config_name:
        return config
    raise ValueError(f'document_classification needs a config, one of {[c.name for c in CONFIGS]}; '
                     f'got {config_name!r}')

  @classmethod
  def source_files(cls, manual_dir, config_name):
    manual_dir = pathlib.Path(manual_dir)
    config = cls._config(config_name)
    return {'tang': _tang_files, 'zhang_csv': _zhang_files, 'csfd': _csfd_files,
            'convote': _convote_files}[config.layout](manual_dir, config, cls.MANUAL_DOWNLOAD_INSTRUCTIONS)

  def _examples(self, split: str, files: Sequence[pathlib.Path],
                dropped: collections.Counter) -> Iterator[dict]:
    config = self.builder_config
    if config.layout == 'tang':
      for path in files:
        for _, example in self.parse_lines(path, lambda l: parse_tang_line(l, config.max_label),
                                           dropped):
          yield example
    elif config.layout == 'zhang_csv':
      for path in files:
        yield from _read_zhang_csv(path, config, self.read_encoding, self.encoding_hint)
    elif config.layout == 'csfd':
      for path in files:
        label = path.stem
        for _, line in _base.read_lines(path, self.read_encoding, encoding_hint=self.encoding_hint):
          if not line.strip():
            dropped['empty_line'] += 1
            continue
          yield {'sentences': [line.strip()], 'label': label}
    else:
      for path in files:
        label = convote_label(path.name)
        lines = [line.strip() for _, line in _base.read_lines(path, self.read_encoding,
                                                              encoding_hint=self.encoding_hint)]
        text = ' '.join(line for line in lines if line)
        if not text:
          raise _base.FormatError(path, None, 'empty speech segment')
        yield {'sentences': [text], 'label': label}


def _tang_files(manual_dir, config, instructions):
  files = {}
  expected = []
  for split, suffix in _SPLIT_SUFFIXES.items():
    name = f'{config.file_stem}.{suffix}{config.file_suffix}'
    expected.append(name)
    if (manual_dir / name).is_file():
      files[split] = [manual_dir / name]
  if not files:
    raise _base.missing_files_error(f'document_classification/{config.name}', manual_dir, expected, instructions)
  return files


def _zhang_files(manual_dir, config, instructions):
  files = {split: [manual_dir / f'{split}.csv'] for split in ('train', 'test')
           if (manual_dir / f'{split}.csv').is_file()}
  if not files:
    raise _base.missing_files_error(f'document_classification/{config.name}', manual_dir,
                                    ['train.csv', 'test.csv'], instructions)
  return files


def _read_zhang_csv(path: pathlib.Path, config: DocumentConfig, encoding: str = 'utf-8',
                    encoding_hint: str = '') -> Iterator[dict]:
  with open(path, 'rb') as raw:
    bom_encoding, skip = _base.detect_bom(raw.read(4))
    raw.seek(skip)
    encoding = bom_encoding or encoding
    text = io.TextIOWrapper(raw, encoding=encoding, newline='')
    reader = csv.reader(text, strict=True)
    line = 1
    try:
      for row in reader:
        try:
          yield parse_zhang_row(row, config.num_columns, config.max_label)
        except ValueError as e:
          raise _base.FormatError(path, line, str(e)) from None
        line = reader.line_num + 1
    except csv.Error as e:
      raise _base.FormatError(path, line, f'bad CSV: {e}') from None
    except UnicodeDecodeError as e:
      raise _base.FormatError(path, line, f'not valid {encoding} ({e.reason}){encoding_hint}') from None


def _csfd_files(manual_dir, config, instructions):
  for directory in (manual_dir, manual_dir / 'csfd'):
    paths = [directory / f'{label}.txt' for label in _CSFD_LABELS]
    present = [p for p in paths if p.is_file()]
    if present and len(present) < len(paths):
      missing = [str(p) for p in paths if not p.is_file()]
      raise FileNotFoundError(f'document_classification/csfd: {missing} missing next to '
                              f'{[str(p) for p in present]} (all three classes are needed)')
    if present:
      return {'train': paths}
  raise _base.missing_files_error('document_classification/csfd', manual_dir,
                                  [f'{l}.txt' for l in _CSFD_LABELS], instructions)


def _convote_files(manual_dir, config, instructions):
  for root in (manual_dir / 'convote_v1.1' / 'data_stage_one', manual_dir / 'data_stage_one', manual_dir):
    dirs = {split: root / d for split, d in _CONVOTE_DIRS.items() if (root / d).is_dir()}
    if dirs:
      files = {}
      for split, directory in dirs.items():
        paths = sorted(p for p in directory.iterdir() if p.is_file() and p.suffix == '.txt')
        for p in paths:
          try:
            convote_label(p.name)
          except ValueError as e:
            raise _base.FormatError(p, None, str(e)) from None
        if paths:
          files[split] = paths
      if files:
        return files
  raise _base.missing_files_error('document_classification/convote', manual_dir,
                                  [f'convote_v1.1/data_stage_one/{d}/*.txt' for d in _CONVOTE_DIRS.values()],
                                  instructions)
