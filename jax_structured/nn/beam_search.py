"""Batched beam search on device with static shapes (a `lax.while_loop` over at most `max_length` steps).

`beam_search(step_fn, state, ...)` decodes B examples with K beams each. The model is given as

    step_fn(state, tokens int32 [B * K]) -> (log_probs float [B * K, V], new_state)

where `state` is any pytree whose leaves have the leading axis B * K (beam k of example b is row
b * K + k; `tile_beams` makes it from a [B, ...] state) and `tokens` are the previous outputs (`bos_id`
at the first step). Per step (the OpenNMT / Bahdanau et al. 2015 beam):

  1. every alive beam is extended by every token: raw score = cumulative log-probability;
  2. the K best extensions by raw score are kept (at the first step only beam 0 is alive, so the K
     beams are distinct);
  3. an extension ending in `eos_id` leaves the beam: it joins the example's finished hypotheses with
     its length-normalised score, and its beam slot is dead (raw score -inf) from then on;
  4. at the example's last position (`max_lengths - 1`) only `eos_id` is allowed, so every
     hypothesis is finished by `max_length` tokens (EOS included).

The loop stops early when, for every example, no alive beam can still beat its best finished
hypothesis: raw scores only fall, so an alive beam's best reachable normalised score is
raw / norm(max_lengths) (exact for both normalisations below, whose norm grows with the length).
Hence beam size 1 is greedy decoding (argmax until EOS), and a beam at least as wide as the number of
prefixes enumerates every hypothesis (tests/test_translation.py checks both).

Length normalisation (`normalization`), applied to finished hypotheses only; |Y| counts EOS:
  'average': score = log P(Y) / |Y|                (divide by the length; the default)
  'gnmt':    score = log P(Y) / ((5 + |Y|) / 6) ** alpha   (Wu et al. 2016, eq. 14, without coverage)
  'none':    score = log P(Y)
"""
from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import flax
import jax
import jax.numpy as jnp

NORMALIZATIONS = ('average', 'gnmt', 'none')
_NEG_INF = float('-inf')  # the raw score of a dead beam, the score of no hypothesis


@flax.struct.dataclass
class BeamSearchOutput:
  """The best finished hypothesis of every example.

  Attributes:
    tokens: int32 [B, max_length]: the hypothesis' tokens, `eos_id` at position `lengths`, then 0.
    lengths: int32 [B]: tokens before EOS (the words of the hypothesis).
    scores: float [B]: its length-normalised score.
    log_probs: float [B]: its log-probability log P(Y) (EOS included).
  """
  tokens: jax.Array
  lengths: jax.Array
  scores: jax.Array
  log_probs: jax.Array


def length_norm(lengths: jax.Array, normalization: str = 'average', alpha: float = 0.6) -> jax.Array:
  """The divisor of log P(Y) for hypotheses of `lengths` tokens (EOS included); see module docstring."""
  lengths = jnp.asarray(lengths, jnp.float32)
  if normalization == 'average':
    return jnp.maximum(lengths, 1.0)
  if normalization == 'gnmt':
    return ((5.0 + lengths) / 6.0) ** alpha
  if normalization == 'none':
    return jnp.ones_like(lengths)
  raise ValueError(f'beam search normalization={normalization!r}; valid: {NORMALIZATIONS}')


def tile_beams(tree: Any, beam_size: int) -> Any:
  """Repeats every leaf [B, ...] of a pytree to [B * beam_size, ...] (row b * K + k is beam k of b)."""
  return jax.tree.map(lambda x: jnp.repeat(x, beam_size, axis=0), tree)


def _gather_beams(tree: Any, beams: jax.Array, batch_size: int, beam_size: int) -> Any:
  """Leaves [B * K, ...] -> rows `beams [B, K]` of each example, again [B * K, ...]."""
  rows = (jnp.arange(batch_size)[:, None] * beam_size + beams).reshape(-1)
  return jax.tree.map(lambda x: jnp.take(x, rows, axis=0), tree)


