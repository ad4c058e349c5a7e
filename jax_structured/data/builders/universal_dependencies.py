"""Universal Dependencies treebanks in CoNLL-U (https://universaldependencies.org/format.html).

Upstream files: `<treebank>-ud-{train,dev,test}.conllu` (e.g. `en_ewt-ud-train.conllu`) from a
UD release or the treebank's GitHub repository. The config is the treebank prefix (`en_ewt`,
`cs_pdt`, ...), any treebank; without a config the single treebank found in manual_dir is used.

Per sentence: `sent_id` and `text` (from the `# sent_id =` / `# text =` comments) and, per basic
token, FORM, LEMMA, UPOS, XPOS, HEAD, DEPREL. `heads` is the CoNLL-U HEAD column as is (1-based,
0 = ROOT); convert with `heads - 1` to the `trees` convention (-1 = ROOT). Multiword-token ranges
(`1-2`) and empty nodes (`8.1`) are skipped, as UD specifies for the basic tree.
"""
from __future__ import annotations

import collections
import pathlib
import re
from typing import Iterator, Sequence

import tensorflow_datasets as tfds

from jax_structured.data.builders import _base

_SUFFIXES = {'train': 'train', 'validation': 'dev', 'test': 'test'}
_FILE = re.compile(r'^(?P<treebank>.+)-ud-(?P<split>train|dev|test)\.conllu$')
_RANGE = re.compile(r'^\d+-\d+$')
_EMPTY = re.compile(r'^\d+\.\d+$')
NUM_COLUMNS = 10


def parse_conllu(lines: Iterator[tuple[int, str]], path: str = '<conllu>') -> Iterator[dict]:
  """Parses CoNLL-U sentences from `(lineno, line)` pairs (see `_base.read_lines`).

  Args:
    lines: numbered lines of one CoNLL-U file.
    path: file name for error messages.

  Yields:
    `{'sent_id', 'text', 'tokens', 'lemmas', 'upos', 'xpos', 'heads', 'deprels'}` per sentence;
    `heads` are ints (1-based, 0 = ROOT). A sentence without `# sent_id` gets `<file>:<line>`
    of its first line; without `# text`, its forms joined by spaces.

  Raises:
    FormatError: a token row without 10 tab-separated columns, a non-integer ID or HEAD, IDs not
      1, 2, 3, ..., a HEAD outside 0..n, or a sentence without tokens.
  """
  sentence = _new_sentence()
  for lineno, line in lines:
    if not line.strip():
      if sentence['start'] is not None:
        yield _finish(sentence, path)
      sentence = _new_sentence()
      continue
    if sentence['start'] is None:
      sentence['start'] = lineno
    if line.startswith('#'):
      key, eq, value = line[1:].partition('=')
      key = key.strip()
      if eq and key == 'sent_id':
        sentence['sent_id'] = value.strip()
      elif eq and key == 'text':
        sentence['text'] = value.strip()
      continue
    columns = line.split('\t')
    if len(columns) != NUM_COLUMNS:
      raise _base.FormatError(path, lineno, f'expected {NUM_COLUMNS} tab-separated columns, got {len(columns)}')
    token_id = columns[0]
    if _RANGE.match(token_id) or _EMPTY.match(token_id):
      continue  # multiword token / empty node: not part of the basic tree
    if not token_id.isdigit():
      raise _base.FormatError(path, lineno, f'ID {token_id!r} is not an integer, a range or a decimal')
    if int(token_id) != len(sentence['tokens']) + 1:
      raise _base.FormatError(path, lineno, f'ID {token_id} out of sequence (expected {len(sentence["tokens"]) + 1})')
    head = columns[6]
    if not head.isdigit():
      raise _base.FormatError(path, lineno, f'HEAD {head!r} of token {token_id} is not a non-negative integer')
    sentence['tokens'].append(columns[1])
    sentence['lemmas'].append(columns[2])
    sentence['upos'].append(columns[3])
    sentence['xpos'].append(columns[4])
    sentence['heads'].append(int(head))
    sentence['deprels'].append(columns[7])
    sentence['head_lines'].append(lineno)
  if sentence['start'] is not None:
    yield _finish(sentence, path)


