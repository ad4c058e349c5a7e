"""Users' own text classification data: a folder of `train` / `dev` (or `validation`) / `test` files.

Each file is either
- `<split>.tsv`: one example a line, `label<TAB>text` (the first tab separates; the text may
  contain further tabs), or
- `<split>.jsonl`: one JSON object a line with a string `text` and a string or integer `label`
  (other keys are ignored).
Features: `{'text': str, 'label': str}`. The config names the dataset (default: the folder's name),
so several user datasets can share one data_dir. Blank lines (a trailing newline too many, an empty
line between records) are skipped and counted (`dropped['blank_line']`). A malformed line (reasons
'no_tab', 'no_label', 'empty_text', 'invalid_json') or an undecodable one stops the build naming it,
or, with `on_bad_lines='skip'`, is left out and counted under its reason. The files are UTF-8 unless
the user gives another encoding (`config.data.encoding`); a byte-order mark (UTF-8, UTF-16) is removed
and decides the encoding.
"""
from __future__ import annotations

import collections
import pathlib
import re
from typing import Iterator, Sequence

import tensorflow_datasets as tfds

from jax_structured.data.builders import _base

_STEMS = {'train': ('train',), 'validation': ('dev', 'validation'), 'test': ('test',)}
_FORMATS = ('.tsv', '.jsonl')


def parse_tsv_line(line: str) -> dict[str, str]:
  """`label<TAB>text` -> `{'text', 'label'}`.

  Raises:
    ValueError: no tab, an empty label or an empty text.
  """
  if not line.strip():
    raise ValueError('blank line (a line is "label<TAB>text")')
  label, tab, text = line.partition('\t')
  if not tab:
    raise _base.BadLine('no_tab', 'expected "label<TAB>text", found no tab')
  if not label.strip():
    raise _base.BadLine('no_label', 'empty label')
  if not text.strip():
    raise _base.BadLine('empty_text', f'empty text for label {label!r}')
  return {'text': text, 'label': label.strip()}


def parse_jsonl_line(line: str) -> dict[str, str]:
  """`{"text": ..., "label": ...}` -> `{'text', 'label'}` (an integer label becomes its str).

  Raises:
    ValueError: a blank line, invalid JSON, not an object, a missing/non-string text, a
      missing/empty label.
  """
  if not line.strip():
    raise ValueError('blank line (a line is one JSON object {"text": ..., "label": ...})')
  try:
    record = _base.json_object(line)
  except ValueError as e:
    raise _base.BadLine('invalid_json', str(e)) from None
  text, label = record.get('text'), record.get('label')
  if not isinstance(text, str) or not text.strip():
    raise _base.BadLine('empty_text', 'missing, empty or non-string "text"')
  if isinstance(label, bool) or not isinstance(label, (str, int)) or not str(label).strip():
    raise _base.BadLine('no_label', f'"label" must be a non-empty string or an integer, got {label!r}')
  return {'text': text, 'label': str(label).strip()}


class TextClassification(_base.ManualBuilder, skip_registration=True):
  """Single-text classification from `label<TAB>text` or jsonl files."""

  name = 'text_classification'
  DYNAMIC_CONFIGS = True
  ENCODING_OPTION = True
  DESCRIPTION = __doc__
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Put your own train.tsv / dev.tsv (or validation.tsv) / test.tsv files (`label<TAB>text`), or the
  same names with .jsonl ({"text": ..., "label": ...} per line), into manual_dir.
  """

  @classmethod
  def features(cls):
    return {'text': tfds.features.Text(), 'label': tfds.features.Text()}

  @classmethod
  def resolve_config(cls, config: str | None, manual_dir) -> str:
    """`config`, or the name of `manual_dir` made a valid config name."""
    if config is None:
      if manual_dir is None:
        raise ValueError('text_classification: pass config= (a name for the dataset)')
      config = pathlib.Path(manual_dir).resolve().name
      config = re.sub(r'[^\w.-]+', '_', config) or 'data'
    if not re.fullmatch(r'[\w.-]+', config):
      raise ValueError(f'text_classification: invalid config name {config!r} (letters, digits, _ . -)')
    return config

  @classmethod
  def source_files(cls, manual_dir, config_name):
    return _base.split_files(
        'text_classification', manual_dir,
        {split: [f'{stem}{ext}' for stem in stems for ext in _FORMATS] for split, stems in _STEMS.items()},
        cls.MANUAL_DOWNLOAD_INSTRUCTIONS)

  def _examples(self, split: str, files: Sequence[pathlib.Path],
                dropped: collections.Counter) -> Iterator[dict]:
    for path in files:
      parse = parse_tsv_line if path.suffix == '.tsv' else parse_jsonl_line
      for _, example in self.parse_lines(path, lambda line, p=parse: p(line) if line.strip() else None,
                                         dropped):
        if example is None:
          dropped['blank_line'] += 1
        else:
          yield example
