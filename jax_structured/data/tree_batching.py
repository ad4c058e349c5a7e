"""Binarised constituency trees (SST) as static-shape node arrays for the batched Tree-LSTM.

`binary_tree_arrays(line)` turns one PTB-format SST tree into the arrays `nn.tree_lstm` reads; for a
sentence of s words:
  tree_children int32 [s - 1, 2]: the node ids of the left and right child of internal node j;
  tree_heights  int32 [s - 1]:    1 + the larger child height (leaves have height 0);
  tree_labels   int32 [2s - 1]:   the sentiment label (0-4) of every node, by node id (phrase-level
                                  supervision as in Tai et al. 2015); with `binary_labels` the binary
                                  class (0-1 -> 0, 3-4 -> 1, neutral 2 -> -1: no label).
Node ids: 0..s-1 are the leaves in word order, s + j is internal node j in post-order (children before
parents, the root last: node 2s - 2). `collate_trees` pads a batch to T words: children -1, heights 0,
labels -1, shapes [B, T - 1, 2], [B, T - 1], [B, 2T - 1]; the ids never depend on T.
"""
from __future__ import annotations

import re
from typing import Optional, Sequence

import numpy as np

# Words are separated by ASCII spaces only (as the sst builder): SST words may contain U+00A0.
_TOKEN = re.compile(r'\(|\)|[^ \t()]+')
TREE_KEYS = ('tree_children', 'tree_heights', 'tree_labels')


class TreeError(ValueError):
  """A tree line that is malformed, not binary, or does not match the sentence's tokens."""


def binary_tree_arrays(line: str, tokens: Optional[Sequence[str]] = None, *, lowercase: bool = False,
                       binary_labels: bool = False) -> dict[str, np.ndarray]:
  """Node arrays of one binarised PTB-format tree (module docstring).

  Args:
    line: e.g. `(3 (2 The) (4 (3 good) (2 film)))`: every node `(label ...)`, preterminals `(label word)`,
      every other node exactly two children.
    tokens: the example's tokens; the tree's leaves (lower-cased if `lowercase`) must equal them.
    lowercase: compare lower-cased leaves with `tokens`.
    binary_labels: node labels as binary SST classes (`binary_sentiment`), as the binary task's
      phrase-level supervision uses them (Tai et al. 2015: neutral phrases are not trained on).

  Returns:
    {'tree_children': int32 [s - 1, 2], 'tree_heights': int32 [s - 1], 'tree_labels': int32 [2s - 1]}.

  Raises:
    TreeError: unbalanced brackets, a missing or non-integer label, a node with other than two children
      (a unary chain or a flat node: the binary Tree-LSTM needs binarised trees), text after the tree, or
      leaves that differ from `tokens` (saying at which word).
  """
  leaves, leaf_labels, internal = _parse_binary(line)
  if tokens is not None:
    _check_leaves(leaves, tokens, lowercase)
  arrays = _node_arrays(leaf_labels, internal)
  if binary_labels:
    arrays['tree_labels'] = binary_sentiment(arrays['tree_labels'])
  return arrays


def _parse_binary(line: str) -> tuple[list[str], list[int], list[tuple[list, int, int]]]:
  """The leaves, the leaves' labels and the internal nodes (child refs, height, label; post-order) of
  one bracketed binary tree; a child ref is ('leaf', leaf index, 0) or ('node', internal index,
  height). Raises TreeError as `binary_tree_arrays` says."""
  parts = _TOKEN.findall(line)
  if not parts:
    raise TreeError('empty line where a bracketed tree was expected')
  leaves: list[str] = []
  leaf_labels: list[int] = []
  internal: list[tuple[list, int, int]] = []  # (child refs, height, label), post-order
  stack: list[list] = []  # each open node: [label, child refs]
  roots: list[tuple] = []  # the ref of the closed outermost node (at most one)

  def close(ref):
    (stack[-1][1] if stack else roots).append(ref)

  i, n = 0, len(parts)
  while i < n:
    part = parts[i]
    if part == '(':
      if roots:
        raise TreeError(f'text after the end of the tree at token {i} ({part!r})')
      if i + 1 >= n or parts[i + 1] in '()':
        raise TreeError(f'node without a label at token {i}')
      label = _label(parts[i + 1], i + 1)
      if i + 2 < n and parts[i + 2] not in '()':  # preterminal (label word)
        if i + 3 >= n or parts[i + 3] != ')':
          raise TreeError(f'preterminal ({label} {parts[i + 2]}) is not closed right after its word')
        leaves.append(parts[i + 2])
        leaf_labels.append(label)
        close(('leaf', len(leaves) - 1, 0))
        i += 4
        continue
      stack.append([label, []])
      i += 2
    elif part == ')':
      if not stack:
        raise TreeError(f'unbalanced ")" at token {i}')
      label, kids = stack.pop()
      if len(kids) != 2:
        raise TreeError(f'node ({label} ...) closed at token {i} has {len(kids)} children; the binary '
                        'Tree-LSTM needs binarised trees (every non-preterminal node with exactly 2)')
      internal.append((kids, max(k[2] for k in kids) + 1, label))
      close(('node', len(internal) - 1, max(k[2] for k in kids) + 1))
      i += 1
    else:
      raise TreeError(f'word {part!r} outside a preterminal at token {i}')
  if stack:
    raise TreeError(f'unbalanced tree: {len(stack)} unclosed "(" at the end of the line')
  return leaves, leaf_labels, internal


