"""Text processing of the papers: tokenisation, cleaning, sentence splitting, length filtering.

Everything here is deterministic, rule based and offline (no downloaded models):

* `clean_str` / `clean_str_sst`: the cleaning of Kim (2014), used by most sentence-classification papers
  on TREC and SST.
* `tokenize`: a Penn-Treebank-like word tokeniser for raw text (documents, user data).
* `whitespace_tokenize`: for already tokenised corpora (PTB language modelling, SNLI/Quora, IWSLT).
* `split_sentences`: a rule-based sentence splitter that knows abbreviations, initials, decimals,
  "e.g."/"i.e.", ellipses and closing quotes/brackets.
* `sst_phrases`: all labelled phrases of an SST tree in PTB bracket format.
* `filter_by_length`: drops too long / empty examples and counts what was dropped.
* `char_ids`: byte-level character ids of words (the parser's character CNN).
* `is_punctuation`: whether a token is a punctuation mark (Luo & Zhu's static boundary, eq. 2).
* `remove_invisible` / `printable`: what the tokenisers do with control and format characters, and
  how a word from the data is shown on the console.

Control and invisible characters (one decision, applied by `tokenize`, `whitespace_tokenize` and
`clean_str` alike): a control character (Unicode category Cc: NUL `\\x00`, bell `\\x07`, backspace
`\\x08`, escape, DEL, C1 controls; also tab and newline) separates words like a space and is never a
token or part of one; a format character (category Cf: zero-width space U+200B, zero-width
(non-)joiners U+200C/U+200D, soft hyphen U+00AD, byte-order mark U+FEFF, bidi marks) is invisible and
removed, so "foo\\u200bbar" is the one word "foobar", as it reads on screen.
"""
from __future__ import annotations

import collections
import re
import unicodedata
from typing import Callable, Iterable, Sequence, TypeVar

import numpy as np

T = TypeVar('T')

# Character ids of `char_ids`: 0 padding, 1 word begin, 2 word end, 3 + byte.
NUM_CHAR_IDS = 256 + 3

# --------------------------------------------------------------------------------------------------
# Cleaning (Kim 2014, github.com/yoonkim/CNN_sentence, process_data.py)

_KIM_RULES = (
    (re.compile(r"[^A-Za-z0-9(),!?'`]"), ' '),
    (re.compile(r"'s"), " 's"),
    (re.compile(r"'ve"), " 've"),
    (re.compile(r"n't"), " n't"),
    (re.compile(r"'re"), " 're"),
    (re.compile(r"'d"), " 'd"),
    (re.compile(r"'ll"), " 'll"),
    (re.compile(r','), ' , '),
    (re.compile(r'!'), ' ! '),
    (re.compile(r'\('), ' ( '),
    (re.compile(r'\)'), ' ) '),
    (re.compile(r'\?'), ' ? '),
)
_SPACES = re.compile(r'\s+')


def clean_str(text: str, *, lowercase: bool = True) -> str:
  """Kim (2014)'s `clean_str`: keeps ``[A-Za-z0-9(),!?'`]``, splits clitics and punctuation.

  Kim lower-cases every dataset except TREC (`clean_str(s, TREC=True)` keeps the case). One deliberate
  difference: Kim's regex replacement writes brackets as the two characters `\\(`; we write `(`.
  Control and format characters go as in `tokenize` (a control character separates words, a format
  character is removed) before Kim's rules, which turn every other character outside the kept set
  into a space.

  Args:
    text: raw text.
    lowercase: lower-case the result (False for TREC as in Kim 2014).

  Returns:
    The cleaned text, tokens separated by single spaces.
  """
  text = remove_invisible(text)
  for pattern, repl in _KIM_RULES:
    text = pattern.sub(repl, text)
  text = _SPACES.sub(' ', text).strip()
  return text.lower() if lowercase else text


def clean_str_sst(text: str) -> str:
  """Kim (2014)'s `clean_str_sst`: keeps ``[A-Za-z0-9(),!?'`]``, collapses spaces, lower-cases."""
  text = re.sub(r"[^A-Za-z0-9(),!?'`]", ' ', text)
  return _SPACES.sub(' ', text).strip().lower()


def whitespace_tokenize(text: str, *, lowercase: bool = False) -> list[str]:
  """Splits already tokenised text on whitespace (PTB LM data is used as is).

  Control characters split like whitespace and format characters are removed (`remove_invisible`),
  as in `tokenize`.
  """
  text = remove_invisible(text)
  return (text.lower() if lowercase else text).split()


