"""Sentences for the dependency parser: reading them from files, writing parses as CoNLL-U.

The data side of parsing text (`analysis.parsing` runs the model over these records):

* `read_sentences(path, fmt)`: the sentences of a file in one of `INPUT_FORMATS` ('raw', 'tokenized',
  'conllu', 'sst', 'trec', 'snli', 'quora', 'iwslt') as records
  {'words', 'sent_id', 'text', 'tags' (UPOS or None), 'rows', 'comments'} (`sentence` builds one).
* `tokenize_ewt(text)`: a rule-based tokeniser approximating UD English EWT tokens (the 'raw' format).
* `to_conllu(sentence, heads, relations, upos)`: one parsed sentence as CoNLL-U lines.
* `PUNCT_UPOS` / `punct_tag_ids(tag_vocab)`: the UPOS tags left out of the punctuation-free scores.

Heads follow the `trees` convention (0-based word indices, -1 = ROOT); CoNLL-U's HEAD column is
1-based with 0 = ROOT.
"""
from __future__ import annotations

import gzip
import html
import json
import os
import re
from typing import Any, Mapping, Sequence

INPUT_FORMATS = ('raw', 'tokenized', 'conllu', 'sst', 'trec', 'snli', 'quora', 'iwslt')

# UPOS tags excluded by the punctuation-free attachment scores (the CoNLL-2006/2007 convention by tag).
PUNCT_UPOS = ('PUNCT', 'SYM')

_ABBREVIATIONS = ('Mr', 'Mrs', 'Ms', 'Dr', 'Prof', 'St', 'Jr', 'Sr', 'vs', 'etc', 'Inc', 'Ltd', 'Co',
                  'Corp', 'Jan', 'Feb', 'Mar', 'Apr', 'Jun', 'Jul', 'Aug', 'Sep', 'Sept', 'Oct',
                  'Nov', 'Dec', 'No', 'Mt', 'Gov', 'Sen', 'Rep', 'Gen', 'Col', 'Lt', 'Capt')
_CLITICS = r"(?:[sSdDmM]|re|RE|ve|VE|ll|LL)"
_TOKEN_RE = re.compile(r"""
    (?:https?://|www\.)\S+?(?=[.,!?;:)\]]*(?:\s|$))  # URLs (without trailing punctuation)
  | [\w.+-]+@[\w-]+(?:\.[\w-]+)+                  # e-mail addresses
  | (?:[A-Za-z]\.){2,}                            # U.S. e.g. i.e.
  | (?:%s)\.                                      # Mr. Dr. etc.
  | \w+(?=[nN]'[tT]\b) | [nN]'[tT]\b               # do|n't  (UD EWT splits negation clitics)
  | '%s\b                                         # 's 're 've 'll 'd 'm
  | [A-Za-z]+'(?!%s\b)[A-Za-z]+                   # O'Brien
  | \d+(?:[.,:]\d+)*                              # 3.14 1,000 10:30
  | \w+                                           # words (hyphens split, as in UD EWT)
  | \.\.\.+ | --+ | ``|'' | [^\w\s]               # punctuation
""" % ('|'.join(_ABBREVIATIONS), _CLITICS, _CLITICS), re.VERBOSE)


def tokenize_ewt(text: str) -> list[str]:
  """Rule-based English tokeniser approximating UD English EWT tokens.

  Splits punctuation, negation and other clitics ("don't" -> do n't, "it's" -> it 's) and hyphens,
  keeps URLs, e-mail addresses, decimal numbers, dotted abbreviations (U.S., e.g.) and a list of
  titles/months ("Mr.") whole. (`data.text.tokenize` is the Penn-Treebank-like tokeniser of the
  classification datasets.)

  Args:
    text: one sentence.

  Returns:
    The tokens (no whitespace tokens; an empty list for blank text).
  """
  return _TOKEN_RE.findall(text)


def punct_tag_ids(tag_vocab) -> tuple[int, ...]:
  """Ids of the `PUNCT_UPOS` tags in a tag `Vocabulary` (or a list of tag names)."""
  tokens = list(getattr(tag_vocab, 'tokens', tag_vocab))
  return tuple(tokens.index(t) for t in PUNCT_UPOS if t in tokens)


def sentence(words: Sequence[str], sent_id: str, *, text: str | None = None,
             tags: Sequence[str] | None = None, rows=None, comments=None) -> dict[str, Any]:
  """A sentence record (see the module docstring); `text` defaults to the words joined by spaces."""
  return {'words': list(words), 'sent_id': sent_id,
          'text': text if text is not None else ' '.join(words), 'tags': tags, 'rows': rows,
          'comments': comments}


