"""New text for a trained classifier: lines -> encoded examples, tokenised as the run's loader did.

`tokenizer(data_config)` is the word splitting of the run's data loader (`config.data.name`), read from
the config saved in the workdir: `text.tokenize` for `text_classification` and the raw formats of
`document_classification`, whitespace for the pre-tokenised corpora (SST, Quora, Tang et al.'s Yelp /
IMDB files), Kim (2014)'s `clean_str` for TREC (`clean=True`), both with the run's `lowercase`. SNLI
was trained on the tokens of its parses; new text is split with `text.tokenize`, brackets and double
quotes written as the Penn Treebank writes them (`-LRB-`, two backquotes, two single quotes): the parses' tokens for 19,983 of
SNLI dev's 20,000 sentences (the rest: abbreviations such as 'St.' that the parses keep whole).

`read_lines(lines, kind, ...)` turns input lines into examples of `kind` (`data.core` formats):

- 'sentence': one text per line;
- 'pair': `premise<TAB>hypothesis`;
- 'document': one document per line, its sentences separated by `<sssss>` (Tang et al.'s files) or, without
  one, split with `text.split_sentences` (as the loaders do); truncated to `max_sentences` x
  `max_sentence_length` as training did (counted), punctuation flagged / replaced as
  `config.data.punctuation` asks (Luo & Zhu).

A line that is empty, a pair line without its tab, a document without a word, or a line that is not
valid text in the encoding is a `BadLine` (file:line and what to do) with `on_bad_lines='error'`, or is
left out and counted per reason with 'skip' (`Lines.skipped`); the examples keep each good line's number.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from jax_structured import errors
from jax_structured.data import text as text_lib

ON_BAD_LINES = ('error', 'skip')
DOCUMENT_SEPARATOR = '<sssss>'  # Tang et al. (2015)'s sentence separator, read by the builders too
_PRETOKENISED_DOCUMENTS = ('yelp13', 'yelp14', 'yelp15', 'imdb')
PUNCTUATION_TOKEN = 'p'  # `data.loaders.documents.PUNCTUATION_TOKEN` (Luo & Zhu sec. IV-B)


class BadLine(errors.UserError):
  """An input line that cannot be read; the message names `source:line` and what to do."""


def tokenizer(data_config: Mapping[str, Any]) -> Callable[[str], list[str]]:
  """`fn(text) -> tokens`: the word splitting the run's loader (`data_config['name']`) applied.

  Args:
    data_config: the saved run's `config.data` (a ConfigDict or dict; missing keys take the loaders'
      defaults).
  """
  from jax_structured.data.loaders import options  # pylint: disable=g-import-not-at-top
  name = str(data_config.get('name', ''))
  defaults = options.loader_defaults(name) if name in options.LOADER_DEFAULTS else {}
  get = lambda key, default=None: data_config.get(key, defaults.get(key, default))  # noqa: E731
  lower = bool(get('lowercase', True))
  if name == 'trec':
    from jax_structured.data.loaders import trec  # pylint: disable=g-import-not-at-top
    clean = bool(get('clean', True))
    return lambda s: trec.trec_tokens(s, clean=clean, lowercase=lower)
  if name == 'snli':
    return lambda s: _ptb_brackets_and_quotes(text_lib.tokenize(s, lowercase=lower))
  if name == 'document_classification':
    choice = get('tokenizer', 'auto')
    if choice == 'whitespace' or (choice == 'auto' and get('config', '') in _PRETOKENISED_DOCUMENTS):
      return lambda s: text_lib.whitespace_tokenize(s, lowercase=lower)
    return lambda s: text_lib.tokenize(s, lowercase=lower)
  if name == 'text_classification':
    return lambda s: text_lib.tokenize(s, lowercase=lower)
  # sst, quora_qqp and the synthetic / test data sets: the corpora's own tokens, whitespace-separated.
  return lambda s: text_lib.whitespace_tokenize(s, lowercase=lower)


_PTB = {'(': '-LRB-', ')': '-RRB-', '[': '-LSB-', ']': '-RSB-', '{': '-LCB-', '}': '-RCB-'}


def _ptb_brackets_and_quotes(tokens: list[str]) -> list[str]:
  """Brackets as the Penn Treebank writes them (-LRB- ...) and straight double quotes as opening ``
  and closing '' in turn: the tokens of SNLI's parses."""
  out, opened = [], False
  for t in tokens:
    if t == '"':
      t, opened = ("''" if opened else '``'), not opened
    out.append(_PTB.get(t, t))
  return out


@dataclasses.dataclass
class Lines:
  """What `read_lines` read.

  Attributes:
    examples: encoded examples (`data.core` formats of the kind), one per good line.
    line_numbers: the 1-based input line of each example.
    words: each example's words (pairs: (premise words, hypothesis words); documents: sentences).
    skipped: {reason: count} of the lines left out (`on_bad_lines='skip'`).
    truncated: {what: count} of the inputs cut to the lengths the run was trained with.
    bad: (line number, reason) of every line left out.
    error: with on_bad_lines='error', the `BadLine` of the first bad line (reading stopped there;
      the examples before it are kept so that their output is not lost); None otherwise.
  """
  examples: list
  line_numbers: list
  words: list
  skipped: dict
  truncated: dict
  bad: list = dataclasses.field(default_factory=list)
  error: Any = None


