"""Relation networks over words, with tree constraints (Yu et al. 2018, "Sentence encoding with
tree-constrained relation networks"; Santoro et al. 2017; Palm et al. 2017).

Objects are the BiLSTM outputs o_1..o_n of a sentence plus ROOT, a learned vector o_0: eq. 3 sums over
D(x) = {(h, m) | h in [0..n], m in [1..n]}, so ROOT is a head like any word. Relations are
g_theta(o_h, o_m) for head h and modifier m; a TREE WEIGHT w[h, m] in [0, 1] says how much each relation
counts (layout [..., 1 + n, n]: row 0 is ROOT, row 1 + h is word h, column m is word m):

- 'none':       w = 1 on every pair of real words (h, m), the diagonal included (eq. 1 sums over all
                i, j), 0 on ROOT;
- 'supervised': w[h, m] = 1 iff h is the head of m in a given tree (ROOT included), eq. 3;
- 'latent':     w[h, m] = p_psi(h -> m | x), the edge marginals of the matrix-tree CRF (`trees.marginals`)
                whose potentials are the bilinear form of eq. 4 over the objects (`LatentTree`).

g_theta and f_phi are two-hidden-layer ReLU MLPs with residual connections (appendix A.1, 300 units;
512 for translation). g's first layer is SEPARABLE: W [o_h; o_m] + b = (W_1 o_h + b) + W_2 o_m, so it
costs two [n, H] projections instead of a [n^2, 2d] one; only its second layer runs over the pairs
(`PairRelation`). Memory is [..., 1 + n, n, H] per call, linear in the batch.

Aggregation (`aggregate`): 'sum' (eq. 1) or 'max' (appendix A.1 replaces the sums by max for the
intra-attention and recurrent models). With max, weights scale each relation before the max:
max_{h} w[h, m] g(o_h, o_m). Every g output is >= 0 (a ReLU layer plus a residual of a ReLU layer), so a
pair with weight 0 contributes 0, which never exceeds a real relation: with 0/1 weights (no tree, a given
tree, padding) the weighted max is exactly the max over the pairs the tree keeps, and with marginals it
is the soft version of that max, differentiable in the marginals.
"""
from typing import Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jax_structured import trees
from jax_structured.nn import exactness
from jax_structured.nn import masks

TREES = ('none', 'supervised', 'latent')
AGGREGATIONS = ('sum', 'max')


def check_choice(value: str, valid: Sequence[str], key: str) -> None:
  """ValueError naming `config.model.encoder.<key>` when `value` is not one of `valid`."""
  if value not in valid:
    raise ValueError(f'config.model.encoder.{key}={value!r}; valid: {list(valid)}')


class ResidualMLP(nn.Module):
  """f_phi of appendix A.1: `num_layers` ReLU layers of `features` units with residual connections,
  z_k = relu(A_k z_{k-1} + a_k) + z_{k-1} (the residual is dropped where the sizes differ, i.e. on a
  first layer whose input is not `features` wide).

  Attributes:
    features: hidden units per layer (300; 512 for translation).
    num_layers: hidden layers (2).
  """
  features: int
  num_layers: int = 2

  @nn.compact
  def __call__(self, x: jax.Array) -> jax.Array:
    """[..., D] -> [..., features]."""
    for k in range(self.num_layers):
      y = nn.relu(nn.Dense(self.features, name=f'dense_{k}')(x))
      x = y + x if x.shape[-1] == self.features else y
    return x