def beam_search(step_fn: Callable[[Any, jax.Array], tuple[jax.Array, Any]], state: Any, *,
                batch_size: int, beam_size: int, max_length: int, bos_id: int, eos_id: int,
                max_lengths: Optional[jax.Array] = None, normalization: str = 'average',
                alpha: float = 0.6, banned_ids: Sequence[int] = ()) -> BeamSearchOutput:
  """Beam search (module docstring) for B examples with K = `beam_size` beams.

  Args:
    step_fn: `(state, tokens [B * K]) -> (log_probs [B * K, V], state)`; log_probs are normalised
      log-probabilities of the next token.
    state: the decoder state after reading nothing, leaves [B * K, ...] (`tile_beams`).
    batch_size: B.
    beam_size: K >= 1.
    max_length: static upper bound L on hypothesis length (EOS included).
    bos_id: the first input token.
    eos_id: the end-of-sentence token.
    max_lengths: optional int [B], per-example bounds (clipped to [1, L]); default L.
    normalization: 'average' | 'gnmt' | 'none' (module docstring).
    alpha: the GNMT exponent.
    banned_ids: tokens never produced (e.g. padding and BOS).

  Returns:
    `BeamSearchOutput` of the best finished hypothesis per example.
  """
  if beam_size < 1 or max_length < 1:
    raise ValueError(f'beam search needs beam_size >= 1 and max_length >= 1, got {beam_size}, '
                     f'{max_length}')
  if normalization not in NORMALIZATIONS:
    raise ValueError(f'beam search normalization={normalization!r}; valid: {NORMALIZATIONS}')
  b, steps = batch_size, max_length
  limits = (jnp.full((b,), steps, jnp.int32) if max_lengths is None
            else jnp.clip(jnp.asarray(max_lengths, jnp.int32), 1, steps))
  norm = lambda lengths: length_norm(lengths, normalization, alpha)

  def running(c):
    best_alive = jnp.max(c['alive_logp'], axis=1) / norm(limits)
    can_improve = (best_alive > c['done_score']) & (c['t'] < limits)
    return (c['t'] < steps) & jnp.any(can_improve)

  def body(c):
    log_probs, new_state = step_fn(c['state'], c['last'])
    top, beams, tokens, seqs = _extend(c, log_probs, limits, eos_id=eos_id, banned_ids=banned_ids)
    ended = (tokens == eos_id) & jnp.isfinite(top)
    return {'t': c['t'] + 1,
            'state': _gather_beams(new_state, beams, b, beam_size),
            'last': tokens.reshape(-1).astype(jnp.int32),
            'alive_tokens': seqs,
            'alive_logp': jnp.where(ended, _NEG_INF, top),
            **_finish(c, top, seqs, ended, norm)}

  out = jax.lax.while_loop(running, body, _initial_carry(state, b, beam_size, steps, bos_id))
  return BeamSearchOutput(tokens=out['done_tokens'], lengths=out['done_length'],
                          scores=out['done_score'], log_probs=out['done_logp'])



def _initial_carry(state: Any, b: int, k: int, steps: int, bos_id: int) -> dict[str, Any]:
  """The loop's carry before the first step: only beam 0 of each example is alive (raw score 0), no
  hypothesis is finished (score -inf); `alive_tokens` [B, K, L], `done_*` [B] (`done_tokens` [B, L])."""
  return {
      't': jnp.zeros((), jnp.int32),
      'state': state,
      'last': jnp.full((b * k,), bos_id, jnp.int32),
      'alive_tokens': jnp.zeros((b, k, steps), jnp.int32),
      'alive_logp': jnp.where(jnp.arange(k)[None] == 0, 0.0, _NEG_INF) * jnp.ones((b, 1), jnp.float32),
      'done_tokens': jnp.zeros((b, steps), jnp.int32),
      'done_score': jnp.full((b,), _NEG_INF, jnp.float32),
      'done_logp': jnp.full((b,), _NEG_INF, jnp.float32),
      'done_length': jnp.zeros((b,), jnp.int32),
  }


def _extend(c: dict[str, Any], log_probs: jax.Array, limits: jax.Array, *, eos_id: int,
            banned_ids: Sequence[int]) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
  """Steps 1-2 (module docstring): the K best extensions of the alive beams by raw score.

  Args:
    c: the carry (`alive_logp` [B, K], `alive_tokens` [B, K, L], `t`).
    log_probs: float [B * K, V] of the next token.
    limits: int [B] per-example length bounds (only EOS at position limits - 1).

  Returns:
    (raw scores [B, K], source beams [B, K], tokens [B, K], sequences [B, K, L] with the token at t).
  """
  t, (b, k) = c['t'], c['alive_logp'].shape
  vocab = log_probs.shape[-1]
  log_probs = log_probs.astype(jnp.float32).reshape(b, k, vocab)
  if banned_ids:
    log_probs = log_probs.at[..., jnp.asarray(list(banned_ids))].set(_NEG_INF)
  last_position = (t == limits - 1)[:, None, None]  # only EOS at the last position
  log_probs = jnp.where(last_position & (jnp.arange(vocab) != eos_id), _NEG_INF, log_probs)
  scores = (c['alive_logp'][..., None] + log_probs).reshape(b, k * vocab)
  top, index = jax.lax.top_k(scores, k)  # [B, K]
  beams, tokens = index // vocab, index % vocab
  seqs = jnp.take_along_axis(c['alive_tokens'], beams[..., None], axis=1)
  return top, beams, tokens, seqs.at[:, :, t].set(tokens)


def _finish(c: dict[str, Any], top: jax.Array, seqs: jax.Array, ended: jax.Array,
            norm: Callable[[jax.Array], jax.Array]) -> dict[str, jax.Array]:
  """Step 3 (module docstring): each example's finished hypothesis, the best of the old one and the
  extensions `ended` [B, K] here (raw scores `top` [B, K], sequences `seqs` [B, K, L]); the carry's
  new `done_*` entries."""
  t = c['t']
  norm_scores = jnp.where(ended, top / norm(t + 1), _NEG_INF)
  best = jnp.argmax(norm_scores, axis=1)
  best_score = jnp.take_along_axis(norm_scores, best[:, None], axis=1)[:, 0]
  better = best_score > c['done_score']
  return {
      'done_tokens': jnp.where(better[:, None],
                               jnp.take_along_axis(seqs, best[:, None, None], axis=1)[:, 0],
                               c['done_tokens']),
      'done_score': jnp.where(better, best_score, c['done_score']),
      'done_logp': jnp.where(better, jnp.take_along_axis(top, best[:, None], axis=1)[:, 0],
                             c['done_logp']),
      'done_length': jnp.where(better, t, c['done_length']),
  }
