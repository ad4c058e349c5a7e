"""Tests of the labeled tree functions (`trees.labeled_*`) against brute-force enumeration of labeled trees.

Every labeled tree (every tree of `brute_force.all_trees` with every assignment of labels to its words) is
enumerated in float64 numpy, independently of the reduction the library uses (logsumexp / max over the
labels): log Z, arc-label marginals, the best labeled tree and the probabilities of labeled trees follow
by summation over the list. Gradients are also checked against finite differences (`check_grads`).
"""
import functools
import itertools

import brute_force
import jax
import jax.numpy as jnp
from jax.test_util import check_grads
import numpy as np
import pytest
import scipy.stats

from jax_structured import trees

ROOT_MODES = [True, False]
KINDS = ['nonprojective', 'projective']
# The default set runs one root mode of each kind for the costlier tests; the other two are slow.
_SLOW = pytest.mark.slow
KIND_AND_ROOT = [('nonprojective', True), ('projective', False),
                 pytest.param('nonprojective', False, marks=_SLOW),
                 pytest.param('projective', True, marks=_SLOW)]


@functools.lru_cache(maxsize=None)
def all_labeled_trees(n, num_labels, single_root=True, projective=False):
  """(heads [T, n], labels [T, n]): every tree over n words with every labeling (L^n per tree)."""
  heads = brute_force.all_trees(n, single_root, projective)
  labelings = np.array(list(itertools.product(range(num_labels), repeat=n)), np.int64).reshape(-1, n)
  return (np.repeat(heads, len(labelings), axis=0), np.tile(labelings, (len(heads), 1)))


def labeled_tree_scores(arc, root, heads, labels):
  """float64 [T]: sum_m s[heads[m], m, labels[m]] (root_scores[m, labels[m]] where heads[m] == -1)."""
  n = heads.shape[1]
  m = np.arange(n)[None, :]
  arc_part = arc[np.where(heads == -1, 0, heads), m, labels]
  return np.where(heads == -1, root[m, labels], arc_part).sum(-1)


def labeled_reference(arc, root, single_root=True, projective=False):
  """Brute force: (log Z, arc marginals [n, n, L], root marginals [n, L], (heads, labels) of the best
  labeled tree, (all heads, all labels, probabilities))."""
  n, num_labels = root.shape
  heads, labels = all_labeled_trees(n, num_labels, single_root, projective)
  s = labeled_tree_scores(np.asarray(arc, np.float64), np.asarray(root, np.float64), heads, labels)
  finite = np.isfinite(s)
  top = s[finite].max()
  log_z = top + np.log(np.exp(s[finite] - top).sum())
  p = np.where(finite, np.exp(s - log_z), 0.0)
  arc_m, root_m = np.zeros((n, n, num_labels)), np.zeros((n, num_labels))
  for m in range(n):
    is_root = heads[:, m] == -1
    np.add.at(root_m, (m, labels[is_root, m]), p[is_root])
    np.add.at(arc_m, (heads[~is_root, m], m, labels[~is_root, m]), p[~is_root])
  best = int(np.argmax(np.where(finite, s, -np.inf)))
  return log_z, arc_m, root_m, (heads[best], labels[best]), (heads, labels, p)


def _problem(seed, lengths, n, num_labels, forbid=True):
  """Random float64 labeled scores [B, n, n, L], [B, n, L] with NaN in the padding and, with `forbid`,
  forbidden labels: one label of an arc, every label of another arc, one label of a root arc."""
  rng = np.random.default_rng(seed)
  batch = len(lengths)
  arc = rng.normal(size=(batch, n, n, num_labels))
  root = rng.normal(size=(batch, n, num_labels))
  for b, k in enumerate(lengths):
    arc[b, k:], arc[b, :, k:], root[b, k:] = np.nan, np.nan, np.nan  # must not matter
    if forbid and k >= 3:
      arc[b, 0, 1, 0] = -np.inf          # one label of 0 -> 1
      arc[b, 2, 1, :] = -np.inf          # the whole arc 2 -> 1
      root[b, 2, num_labels - 1] = -np.inf
  return arc, root, np.asarray(lengths)


def _functions(kind, single_root):
  projective = kind == 'projective'
  kw = dict(single_root=single_root, projective=projective)
  return projective, kw