# Ranges of Unicode category Cf (format characters, invisible), as of Python's unicodedata.
_FORMAT_RANGES = ((0xad, 0xad), (0x600, 0x605), (0x61c, 0x61c), (0x6dd, 0x6dd), (0x70f, 0x70f),
                  (0x890, 0x891), (0x8e2, 0x8e2), (0x180e, 0x180e), (0x200b, 0x200f),
                  (0x202a, 0x202e), (0x2060, 0x2064), (0x2066, 0x206f), (0xfeff, 0xfeff),
                  (0xfff9, 0xfffb), (0x110bd, 0x110bd), (0x110cd, 0x110cd), (0x13430, 0x13438),
                  (0x1bca0, 0x1bca3), (0x1d173, 0x1d17a), (0xe0001, 0xe0001), (0xe0020, 0xe007f))
_CONTROL_RE = re.compile('[\x00-\x1f\x7f-\x9f]')  # category Cc
_FORMAT_RE = re.compile('[' + ''.join(f'{chr(a)}-{chr(b)}' if a != b else chr(a)
                                      for a, b in _FORMAT_RANGES) + ']')


def remove_invisible(text: str) -> str:
  """`text` with every control character (Unicode Cc: `\\x00`-`\\x1f`, `\\x7f`-`\\x9f`, tab
  and newline included) made a space and every format character (Cf: zero-width space and joiners,
  soft hyphen, byte-order mark, bidi marks) removed.

  `"a\\x08b"` -> `"a b"`, `"a\\tb"` -> `"a b"`, `"foo\\u200bbar"` -> `"foobar"`. Printable text is
  returned unchanged (the same object).
  """
  if _CONTROL_RE.search(text):
    text = _CONTROL_RE.sub(' ', text)
  if not text.isascii() and _FORMAT_RE.search(text):
    text = _FORMAT_RE.sub('', text)
  return text


_ESCAPES = {'\t': '\\t', '\n': '\\n', '\r': '\\r'}


def printable(word: str) -> str:
  """`word` as the console and pictures show it: every character that does not print (control and
  format characters, and spaces other than ' ') written as a Python escape (`\\x08`, `\\u200b`,
  `\\t`), the rest unchanged; a word that prints is returned as it is."""
  if word.isprintable():
    return word
  return ''.join(ch if ch.isprintable() or ch == ' ' else _ESCAPES.get(ch) or _escape(ch) for ch in word)


def _escape(ch: str) -> str:
  code = ord(ch)
  return f'\\x{code:02x}' if code < 0x100 else f'\\u{code:04x}' if code < 0x10000 else f'\\U{code:08x}'


# PTB-style escapes found in SST / SNLI parses (brackets matched in any case: SST lower-cases them).
_PTB_ESCAPES = {'-LRB-': '(', '-RRB-': ')', '-LSB-': '[', '-RSB-': ']', '-LCB-': '{', '-RCB-': '}',
                '``': '"', "''": '"'}


def unescape_ptb_token(token: str) -> str:
  """One token with Penn Treebank escapes undone: `-LRB-` / `-lrb-` -> `(` (the other brackets alike),
  `` `` `` and `''` -> `"`, `\\/` -> `/`, `\\*` -> `*` (`writer\\/director` -> `writer/director`)."""
  plain = _PTB_ESCAPES.get(token.upper())
  if plain is not None:
    return plain
  return token.replace('\\/', '/').replace('\\*', '*')


def unescape_ptb(tokens: Sequence[str]) -> list[str]:
  """`unescape_ptb_token` of every token."""
  return [unescape_ptb_token(t) for t in tokens]


# --------------------------------------------------------------------------------------------------
# Word tokenisation of raw text

_TOKEN_RE = re.compile(r"""
    (?:https?://|www\.)\S+[^\s.,;:!?'")\]]      # URLs
  | [\w.+-]+@[\w-]+\.[\w.-]*\w                 # e-mail addresses
  | \d+(?:[.,:/]\d+)+                          # numbers with separators: 3.14 1,000 10:30 1/2
  | (?:[A-Za-z]\.){2,}                         # acronyms with dots: e.g. i.e. U.S.
  | [^\W_]+(?:[-'’/+][^\W_]+)*(?=n['’]t\b)     # the stem before a n't clitic (do|n't)
  | n['’]t\b                                   # the n't clitic
  | ['’](?:s|re|ve|ll|d|m)\b(?=\W|$)           # other clitics: 's 're 've 'll 'd 'm
  | [^\W_]+(?:[-/+.][^\W_]+)*\+*               # words, hyphenated/dotted compounds, C++
  | \.\.\.|--                                  # ellipsis, dash
  | \S                                         # any other single character (punctuation)
""", re.VERBOSE | re.IGNORECASE)