class PairRelation(nn.Module):
  """g_theta(o_h, o_m) of eqs. 1-3: a two-hidden-layer residual ReLU MLP over the pair [o_h; o_m].

  Layer 1 (separable): z_1 = relu(W_1 o_h + W_2 o_m + b_1) ('head' carries W_1 and b_1, 'modifier'
  W_2); further layers z_k = relu(W_k z_{k-1} + b_k) + z_{k-1}. Outputs are >= 0 (see the module
  docstring: this is what lets weights combine with max).

  Attributes:
    features: hidden units per layer.
    num_layers: hidden layers (2).
  """
  features: int
  num_layers: int = 2

  def setup(self):
    self.head = nn.Dense(self.features, name='head')
    self.modifier = nn.Dense(self.features, use_bias=False, name='modifier')
    self.hidden = [nn.Dense(self.features, name=f'dense_{k}') for k in range(1, self.num_layers)]

  def _rest(self, z: jax.Array) -> jax.Array:
    for dense in self.hidden:
      z = nn.relu(dense(z)) + z
    return z

  def __call__(self, heads: jax.Array, modifiers: jax.Array) -> jax.Array:
    """All pairs: heads [..., Nh, d], modifiers [..., Nm, d] -> g [..., Nh, Nm, features]."""
    first = self.head(heads)[..., :, None, :] + self.modifier(modifiers)[..., None, :, :]
    return self._rest(nn.relu(first))

  def aligned(self, heads: jax.Array, modifiers: jax.Array) -> jax.Array:
    """Position-wise pairs: heads [..., n, d], modifiers [..., n, d] -> g(heads_i, modifiers_i)
    [..., n, features] (a given tree: each word with its own head, n pairs instead of n^2)."""
    return self._rest(nn.relu(self.head(heads) + self.modifier(modifiers)))


def with_root(objects: jax.Array, root: jax.Array) -> jax.Array:
  """[o_0; o_1..o_n]: objects [..., n, d], root [d] -> [..., 1 + n, d]."""
  root = jnp.broadcast_to(root.astype(objects.dtype), objects.shape[:-2] + (1, objects.shape[-1]))
  return jnp.concatenate([root, objects], axis=-2)


def tree_weights(tree: str, lengths: jax.Array, n: int, *, heads: Optional[jax.Array] = None,
                 arc_marginals: Optional[jax.Array] = None,
                 root_marginals: Optional[jax.Array] = None, dtype=jnp.float32) -> jax.Array:
  """The weight w[h, m] of every relation (module docstring), zero wherever h or m is padding.

  Args:
    tree: one of TREES.
    lengths: int [...].
    n: padded length.
    heads: int [..., n] (-1 = ROOT), for 'supervised'.
    arc_marginals, root_marginals: [..., n, n] / [..., n] (`trees.marginals` layout), for 'latent'.
    dtype: of the result.

  Returns:
    [..., 1 + n, n]: row 0 = ROOT -> m, row 1 + h = word h -> m.
  """
  check_choice(tree, TREES, 'tree')
  lengths = jnp.asarray(lengths, jnp.int32)
  if tree == 'none':
    pairs = masks.pair_mask(lengths, n).astype(dtype)
    return jnp.concatenate([jnp.zeros(pairs.shape[:-2] + (1, n), dtype), pairs], axis=-2)
  if tree == 'supervised':
    if heads is None:
      raise ValueError("tree='supervised' needs structure['heads'] (the batch key 'heads', or "
                       "'premise_heads' / 'hypothesis_heads' for pairs): set config.data.trees")
    arc_marginals, root_marginals = trees.heads_to_arcs(heads, lengths, dtype)
  elif arc_marginals is None or root_marginals is None:
    raise ValueError("tree='latent' needs arc_marginals and root_marginals")
  mask = masks.sequence_mask(lengths, n)
  pairs = masks.pair_mask(lengths, n)
  arcs = jnp.where(pairs, arc_marginals, 0).astype(dtype)
  roots = jnp.where(mask, root_marginals, 0).astype(dtype)
  return jnp.concatenate([roots[..., None, :], arcs], axis=-2)


def aggregate(relations: jax.Array, weights: jax.Array, axis, kind: str) -> jax.Array:
  """Weighted sum or max of relations (module docstring).

  Args:
    relations: g [..., Nh, Nm, H], every entry >= 0.
    weights: w [..., Nh, Nm].
    axis: -3 (over heads: one vector per modifier), -2 (over modifiers) or (-3, -2) (all pairs).
    kind: 'sum' | 'max'.

  Returns:
    [..., Nm, H], [..., Nh, H] or [..., H].
  """
  check_choice(kind, AGGREGATIONS, 'aggregation')
  weighted = relations * weights[..., None].astype(relations.dtype)
  if kind == 'sum':
    return jnp.sum(weighted, axis=axis)
  return jnp.max(weighted, axis=axis)


