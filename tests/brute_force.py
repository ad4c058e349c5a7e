"""Independent float64 references by brute-force enumeration of dependency trees.

Used by the tests of `jax_structured.trees`: every head assignment of n <= 6 words is enumerated,
trees are kept, and log Z, marginals, argmax and projectivity follow by summation over the list.
Heads use the library convention: `heads[m]` is the head word of `m`, `-1` for ROOT.
"""
import functools
import itertools

import numpy as np


def _is_tree(heads):
  n = len(heads)
  for start in range(n):
    seen, node = set(), start
    while node != -1:
      if node in seen:
        return False
      seen.add(node)
      node = heads[node]
  return True


def _is_projective(heads):
  # Arc (h, m) is projective iff every word strictly between h and m descends from h.
  for m, h in enumerate(heads):
    head_pos = -1 if h == -1 else h
    lo, hi = sorted((head_pos, m))
    for k in range(lo + 1, hi):
      node = k
      while node != -1 and node != h:
        node = heads[node]
      if node != h:
        return False
  return True


@functools.lru_cache(maxsize=None)
def all_trees(n, single_root=True, projective=False):
  """All dependency trees over n words as an int array [num_trees, n] (head -1 = ROOT)."""
  out = []
  for heads in itertools.product(range(-1, n), repeat=n):
    if any(h == m for m, h in enumerate(heads)):
      continue
    if single_root and sum(h == -1 for h in heads) != 1:
      continue
    if not _is_tree(heads):
      continue
    if projective and not _is_projective(heads):
      continue
    out.append(heads)
  return np.array(out, dtype=np.int64).reshape(-1, n)


def tree_scores(arc_scores, root_scores, trees):
  """Scores [num_trees] of each tree under float64 potentials arc_scores [n, n], root_scores [n]."""
  arc_scores = np.asarray(arc_scores, np.float64)
  root_scores = np.asarray(root_scores, np.float64)
  n = trees.shape[1]
  m = np.arange(n)
  is_root = trees == -1
  arc = arc_scores[np.where(is_root, 0, trees), m[None, :]]
  return np.where(is_root, root_scores[None, :], arc).sum(-1)


def reference(arc_scores, root_scores, single_root=True, projective=False):
  """Brute-force (log Z, arc marginals [n, n], root marginals [n], best heads [n], best score)."""
  n = len(root_scores)
  trees = all_trees(n, single_root, projective)
  s = tree_scores(arc_scores, root_scores, trees)
  finite = np.isfinite(s)
  top = s[finite].max()
  log_z = top + np.log(np.exp(s[finite] - top).sum())
  p = np.where(finite, np.exp(s - log_z), 0.0)
  arc_m = np.zeros((n, n))
  root_m = np.zeros(n)
  for tree, prob in zip(trees, p):
    for m, h in enumerate(tree):
      if h == -1:
        root_m[m] += prob
      else:
        arc_m[h, m] += prob
  best = int(np.argmax(np.where(finite, s, -np.inf)))
  return log_z, arc_m, root_m, trees[best], s[best]


def entropy(arc_scores, root_scores, single_root=True, projective=False):
  n = len(root_scores)
  trees = all_trees(n, single_root, projective)
  s = tree_scores(arc_scores, root_scores, trees)
  log_z = np.logaddexp.reduce(s)
  logp = s - log_z
  return float(-(np.exp(logp) * logp).sum())


def tree_probabilities(arc_scores, root_scores, single_root=True, projective=False):
  """(trees [num_trees, n], probabilities [num_trees]) for sampling tests."""
  n = len(root_scores)
  trees = all_trees(n, single_root, projective)
  s = tree_scores(arc_scores, root_scores, trees)
  return trees, np.exp(s - np.logaddexp.reduce(s))


def padded_batch(seed, lengths, n):
  """Random float64 scores (arc [B, n, n], root [B, n]) for sentences of `lengths` (B of them, B >= 3),
  with garbage on padding and forbidden arcs: every word-head of word 2 of sentence 1 (it can only hang
  from ROOT) and 0 -> 1 of sentence 2. Returns (arc, root, lengths [B])."""
  lengths = np.asarray(lengths)
  batch = len(lengths)
  rng = np.random.default_rng(seed)
  arc, root = rng.normal(size=(batch, n, n)), rng.normal(size=(batch, n))
  for b in range(batch):
    arc[b, lengths[b]:, :] = 1e3
    arc[b, :, lengths[b]:] = -1e3
    root[b, lengths[b]:] = 1e3
  arc[1, :, 2] = -np.inf
  arc[2, 0, 1] = -np.inf
  return arc, root, lengths

