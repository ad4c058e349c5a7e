"""Labeled dependency trees: every arc carries one of `L` labels (relations), non-projective or projective.

Layout (the label axis last): `arc_scores[..., h, m, l]` is the log-potential of the arc word h -> word
m with label l (shape `[..., n, n, L]`), `root_scores[..., m, l]` of ROOT -> m with label l (shape
`[..., n, L]`). A labeled tree gives every word a head and a label; its score is
`sum_m s[head(m), m, label(m)]` (root arcs read `root_scores`). `-inf` forbids one label of an arc; an
arc whose every label is `-inf` is forbidden. `lengths`, `single_root`, any leading batch shape,
`jit` / `vmap` are as for the unlabeled functions (docs/concepts.md).

The reduction (exact, because a tree's score is a sum over its arcs and each arc's label is chosen
independently of the others'):

- partition function: `Z = sum_T prod_{(h, m) in T} sum_l exp(s[h, m, l])`, so the labeled `log Z` is
  the unlabeled `log Z` of `s_bar[h, m] = logsumexp_l s[h, m, l]`;
- marginals: `P(h -> m, l) = P_bar(h -> m) * softmax_l(s[h, m, :])[l]` (`P_bar` the unlabeled
  marginals of `s_bar`); they equal the gradient of the labeled `log Z` (autodiff gives the same);
- sampling: a tree from the unlabeled distribution of `s_bar`, then each arc's label independently
  from its softmax;
- best labeled tree: `max_{T, labels} sum s = max_T sum_{(h, m) in T} max_l s[h, m, l]`, so the
  unlabeled best tree of `s_max[h, m] = max_l s[h, m, l]` with each arc's argmax label (ties: the
  lowest label; the tree's ties as `mst` / `projective_mst`).

Cost: one O(n^2 L) reduction over the labels (and, for marginals and samples, one O(n^2 L)
expansion) on top of the unlabeled function; no `[..., n, n, L]` array besides the scores and the
marginals is kept. Non-projective functions call `trees.log_partition`, `marginals`, `mst`,
`sample`, `score`; projective ones `projective_log_partition`, `projective_marginals`,
`projective_mst`. Projective sampling has no unlabeled counterpart in `trees`: it is done here by
sequential conditioning on `projective_marginals` (see `labeled_sample`).
"""
import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from jax_structured.trees import _inputs
from jax_structured.trees import _matrix_tree
from jax_structured.trees import _mst
from jax_structured.trees import _projective
from jax_structured.trees import _sampling

__all__ = ['labeled_log_partition', 'labeled_marginals', 'labeled_mst', 'labeled_sample',
           'labeled_score', 'labeled_log_prob']


def _check(arc_scores, root_scores, lengths):
  """Validates the labeled layout; returns (arc [..., n, n, L], root [..., n, L], lengths [...],
  arc_ok [..., n, n] bool (both ends real, h != m), root_ok [..., n] bool (real word)).

  Raises:
    ValueError naming the argument, its shape and what was expected.
  """
  arc_scores, root_scores = jnp.asarray(arc_scores), jnp.asarray(root_scores)
  if arc_scores.ndim < 3 or arc_scores.shape[-3] != arc_scores.shape[-2]:
    raise ValueError(f'labeled arc_scores must have shape [..., n, n, L] (label axis last), got '
                     f'{arc_scores.shape}')
  if arc_scores.shape[-1] < 1:
    raise ValueError(f'labeled arc_scores need at least one label (L >= 1), got {arc_scores.shape}')
  if root_scores.shape != arc_scores.shape[:-3] + arc_scores.shape[-2:]:
    raise ValueError(f'labeled root_scores must have shape {arc_scores.shape[:-3] + arc_scores.shape[-2:]} '
                     f'([..., n, L] of arc_scores {arc_scores.shape}), got {root_scores.shape}')
  # The unlabeled check (dtype, lengths) on one label's slice: one contract for both layouts.
  _, _, lengths = _inputs.check_scores(arc_scores[..., 0], root_scores[..., 0], lengths)
  dtype = jnp.promote_types(jnp.promote_types(arc_scores.dtype, root_scores.dtype), jnp.float32)
  n = arc_scores.shape[-2]
  root_ok = jnp.arange(n, dtype=jnp.int32) < lengths[..., None]
  arc_ok = root_ok[..., :, None] & root_ok[..., None, :] & ~jnp.eye(n, dtype=bool)
  return arc_scores.astype(dtype), root_scores.astype(dtype), lengths, arc_ok, root_ok