@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.parametrize('single_root', ROOT_MODES)
def test_against_enumeration_with_padding_and_forbidden_labels(kind, single_root):
  """log Z, marginals and the best labeled tree of padded batches (jit) equal the enumeration's."""
  projective, kw = _functions(kind, single_root)
  lengths = [4, 3, 1, 0]
  arc, root, lengths = _problem(1 if single_root else 2, lengths, 4, 3)
  log_z, (arc_m, root_m), (heads, labels) = jax.jit(lambda a, r, l: (
      trees.labeled_log_partition(a, r, l, **kw), trees.labeled_marginals(a, r, l, **kw),
      trees.labeled_mst(a, r, l, **kw)))(arc, root, lengths)
  arc_m, root_m, heads, labels = map(np.asarray, (arc_m, root_m, heads, labels))
  assert arc_m.shape == arc.shape and root_m.shape == root.shape
  assert heads.dtype == np.int32 and labels.dtype == np.int32
  for b, k in enumerate(lengths):
    assert np.all(heads[b, k:] == -1) and np.all(labels[b, k:] == -1)
    assert np.all(arc_m[b, k:] == 0) and np.all(arc_m[b, :, k:] == 0) and np.all(root_m[b, k:] == 0)
    if k == 0:
      assert log_z[b] == 0.0
      continue
    ref_z, ref_arc, ref_root, (ref_heads, ref_labels), _ = labeled_reference(
        arc[b, :k, :k], root[b, :k], single_root, projective)
    np.testing.assert_allclose(log_z[b], ref_z, rtol=1e-10)
    np.testing.assert_allclose(arc_m[b, :k, :k], ref_arc, atol=1e-10)
    np.testing.assert_allclose(root_m[b, :k], ref_root, atol=1e-10)
    np.testing.assert_array_equal(heads[b, :k], ref_heads)   # continuous scores: a unique argmax
    np.testing.assert_array_equal(labels[b, :k], ref_labels)
    if k >= 3:  # forbidden labels and arcs have marginal exactly 0
      assert arc_m[b, 0, 1, 0] == 0 and np.all(arc_m[b, 2, 1] == 0) and root_m[b, 2, -1] == 0


@pytest.mark.parametrize('kind, single_root, finite_differences', [
    ('nonprojective', True, False), ('projective', False, True),
    pytest.param('nonprojective', True, True, marks=_SLOW),
    pytest.param('nonprojective', False, True, marks=_SLOW),
    pytest.param('projective', True, True, marks=_SLOW)])
def test_gradient_is_the_marginals_and_matches_finite_differences(kind, single_root, finite_differences):
  """jax.grad of labeled log Z (autodiff through the reduction) == labeled_marginals (closed form),
  and the gradient of log Z agrees with finite differences (reverse mode, float64)."""
  projective, kw = _functions(kind, single_root)
  arc, root, lengths = _problem(3, [4, 2], 4, 2)
  arc, root = np.nan_to_num(arc), np.nan_to_num(root)  # finite everywhere for finite differences
  arc[0, 0, 1, 0] = -np.inf
  f = lambda a, r: trees.labeled_log_partition(a, r, lengths, **kw).sum()
  g_arc, g_root = jax.jit(jax.grad(f, argnums=(0, 1)))(arc, root)
  arc_m, root_m = jax.jit(lambda a, r: trees.labeled_marginals(a, r, lengths, **kw))(arc, root)
  np.testing.assert_allclose(g_arc, arc_m, atol=1e-12)
  np.testing.assert_allclose(g_root, root_m, atol=1e-12)
  assert np.all(np.isfinite(g_arc)) and g_arc[0, 0, 1, 0] == 0
  if not finite_differences:
    return
  finite_arc = np.where(np.isfinite(arc), arc, -30.0)  # check_grads perturbs every entry
  check_grads(jax.jit(lambda a, r: trees.labeled_log_partition(a, r, lengths, **kw)), (finite_arc, root),
              order=1, modes=('rev',), atol=1e-6, rtol=1e-6)


