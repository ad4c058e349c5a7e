"""Tests for jax_structured.data.text and the vocabulary built from its tokens."""
import re

import pytest

from jax_structured.data import core
from jax_structured.data import text


def _kim_clean_str(string, trec=False):
  """Kim (2014)'s clean_str as published (process_data.py), except `\\(` written as `(`."""
  string = re.sub(r"[^A-Za-z0-9(),!?\'\`]", ' ', string)
  string = re.sub(r"\'s", " \'s", string)
  string = re.sub(r"\'ve", " \'ve", string)
  string = re.sub(r"n\'t", " n\'t", string)
  string = re.sub(r"\'re", " \'re", string)
  string = re.sub(r"\'d", " \'d", string)
  string = re.sub(r"\'ll", " \'ll", string)
  string = re.sub(r',', ' , ', string)
  string = re.sub(r'!', ' ! ', string)
  string = re.sub(r'\(', ' ( ', string)
  string = re.sub(r'\)', ' ) ', string)
  string = re.sub(r'\?', ' ? ', string)
  string = re.sub(r'\s{2,}', ' ', string)
  return string.strip() if trec else string.strip().lower()


@pytest.mark.parametrize('s', [
    "How did serfdom develop in and then leave Russia ?",
    "What 's the sister\xf0city of Denver ?",
    "Don't (you) think it's great?! Yes, 100%... we'll see; they'd've",
    "  Who wrote `` Hamlet '' ?\t",
])
def test_clean_str_matches_kim(s):
  assert text.clean_str(s, lowercase=False) == _kim_clean_str(s, trec=True)
  assert text.clean_str(s) == _kim_clean_str(s)


def test_clean_str_sst():
  assert text.clean_str_sst("It 's a -- GOOD film ; (really)!") == "it 's a good film (really)!"


def test_tokenize():
  assert text.tokenize("I don't like John's C++ code, e.g. at http://x.org/a. It costs $3.50 "
                       "(1,000 units) -- state-of-the-art U.S. stuff... isn't it?") == [
                           'I', 'do', "n't", 'like', 'John', "'s", 'C++', 'code', ',', 'e.g.',
                           'at', 'http://x.org/a', '.', 'It', 'costs', '$', '3.50', '(', '1,000',
                           'units', ')', '--', 'state-of-the-art', 'U.S.', 'stuff', '...', 'is',
                           "n't", 'it', '?']
  assert text.tokenize('Node.js and ZFS.', lowercase=True) == ['node.js', 'and', 'zfs', '.']
  assert text.whitespace_tokenize(' the  N <unk> \n') == ['the', 'N', '<unk>']


@pytest.mark.parametrize('paragraph,expected', [
    ('Dr. Smith went to Washington. He arrived at 3.30 p.m. on Monday, e.g. after lunch. Prices '
     'rose 2.5 percent! Why? "Because," he said.',
     ['Dr. Smith went to Washington.', 'He arrived at 3.30 p.m. on Monday, e.g. after lunch.',
      'Prices rose 2.5 percent!', 'Why?', '"Because," he said.']),
    ("It supports Python, Ruby, etc. The author is J. R. R. Tolkien. It works (see below.) Next.",
     ['It supports Python, Ruby, etc.', 'The author is J. R. R. Tolkien.',
      'It works (see below.)', 'Next.']),
    ('Use it, i.e. Foo works. Or not?! yes. This is v1.2. Then node.js works.\n\nNew paragraph',
     ['Use it, i.e. Foo works.', 'Or not?! yes.', 'This is v1.2.', 'Then node.js works.',
      'New paragraph']),
    ('He said "Stop." Then he left... The end', ['He said "Stop."', 'Then he left...', 'The end']),
    ('Fig. 3 shows it vs. the baseline. 42 runs were made.',
     ['Fig. 3 shows it vs. the baseline.', '42 runs were made.']),
    ('no end punctuation', ['no end punctuation']),
    ('   ', []),
])
def test_split_sentences(paragraph, expected):
  assert text.split_sentences(paragraph) == expected


def test_split_sentences_keeps_all_text():
  paragraph = 'A b. C d e.g. f. G h? I j! K l... M n.'
  assert ' '.join(text.split_sentences(paragraph)) == paragraph


def test_sst_phrases():
  nodes = text.sst_phrases('(3 (2 The) (4 (3 (2 good) (3 film)) (2 .)))')
  assert nodes[0] == (3, ['The', 'good', 'film', '.'])
  assert [label for label, _ in nodes] == [3, 2, 4, 3, 2, 3, 2]
  assert [tokens for _, tokens in nodes if len(tokens) == 1] == [['The'], ['good'], ['film'], ['.']]
  # Each internal node's tokens are the concatenation of its children's.
  assert nodes[3] == (3, ['good', 'film'])
  for bad, msg in [('(3 (2 The) (4 film)', 'missing'), ('(x The)', 'not an integer'),
                   ('(2 a)) ', 'trailing'), ('2 a', 'expected')]:
    with pytest.raises(ValueError, match=msg):
      text.sst_phrases(bad)


def test_unescape_ptb():
  assert text.unescape_ptb(['-LRB-', 'a', '-RRB-', '``', "''"]) == ['(', 'a', ')', '"', '"']
  assert text.unescape_ptb(['-lcb-', 'writer\\/director', '\\*\\*']) == ['{', 'writer/director', '**']


def test_filter_by_length():
  items = [[], ['a'], ['a'] * 3, ['a'] * 5, ['a'] * 6]
  kept, skipped = text.filter_by_length(items, len, max_length=5)
  assert kept == items[1:4] and skipped == {'empty': 1, 'too_long': 1}
  kept, skipped = text.filter_by_length(items, len, max_length=None, min_length=3)
  assert kept == items[2:] and skipped == {'too_short': 2}


def test_vocabulary_min_count_and_save(tmp_path):
  sentences = [['a'] * 6 + ['b'] * 5 + ['c'] * 7, ['d']]
  vocab = core.Vocabulary.from_corpus(sentences, min_count=6)  # the papers' "> 5"
  assert vocab.tokens == [core.PAD, core.UNK, 'c', 'a']
  assert list(vocab.encode(['a', 'b', 'zzz'])) == [3, core.UNK_ID, core.UNK_ID]
  vocab.save(str(tmp_path / 'vocab.json'))
  assert core.Vocabulary.load(str(tmp_path / 'vocab.json')).tokens == vocab.tokens
