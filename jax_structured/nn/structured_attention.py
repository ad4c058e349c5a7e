"""Structured attention of Liu & Lapata (2018), "Learning Structured Text Representations", sec. 3.2.

The BiLSTM output h_t is split into a semantic vector e_t and a structure vector d_t (eq. 7). The
structure vectors score every head -> modifier arc (eqs. 8-10) and every ROOT -> word arc (eq. 11);
the scores are normalised into the posterior marginals of a non-projective dependency tree with the
matrix-tree theorem (eqs. 12-15, `trees.marginals`, single root), and each word is updated with the
expected representation of its parent (eq. 16) and of its children (eq. 17):
`r_i = tanh(W_r [e_i, p_i, c_i])` (eq. 18).

`normalizer` switches the normalisation for the comparisons of Tables 1 and 4:
- 'matrix_tree': non-projective tree marginals (the paper's model, "matrix inversion");
- 'projective': projective tree marginals by inside-outside (Kim et al. 2017; `trees.projective_marginals`);
- 'softmax': no tree constraint; each word's attention over its candidate parents (the other words and
  ROOT) is a softmax of the same scores, i.e. the intra-attention of eqs. 1-3 with `a_ki`
  normalised over k ("simple attention"); parents/children contexts follow eqs. 16-17 unchanged;
- 'none': no attention; the BiLSTM outputs are returned unchanged (the "no attention" baselines).
"""
from typing import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured import trees
from jax_structured.nn import attention
from jax_structured.nn import exactness
from jax_structured.nn import masks
from jax_structured.nn import rnn

NORMALIZERS = ('matrix_tree', 'projective', 'softmax', 'none')


def local_head_marginals(arc_scores: jax.Array, root_scores: jax.Array, lengths: jax.Array,
                         ) -> tuple[jax.Array, jax.Array]:
  """Per-word softmax over candidate heads (ROOT and every other real word): no tree constraint.

  Args:
    arc_scores: [..., n, n], `arc_scores[..., h, m]` = score of head h -> modifier m.
    root_scores: [..., n], score of ROOT -> m.
    lengths: int [...].

  Returns:
    (arc_weights [..., n, n], root_weights [..., n]) in the `trees.marginals` layout: for each real
    modifier m, `root_weights[m] + sum_h arc_weights[h, m] = 1`; padded entries and the diagonal are 0.
  """
  n = arc_scores.shape[-1]
  head_mask = masks.pair_mask(lengths, n) & ~jnp.eye(n, dtype=bool)
  word_mask = masks.sequence_mask(lengths, n)
  scores = jnp.concatenate([root_scores[..., None, :], arc_scores], axis=-2)  # [..., 1 + n, n]
  mask = jnp.concatenate([word_mask[..., None, :], head_mask], axis=-2)
  weights = attention.masked_softmax(scores, mask, axis=-2)
  return weights[..., 1:, :], weights[..., 0, :]


def normalize(arc_scores: jax.Array, root_scores: jax.Array, lengths: jax.Array, normalizer: str,
              *, single_root: bool = True) -> tuple[jax.Array, jax.Array]:
  """Attention weights (arc_marginals [..., n, n], root_marginals [..., n]) under `normalizer`."""
  if normalizer == 'matrix_tree':
    return trees.marginals(arc_scores, root_scores, lengths, single_root=single_root)
  if normalizer == 'projective':
    return trees.projective_marginals(arc_scores, root_scores, lengths, single_root=single_root)
  if normalizer == 'softmax':
    return local_head_marginals(arc_scores, root_scores, lengths)
  raise ValueError(f'unknown normalizer {normalizer!r}; valid: {NORMALIZERS}')


