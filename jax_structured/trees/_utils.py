"""Tree statistics, evaluation scores and conversions between head / score layouts.

All functions take `heads[..., n]` in the library convention (`heads[..., m]` = head word of m, -1 for
ROOT and for padding) with optional `lengths[...]` (default n) and any leading batch shape. The
statistics are those of Liu & Lapata (2018, Section 4.3, Tables 5 and 6): tree height, node depths
(ROOT's children have depth 1), the share of projective trees and the "same edges" rate.

The jnp functions (`tree_depths` ... `same_edge_rate`, the layout converters) are pure and jit/vmap-able;
they assume well-formed trees (check with `is_tree`). The CoNLL-U converters are host-side numpy
functions that validate their input and raise `ValueError` naming the offending position.
"""
import jax.numpy as jnp
from jax import lax
import numpy as np

from jax_structured.trees import _inputs

__all__ = [
    'is_tree', 'tree_depths', 'tree_height', 'depth_histogram', 'is_projective',
    'attachment_counts', 'attachment_score', 'same_edge_rate',
    'heads_to_arcs', 'heads_from_arcs', 'heads_to_conllu', 'heads_from_conllu',
    'to_synjax', 'from_synjax', 'to_torch_struct', 'from_torch_struct',
]


def _heads_and_mask(heads, lengths):
  """(heads int32 [..., n] with -1 on padding, real-word mask bool [..., n])."""
  heads = jnp.asarray(heads).astype(jnp.int32)
  n = heads.shape[-1]
  if lengths is None:
    mask = jnp.ones(heads.shape, bool)
  else:
    lengths = jnp.asarray(lengths)
    if lengths.shape != heads.shape[:-1]:
      raise ValueError(f'lengths must have shape {heads.shape[:-1]} (the batch shape of heads '
                       f'{heads.shape}), got {lengths.shape}')
    mask = jnp.arange(n) < lengths[..., None]
  return jnp.where(mask, heads, -1), mask


def _follow(heads, nodes):
  """heads[..., nodes] with -1 staying -1. heads [..., n], nodes int [..., k]."""
  gathered = jnp.take_along_axis(heads, jnp.maximum(nodes, 0), axis=-1)
  return jnp.where(nodes >= 0, gathered, -1)


def is_tree(heads, lengths=None, *, single_root=False):
  """Whether each `heads` row is a dependency tree over its real words.

  A tree: every real head is -1 or a real word other than the word itself, following heads from any
  word reaches ROOT (no cycle), and with `single_root` exactly one word hangs from ROOT.

  Args:
    heads: int [..., n].
    lengths: optional int [...].
    single_root: also require exactly one ROOT child (for a non-empty sentence).

  Returns:
    bool [...].
  """
  raw = jnp.asarray(heads).astype(jnp.int32)
  heads, mask = _heads_and_mask(raw, lengths)
  n = heads.shape[-1]
  length = jnp.sum(mask, axis=-1)
  in_range = (raw >= -1) & (raw < length[..., None]) & (raw != jnp.arange(n))
  ok = jnp.all(in_range | ~mask, axis=-1)
  safe = jnp.where(ok[..., None], heads, -1)
  # After n steps every node of a tree has reached ROOT; a node on a cycle never does.
  cur = lax.fori_loop(0, max(n, 1), lambda _, c: _follow(safe, c), safe)
  ok = ok & jnp.all(cur == -1, axis=-1)
  if single_root:
    roots = jnp.sum((heads == -1) & mask, axis=-1)
    ok = ok & ((roots == 1) | (length == 0))
  return ok


def tree_depths(heads, lengths=None):
  """Depth of every word: ROOT's children have depth 1, their children 2, ...

  Pointer jumping: O(n log n) per tree. Assumes `heads` is a tree (see `is_tree`).

  Args:
    heads: int [..., n].
    lengths: optional int [...].

  Returns:
    int32 [..., n]; 0 on padding.
  """
  heads, mask = _heads_and_mask(heads, lengths)
  n = heads.shape[-1]
  depth = mask.astype(jnp.int32)       # nodes on the path from m up to (not including) `jump`
  jump = heads
  for _ in range(max(1, int(np.ceil(np.log2(max(n, 2)))) + 1)):
    depth = depth + jnp.where(jump >= 0, jnp.take_along_axis(depth, jnp.maximum(jump, 0), -1), 0)
    jump = _follow(jump, jump)
  return jnp.where(mask, depth, 0)


def tree_height(heads, lengths=None):
  """Height of each tree: the largest word depth (Liu & Lapata Table 5 "Height"); 0 when empty.

  Args:
    heads: int [..., n].
    lengths: optional int [...].

  Returns:
    int32 [...].
  """
  return jnp.max(tree_depths(heads, lengths), axis=-1, initial=0)