def _logsumexp(x):
  """logsumexp over the last axis: -inf (with zero, not NaN, gradients) where every entry is -inf."""
  top = jnp.max(x, axis=-1, keepdims=True)
  top = lax.stop_gradient(jnp.where(jnp.isfinite(top), top, 0.0))
  total = jnp.sum(jnp.exp(x - top), axis=-1)
  positive = total > 0
  return jnp.where(positive, jnp.log(jnp.where(positive, total, 1.0)) + top[..., 0], -jnp.inf)


def _summed(arc_scores, root_scores, lengths):
  """(arc [..., n, n, L], root [..., n, L], lengths, s_bar arc [..., n, n], s_bar root [..., n]).

  Padded and diagonal entries are replaced by 0 before the reduction, so whatever they hold (NaN
  included) reaches neither the values nor the gradients.
  """
  arc, root, lengths, arc_ok, root_ok = _check(arc_scores, root_scores, lengths)
  arc = jnp.where(arc_ok[..., None], arc, 0.0)
  root = jnp.where(root_ok[..., None], root, 0.0)
  return arc, root, lengths, _logsumexp(arc), _logsumexp(root)


def _label_probs(scores, summed):
  """softmax over the labels given the logsumexp `summed`; 0 where `summed` is -inf."""
  finite = jnp.isfinite(summed)
  return jnp.where(finite[..., None], jnp.exp(scores - jnp.where(finite, summed, 0.0)[..., None]), 0.0)


def _check_exact(projective, exact):
  if projective and exact is not None:
    raise ValueError(f'exact={exact!r} applies to the matrix-tree (non-projective) functions; the '
                     'projective ones have no separate exact path: leave exact=None')


def labeled_log_partition(arc_scores, root_scores, lengths=None, *, single_root=True,
                          projective=False, exact=None):
  """log Z over labeled dependency trees: the unlabeled log Z of the label-summed scores.

  `log Z = log sum_{T, labels} exp(sum_m s[head(m), m, label(m)])` = `log_partition` (matrix-tree,
  or `projective_log_partition`, inside algorithm) of `logsumexp_l s[..., l]` (module docstring).
  Cost: the unlabeled function plus one O(n^2 L) reduction. Differentiable; its gradient is
  `labeled_marginals`.

  Args:
    arc_scores: float [..., n, n, L], `arc_scores[..., h, m, l]` log-potential of h -> m with label
      l; -inf forbids that label of the arc; the diagonal and padded entries are ignored.
    root_scores: float [..., n, L], log-potential of ROOT -> m with label l.
    lengths: None or int [...] number of real words (see `log_partition`).
    single_root: exactly one word hangs from ROOT if True; any number if False.
    projective: sum over projective trees only (Eisner's inside algorithm) if True.
    exact: matrix-tree only (see `log_partition` and `exact_mode`); must be None with
      `projective=True`.

  Returns:
    float [...] labeled log Z (0 for lengths == 0; -inf where no labeled tree is allowed).
  """
  _check_exact(projective, exact)
  _, _, lengths, arc, root = _summed(arc_scores, root_scores, lengths)
  if projective:
    return _projective.projective_log_partition(arc, root, lengths, single_root=single_root)
  return _matrix_tree.log_partition(arc, root, lengths, single_root=single_root, exact=exact)