class StructuredAttention(nn.Module):
  """Structured attention over BiLSTM outputs (Liu & Lapata 2018, eqs. 7-18).

  Sows into 'intermediates' (names prefixed by the call's `sow_prefix`): `arc_scores` [..., n, n]
  (f_ij of eq. 10 before normalisation, head i -> modifier j), `root_scores` [..., n] (f_i^r, eq. 11),
  `lengths` [...], `arc_marginals` [..., n, n] (a_ij) and `root_marginals` [..., n] (a_i^r).

  Attributes:
    semantic_size: size of the semantic part of EACH direction; e_t = [fw_t[:s], bw_t[:s]] has
      k_e = 2 s features and d_t = [fw_t[s:], bw_t[s:]] has k_s = 2 (H - s) (eq. 7 applied per
      direction, as in the released code of the paper: hidden 100 = 75 semantic + 25 structure).
    normalizer: one of NORMALIZERS (see the module docstring).
    single_root: exactly one word hangs from ROOT (Koo et al. 2007; the paper's formulation).
    shared_features: the whole of h_t both scores the attention and is aggregated (e_t = d_t = h_t;
      footnote 6 of Yu et al. 2018); `semantic_size` is then unused and r has 2H features.
  """
  semantic_size: int
  normalizer: str = 'matrix_tree'
  single_root: bool = True
  shared_features: bool = False

  @nn.compact
  def __call__(self, hidden: jax.Array, lengths: jax.Array, *, arc_bias: jax.Array | None = None,
               sow_prefix: str = '', sow_splits: Sequence[tuple[str, int]] = ()) -> jax.Array:
    """Updates BiLSTM outputs with structured attention.

    Args:
      hidden: h [..., n, 2H] BiLSTM outputs (forward half first), any leading batch shape.
      lengths: int [...], number of real words (0 allowed: an empty sequence gives zeros).
      arc_bias: optional float [..., n, n] (or broadcastable) added to the arc scores f_ij of eq. 10
        before normalisation, e.g. a distance penalty (`models.context_free`); sown scores include it.
      sow_prefix: prefix of the sown names, e.g. 'sentence_' or 'document_'.
      sow_splits: for inputs that stack several texts along the first axis: ((prefix, rows), ...)
        sows rows [0, rows_0) under prefix_0, the next rows_1 rows under prefix_1, ... (instead of
        `sow_prefix`), e.g. (('premise_', B), ('hypothesis_', B)).

    Returns:
      r [..., n, 2 * semantic_size] (eq. 18), zero at padded positions; for normalizer 'none' the
      input `hidden` itself.
    """
    if self.normalizer not in NORMALIZERS:
      raise ValueError(f'unknown normalizer {self.normalizer!r}; valid: {NORMALIZERS}')
    if self.normalizer == 'none':
      return hidden
    lengths = jnp.asarray(lengths, jnp.int32)
    if self.shared_features:
      semantic = structure = hidden
    else:
      semantic, structure = rnn.split_directions(hidden, self.semantic_size)  # eq. 7
    k_e, k_s = semantic.shape[-1], structure.shape[-1]
    if k_s == 0:
      raise ValueError(f'no structure features left: semantic_size={self.semantic_size} uses all '
                       f'{hidden.shape[-1] // 2} hidden features of each direction')
    parent = jnp.tanh(nn.Dense(k_s, name='parent')(structure))  # t_p, eq. 8
    child = jnp.tanh(nn.Dense(k_s, name='child')(structure))  # t_c, eq. 9
    bilinear = self.param('bilinear', nn.initializers.lecun_normal(), (k_s, k_s))
    arc_scores = jnp.einsum('...id,de,...je->...ij', parent, bilinear.astype(parent.dtype),
                            child)  # f_ij, eq. 10
    if arc_bias is not None:
      arc_scores = arc_scores + jnp.asarray(arc_bias, arc_scores.dtype)
    root_scores = nn.Dense(1, use_bias=False, name='root')(structure)[..., 0]  # f_i^r, eq. 11
    arc_marginals, root_marginals = normalize(arc_scores, root_scores, lengths, self.normalizer,
                                              single_root=self.single_root)  # eqs. 12-15
    if self.normalizer == 'matrix_tree':  # flagged trees: recomputed by the caller (nn.exactness)
      arc_marginals, root_marginals = exactness.defer_marginals(self, arc_marginals, root_marginals,
                                                                sow_splits=sow_splits)
    root_embedding = self.param('root_embedding', nn.initializers.normal(stddev=0.1), (k_e,))
    parents = (jnp.einsum('...ki,...kd->...id', arc_marginals, semantic)
               + root_marginals[..., None] * root_embedding.astype(semantic.dtype))  # p_i, eq. 16
    children = jnp.einsum('...ik,...kd->...id', arc_marginals, semantic)  # c_i, eq. 17
    combined = jnp.concatenate([semantic, parents, children], axis=-1)
    outputs = jnp.tanh(nn.Dense(k_e, name='output')(combined))  # r_i, eq. 18
    outputs = masks.masked_fill(outputs, masks.sequence_mask(lengths, hidden.shape[-2]))
    sown = (('arc_scores', arc_scores), ('root_scores', root_scores), ('lengths', lengths),
            ('arc_marginals', arc_marginals), ('root_marginals', root_marginals))
    if not sow_splits:
      for name, value in sown:
        self.sow('intermediates', sow_prefix + name, value)
      return outputs
    if sum(rows for _, rows in sow_splits) != hidden.shape[0]:
      raise ValueError(f'sow_splits {tuple(sow_splits)} do not add up to the {hidden.shape[0]} '
                       'stacked rows')
    start = 0
    for prefix, rows in sow_splits:
      for name, value in sown:
        self.sow('intermediates', prefix + name, value[start:start + rows])
      start += rows
    return outputs
