"""Stanford Sentiment Treebank (Socher et al. 2013) from its PTB-format trees.

Upstream files (`trainDevTestTrees_PTB.zip` -> `trees/`): `train.txt`, `dev.txt`, `test.txt`, one
tree per line, every node labelled with its sentiment 0-4, e.g. `(3 (2 The) (2 Rock) ...)`.

Configs:
- `fine`: 5 classes, the root label 0-4.
- `binary`: the root label mapped 0,1 -> 0 and 3,4 -> 1; neutral roots (2) are dropped and counted
  (`info.metadata['dropped'][split]['neutral_root']`), the protocol of Socher et al. 2013 / Tai et
  al. 2015 (6920/872/1821 sentences).
"""
from __future__ import annotations

import collections
import pathlib
import re
from typing import Iterator, Sequence

import numpy as np
import tensorflow_datasets as tfds

from jax_structured.data.builders import _base

_FILES = {'train': 'train.txt', 'validation': 'dev.txt', 'test': 'test.txt'}
# Words are separated by ASCII spaces only: SST words may contain U+00A0 (e.g. '8\xa01\/2').
_TOKEN = re.compile(r'\(|\)|[^ \t()]+')
NUM_FINE_LABELS = 5


def parse_tree(line: str) -> tuple[int, list[str]]:
  """Parses one PTB-format SST tree and checks its well-formedness.

  Args:
    line: a one-line tree `(label child ...)` whose preterminals are `(label word)` and whose
      labels are integers 0-4.

  Returns:
    `(root_label, leaves)`: the sentiment of the whole sentence and its words in order.

  Raises:
    ValueError: unbalanced brackets, a missing/non-integer/out-of-range label, a word outside a
      preterminal, an empty node, or text after the tree.
  """
  tokens = _TOKEN.findall(line)
  if not tokens:
    raise ValueError('empty line where a PTB tree was expected')
  leaves: list[str] = []
  stack: list[list[int]] = []  # [label, number of children]
  root_label = None
  i, n = 0, len(tokens)
  while i < n:
    token = tokens[i]
    if token == '(':
      if root_label is not None:
        raise ValueError(f'text after the end of the tree (token {i}: {token!r})')
      if i + 1 >= n or tokens[i + 1] in '()':
        raise ValueError(f'node without a label at token {i}')
      label = _label(tokens[i + 1])
      if stack:
        stack[-1][1] += 1
      stack.append([label, 0])
      i += 2
      if i < n and tokens[i] not in '()':  # preterminal: (label word)
        leaves.append(tokens[i])
        stack[-1][1] += 1
        i += 1
        if i >= n or tokens[i] != ')':
          raise ValueError(f'preterminal ({label} {leaves[-1]}) is not closed right after its word')
    elif token == ')':
      if not stack:
        raise ValueError(f'unbalanced ")" at token {i}')
      label, num_children = stack.pop()
      if num_children == 0:
        raise ValueError(f'empty node ({label}) at token {i}')
      if not stack:
        root_label = label
      i += 1
    else:
      raise ValueError(f'word {token!r} outside a preterminal at token {i}')
  if stack:
    raise ValueError(f'unbalanced tree: {len(stack)} unclosed "("')
  return root_label, leaves


def _label(token: str) -> int:
  try:
    label = int(token)
  except ValueError:
    raise ValueError(f'node label {token!r} is not an integer') from None
  if not 0 <= label < NUM_FINE_LABELS:
    raise ValueError(f'node label {label} is outside 0-4')
  return label


def binary_label(fine_label: int) -> int | None:
  """0,1 -> 0 (negative); 3,4 -> 1 (positive); 2 (neutral) -> None (dropped)."""
  return None if fine_label == 2 else int(fine_label > 2)


class Sst(_base.ManualBuilder, skip_registration=True):
  """SST sentences with their root sentiment and the full labelled tree."""

  name = 'sst'
  BUILDER_CONFIGS = [
      tfds.core.BuilderConfig(name='fine', description='5 classes (root label 0-4).'),
      tfds.core.BuilderConfig(name='binary', description='2 classes; neutral roots dropped.'),
  ]
  DESCRIPTION = __doc__
  HOMEPAGE = 'https://nlp.stanford.edu/sentiment/'
  CITATION = ('Socher et al. 2013. Recursive Deep Models for Semantic Compositionality Over a '
              'Sentiment Treebank. EMNLP.')
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Download https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip, unzip it and pass its
  `trees/` folder (holding train.txt, dev.txt, test.txt) as manual_dir.
  """

  @classmethod
  def features(cls):
    return {'text': tfds.features.Text(), 'label': np.int32, 'tree': tfds.features.Text()}

  @classmethod
  def source_files(cls, manual_dir, config_name):
    return _base.split_files('sst', manual_dir, {s: [n] for s, n in _FILES.items()},
                             cls.MANUAL_DOWNLOAD_INSTRUCTIONS)

  def _examples(self, split: str, files: Sequence[pathlib.Path],
                dropped: collections.Counter) -> Iterator[dict]:
    binary = self.builder_config.name == 'binary'
    for path in files:
      for _, ((root_label, leaves), line) in self.parse_lines(path, lambda l: (parse_tree(l), l),
                                                              dropped):
        label = root_label
        if binary:
          label = binary_label(root_label)
          if label is None:
            dropped['neutral_root'] += 1
            continue
        yield {'text': ' '.join(leaves), 'label': label, 'tree': line.strip()}