def tokenize(text: str, *, lowercase: bool = False) -> list[str]:
  """Penn-Treebank-like tokenisation of raw text.

  Splits punctuation off words and separates clitics ("don't" -> "do n't", "John's" -> "John 's"),
  keeps numbers with separators ("3.14", "1,000"), dotted acronyms ("e.g.", "U.S."), hyphenated and
  dotted compounds ("state-of-the-art", "node.js"), URLs and e-mail addresses as one token.

  Control and format characters (`remove_invisible`): no token holds one. A control character
  (`\\x00`, bell `\\x07`, backspace `\\x08`, tab `\\t`, newline, DEL, ...) separates words like a
  space (`"a\\x08b"` -> `['a', 'b']`); a format character (zero-width space `\\u200b`, joiners,
  soft hyphen, byte-order mark) is removed (`"foo\\u200bbar"` -> `['foobar']`); a text of nothing
  else has no tokens (`[]`, dropped as empty by the loaders).

  Args:
    text: raw text (str).
    lowercase: lower-case the tokens.

  Returns:
    The list of tokens.
  """
  text = remove_invisible(text)
  if lowercase:
    text = text.lower()
  return _TOKEN_RE.findall(text)


# Penn Treebank escapes of brackets (lower-cased in Tang et al.'s Yelp files) and its opening quote.
_PTB_PUNCTUATION = frozenset('-lrb- -rrb- -lsb- -rsb- -lcb- -rcb- ` ``'.split())


def is_punctuation(token: str) -> bool:
  """Whether `token` is a punctuation mark.

  It is when every character is Unicode punctuation (categories `P*`: ``. , ; : ! ? ' " ( ) - ... '' %
  & *`` and their Unicode forms), or it is PTB's opening quote (two backquotes) or a bracket escape
  (`-LRB-`, `-rrb-`, ...). Symbols (``$ + = < > ^ |``) and words with punctuation inside ("e.g.",
  "3.14", "don't") are not.
  """
  if not token:
    return False
  if token.lower() in _PTB_PUNCTUATION:
    return True
  return all(unicodedata.category(ch).startswith('P') for ch in token)


# --------------------------------------------------------------------------------------------------
# Sentence splitting

# Abbreviations after which a period never ends a sentence (lower-cased, without the final period).
NON_FINAL_ABBREVIATIONS = frozenset("""
    mr mrs ms dr prof sr jr st mt rev gen col lt sgt capt cmdr gov sen rep pres fr
    e.g i.e cf vs viz al approx ca fig figs eq eqs nos vol vols pp ch sec ref refs ed eds
    jan feb mar apr jun jul aug sep sept oct nov dec inc ltd co corp dept univ est
""".split())
# Abbreviations that end a sentence when the next word starts with an upper-case letter.
FINAL_ABBREVIATIONS = frozenset('etc'.split())

_CANDIDATE = re.compile(r"""
    (?P<end>[.!?]+|\.\.\.|…)     # sentence-final punctuation
    (?P<close>["'”’)\]]*)        # closing quotes / brackets stay with the sentence
    (?P<space>\s+)               # whitespace
    (?=(?P<next>["'“‘(\[]*\S))   # the next sentence's first characters
""", re.VERBOSE)
_LAST_WORD = re.compile(r'(\S+)$')


def _ends_sentence(before: str, end: str, next_start: str) -> bool:
  """Decides whether punctuation `end` after text `before` ends a sentence, given what follows."""
  first = next_start.lstrip('"\'“‘([')[:1]
  if end != '.' and not end.startswith('..') and end != '…':
    # '!' or '?' (possibly repeated): a boundary unless the next word continues in lower case.
    return not first.islower()
  match = _LAST_WORD.search(before)
  word = match.group(1) if match else ''
  core_word = word.lstrip('"\'“‘([').lower()
  if end == '.':
    if core_word in NON_FINAL_ABBREVIATIONS:
      return False
    if len(core_word) == 1 and core_word.isalpha():  # an initial: "J. Smith"
      return False
    if re.fullmatch(r'(?:[a-z]\.)+[a-z]', core_word):  # dotted acronyms ("U.S."): only before a capital
      return first.isupper()
    if core_word in FINAL_ABBREVIATIONS:
      return first.isupper()
  # A new sentence starts with an upper-case letter, a digit or an opening quote/bracket.
  return bool(first) and not first.islower()


