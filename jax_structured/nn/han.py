"""Hierarchical attention networks over a flat document (Yang et al. 2016), and the sentence segments
that MHS-RNN (Luo & Zhu) shares with them.

A document is ONE token sequence `x [B, T, E]` with `lengths [B]` and static boundary flags
`boundaries [B, T]` (1 at the last token of each sentence). Sentences are the segments ending at a flag;
the last real token always closes a sentence (`sentence_ids`), so a document without any flag is one
sentence and a document of punctuation only is one sentence per token. Sentence-level tensors have a
static slot axis of size T (a document has at most T sentences); slots at or past `num_sentences` are 0.

Pure functions (shapes in each docstring):
  sentence_ids          token -> sentence index, number of sentences
  segment_softmax       softmax of scores within each sentence (Yang et al. eqs. 5-6, 8-9 inner part)
  segment_sum           weighted sums of token vectors per sentence -> [B, T(slots), D]
  gru_scan              GRU (Cho et al. 2014, as Yang et al. eqs. 1-4) over the flat document that
                        restarts from a zero state at every sentence start (one scan, exact per sentence)
Modules: `ResetBiGRU` (Yang et al.'s bidirectional word / sentence encoder, eqs. 5 and 8),
`SegmentAttention` (u_t = tanh(W h_t + b), alpha = softmax(u_t^T u_w) within each sentence, s_i =
sum alpha h_t: Yang eqs. 5-7; HN-AVE replaces it by the mean).
"""
from __future__ import annotations

from typing import NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured.nn import masks