def parent_objects(objects: jax.Array, heads: jax.Array, root: jax.Array) -> jax.Array:
  """o_{head(m)} for every word m (the root vector where the head is ROOT or m is padding).

  Args:
    objects: [..., n, d].
    heads: int [..., n], -1 = ROOT.
    root: [d].

  Returns:
    [..., n, d].
  """
  heads = jnp.asarray(heads, jnp.int32)
  gathered = jnp.take_along_axis(objects, jnp.maximum(heads, 0)[..., None], axis=-2)
  return jnp.where((heads >= 0)[..., None], gathered, root.astype(objects.dtype))


def check_heads(heads, lengths, where: str = 'structure["heads"]') -> None:
  """Host-side check that every row of `heads` is a dependency tree over its real words.

  Args:
    heads: int [..., n] (-1 = ROOT).
    lengths: int [...].
    where: what to name in the error (a batch key, a file).

  Raises:
    ValueError naming the first bad example, its heads and what is wrong.
  """
  heads = np.asarray(heads)
  lengths = np.asarray(lengths)
  if heads.shape[:-1] != lengths.shape:
    raise ValueError(f'{where}: heads of shape {heads.shape} do not match lengths of shape '
                     f'{lengths.shape}')
  ok = np.asarray(trees.is_tree(heads, lengths))
  bad = np.argwhere(~ok)
  if bad.size:
    index = tuple(int(i) for i in bad[0])
    row = heads[index][:int(lengths[index])].tolist()
    raise ValueError(f'{where}: example {index[0] if len(index) == 1 else index} has heads {row}, '
                     'which do not form a dependency tree (each head must be -1 for ROOT or another '
                     'word of the sentence, with no cycle): re-parse the data (launch.parse)')


def _is_concrete(x) -> bool:
  return not isinstance(x, jax.core.Tracer)


class LatentTree(nn.Module):
  """Edge marginals p_psi(h -> m | x) of a non-projective tree CRF over the objects (sec. 3.1).

  Potentials (eq. 4): log Psi(h, m) = o_h^T W o_m + U^T o_h + V^T o_m + b, with ROOT's object o_0 (the
  `root` argument) as the head of root arcs; marginals by the matrix-tree theorem (`trees.marginals`).
  Sows `arc_scores`, `root_scores`, `lengths`, `arc_marginals`, `root_marginals` (prefixed, or split
  per stacked text by `sow_splits`), as `StructuredAttention` does, for tree evaluation and rendering.

  Attributes:
    single_root: exactly one word hangs from ROOT.
  """
  single_root: bool = True

  @nn.compact
  def __call__(self, objects: jax.Array, lengths: jax.Array, root: jax.Array, *,
               sow_prefix: str = '', sow_splits: Sequence[tuple[str, int]] = (),
               ) -> tuple[jax.Array, jax.Array]:
    """objects [..., n, d], lengths [...], root [d] -> (arc_marginals [..., n, n], root_marginals [..., n])."""
    d = objects.shape[-1]
    bilinear = self.param('W', nn.initializers.normal(stddev=1.0 / d), (d, d)).astype(objects.dtype)
    u = self.param('U', nn.initializers.zeros, (d,)).astype(objects.dtype)
    v = self.param('V', nn.initializers.zeros, (d,)).astype(objects.dtype)
    b = self.param('b', nn.initializers.zeros, ()).astype(objects.dtype)
    root = root.astype(objects.dtype)
    arc_scores = (jnp.einsum('...hd,de,...me->...hm', objects, bilinear, objects)
                  + (objects @ u)[..., :, None] + (objects @ v)[..., None, :] + b)  # eq. 4
    root_scores = (jnp.einsum('d,de,...me->...m', root, bilinear, objects) + root @ u
                   + objects @ v + b)  # eq. 4 with h = ROOT
    lengths = jnp.asarray(lengths, jnp.int32)
    arc_marginals, root_marginals = trees.marginals(arc_scores, root_scores, lengths,
                                                    single_root=self.single_root)
    arc_marginals, root_marginals = exactness.defer_marginals(self, arc_marginals, root_marginals,
                                                              sow_splits=sow_splits)
    sown = (('arc_scores', arc_scores), ('root_scores', root_scores), ('lengths', lengths),
            ('arc_marginals', arc_marginals), ('root_marginals', root_marginals))
    sow(self, sown, sow_prefix, sow_splits)
    return arc_marginals, root_marginals