def depth_histogram(heads, lengths=None, *, max_depth):
  """Number of real words at each depth 1..max_depth (Liu & Lapata Tables 5-6 "Nodes depth d").

  Words deeper than `max_depth` are not counted; divide by the number of words for the paper's
  percentages.

  Args:
    heads: int [..., n].
    lengths: optional int [...].
    max_depth: int (static), number of bins.

  Returns:
    int32 [..., max_depth]; entry d - 1 counts the words of depth d.
  """
  depths = tree_depths(heads, lengths)
  bins = jnp.arange(1, max_depth + 1)
  return jnp.sum(depths[..., None] == bins, axis=-2).astype(jnp.int32)


def _ancestors(heads):
  """anc[..., a, m]: word a is a proper ancestor of word m. heads [..., n] (a tree), O(height n^2)."""
  n = heads.shape[-1]
  nodes = jnp.arange(n)

  def cond(state):
    step, cur, _ = state
    return (step < n) & jnp.any(cur >= 0)   # at most n steps, also when `heads` has a cycle

  def body(state):
    step, cur, anc = state
    anc = anc | (cur[..., None, :] == nodes[:, None])
    return step + 1, _follow(heads, cur), anc

  anc = jnp.zeros(heads.shape[:-1] + (n, n), bool)
  return lax.while_loop(cond, body, _inputs.vary_like((0, heads, anc), heads))[2]


def is_projective(heads, lengths=None):
  """Whether each tree is projective.

  An arc h -> m is projective iff every word strictly between h and m descends from h (ROOT sits
  before the first word, so ROOT arcs only constrain other arcs); a tree is projective iff all its
  arcs are (equivalently: no two arcs cross when ROOT is drawn at position 0).

  Args:
    heads: int [..., n], trees.
    lengths: optional int [...].

  Returns:
    bool [...].
  """
  heads, mask = _heads_and_mask(heads, lengths)
  n = heads.shape[-1]
  if n == 0:
    return jnp.ones(heads.shape[:-1], bool)
  anc = _ancestors(heads)                                            # [..., a, m]
  # below[..., a, k] = number of descendants of a among words 0..k-1.
  below = jnp.concatenate([jnp.zeros(anc.shape[:-1] + (1,), jnp.int32),
                           jnp.cumsum(anc.astype(jnp.int32), axis=-1)], axis=-1)
  m = jnp.arange(n)
  lo = jnp.minimum(heads, m) + 1                                      # first word strictly between
  hi = jnp.maximum(heads, m)                                          # one past the last
  row = jnp.take_along_axis(below, jnp.maximum(heads, 0)[..., None], axis=-2)   # [..., m, n + 1]
  inside = (jnp.take_along_axis(row, hi[..., None], -1)
            - jnp.take_along_axis(row, jnp.maximum(lo, 0)[..., None], -1))[..., 0]
  ok = (heads < 0) | ~mask | (inside == hi - lo)
  return jnp.all(ok, axis=-1)


def attachment_counts(pred_heads, gold_heads, lengths=None):
  """Per-sentence (correct, total) head attachments over real words, for metric accumulation.

  Args:
    pred_heads: int [..., n].
    gold_heads: int [..., n].
    lengths: optional int [...].

  Returns:
    (correct int32 [...], total int32 [...]).
  """
  pred, mask = _heads_and_mask(pred_heads, lengths)
  gold, _ = _heads_and_mask(gold_heads, lengths)
  correct = jnp.sum((pred == gold) & mask, axis=-1).astype(jnp.int32)
  return correct, jnp.sum(mask, axis=-1).astype(jnp.int32)


def attachment_score(pred_heads, gold_heads, lengths=None):
  """Unlabelled attachment score (UAS): share of real words whose predicted head is the gold head.

  Micro-averaged over every real word of the batch (0 when there is none).

  Args:
    pred_heads: int [..., n].
    gold_heads: int [..., n].
    lengths: optional int [...].

  Returns:
    float32 scalar in [0, 1].
  """
  correct, total = attachment_counts(pred_heads, gold_heads, lengths)
  total = jnp.sum(total)
  return (jnp.sum(correct) / jnp.maximum(total, 1)).astype(jnp.float32)


def same_edge_rate(pred_heads, ref_heads, lengths=None, *, include_root=True):
  """Share of predicted head-dependent edges that are identical in the reference trees.

  Liu & Lapata (2018, Section 4.3, Table 5 "Same Edges") report "the percentage of head-dependency
  edges that are identical between the two sets of trees"; identical edges are directed (same head and
  same dependent). Micro-averaged over the batch. With `include_root=True` (default) the ROOT edge of
  each word counts as an edge, so the rate equals the micro-averaged `attachment_score`; with
  `include_root=False` only predicted word -> word edges are counted (numerator and denominator).

  Args:
    pred_heads: int [..., n].
    ref_heads: int [..., n].
    lengths: optional int [...].
    include_root: whether ROOT -> word edges count.

  Returns:
    float32 scalar in [0, 1] (0 when no edge is counted).
  """
  pred, mask = _heads_and_mask(pred_heads, lengths)
  ref, _ = _heads_and_mask(ref_heads, lengths)
  counted = mask if include_root else mask & (pred >= 0)
  same = jnp.sum((pred == ref) & counted)
  return (same / jnp.maximum(jnp.sum(counted), 1)).astype(jnp.float32)