def _node_arrays(leaf_labels: list[int], internal: list[tuple[list, int, int]]
                 ) -> dict[str, np.ndarray]:
  """The module's node arrays of a parsed tree of s = len(leaf_labels) words (`_parse_binary`)."""
  s = len(leaf_labels)
  children = np.full((s - 1, 2), -1, np.int32)
  heights = np.zeros((s - 1,), np.int32)
  labels = np.asarray(leaf_labels + [0] * (s - 1), np.int32)
  for j, (kids, height, label) in enumerate(internal):
    children[j] = [k[1] if k[0] == 'leaf' else s + k[1] for k in kids]
    heights[j] = height
    labels[s + j] = label
  return {'tree_children': children, 'tree_heights': heights, 'tree_labels': labels}


def subtree_arrays(arrays: dict[str, np.ndarray], node: int) -> tuple[int, int, dict[str, np.ndarray]]:
  """The subtree of `binary_tree_arrays`' tree rooted at node id `node`, as a tree of its own.

  A phrase of a binarised tree covers consecutive leaves `first..end-1`, and in post-order its m - 1
  internal nodes are consecutive ids ending at `node` (every node's descendants come right before it),
  so the subtree's arrays are slices renumbered to the module's node ids: leaf `first + i` becomes
  leaf `i`, internal node `s + j` becomes `m + j - j0`. Equal to `binary_tree_arrays` of the
  subtree's own bracket text (tested), without re-parsing. Phrase examples (the sst loader's
  `train_phrases` with `binary_trees`: Kim 2014, Kalchbrenner et al. 2014 train on every phrase)
  keep their tree this way.

  Args:
    arrays: `binary_tree_arrays` of a sentence of s words (`tree_labels` optional).
    node: a node id, 0..2s-2 (leaves 0..s-1, internal s..2s-2).

  Returns:
    (first, end, arrays of the m = end - first word subtree: children [m - 1, 2], heights [m - 1],
    labels [2m - 1] when given).
  """
  children = np.asarray(arrays['tree_children'])
  s = len(children) + 1
  if not 0 <= node < 2 * s - 1:
    raise ValueError(f'node id {node} outside the tree of {s} words (0..{2 * s - 2})')
  first, last = node, node
  while first >= s:  # leftmost leaf: follow left children
    first = int(children[first - s, 0])
  while last >= s:  # rightmost leaf: follow right children
    last = int(children[last - s, 1])
  m = last - first + 1
  j_end = node - s + 1 if node >= s else 0  # internal ids j0..j_end-1 (none for a leaf)
  j0 = j_end - (m - 1)
  block = children[j0:j_end]
  out = {'tree_children': np.where(block < s, block - first, block - s - j0 + m).astype(np.int32),
         'tree_heights': np.asarray(arrays['tree_heights'])[j0:j_end].astype(np.int32)}
  if 'tree_labels' in arrays:
    labels = np.asarray(arrays['tree_labels'])
    out['tree_labels'] = np.concatenate([labels[first:last + 1], labels[s + j0:s + j_end]]).astype(np.int32)
  return first, last + 1, out


def binary_sentiment(labels: np.ndarray) -> np.ndarray:
  """SST fine labels int [...] (0-4) -> binary classes: 0-1 -> 0, 3-4 -> 1, 2 (neutral) -> -1 (none)."""
  labels = np.asarray(labels, np.int32)
  return np.where(labels <= 1, 0, np.where(labels >= 3, 1, -1)).astype(np.int32)


def _label(part: str, position: int) -> int:
  try:
    return int(part)
  except ValueError:
    raise TreeError(f'node label {part!r} at token {position} is not an integer') from None


def _check_leaves(leaves: Sequence[str], tokens: Sequence[str], lowercase: bool) -> None:
  words = [w.lower() for w in leaves] if lowercase else list(leaves)
  tokens = list(tokens)
  if words == tokens:
    return
  for k, (a, b) in enumerate(zip(words, tokens)):
    if a != b:
      raise TreeError(f'the tree leaves do not match the tokens at word {k + 1}: leaf {a!r}, token {b!r} '
                      '(the tree must be of the same tokenised sentence)')
  raise TreeError(f'the tree has {len(words)} leaves but the sentence has {len(tokens)} tokens')


def collate_trees(examples: Sequence[dict], steps: int) -> dict[str, np.ndarray]:
  """Pads the tree arrays of a batch whose sentences are padded to `steps` words (module docstring).

  Returns {'tree_children': [B, T - 1, 2], 'tree_heights': [B, T - 1], 'tree_labels': [B, 2T - 1]}
  (labels only when the examples have them).
  """
  num_nodes = max(steps - 1, 0)
  children = np.full((len(examples), num_nodes, 2), -1, np.int32)
  heights = np.zeros((len(examples), num_nodes), np.int32)
  out = {'tree_children': children, 'tree_heights': heights}
  if 'tree_labels' in examples[0]:
    out['tree_labels'] = np.full((len(examples), 2 * steps - 1), -1, np.int32)
  for b, e in enumerate(examples):
    m = len(e['tree_heights'])
    children[b, :m] = e['tree_children']
    heights[b, :m] = e['tree_heights']
    if 'tree_labels' in out:
      out['tree_labels'][b, :len(e['tree_labels'])] = e['tree_labels']
  return out
