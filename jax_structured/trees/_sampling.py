"""Exact samples of non-projective dependency trees (`sample`).

`sample` draws from the same two paths: the LU inverse with Sherman-Morrison updates, and for the
sentences the estimate sends to the exact path, conditionals from the elimination (O(n^4) per tree).
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax

from jax_structured.trees import _inputs
from jax_structured.trees._elimination import _elimination_marginals
from jax_structured.trees._elimination import _forbid_padding
from jax_structured.trees._exact_path import _chunk_size
from jax_structured.trees._exact_path import _replace_flagged
from jax_structured.trees._lu_path import _laplacian
from jax_structured.trees._lu_path import _laplacian_column_abs_sums
from jax_structured.trees._lu_path import _lu_logdet_and_inverse
from jax_structured.trees._lu_path import _lu_tolerance
from jax_structured.trees._lu_path import _needs_exact
from jax_structured.trees._lu_path import _potentials
from jax_structured.trees._lu_path import _prepare

__all__ = ['sample']


def _laplacian_column(arc_column, root_potential, m, single_root):
  """Column m of the Laplacian for the potentials arc_column [n] (heads of m) and root_potential."""
  n = arc_column.shape[-1]
  e_m = (jnp.arange(n) == m).astype(arc_column.dtype)
  if single_root:
    column = -arc_column + e_m * jnp.sum(arc_column)
    return column.at[0].set(root_potential)
  return -arc_column + e_m * (jnp.sum(arc_column) + root_potential)


def _draw_head(key, arc_probs, root_prob, top, m, root_taken, single_root):
  """Draws the head of word m from its conditional probabilities; only heads that keep a tree.

  Whatever rounding did to the probabilities, a head whose chain of already-drawn heads leads back
  to m (`top[h] == m`: a cycle) and, single root, a second ROOT child are never drawn: their exact
  probability is 0, and a sample is always a tree.

  Args:
    key: PRNG key.
    arc_probs: [n] P(h -> m | heads drawn so far); root_prob: [] P(ROOT -> m | ...).
    top: [n] int, the word at the top of each word's chain of drawn heads (n for ROOT).
    m: the word; root_taken: [] bool, a word already hangs from ROOT.
    single_root: root mode.

  Returns:
    (choice in 0..n (n = ROOT), updated top, updated root_taken, error): `error` is how far the
    given probabilities are from a distribution over the heads that keep a tree (|their sum - 1| plus
    the mass given to the others), a measure of the rounding in them (NaN if they are).
  """
  n = arc_probs.shape[-1]
  probs = jnp.concatenate([arc_probs, root_prob[None]])
  closes_cycle = jnp.concatenate([top == m, jnp.zeros((1,), bool)])
  if single_root:
    closes_cycle = closes_cycle.at[n].set(root_taken)
  kept = jnp.where(closes_cycle, 0.0, probs)
  error = jnp.abs(jnp.sum(kept) - 1.0) + jnp.sum(jnp.abs(jnp.where(closes_cycle, probs, 0.0)))
  # Rounding can make an allowed option's probability a tiny negative; forbidden ones are exactly 0.
  logits = jnp.log(jnp.maximum(kept, 0.0))  # log(0) = -inf: never drawn.
  choice = jax.random.categorical(key, logits)
  is_root = choice == n
  new_top = jnp.where(is_root, n, top[jnp.minimum(choice, n - 1)])
  return choice, jnp.where(top == m, new_top, top), root_taken | is_root, error


def _sample_one(key, arc_potentials, root_potentials, inverse, mask, single_root):
  """One sample for one sentence by sequential conditioning (chain rule over modifiers).

  Modifier m = 0, 1, ... draws its head from P(head(m) = . | heads of 0..m-1) (the marginals of the
  conditioned distribution, Koo et al. formulas), then its Laplacian column is replaced by the column
  of the chosen arc alone, with potential 1; the inverse is updated by Sherman-Morrison (O(n^2) per
  word, O(n^3) per tree, the scheme of Colbourn, Myrvold & Neufeld 1996). The denominator
  `1 + X[m] . u` is the probability of the drawn head over its potential, so it is positive. Exact up
  to the rounding of the inverse, which the returned error measures (`sample` sends the samples
  where it is too large to `_sample_one_exact`).

  Args:
    key: PRNG key.
    arc_potentials: [n, n]; root_potentials: [n]; inverse: [n, n] inverse of the Laplacian; mask: [n].
    single_root: root mode.

  Returns:
    (heads [n] int32 (-1 for ROOT and padding), [] the largest `_draw_head` error of the draws).
  """
  n = mask.shape[-1]

  def step(carry, m):
    inverse, top, root_taken, worst = carry
    row = inverse[m]
    arc_column = arc_potentials[:, m]
    if single_root:
      not_first = jnp.arange(n) != 0
      arc_probs = arc_column * (jnp.where(m != 0, row[m], 0.0) - jnp.where(not_first, row, 0.0))
      root_prob = root_potentials[m] * row[0]
    else:
      arc_probs = arc_column * (row[m] - row)
      root_prob = root_potentials[m] * row[m]
    choice, new_top, new_root_taken, error = _draw_head(jax.random.fold_in(key, m), arc_probs,
                                                        root_prob, top, m, root_taken, single_root)
    is_root = choice == n
    chosen = jnp.arange(n) == choice
    # The drawn arc's potential is a constant factor of every remaining tree, so it is set to 1:
    # a small one makes the conditioned Laplacian badly scaled and the Sherman-Morrison error grow.
    new_column = _laplacian_column(chosen.astype(arc_column.dtype), is_root.astype(arc_column.dtype),
                                   m, single_root)
    old_column = _laplacian_column(arc_column, root_potentials[m], m, single_root)
    u = new_column - old_column
    denominator = 1.0 + row @ u
    updated = inverse - jnp.outer(inverse @ u, row) / denominator
    real = mask[m]
    head = jnp.where(real & ~is_root, choice, -1).astype(jnp.int32)
    carry = (jnp.where(real, updated, inverse), jnp.where(real, new_top, top),
             jnp.where(real, new_root_taken, root_taken),
             jnp.where(real & ~(error <= worst), error, worst))  # NaN errors stick
    return carry, head

  init = _inputs.vary_like((inverse, jnp.arange(n), jnp.zeros((), bool), jnp.zeros((), inverse.dtype)),
                           arc_potentials, root_potentials, inverse, mask)
  (_, _, _, worst), heads = lax.scan(step, init, jnp.arange(n))
  return heads, worst


def _sample_one_exact(key, arc_scores, root_scores, mask, single_root):
  """`_sample_one` with the conditionals from the exact elimination, for sharp scores.

  Each step takes the marginals of the conditioned distribution as the gradient of
  `_eliminate_sentence` (`_elimination_marginals`; the drawn columns reduced to their one arc), so
  nothing is lost to rounding: O(n^3) per word, O(n^4) per tree.

  Args:
    key: PRNG key (the same draws as `_sample_one` would make from exact conditionals).
    arc_scores: [n, n] log-potentials, -inf on the diagonal, on padding and on forbidden arcs.
    root_scores: [n] log-potentials, -inf on padding.
    mask: [n] bool; single_root: root mode.

  Returns:
    heads [n] int32 (-1 for ROOT and padding).
  """
  n = mask.shape[-1]
  conditionals = lambda arc, root: _elimination_marginals(arc, root, mask, single_root)[1:]

  def step(carry, m):
    arc, root, top, root_taken = carry
    arc_marginals, root_marginals = conditionals(arc, root)
    choice, new_top, new_root_taken, _ = _draw_head(
        jax.random.fold_in(key, m), arc_marginals[:, m], root_marginals[m], top, m, root_taken,
        single_root)
    is_root = choice == n
    real = mask[m]
    keep = (jnp.arange(n) == choice) | ~real
    arc = arc.at[:, m].set(jnp.where(keep, arc[:, m], -jnp.inf))
    root = root.at[m].set(jnp.where(is_root | ~real, root[m], -jnp.inf))
    head = jnp.where(real & ~is_root, choice, -1).astype(jnp.int32)
    carry = (arc, root, jnp.where(real, new_top, top), jnp.where(real, new_root_taken, root_taken))
    return carry, head

  init = _inputs.vary_like((arc_scores, root_scores, jnp.arange(n), jnp.zeros((), bool)),
                           arc_scores, root_scores, mask)
  _, heads = lax.scan(step, init, jnp.arange(n))
  return heads


def sample(key, arc_scores, root_scores, lengths=None, *, single_root=True, num_samples=None):
  """Exact samples from the Gibbs distribution P(T) = exp(score(T)) / Z over non-projective trees.

  Sequential conditioning with Sherman-Morrison updates of the Laplacian inverse (see
  `_sample_one`): O(n^3) per tree after one O(n^3) factorisation shared by all samples of a
  sentence, a fixed-length `lax.scan` on device (no host callback, no rejection). Sentences whose
  LU error estimate is too large for `marginals` (sharp scores, see the module docstring) draw their
  conditionals from the exact elimination instead (`_sample_one_exact`, O(n^4) per tree), and so do
  samples whose conditionals drifted (see `_sample_one`); only those samples are redrawn when they
  are few (`_replace_flagged`).

  Args:
    key: a `jax.random` key.
    arc_scores: [..., n, n] float; -inf arcs are never sampled.
    root_scores: [..., n] float.
    lengths: None or int [...].
    single_root: see `log_partition`.
    num_samples: None for one sample per sentence, or a positive int.

  Returns:
    heads int32, [..., n] if `num_samples` is None else [num_samples, ..., n]; -1 for ROOT and at
    padded positions. Every sample is a tree of the root mode (a head that would close a cycle, or a
    second ROOT child, is never drawn). A batch element whose `log_partition` is NaN or -inf gives
    meaningless heads.
  """
  if num_samples is not None and (not isinstance(num_samples, int) or num_samples < 1):
    raise ValueError(f'num_samples must be None or a positive int, got {num_samples!r}')
  arc_scores, root_scores, _, mask = _prepare(arc_scores, root_scores, lengths)
  arc_scores = lax.stop_gradient(arc_scores)
  root_scores = lax.stop_gradient(root_scores)
  arc_potentials, root_potentials, _, _ = _potentials(arc_scores, root_scores, mask, single_root)
  lap = _laplacian(arc_potentials, root_potentials, mask, single_root)
  _, inverse = _lu_logdet_and_inverse(lap)
  exact = _needs_exact(inverse, _laplacian_column_abs_sums(arc_potentials, root_potentials, mask,
                                                           single_root))

  batch_shape = mask.shape[:-1]
  n = mask.shape[-1]
  size = 1
  for d in batch_shape:
    size *= d
  flat = lambda x, tail: x.reshape((size,) + tail)
  flat_mask = flat(mask, (n,))
  count = 1 if num_samples is None else num_samples
  keys = jax.random.split(key, (count, size))
  fast = jax.vmap(functools.partial(_sample_one, single_root=single_root))  # over the flat batch
  args = (flat(arc_potentials, (n, n)), flat(root_potentials, (n,)), flat(inverse, (n, n)), flat_mask)
  heads, worst = jax.vmap(lambda k: fast(k, *args))(keys)  # [count, size, n], [count, size]
  # Sherman-Morrison updates can lose accuracy as the conditioning goes on even where the first
  # inverse was fine; the conditionals' sum is a free check (it is 1 in exact arithmetic).
  exact = flat(exact, ())[None, :] | ~(worst < _lu_tolerance(worst.dtype))

  flat_keys = keys.reshape((count * size,) + keys.shape[2:])  # typed or raw uint32 keys
  slow = jax.vmap(functools.partial(_sample_one_exact, single_root=single_root))

  def exact_heads(inputs):  # keys and sentences of some of the flat [count * size] samples
    sample_keys, sentence = inputs
    arc, root = _forbid_padding(flat(arc_scores, (n, n))[sentence], flat(root_scores, (n,))[sentence],
                                flat_mask[sentence])
    return slow(sample_keys, arc, root, flat_mask[sentence])

  sentences = jnp.tile(jnp.arange(size), count)
  heads = _replace_flagged(exact.reshape(-1), exact_heads, (flat_keys, sentences),
                           heads.reshape(count * size, n), _chunk_size(count * size, n))
  heads = heads.reshape((count,) + batch_shape + (n,))
  return heads[0] if num_samples is None else heads