def _open(path: str):
  if path.endswith('.gz'):
    return gzip.open(path, 'rt', encoding='utf-8')
  return open(path, encoding='utf-8')


def _tree_leaves(tree: str, where: str) -> list[str]:
  """Leaves of a one-line PTB tree "(3 (2 It) (4 ...))" (SST) or binary parse "( ( A b ) c )"."""
  leaves = [t for t in tree.replace('(', ' ( ').replace(')', ' ) ').split() if t not in '()']
  labelled = re.findall(r'\(\s*\S+\s+([^()\s]+)\s*\)', tree)
  if tree.lstrip().startswith('(') and re.match(r'\(\d', tree.lstrip()):  # SST: drop labels
    leaves = labelled
  if not leaves:
    raise ValueError(f'{where}: no words in the tree {tree[:60]!r}')
  return leaves


def _trec_sentence(line: str, line_no: int, where: str) -> dict[str, Any]:
  label, _, question = line.partition(' ')
  if ':' not in label or not question.strip():
    raise ValueError(f'{where}: expected "COARSE:fine question", got {line[:60]!r}')
  # The `trec` loader's words, so that the parses line up with a trained model's trees
  # (`launch.induce_trees --reference`).
  from jax_structured.data import loaders  # pylint: disable=g-import-not-at-top
  return sentence(loaders.trec_tokens(question), f'{line_no}', text=question.strip())


def _snli_sentences(line: str, line_no: int, where: str) -> list[dict[str, Any]]:
  try:
    pair = json.loads(line)
  except json.JSONDecodeError as e:
    raise ValueError(f'{where}: not JSON ({e})') from None
  out = []
  for side, key in (('premise', 'sentence1'), ('hypothesis', 'sentence2')):
    if f'{key}_binary_parse' in pair:
      words = _tree_leaves(pair[f'{key}_binary_parse'], where)
    elif key in pair:
      words = tokenize_ewt(pair[key])
    else:
      raise ValueError(f'{where}: no {key!r} in the SNLI record')
    out.append(sentence(words, f'{pair.get("pairID", line_no)}-{side}', text=pair.get(key)))
  return out


def _quora_sentences(line: str, line_no: int, where: str) -> list[dict[str, Any]]:
  cols = line.split('\t')
  if len(cols) == 3 and cols[2] in ('0', '1'):
    questions = cols[:2]
  elif len(cols) == 4 and cols[0] in ('0', '1'):
    questions = cols[1:3]
  else:
    raise ValueError(f'{where}: expected "q1<TAB>q2<TAB>label" or "label<TAB>q1<TAB>q2<TAB>id", '
                     f'got {len(cols)} column(s)')
  return [sentence(q.split(), f'{line_no}-q{k}') for k, q in enumerate(questions, 1)]


def _line_sentences(fmt: str, line: str, line_no: int, where: str) -> list[dict[str, Any]]:
  """The sentences of one non-blank line of a line format (all of `INPUT_FORMATS` but 'conllu')."""
  if fmt == 'raw':
    return [sentence(tokenize_ewt(line), f'{line_no}', text=line.strip())]
  if fmt == 'tokenized':
    return [sentence(line.split(), f'{line_no}')]
  if fmt == 'iwslt':
    return [sentence(html.unescape(line).split(), f'{line_no}')]
  if fmt == 'sst':
    return [sentence(_tree_leaves(line, where), f'{line_no}')]
  if fmt == 'trec':
    return [_trec_sentence(line, line_no, where)]
  if fmt == 'snli':
    return _snli_sentences(line, line_no, where)
  return _quora_sentences(line, line_no, where)


def read_sentences(path: str, fmt: str) -> list[dict[str, Any]]:
  """Reads the sentences to parse from `path` in format `fmt`.

  Formats: 'raw' (one sentence per line, `tokenize_ewt`ed), 'tokenized' (one sentence per line,
  tokens separated by whitespace), 'conllu' (FORM column; UPOS kept as input tags when given;
  comments, multiword-token lines and the other columns are kept for writing back; empty nodes are
  dropped), 'sst' (PTB trees, one per line: the leaves), 'trec' (`LABEL:fine question`, tokenised as
  the `trec` loader does: Kim's clean_str, case kept), 'snli' (jsonl(.gz): premise and hypothesis of
  each pair, tokens of the binary parses), 'quora' (TSV `q1 q2 label` or BiMPM `label q1 q2 id`; both
  questions), 'iwslt' (one tokenised sentence per line; HTML entities such as &apos; unescaped).
  Blank lines are skipped in the line formats.

  Args:
    path: the input file (gzip when it ends in .gz; 'trec' files are ISO-8859-1).
    fmt: one of `INPUT_FORMATS`.

  Returns:
    A list of `sentence` records {'words', 'sent_id', 'text', 'tags' (list or None), 'rows',
    'comments'}.

  Raises:
    FileNotFoundError naming the path; ValueError naming path:line for malformed input.
  """
  if fmt not in INPUT_FORMATS:
    raise ValueError(f'unknown input format {fmt!r}; expected one of {INPUT_FORMATS}')
  if not os.path.exists(path):
    raise FileNotFoundError(f'input file not found: {path}')
  if fmt == 'conllu':
    return read_conllu(path)
  out = []
  opener = open(path, encoding='iso-8859-1') if fmt == 'trec' else _open(path)
  with opener as f:
    for line_no, line in enumerate(f, 1):
      line = line.rstrip('\r\n')
      if line.strip():
        out.extend(_line_sentences(fmt, line, line_no, f'{path}:{line_no}'))
  empty = [s['sent_id'] for s in out if not s['words']]
  if empty:
    raise ValueError(f'{path}: sentence(s) without words: {empty[:5]}')
  return out