def read_lines(lines: Iterable[str | bytes], kind: str, vocab, data_config: Mapping[str, Any], *,
               source: str = '<input>', on_bad_lines: str = 'error', encoding: str = 'utf-8',
               first_line: int = 1) -> Lines:
  """Encodes input lines as examples of `kind` ('sentence', 'pair' or 'document') for `vocab`.

  Args:
    lines: texts (str) or raw lines (bytes, decoded with `encoding`), without or with their newline.
    kind: the run's task kind.
    vocab: the run's `data.Vocabulary` (unknown words -> `<unk>`, as in training).
    data_config: the run's `config.data` (tokenizer, truncation, punctuation).
    source: the input's name in messages (a path, or '<stdin>').
    on_bad_lines: 'error' (raise `BadLine` at the first bad line) or 'skip' (count it).
    encoding: the encoding of byte lines (named in the message of an undecodable line).
    first_line: the number of the first line.

  Returns:
    `Lines` (with on_bad_lines='error', reading stops at the first bad line: `Lines.error`).
  """
  if on_bad_lines not in ON_BAD_LINES:
    raise ValueError(f'on_bad_lines={on_bad_lines!r}; valid: {ON_BAD_LINES}')
  if kind not in ('sentence', 'pair', 'document'):
    raise ValueError(f'task kind {kind!r}: only sentence, pair and document classifiers read new text')
  tokenize = tokenizer(data_config)
  out = Lines([], [], [], collections.Counter(), collections.Counter())
  for number, line in enumerate(lines, first_line):
    try:
      textline = _decode(line, encoding)
      example, words = _example(textline, kind, tokenize, vocab, data_config, out.truncated)
    except _Bad as bad:
      if on_bad_lines == 'error':
        out.error = BadLine(f'{source}:{number}: {bad.message}; {bad.remedy} (or --on_bad_lines=skip to '
                            'leave such lines out, counted)')
        break
      out.skipped[bad.reason] += 1
      out.bad.append((number, bad.reason))
      continue
    out.examples.append(example)
    out.line_numbers.append(number)
    out.words.append(words)
  out.skipped, out.truncated = dict(out.skipped), dict(out.truncated)
  return out


class _Bad(Exception):

  def __init__(self, reason: str, message: str, remedy: str):
    super().__init__(message)
    self.reason, self.message, self.remedy = reason, message, remedy


def _decode(line: str | bytes, encoding: str) -> str:
  if isinstance(line, bytes):
    try:
      line = line.decode(encoding)
    except UnicodeDecodeError as e:
      raise _Bad('undecodable', f'not valid {encoding} ({e.reason} at byte {e.start})',
                 'convert the file, or give its encoding with --encoding') from None
  return line.rstrip('\r\n')


def _example(line: str, kind: str, tokenize, vocab, cfg, truncated) -> tuple[dict, Any]:
  if not line.strip():
    raise _Bad('empty', 'empty line', 'remove it: every line is one input')
  if kind == 'sentence':
    words = tokenize(line)
    if not words:
      raise _Bad('no_words', 'no words after tokenisation', 'remove the line')
    return {'tokens': vocab.encode(words), 'label': 0}, words
  if kind == 'pair':
    if '\t' not in line:
      raise _Bad('no_tab', 'a pair line needs premise<TAB>hypothesis; found no tab',
                 'separate the two texts with one tab')
    premise, hypothesis = line.split('\t', 1)
    pw, hw = tokenize(premise), tokenize(hypothesis.replace('\t', ' '))
    if not pw or not hw:
      raise _Bad('empty_side', f'the {"premise" if not pw else "hypothesis"} has no words',
                 'give both texts')
    return {'premise': vocab.encode(pw), 'hypothesis': vocab.encode(hw), 'label': 0}, (pw, hw)
  return _document(line, tokenize, vocab, cfg, truncated)


def _document(line: str, tokenize, vocab, cfg, truncated) -> tuple[dict, list]:
  """A document example: sentences split, tokenised, truncated and flagged as the loaders do."""
  parts = (line.split(DOCUMENT_SEPARATOR) if DOCUMENT_SEPARATOR in line
           else text_lib.split_sentences(line))
  max_len, max_sentences = int(cfg.get('max_sentence_length', 0) or 0), int(cfg.get('max_sentences', 0) or 0)
  doc = []
  for part in parts:
    tokens = tokenize(part)
    if not tokens:
      continue
    if max_len and len(tokens) > max_len:
      truncated[f'sentences cut to config.data.max_sentence_length={max_len}'] += 1
      tokens = tokens[:max_len]
    doc.append(tokens)
  if not doc:
    raise _Bad('no_words', 'a document without words', 'remove the line')
  if max_sentences and len(doc) > max_sentences:
    truncated[f'documents cut to config.data.max_sentences={max_sentences}'] += 1
    doc = doc[:max_sentences]
  example: dict[str, Any] = {'label': 0}
  punctuation = cfg.get('punctuation', '')
  if punctuation:
    flags = [[int(text_lib.is_punctuation(t)) for t in s] for s in doc]
    if punctuation == 'p':
      doc = [[PUNCTUATION_TOKEN if f else t for t, f in zip(s, fs)] for s, fs in zip(doc, flags)]
    example['punctuation'] = [np.asarray(f, np.int32) for f in flags]
  example['sentences'] = [vocab.encode(s) for s in doc]
  return example, doc


def split_text(texts: Iterable[str] | str, kind: str) -> list[str]:
  """Python inputs as lines: a str is one input; pairs may be (premise, hypothesis) tuples."""
  if isinstance(texts, str):
    texts = [texts]
  out = []
  for t in texts:
    if kind == 'pair' and isinstance(t, (tuple, list)):
      if len(t) != 2:
        raise ValueError(f'a pair is (premise, hypothesis), got {len(t)} texts: {t!r}')
      t = f'{t[0]}\t{t[1]}'
    if not isinstance(t, str):
      raise TypeError(f'inputs are strings (pairs: "premise\\thypothesis" or a 2-tuple), got {t!r}')
    out.append(t.replace('\n', ' ').replace('\r', ' '))
  return out