def sow(module: nn.Module, values, sow_prefix: str, sow_splits: Sequence[tuple[str, int]]) -> None:
  """Sows (name, value) pairs into 'intermediates' under `sow_prefix`, or split along the first axis
  per `sow_splits` ((prefix, rows), ...) for stacked texts."""
  if not sow_splits:
    for name, value in values:
      module.sow('intermediates', sow_prefix + name, value)
    return
  total = values[0][1].shape[0]
  if sum(rows for _, rows in sow_splits) != total:
    raise ValueError(f'sow_splits {tuple(sow_splits)} do not add up to the {total} stacked rows')
  start = 0
  for prefix, rows in sow_splits:
    for name, value in values:
      module.sow('intermediates', prefix + name, value[start:start + rows])
    start += rows


def structure_weights(module: nn.Module, tree: str, objects: jax.Array, lengths: jax.Array,
                      root: jax.Array, heads: Optional[jax.Array], *, single_root: bool,
                      sow_prefix: str, sow_splits) -> jax.Array:
  """`tree_weights` of `objects` [..., n, d] inside `module`: runs `LatentTree` (named 'latent_tree')
  for 'latent', validates `heads` for 'supervised'. Returns [..., 1 + n, n]."""
  n = objects.shape[-2]
  if tree == 'latent':
    arcs, roots = LatentTree(single_root, name='latent_tree')(
        objects, lengths, root, sow_prefix=sow_prefix, sow_splits=sow_splits)
    return tree_weights('latent', lengths, n, arc_marginals=arcs, root_marginals=roots,
                        dtype=objects.dtype)
  if tree == 'supervised':
    validate_heads(heads, lengths, objects.shape[:-1])
  return tree_weights(tree, lengths, n, heads=heads, dtype=objects.dtype)


def validate_heads(heads: jax.Array, lengths: jax.Array, shape: tuple[int, ...]) -> None:
  """Checks the shape of `heads` (must be `shape`, one head per padded word) and, when the arrays are
  concrete (not traced under jit), that they form trees (`check_heads`); ValueError otherwise."""
  if heads.shape != tuple(shape):
    raise ValueError(f'structure["heads"] has shape {heads.shape}; expected {tuple(shape)} (one head per '
                     'padded word)')
  if _is_concrete(heads) and _is_concrete(lengths):
    check_heads(heads, lengths)


def supervised_heads(tree: str, structure, lengths: jax.Array, shape: tuple[int, ...],
                     ) -> Optional[jax.Array]:
  """structure['heads'] int32 [*shape] for tree='supervised', validated (`validate_heads`), else None.

  Raises:
    ValueError when the heads are missing, misshapen or (concrete and) not trees.
  """
  if tree != 'supervised':
    return None
  if not structure or 'heads' not in structure:
    raise ValueError("tree='supervised' needs structure['heads'] (batch key 'heads', or "
                     "'premise_heads' / 'hypothesis_heads' for pairs): set config.data.trees to a "
                     'parser workdir (launch.parse --annotate) so that every example has heads')
  heads = jnp.asarray(structure['heads'], jnp.int32)
  validate_heads(heads, lengths, shape)
  return heads


def masked_states(x: jax.Array, lengths: jax.Array) -> jax.Array:
  """x [..., n, D] with padded positions set to 0."""
  return masks.masked_fill(x, masks.sequence_mask(lengths, x.shape[-2]))


__all__ = ['TREES', 'AGGREGATIONS', 'ResidualMLP', 'PairRelation', 'LatentTree', 'with_root',
           'tree_weights', 'aggregate', 'parent_objects', 'check_heads', 'structure_weights',
           'supervised_heads', 'validate_heads', 'masked_states', 'sow', 'check_choice']