def heads_to_arcs(heads, lengths=None, dtype=jnp.float32):
  """One-hot arc indicators of trees: (arcs [..., n, n] with arcs[h, m] = 1 iff h -> m, roots [..., n]).

  Args:
    heads: int [..., n].
    lengths: optional int [...]; padding gets all zeros.
    dtype: output dtype.

  Returns:
    (arc indicators [..., n, n], root indicators [..., n]), the layout of `trees.marginals`.
  """
  heads, mask = _heads_and_mask(heads, lengths)
  n = heads.shape[-1]
  arcs = (heads[..., None, :] == jnp.arange(n)[:, None]) & mask[..., None, :]
  return arcs.astype(dtype), ((heads == -1) & mask).astype(dtype)


def heads_from_arcs(arc_indicators, root_indicators, lengths=None):
  """Inverse of `heads_to_arcs`: the head of m is the row of column m's largest entry (ROOT first).

  Also decodes marginals greedily (each word takes its most probable head; not necessarily a tree).

  Args:
    arc_indicators: [..., n, n], [h, m] layout.
    root_indicators: [..., n].
    lengths: optional int [...].

  Returns:
    int32 [..., n], -1 for ROOT and padding.
  """
  scores = jnp.concatenate([jnp.asarray(root_indicators)[..., None, :], jnp.asarray(arc_indicators)],
                           axis=-2)
  heads = jnp.argmax(scores, axis=-2).astype(jnp.int32) - 1
  return _heads_and_mask(heads, lengths)[0]


def heads_to_conllu(heads, lengths=None):
  """CoNLL-U HEAD values (1-based word ids, 0 = ROOT) of library heads; -1 on padding.

  Args:
    heads: int array-like [..., n] (library convention).
    lengths: optional int [...].

  Returns:
    numpy int64 [..., n].

  Raises:
    ValueError: a real head is outside [-1, length) (names its position).
  """
  heads = np.asarray(heads, dtype=np.int64)
  n = heads.shape[-1]
  lengths = (np.full(heads.shape[:-1], n) if lengths is None else np.asarray(lengths))
  if lengths.shape != heads.shape[:-1]:
    raise ValueError(f'lengths must have shape {heads.shape[:-1]}, got {lengths.shape}')
  mask = np.arange(n) < lengths[..., None]
  bad = mask & ((heads < -1) | (heads >= lengths[..., None]))
  if bad.any():
    pos = tuple(int(i) for i in np.argwhere(bad)[0])
    raise ValueError(f'head {int(heads[pos])} at position {pos} is not -1 (ROOT) or a word index '
                     f'below the sentence length {int(lengths[pos[:-1]])}')
  return np.where(mask, heads + 1, -1)


def heads_from_conllu(values, lengths=None, *, source='<input>'):
  """Library heads from a CoNLL-U HEAD column (1-based word ids, 0 = ROOT).

  Args:
    values: int or str array-like [..., n] of HEAD values (strings as in the file, e.g. '0', '3').
    lengths: optional int [...]; entries at or past the length are padding (ignored, head -1).
    source: name used in error messages (e.g. 'train.conllu:120').

  Returns:
    numpy int32 [..., n], -1 for ROOT and padding.

  Raises:
    ValueError: a real value is not an integer in [0, length], or is its own word id (names it).
  """
  raw = np.asarray(values)
  if raw.dtype.kind in 'US':
    n = raw.shape[-1] if raw.ndim else 0
    lengths_ = np.full(raw.shape[:-1], n) if lengths is None else np.asarray(lengths)
    parsed = np.full(raw.shape, -1, np.int64)
    for pos in np.ndindex(*raw.shape):
      if pos[-1] >= lengths_[pos[:-1]]:
        continue
      text = str(raw[pos]).strip()
      if not text.isdigit():
        raise ValueError(f'{source}: HEAD {text!r} of word {pos[-1] + 1} (position {pos}) is not a '
                         'non-negative integer')
      parsed[pos] = int(text)
    raw = parsed
  elif raw.dtype.kind not in 'iu':
    raise ValueError(f'{source}: HEAD values must be integers or strings, got dtype {raw.dtype}')
  raw = raw.astype(np.int64)
  n = raw.shape[-1]
  lengths = np.full(raw.shape[:-1], n) if lengths is None else np.asarray(lengths)
  if lengths.shape != raw.shape[:-1]:
    raise ValueError(f'{source}: lengths must have shape {raw.shape[:-1]}, got {lengths.shape}')
  mask = np.arange(n) < lengths[..., None]
  word_id = np.arange(1, n + 1)
  bad = mask & ((raw < 0) | (raw > lengths[..., None]) | (raw == word_id))
  if bad.any():
    pos = tuple(int(i) for i in np.argwhere(bad)[0])
    raise ValueError(f'{source}: HEAD {int(raw[pos])} of word {pos[-1] + 1} (position {pos}) must be '
                     f'0 (ROOT) or another word id in 1..{int(lengths[pos[:-1]])}')
  return np.where(mask, raw - 1, -1).astype(np.int32)