def _chi_square_p_value(heads, labels, ref_heads, ref_labels, probs):
  """p-value of the counts of sampled labeled trees against their enumerated probabilities."""
  index = {(tuple(h), tuple(l)): i for i, (h, l) in enumerate(zip(ref_heads, ref_labels))}
  counts = np.zeros(len(probs))
  for h, l in zip(heads, labels):
    counts[index[(tuple(h), tuple(l))]] += 1  # a KeyError: a sample that is not a labeled tree
  keep = probs > 0
  assert counts[~keep].sum() == 0, 'sampled a labeled tree of probability 0'
  expected, counts = probs[keep] * len(heads), counts[keep]
  rare = expected < 5  # pooled into one cell (the chi-square approximation)
  if rare.any():
    expected = np.append(expected[~rare], expected[rare].sum())
    counts = np.append(counts[~rare], counts[rare].sum())
  return scipy.stats.chi2.sf(((counts - expected) ** 2 / expected).sum(), len(expected) - 1)


@pytest.mark.parametrize('kind, single_root', KIND_AND_ROOT)
def test_sample_frequencies(kind, single_root):
  """8000 labeled samples of a padded sentence follow the enumerated labeled-tree distribution."""
  projective, kw = _functions(kind, single_root)
  arc, root, lengths = _problem(4, [3, 2], 4, 2, forbid=False)
  arc[0, 0, 1, 0] = -np.inf
  arc[0, 2, 1, :] = -np.inf
  count = 8000
  heads, labels = jax.jit(lambda k, a, r, l: trees.labeled_sample(k, a, r, l, num_samples=count, **kw))(
      jax.random.key(0), arc, root, lengths)
  heads, labels = np.asarray(heads), np.asarray(labels)
  assert heads.shape == labels.shape == (count, 2, 4)
  assert np.all(heads[:, :, 3] == -1) and np.all(labels[:, :, 3] == -1)
  assert np.all(heads[:, 1, 2] == -1) and np.all(labels[:, 1, 2] == -1)
  for b, k in enumerate(lengths):
    *_, (ref_heads, ref_labels, probs) = labeled_reference(arc[b, :k, :k], root[b, :k], single_root,
                                                          projective)
    p_value = _chi_square_p_value(heads[:, b, :k], labels[:, b, :k], ref_heads, ref_labels, probs)
    assert p_value > 1e-3, p_value
  # The test has power: against the labeled distribution of labels scored at half their value (the
  # same trees, flatter labels) the same samples are rejected.
  *_, (ref_heads, ref_labels, _) = labeled_reference(arc[0, :3, :3], root[0, :3], single_root, projective)
  wrong = labeled_reference(arc[0, :3, :3] / 2, root[0, :3] / 2, single_root, projective)[-1][2]
  assert _chi_square_p_value(heads[:, 0, :3], labels[:, 0, :3], ref_heads, ref_labels, wrong) < 1e-3


@pytest.mark.parametrize('kind', ['nonprojective', pytest.param('projective', marks=_SLOW)])
def test_score_log_prob_and_batch_shapes(kind):
  """labeled_score / log_prob against the enumeration; the best labeled trees of a [2, 2] batch and of
  vmap equal those of the flat [4] batch."""
  projective, kw = _functions(kind, True)
  arc, root, lengths = _problem(5, [3, 2, 1, 0], 3, 3)
  best = jax.jit(lambda a, r, l: trees.labeled_mst(a, r, l, **kw))
  heads, labels = best(arc, root, lengths)
  log_p = np.asarray(jax.jit(lambda *args: trees.labeled_log_prob(*args, **kw))(arc, root, heads, labels,
                                                                                 lengths))
  for b, k in enumerate(lengths):
    if k == 0:
      assert log_p[b] == 0
      continue
    *_, (all_heads, all_labels, probs) = labeled_reference(arc[b, :k, :k], root[b, :k], True, projective)
    i = np.flatnonzero((all_heads == np.asarray(heads)[b, :k]).all(1)
                       & (all_labels == np.asarray(labels)[b, :k]).all(1))
    np.testing.assert_allclose(log_p[b], np.log(probs[i[0]]), rtol=1e-10)
  shaped = lambda x: x.reshape((2, 2) + x.shape[1:])
  flat = (heads, labels)
  for x, y in zip(flat, best(shaped(arc), shaped(root), shaped(lengths))):
    np.testing.assert_array_equal(shaped(np.asarray(x)), y)
  mapped = jax.vmap(lambda a, r, l: trees.labeled_mst(a, r, l, **kw))(arc, root, lengths)
  np.testing.assert_array_equal(np.stack(mapped), np.stack(flat))