def labeled_marginals(arc_scores, root_scores, lengths=None, *, single_root=True, projective=False,
                      exact=None):
  """Arc-label marginals `P(h -> m with label l)`: unlabeled marginals times the label softmax.

  `P(h -> m, l) = P_bar(h -> m) softmax_l(s[h, m, :])[l]` with `P_bar` the marginals (`marginals`,
  closed form from one LU; or `projective_marginals`, inside-outside) of the label-summed scores;
  equal to `jax.grad` of `labeled_log_partition`. Cost: the unlabeled marginals plus two O(n^2 L)
  passes. Differentiable.

  Args:
    arc_scores, root_scores, lengths, single_root, projective, exact: see `labeled_log_partition`.

  Returns:
    (arc_marginals [..., n, n, L], root_marginals [..., n, L]); for each real word `m`,
    `sum_{h, l} arc_marginals[h, m, l] + sum_l root_marginals[m, l] = 1`; exactly 0 on padding, the
    diagonal and forbidden (-inf) labels.
  """
  _check_exact(projective, exact)
  arc, root, lengths, arc_sum, root_sum = _summed(arc_scores, root_scores, lengths)
  if projective:
    arc_m, root_m = _projective.projective_marginals(arc_sum, root_sum, lengths, single_root=single_root)
  else:
    arc_m, root_m = _matrix_tree.marginals(arc_sum, root_sum, lengths, single_root=single_root,
                                           exact=exact)
  # Where the unlabeled marginal is 0 the labeled ones are 0 (even if the label softmax is NaN).
  expand = lambda m, s, total: jnp.where(m[..., None] == 0, 0.0, m[..., None] * _label_probs(s, total))
  return expand(arc_m, arc, arc_sum), expand(root_m, root, root_sum)


def _best_labels(arc_scores, root_scores, lengths):
  """(lengths, s_max arc [..., n, n], s_max root [..., n], argmax labels of both (int32, same shapes)).

  Padded and diagonal entries are 0 before the max (ignored by the tree functions either way).
  """
  arc, root, lengths, arc_ok, root_ok = _check(arc_scores, root_scores, lengths)
  arc = lax.stop_gradient(jnp.where(arc_ok[..., None], arc, 0.0))
  root = lax.stop_gradient(jnp.where(root_ok[..., None], root, 0.0))
  return (lengths, jnp.max(arc, -1), jnp.max(root, -1), jnp.argmax(arc, -1).astype(jnp.int32),
          jnp.argmax(root, -1).astype(jnp.int32))


def _at_heads(arc_values, root_values, heads):
  """`arc_values[..., heads[m], m, ...]` (or `root_values[..., m, ...]` where heads[m] == -1).

  Args:
    arc_values: [..., n, n, *tail]; root_values: [..., n, *tail]; heads: int [..., n].

  Returns:
    [..., n, *tail].
  """
  tail = arc_values.ndim - heads.ndim - 1
  n = heads.shape[-1]
  index = jnp.clip(heads, 0, n - 1).astype(jnp.int32)[..., None, :].reshape(
      heads.shape[:-1] + (1, n) + (1,) * tail)
  picked = jnp.squeeze(jnp.take_along_axis(arc_values, index, axis=heads.ndim - 1), heads.ndim - 1)
  is_root = (heads == -1).reshape(heads.shape + (1,) * tail)
  return jnp.where(is_root, root_values, picked)