def to_synjax(arc_scores, root_scores, lengths=None, *, fill_value=-jnp.inf):
  """SynJax `SpanningTreeNonProjectiveCRF` log-potentials from library scores.

  SynJax indexes `log_potentials[..., head, modifier]` over nodes 0..n with ROOT = node 0 and word m
  = node m + 1 (its Laplacian sums over axis -2, i.e. over heads, and drops row/column 0 for ROOT), and
  its `lengths` count ROOT as a node. So `lp[..., 0, m + 1] = root_scores[..., m]`,
  `lp[..., h + 1, m + 1] = arc_scores[..., h, m]`; the diagonal and column 0 (arcs into ROOT) do not
  exist and hold `fill_value`.

  Args:
    arc_scores: float [..., n, n].
    root_scores: float [..., n].
    lengths: optional int [...] (number of words).
    fill_value: value of the non-existent entries.

  Returns:
    (log_potentials [..., n + 1, n + 1], synjax_lengths int32 [...] = lengths + 1).
  """
  arc_scores = jnp.asarray(arc_scores)
  root_scores = jnp.asarray(root_scores)
  n = arc_scores.shape[-1]
  dtype = jnp.result_type(arc_scores, root_scores)
  lp = jnp.full(arc_scores.shape[:-2] + (n + 1, n + 1), fill_value, dtype)
  lp = lp.at[..., 1:, 1:].set(arc_scores).at[..., 0, 1:].set(root_scores)
  eye = jnp.eye(n + 1, dtype=bool)
  lp = jnp.where(eye | (jnp.arange(n + 1) == 0)[None, :], jnp.asarray(fill_value, dtype), lp)
  if lengths is None:
    lengths = jnp.full(arc_scores.shape[:-2], n)
  return lp, jnp.asarray(lengths).astype(jnp.int32) + 1


def from_synjax(log_potentials, lengths=None):
  """Library (arc_scores, root_scores, lengths) from SynJax log-potentials (see `to_synjax`).

  Args:
    log_potentials: float [..., n + 1, n + 1], `[head, modifier]`, ROOT = node 0.
    lengths: optional int [...], SynJax lengths (nodes including ROOT).

  Returns:
    (arc_scores [..., n, n] with -inf diagonal, root_scores [..., n], lengths int32 [...] = words).
  """
  lp = jnp.asarray(log_potentials)
  n = lp.shape[-1] - 1
  arc = jnp.where(jnp.eye(n, dtype=bool), -jnp.inf, lp[..., 1:, 1:])
  if lengths is None:
    lengths = jnp.full(lp.shape[:-2], n + 1)
  return arc, lp[..., 0, 1:], jnp.asarray(lengths).astype(jnp.int32) - 1


def to_torch_struct(arc_scores, root_scores):
  """torch-struct `NonProjectiveDependencyCRF` / `DependencyCRF` log-potentials from library scores.

  torch-struct takes `[..., n, n]` scores indexed `[head, modifier]` over words (its `to_parts` sets
  `labels[head, modifier]` and its Laplacian sums over axis 1, the heads) with the ROOT -> m score on the
  diagonal `[m, m]`; its `lengths` count words, like ours.

  Args:
    arc_scores: float [..., n, n].
    root_scores: float [..., n].

  Returns:
    float [..., n, n].
  """
  arc_scores = jnp.asarray(arc_scores)
  n = arc_scores.shape[-1]
  eye = jnp.eye(n, dtype=bool)
  return jnp.where(eye, jnp.asarray(root_scores)[..., None, :], arc_scores)


def from_torch_struct(log_potentials):
  """Library (arc_scores, root_scores) from torch-struct scores (ROOT -> m on the diagonal).

  Args:
    log_potentials: float [..., n, n].

  Returns:
    (arc_scores [..., n, n] with -inf diagonal, root_scores [..., n]).
  """
  lp = jnp.asarray(log_potentials)
  n = lp.shape[-1]
  eye = jnp.eye(n, dtype=bool)
  return jnp.where(eye, -jnp.inf, lp), jnp.diagonal(lp, axis1=-2, axis2=-1)