def _conllu_sentence(rows: list[list[str]], comments: list[str], index: int) -> dict[str, Any]:
  """The record of one CoNLL-U sentence (`index`: its 1-based position, the default sent_id)."""
  words = [r[1] for r in rows if r[0].isdigit()]
  upos = [r[3] for r in rows if r[0].isdigit()]
  sent_id = next((c.split('=', 1)[1].strip() for c in comments if c.startswith('# sent_id')),
                 str(index))
  text = next((c.split('=', 1)[1].strip() for c in comments if c.startswith('# text')), None)
  return sentence(words, sent_id, text=text, tags=None if any(t == '_' for t in upos) else upos,
                  rows=rows, comments=comments)


def _conllu_row(line: str, rows: list[list[str]], where: str) -> list[str] | None:
  """The 10 columns of a word / multiword-token line; None for an empty node (enhanced graph)."""
  cols = line.split('\t')
  if len(cols) != 10:
    raise ValueError(f'{where}: expected 10 tab-separated CoNLL-U columns, got {len(cols)}')
  if '.' in cols[0]:
    return None  # empty node of the enhanced graph: not part of the basic tree
  if not re.fullmatch(r'\d+(-\d+)?', cols[0]):
    raise ValueError(f'{where}: bad ID {cols[0]!r}')
  if cols[0].isdigit() and int(cols[0]) != sum(r[0].isdigit() for r in rows) + 1:
    raise ValueError(f'{where}: word ID {cols[0]} out of sequence')
  return cols


def read_conllu(path: str) -> list[dict[str, Any]]:
  """The sentences of a CoNLL-U file (`read_sentences(path, 'conllu')`, without its checks)."""
  out, rows, comments, start = [], [], [], 1
  with _open(path) as f:
    lines = list(f) + ['\n']
  for line_no, line in enumerate(lines, 1):
    line = line.rstrip('\r\n')
    if not line.strip():
      if rows:
        out.append(_conllu_sentence(rows, comments, len(out) + 1))
      elif comments:
        raise ValueError(f'{path}:{start}: comment lines without a sentence')
      rows, comments, start = [], [], line_no + 1
    elif line.startswith('#'):
      comments.append(line)
    else:
      cols = _conllu_row(line, rows, f'{path}:{line_no}')
      if cols is not None:
        rows.append(cols)
  return out


def to_conllu(sentence_record: Mapping[str, Any], heads: Sequence[int], relations: Sequence[str],
              upos: Sequence[str] | None = None) -> str:
  """One sentence as CoNLL-U (HEAD 1-based, 0 = ROOT; DEPREL; UPOS when given; DEPS '_').

  Args:
    sentence_record: a `read_sentences` record (its CoNLL-U rows and comments are kept when present).
    heads: int [n] 0-based heads, -1 = ROOT (the `trees` convention).
    relations: relation name of each word.
    upos: UPOS of each word (None: keep the input's, '_' if none).

  Returns:
    The sentence's lines, ending with the blank line.
  """
  words = sentence_record['words']
  if sentence_record.get('comments'):
    lines = list(sentence_record['comments'])
  else:
    lines = [f'# sent_id = {sentence_record["sent_id"]}', f'# text = {sentence_record["text"]}']
  rows = sentence_record.get('rows') or [[str(i + 1), w, '_', '_', '_', '_', '_', '_', '_', '_']
                                         for i, w in enumerate(words)]
  m = 0
  for row in rows:
    row = list(row)
    if row[0].isdigit():
      row[6], row[7], row[8] = str(int(heads[m]) + 1), relations[m], '_'
      if upos is not None:
        row[3] = upos[m]
      m += 1
    lines.append('\t'.join(row))
  return '\n'.join(lines) + '\n\n'