@pytest.mark.slow
@pytest.mark.parametrize('kind', KINDS)
def test_vmap_and_float32(kind):
  """vmap of the labeled marginals and samples, and a [3, 1] batch, equal the batched call; float32 works."""
  projective, kw = _functions(kind, False)
  arc, root, lengths = _problem(6, [3, 2, 1], 3, 3)
  marginals = lambda a, r, l: trees.labeled_marginals(a, r, l, **kw)
  for x, y, z in zip(jax.vmap(marginals)(arc, root, lengths), marginals(arc, root, lengths),
                     marginals(arc[:, None], root[:, None], lengths[:, None])):
    np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(y, np.asarray(z)[:, 0])
  heads, labels = jax.vmap(lambda k, a, r, l: trees.labeled_sample(k, a, r, l, **kw))(
      jax.random.split(jax.random.key(0), 3), arc, root, lengths)
  assert np.all(trees.is_tree(heads, lengths)) and np.all((labels >= 0) == (np.arange(3) < lengths[:, None]))
  single = marginals(arc.astype(np.float32), root.astype(np.float32), lengths)[0]
  assert single.dtype == np.float32
  np.testing.assert_allclose(single, marginals(arc, root, lengths)[0], atol=1e-5)


def test_bad_inputs_are_one_clear_error():
  arc, root = np.zeros((2, 3, 3, 4)), np.zeros((2, 3, 4))
  with pytest.raises(ValueError, match=r'\[\.\.\., n, n, L\]'):
    trees.labeled_log_partition(arc[..., 0], root)
  with pytest.raises(ValueError, match='root_scores must have shape'):
    trees.labeled_marginals(arc, root[..., :2])
  with pytest.raises(ValueError, match='lengths must lie'):
    trees.labeled_mst(arc, root, [3, 4])
  with pytest.raises(ValueError, match='exact='):
    trees.labeled_log_partition(arc, root, projective=True, exact='flag')
  with pytest.raises(ValueError, match=r'labels of real words must lie in \[0, 4\)'):
    trees.labeled_score(arc, root, np.full((2, 3), -1), np.array([[0, 1, 4], [0, 0, 0]]))
  with pytest.raises(ValueError, match='num_samples'):
    trees.labeled_sample(jax.random.key(0), arc, root, num_samples=0)
  # Labels past the lengths are ignored, -1 included.
  score = trees.labeled_score(arc, root, np.full((2, 3), -1), np.array([[0, 1, -1], [0, -1, -1]]), [2, 1])
  np.testing.assert_array_equal(score, [0.0, 0.0])


@pytest.mark.slow
@pytest.mark.parametrize('kind', KINDS)
@pytest.mark.parametrize('single_root', ROOT_MODES)
@pytest.mark.parametrize('n, num_labels', [(2, 3), (3, 3), (4, 3), (5, 2), (6, 2), (5, 3)])
def test_exhaustive_against_enumeration(kind, single_root, n, num_labels):
  """Every size up to n = 6 (L <= 3): log Z, marginals, best labeled tree and log_prob, unpadded and
  padded by one word, with forbidden labels."""
  projective, kw = _functions(kind, single_root)
  arc, root, lengths = _problem(10 * n + num_labels, [n, n - 1], n, num_labels)
  log_z = trees.labeled_log_partition(arc, root, lengths, **kw)
  arc_m, root_m = trees.labeled_marginals(arc, root, lengths, **kw)
  heads, labels = trees.labeled_mst(arc, root, lengths, **kw)
  log_p = trees.labeled_log_prob(arc, root, heads, labels, lengths, **kw)
  for b, k in enumerate(lengths):
    if k == 0:
      continue
    ref_z, ref_arc, ref_root, (ref_heads, ref_labels), (_, _, probs) = labeled_reference(
        arc[b, :k, :k], root[b, :k], single_root, projective)
    np.testing.assert_allclose(log_z[b], ref_z, rtol=1e-10)
    np.testing.assert_allclose(arc_m[b, :k, :k], ref_arc, atol=1e-10)
    np.testing.assert_allclose(root_m[b, :k], ref_root, atol=1e-10)
    np.testing.assert_array_equal(heads[b, :k], ref_heads)
    np.testing.assert_array_equal(labels[b, :k], ref_labels)
    np.testing.assert_allclose(log_p[b], np.log(probs.max()), rtol=1e-9)