def labeled_mst(arc_scores, root_scores, lengths=None, *, single_root=True, projective=False):
  """The highest-scoring labeled tree: the best tree of the label-maximised scores, argmax labels.

  Exact (module docstring): `mst` (Chu-Liu-Edmonds on device) or `projective_mst` (Eisner) of
  `s_max[h, m] = max_l s[h, m, l]`, each chosen arc with its argmax label. Cost: the unlabeled
  function plus one O(n^2 L) max / argmax. Ties: the lowest label; trees as `mst` / `projective_mst`.

  Args:
    arc_scores, root_scores, lengths, single_root, projective: see `labeled_log_partition` (scores
      finite or -inf).

  Returns:
    (heads int32 [..., n] (-1 for ROOT and padding), labels int32 [..., n] (the label of each word's
    arc, -1 on padding)).
  """
  lengths, arc, root, arc_label, root_label = _best_labels(arc_scores, root_scores, lengths)
  best = _projective.projective_mst if projective else _mst.mst
  heads = best(arc, root, lengths, single_root=single_root)
  labels = _at_heads(arc_label, root_label, heads)
  real = jnp.arange(heads.shape[-1]) < lengths[..., None]
  return heads, jnp.where(real, labels, -1).astype(jnp.int32)


def _projective_heads(key, arc, root, lengths, single_root):
  """One projective tree per sentence of a flat batch by sequential conditioning.

  Word m = 0, 1, ... draws its head from the projective marginals of the distribution conditioned on
  the heads drawn before (P(T) = prod_m P(head(m) | heads of 0..m-1), exact), then every other head of
  m is forbidden (-inf). n inside-outside passes per batch: O(n^4) per tree.

  Args:
    key: PRNG key; arc: [B, n, n]; root: [B, n]; lengths: [B]; single_root: root mode.

  Returns:
    heads int32 [B, n] (-1 for ROOT and padding).
  """
  n = arc.shape[-1]
  keys = jax.random.split(key, arc.shape[0])

  def step(carry, m):
    arc, root = carry
    arc_m, root_m = _projective.projective_marginals(arc, root, lengths, single_root=single_root)
    probs = jnp.concatenate([arc_m[:, :, m], root_m[:, m, None]], axis=-1)  # [B, n + 1], ROOT last
    choice = jax.vmap(lambda k, p: jax.random.categorical(jax.random.fold_in(k, m), p))(
        keys, jnp.log(jnp.maximum(probs, 0.0)))
    real = m < lengths
    is_root = choice == n
    keep = (jnp.arange(n)[None, :] == choice[:, None]) | ~real[:, None]
    arc = arc.at[:, :, m].set(jnp.where(keep, arc[:, :, m], -jnp.inf))
    root = root.at[:, m].set(jnp.where(is_root | ~real, root[:, m], -jnp.inf))
    return (arc, root), jnp.where(real & ~is_root, choice, -1).astype(jnp.int32)

  init = _inputs.vary_like((arc, root), arc, root, lengths)
  _, heads = lax.scan(step, init, jnp.arange(n))
  return heads.T


def labeled_sample(key, arc_scores, root_scores, lengths=None, *, single_root=True, projective=False,
                   num_samples=None):
  """Exact samples of labeled trees: a tree of the label-summed scores, then each arc's label.

  `P(T, labels) = P_bar(T) prod_m softmax_l(s[head(m), m, :])[label(m)]` (module docstring). Trees:
  `sample` (matrix-tree, O(n^3) per tree) or, projective, sequential conditioning on
  `projective_marginals` (n inside-outside passes, O(n^4) per tree: the `trees` module has no
  unlabeled projective sampler). Labels: one categorical draw per word, O(n L).

  Args:
    key: a `jax.random` key.
    arc_scores, root_scores, lengths, single_root, projective: see `labeled_log_partition`.
    num_samples: None for one sample per sentence, or a positive int.

  Returns:
    (heads, labels) int32, [..., n] each if `num_samples` is None else [num_samples, ..., n]; -1 for
    ROOT heads and on padding (heads and labels). A batch element that admits no tree gives
    meaningless samples.
  """
  if num_samples is not None and (not isinstance(num_samples, int) or num_samples < 1):
    raise ValueError(f'num_samples must be None or a positive int, got {num_samples!r}')
  arc, root, lengths, arc_sum, root_sum = _summed(arc_scores, root_scores, lengths)
  arc, root, arc_sum, root_sum = (lax.stop_gradient(x) for x in (arc, root, arc_sum, root_sum))
  tree_key, label_key = jax.random.split(key)
  count = 1 if num_samples is None else num_samples
  batch_shape, n = root_sum.shape[:-1], root_sum.shape[-1]
  if not projective:
    heads = _sampling.sample(tree_key, arc_sum, root_sum, lengths, single_root=single_root,
                                num_samples=count)
  else:
    size = int(np.prod(batch_shape))
    tile = lambda x: jnp.tile(x.reshape((size,) + x.shape[len(batch_shape):]),
                              (count,) + (1,) * (x.ndim - len(batch_shape)))
    heads = _projective_heads(tree_key, tile(arc_sum), tile(root_sum), tile(lengths), single_root)
    heads = heads.reshape((count,) + batch_shape + (n,))
  logits = jax.vmap(lambda h: _at_heads(arc, root, h))(heads)  # [count, ..., n, L]
  labels = jax.random.categorical(label_key, logits).astype(jnp.int32)
  real = jnp.arange(n) < lengths[..., None]
  labels = jnp.where(real, labels, -1)
  if num_samples is None:
    return heads[0], labels[0]
  return heads, labels