def sentence_ids(boundaries: jax.Array, lengths: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
  """Sentence index of every token of flat documents.

  Args:
    boundaries: [B, T] 0/1 (any dtype), 1 at the last token of a sentence.
    lengths: int [B] real tokens.

  Returns:
    (ids int32 [B, T]: sentence of token t, equal to `num_sentences` at padding;
     closed float32 [B, T]: the boundary flags used: `boundaries` at real tokens, forced to 1 at the last
       real token, 0 at padding;
     num_sentences int32 [B]: 0 for an empty document).
  """
  steps = boundaries.shape[-1]
  lengths = jnp.asarray(lengths, jnp.int32)
  mask = masks.sequence_mask(lengths, steps)
  last = jnp.arange(steps) == (lengths - 1)[..., None]
  closed = jnp.where(mask, jnp.maximum(jnp.asarray(boundaries, jnp.float32), last.astype(jnp.float32)),
                     0.0)
  flags = closed.astype(jnp.int32)
  ids = jnp.cumsum(flags, axis=-1) - flags  # exclusive cumulative sum: the sentence a token is in
  num = jnp.sum(flags, axis=-1)
  ids = jnp.where(mask, ids, num[..., None])
  return ids, closed, num


def _flat_ids(ids: jax.Array) -> tuple[jax.Array, int]:
  """[B, T] per-example ids -> ids into B * (T + 1) segments (slot T of each row catches padding)."""
  batch, steps = ids.shape
  return (ids + jnp.arange(batch)[:, None] * (steps + 1)).reshape(-1), batch * (steps + 1)


def segment_softmax(scores: jax.Array, ids: jax.Array, mask: jax.Array) -> jax.Array:
  """Softmax of `scores` over the tokens of each sentence.

  Args:
    scores: float [B, T].
    ids: int [B, T] sentence of each token (`sentence_ids`).
    mask: bool [B, T] real tokens.

  Returns:
    float [B, T]: weights summing to 1 over each real sentence, 0 at padding.
  """
  batch, steps = scores.shape
  flat, num = _flat_ids(ids)
  masked = jnp.where(mask, scores, -jnp.inf).reshape(-1)
  top = jax.ops.segment_max(masked, flat, num_segments=num)
  top = jnp.where(jnp.isfinite(top), top, 0.0)
  e = jnp.where(mask.reshape(-1), jnp.exp(masked - top[flat]), 0.0)
  total = jax.ops.segment_sum(e, flat, num_segments=num)
  return (e / jnp.where(total[flat] > 0, total[flat], 1.0)).reshape(batch, steps)


def segment_sum(values: jax.Array, weights: jax.Array, ids: jax.Array) -> jax.Array:
  """Weighted sum of token vectors per sentence.

  Args:
    values: float [B, T, D].
    weights: float [B, T] (0 at padding).
    ids: int [B, T] sentence of each token.

  Returns:
    float [B, T, D]: slot i holds sum_t weights[t] values[t] over the tokens of sentence i (0 for slots
    past the number of sentences).
  """
  batch, steps, dim = values.shape
  flat, num = _flat_ids(ids)
  sums = jax.ops.segment_sum((values * weights[..., None]).reshape(-1, dim), flat, num_segments=num)
  return sums.reshape(batch, steps + 1, dim)[:, :steps]


def sentence_counts(ids: jax.Array, mask: jax.Array) -> jax.Array:
  """Tokens per sentence slot: float [B, T] from ids [B, T] and the real-token mask [B, T]."""
  return segment_sum(jnp.ones(ids.shape + (1,)), mask.astype(jnp.float32), ids)[..., 0]


class GRUParams(NamedTuple):
  """GRU weights, gates in the order (update z, reset r, candidate): w_x [E, 3H], w_h [H, 3H], b [3H]."""
  w_x: jax.Array
  w_h: jax.Array
  b: jax.Array


def gru_scan(params: GRUParams, x: jax.Array, lengths: jax.Array, starts: Optional[jax.Array] = None,
             *, reverse: bool = False) -> jax.Array:
  """A GRU over padded sequences that restarts from zeros at every segment start.

  Yang et al. (2016) eqs. 1-4: z_t = sig(W_z x_t + U_z h_{t-1} + b_z), r_t = sig(W_r x_t + U_r h_{t-1} +
  b_r), h~_t = tanh(W_h x_t + r_t * (U_h h_{t-1}) + b_h), h_t = (1 - z_t) * h_{t-1} + z_t * h~_t.

  Args:
    params: `GRUParams`.
    x: float [B, T, E].
    lengths: int [B].
    starts: optional float/bool [B, T], 1 where h_{t-1} is replaced by 0 before step t (forward: the first
      token of a sentence; reverse: the LAST token of a sentence, where the right-to-left pass begins it).
      None: one segment per sequence.
    reverse: run right to left (outputs stay in input order); the pass over each sequence starts at its
      last real token (padding is skipped with a zero state).

  Returns:
    float [B, T, H], 0 at padding.
  """
  batch, steps, _ = x.shape
  hidden = params.w_h.shape[0]
  mask = masks.sequence_mask(lengths, steps)
  starts = jnp.zeros((batch, steps), bool) if starts is None else jnp.asarray(starts) > 0
  xs = x @ params.w_x + params.b  # [B, T, 3H]

  def step(h, inputs):
    xt, start, real = inputs
    h = jnp.where(start[:, None], 0.0, h)
    hh = h @ params.w_h
    z = jax.nn.sigmoid(xt[:, :hidden] + hh[:, :hidden])
    r = jax.nn.sigmoid(xt[:, hidden:2 * hidden] + hh[:, hidden:2 * hidden])
    cand = jnp.tanh(xt[:, 2 * hidden:] + r * hh[:, 2 * hidden:])
    new = (1.0 - z) * h + z * cand
    new = jnp.where(real[:, None], new, h if not reverse else jnp.zeros_like(h))
    return new, jnp.where(real[:, None], new, 0.0)

  seq = (jnp.swapaxes(xs, 0, 1), jnp.swapaxes(starts, 0, 1), jnp.swapaxes(mask, 0, 1))
  _, out = jax.lax.scan(step, jnp.zeros((batch, hidden), x.dtype), seq, reverse=reverse)
  return jnp.swapaxes(out, 0, 1)


def segment_starts(closed: jax.Array, *, reverse: bool) -> jax.Array:
  """Where `gru_scan` restarts for sentences ending at the flags `closed` [B, T]: the token after a flag
  (forward), or the flag itself (reverse). Float [B, T]."""
  if reverse:
    return closed
  return jnp.pad(closed[:, :-1], ((0, 0), (1, 0)))


def init_gru(module: nn.Module, name: str, input_dim: int, hidden: int) -> GRUParams:
  """GRU parameters `<name>_w_x`, `<name>_w_h` (orthogonal), `<name>_b` of a Linen module."""
  return GRUParams(
      module.param(f'{name}_w_x', nn.initializers.lecun_normal(), (input_dim, 3 * hidden), jnp.float32),
      module.param(f'{name}_w_h', nn.initializers.orthogonal(column_axis=-1), (hidden, 3 * hidden), jnp.float32),
      module.param(f'{name}_b', nn.initializers.zeros, (3 * hidden,), jnp.float32))


class ResetBiGRU(nn.Module):
  """Bidirectional GRU over flat documents, restarted at every sentence (Yang et al. eqs. 5 / 8).

  Called as `(x [B, T, E], lengths [B], closed [B, T] or None) -> [B, T, 2H]` (forward half first, 0 at
  padding); `closed=None` runs each sequence as one segment (the sentence-level encoder).

  Attributes:
    hidden_size: per direction.
  """
  hidden_size: int

  @nn.compact
  def __call__(self, x: jax.Array, lengths: jax.Array, closed: Optional[jax.Array] = None) -> jax.Array:
    dim = x.shape[-1]
    forward = init_gru(self, 'forward', dim, self.hidden_size)
    backward = init_gru(self, 'backward', dim, self.hidden_size)
    fs = None if closed is None else segment_starts(closed, reverse=False)
    bs = None if closed is None else segment_starts(closed, reverse=True)
    return jnp.concatenate([gru_scan(forward, x, lengths, fs),
                            gru_scan(backward, x, lengths, bs, reverse=True)], -1)


class SegmentAttention(nn.Module):
  """Attention pooling of token vectors within each sentence (Yang et al. eqs. 5-7; Luo & Zhu eq. 9).

  u_t = tanh(W h_t + b), alpha_t = softmax over the sentence of u_t^T u_w, s_i = sum_t alpha_t h_t.
  `mean=True` is HN-AVE: alpha_t = 1 / |sentence|.
  Called as `(h [B, T, D], ids [B, T], mask [B, T]) -> (s [B, T(slots), D], alpha [B, T])`.

  Attributes:
    features: size of u_t (default: D).
    mean: average instead of attention.
  """
  features: int = 0
  mean: bool = False

  @nn.compact
  def __call__(self, h: jax.Array, ids: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
    if self.mean:
      counts = sentence_counts(ids, mask)
      size = jnp.take_along_axis(jnp.pad(counts, ((0, 0), (0, 1))), ids, axis=-1)
      alpha = jnp.where(mask, 1.0 / jnp.maximum(size, 1.0), 0.0)
    else:
      u = jnp.tanh(nn.Dense(self.features or h.shape[-1], name='projection')(h))
      context = self.param('context', nn.initializers.normal(stddev=0.1), (u.shape[-1],), jnp.float32)
      alpha = segment_softmax(u @ context, ids, mask)
    return segment_sum(h, alpha, ids), alpha