def split_sentences(text: str) -> list[str]:
  """Splits a paragraph into sentences with deterministic rules (no trained model).

  A sentence ends at `.`, `!`, `?`, `...` (with any closing quotes/brackets) followed by whitespace,
  when the next sentence starts with an upper-case letter, a digit or an opening quote/bracket, and the
  period does not belong to an abbreviation ("Dr.", "e.g.", "i.e.", "vs.", months, ...) or an initial
  ("J. Smith"). Decimals ("3.5") and dotted names ("node.js") never split since no space follows the
  period. Blank lines (paragraph breaks) always split.

  Args:
    text: raw text.

  Returns:
    The sentences, stripped, in order, none empty.
  """
  sentences = []
  for paragraph in re.split(r'\n\s*\n', text):
    start = 0
    for m in _CANDIDATE.finditer(paragraph):
      if _ends_sentence(paragraph[start:m.start('end')], m.group('end'), m.group('next')):
        sentence = paragraph[start:m.end('close')].strip()
        if sentence:
          sentences.append(_SPACES.sub(' ', sentence))
        start = m.end('space')
    rest = paragraph[start:].strip()
    if rest:
      sentences.append(_SPACES.sub(' ', rest))
  return sentences


# --------------------------------------------------------------------------------------------------
# SST trees

def sst_phrases(tree: str) -> list[tuple[int, list[str]]]:
  """All labelled phrases of an SST tree in PTB bracket format, root first.

  `"(3 (2 The) (4 (3 good) (2 film)))"` gives `[(3, [The, good, film]), (2, [The]), (4, [good,
  film]), (3, [good]), (2, [film])]` (pre-order).

  Args:
    tree: one line of the SST PTB files.

  Returns:
    (label, tokens) for every node, root first.

  Raises:
    ValueError: on unbalanced brackets or a non-integer label.
  """
  pos = 0
  n = len(tree)
  nodes: list[tuple[int, list[str]]] = []

  def skip():
    nonlocal pos
    while pos < n and tree[pos].isspace():
      pos += 1

  def parse() -> list[str]:
    nonlocal pos
    skip()
    if pos >= n or tree[pos] != '(':
      raise ValueError(f'malformed SST tree at character {pos}: expected "(" in {tree[:80]!r}')
    pos += 1
    start = pos
    while pos < n and not tree[pos].isspace() and tree[pos] not in '()':
      pos += 1
    try:
      label = int(tree[start:pos])
    except ValueError:
      raise ValueError(f'malformed SST tree at character {start}: label {tree[start:pos]!r} is not '
                       f'an integer in {tree[:80]!r}') from None
    index = len(nodes)
    nodes.append((label, []))
    skip()
    tokens: list[str] = []
    if pos < n and tree[pos] == '(':
      while pos < n and tree[pos] == '(':
        tokens.extend(parse())
        skip()
    else:
      start = pos
      while pos < n and tree[pos] != ')':
        pos += 1
      tokens = tree[start:pos].split()
    if pos >= n or tree[pos] != ')':
      raise ValueError(f'malformed SST tree: missing ")" at character {pos} in {tree[:80]!r}')
    pos += 1
    nodes[index] = (label, tokens)
    return tokens

  parse()
  skip()
  if pos != n:
    raise ValueError(f'malformed SST tree: trailing text at character {pos} in {tree[:80]!r}')
  return nodes


# --------------------------------------------------------------------------------------------------
# Length filtering

def filter_by_length(items: Iterable[T], length_fn: Callable[[T], int], *,
                     max_length: int | None = None, min_length: int = 1
                     ) -> tuple[list[T], collections.Counter]:
  """Keeps items with `min_length <= length_fn(item) <= max_length` and counts the others.

  Args:
    items: anything (raw examples, token lists).
    length_fn: item -> length.
    max_length: inclusive upper bound (None or 0: no bound).
    min_length: inclusive lower bound (1 drops empty items).

  Returns:
    (kept items in order, Counter {'too_short': k, 'too_long': m} of the dropped ones).
  """
  kept, skipped = [], collections.Counter()
  for item in items:
    n = length_fn(item)
    if n < min_length:
      skipped['too_short' if min_length > 1 else 'empty'] += 1
    elif max_length and n > max_length:
      skipped['too_long'] += 1
    else:
      kept.append(item)
  return kept, skipped


def char_ids(words: Sequence[str], max_chars: int) -> np.ndarray:
  """Byte-level character ids of words (the input of `models.parser.CharCNN`).

  Args:
    words: the words of one sentence.
    max_chars: width L >= 3; longer words keep their first L - 2 UTF-8 bytes (plus the boundaries).

  Returns:
    int32[len(words), max_chars]: 1 (begin), UTF-8 bytes + 3, 2 (end), then 0 padding.
  """
  if max_chars < 3:
    raise ValueError(f'max_chars must be >= 3 (begin, one byte, end), got {max_chars}')
  out = np.zeros((len(words), max_chars), np.int32)
  for i, word in enumerate(words):
    ids = [1] + [b + 3 for b in word.encode('utf-8')[:max_chars - 2]] + [2]
    out[i, :len(ids)] = ids
  return out