def labeled_score(arc_scores, root_scores, heads, labels, lengths=None):
  """The score of given labeled trees: `sum_m s[heads[m], m, labels[m]]` over real words.

  Args:
    arc_scores: float [..., n, n, L]; root_scores: float [..., n, L] (see `labeled_log_partition`).
    heads: int [..., n], head word of each word or -1 for ROOT (not checked to form a tree).
    labels: int [..., n] in [0, L) at real words (concrete values outside raise ValueError; entries
      at or past `lengths` are ignored).
    lengths: None or int [...].

  Returns:
    float [...] (`trees.score` of the scores of the given labels).
  """
  arc, root, lengths, _, root_ok = _check(arc_scores, root_scores, lengths)
  labels = jnp.asarray(labels)
  if labels.shape != root.shape[:-1] or not jnp.issubdtype(labels.dtype, jnp.integer):
    raise ValueError(f'labels must be integers of shape {root.shape[:-1]} (= root_scores.shape[:-1]), '
                     f'got {labels.dtype} {labels.shape}')
  num_labels = arc.shape[-1]
  if not isinstance(labels, jax.core.Tracer):
    real = np.asarray(labels)[np.asarray(root_ok)]
    if real.size and (real.min() < 0 or real.max() >= num_labels):
      raise ValueError(f'labels of real words must lie in [0, {num_labels}) (L = arc_scores.shape[-1]), '
                       f'got values in [{real.min()}, {real.max()}]')
  index = jnp.clip(labels, 0, num_labels - 1).astype(jnp.int32)
  arc_index = jnp.broadcast_to(index[..., None, :, None], arc.shape[:-1] + (1,))
  arc_at = jnp.take_along_axis(arc, arc_index, axis=-1)[..., 0]
  root_at = jnp.take_along_axis(root, index[..., None], axis=-1)[..., 0]
  return _matrix_tree.score(arc_at, root_at, heads, lengths)


def labeled_log_prob(arc_scores, root_scores, heads, labels, lengths=None, *, single_root=True,
                     projective=False, exact=None):
  """log P(heads, labels) = labeled_score - labeled_log_partition (the labeled tree-CRF log-likelihood).

  Args:
    arc_scores, root_scores, heads, labels, lengths: see `labeled_score`.
    single_root, projective, exact: see `labeled_log_partition` (a non-tree, or a non-projective tree
      under `projective=True`, has probability 0 but is not detected).

  Returns:
    float [...] log-probabilities.
  """
  return (labeled_score(arc_scores, root_scores, heads, labels, lengths)
          - labeled_log_partition(arc_scores, root_scores, lengths, single_root=single_root,
                                  projective=projective, exact=exact))