def _new_sentence() -> dict:
  return {'start': None, 'sent_id': None, 'text': None, 'tokens': [], 'lemmas': [], 'upos': [],
          'xpos': [], 'heads': [], 'deprels': [], 'head_lines': []}


def _finish(sentence: dict, path: str) -> dict:
  n = len(sentence['tokens'])
  if n == 0:
    raise _base.FormatError(path, sentence['start'], 'sentence without tokens')
  for head, lineno in zip(sentence['heads'], sentence['head_lines']):
    if head > n:
      raise _base.FormatError(path, lineno, f'HEAD {head} outside the sentence (it has {n} words)')
  return {
      'sent_id': sentence['sent_id'] or f'{pathlib.Path(path).name}:{sentence["start"]}',
      'text': sentence['text'] if sentence['text'] is not None else ' '.join(sentence['tokens']),
      'tokens': sentence['tokens'],
      'lemmas': sentence['lemmas'],
      'upos': sentence['upos'],
      'xpos': sentence['xpos'],
      'heads': sentence['heads'],
      'deprels': sentence['deprels'],
  }


def treebanks(manual_dir: _base.PathLike) -> list[str]:
  """The treebank prefixes of the `*-ud-{train,dev,test}.conllu` files in `manual_dir`."""
  manual_dir = pathlib.Path(manual_dir)
  if not manual_dir.is_dir():
    return []
  return sorted({m['treebank'] for p in manual_dir.iterdir() if (m := _FILE.match(p.name))})


class UniversalDependencies(_base.ManualBuilder, skip_registration=True):
  """Sentences of one UD treebank with their basic dependency trees."""

  name = 'universal_dependencies'
  DYNAMIC_CONFIGS = True
  DESCRIPTION = __doc__
  HOMEPAGE = 'https://universaldependencies.org/'
  CITATION = 'de Marneffe et al. 2021. Universal Dependencies. Computational Linguistics 47(2).'
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Download a UD release from https://universaldependencies.org/#download (LINDAT) or clone the
  treebank (e.g. https://github.com/UniversalDependencies/UD_English-EWT) and put its
  <treebank>-ud-train.conllu, <treebank>-ud-dev.conllu, <treebank>-ud-test.conllu into manual_dir.
  """

  @classmethod
  def features(cls):
    strings = _base.string_list
    return {
        'sent_id': tfds.features.Text(), 'text': tfds.features.Text(),
        'tokens': strings(), 'lemmas': strings(), 'upos': strings(), 'xpos': strings(),
        'heads': _base.int_list(), 'deprels': strings(),
    }

  @classmethod
  def resolve_config(cls, config: str | None, manual_dir) -> str:
    """The treebank: `config` if given, else the only treebank in `manual_dir`."""
    if config is not None:
      if not re.fullmatch(r'[\w.-]+', config):
        raise ValueError(f'universal_dependencies: invalid treebank name {config!r}')
      return config
    found = treebanks(manual_dir) if manual_dir is not None else []
    if not found:
      raise _base.missing_files_error('universal_dependencies', manual_dir or '.',
                                      ['<treebank>-ud-{train,dev,test}.conllu'], cls.MANUAL_DOWNLOAD_INSTRUCTIONS)
    if len(found) > 1:
      raise ValueError(f'universal_dependencies: several treebanks in {manual_dir}: {found}; pass config=')
    return found[0]

  @classmethod
  def source_files(cls, manual_dir, config_name):
    manual_dir = pathlib.Path(manual_dir)
    treebank = cls.resolve_config(config_name, manual_dir)
    expected = {split: manual_dir / f'{treebank}-ud-{suffix}.conllu' for split, suffix in _SUFFIXES.items()}
    files = {split: [path] for split, path in expected.items() if path.is_file()}
    if not files:
      raise _base.missing_files_error('universal_dependencies', manual_dir, [p.name for p in expected.values()],
                                      cls.MANUAL_DOWNLOAD_INSTRUCTIONS)
    return files

  def _examples(self, split: str, files: Sequence[pathlib.Path],
                dropped: collections.Counter) -> Iterator[dict]:
    for path in files:
      yield from parse_conllu(_base.read_lines(path), str(path))
