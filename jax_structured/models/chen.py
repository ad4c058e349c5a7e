"""Chen, Zeng, Zhang & Chen (2017), "Tree-LSTM guided attention pooling of DCNN for semantic sentence
modeling" (AP-DCNN), and the encoders of its Table 1 that the library did not have yet.

Encoders (registered in `models.encoders`; use them under 'classifier.sentence' with pooling 'encoder'):
  'dcnn'                  parallel DCNNs (Kalchbrenner et al. 2014; Chen eqs. 2-3, `nn.dcnn`); sentence =
                          the concatenated top layers' k_top local vectors, flattened.
  'tree_lstm'             binary Tree-LSTM over SST's binarised constituency trees (Tai et al. 2015; Chen
                          eqs. 4-9, `nn.tree_lstm`); states = the leaves' h, sentence = the root's h.
                          Structure inputs 'tree_children', 'tree_heights' (`config.data.binary_trees=True`).
  'child_sum_tree_lstm'   Child-Sum Tree-LSTM over dependency trees (structure input 'heads', gold from
                          CoNLL-U or parsed); states = every word's h, sentence = the root's h.
  'ap_dcnn'               AP-DCNN: DCNN local vectors c_i attention-pooled with a binary Tree-LSTM sentence
                          vector s~ (Chen eqs. 10-11); 'ap_dcnn_dependency' guides it with the Child-Sum
                          Tree-LSTM over 'heads' instead.
"""
from __future__ import annotations

from typing import ClassVar, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured.models import encoders
from jax_structured.nn import dcnn as dcnn_lib
from jax_structured.nn import flatten
from jax_structured.nn import masks
from jax_structured.nn import tree_lstm as tree_lstm_lib

CLASSIFIER_INPUTS = ('paper', 'both')
_EPS = 1e-12


def cosine_attention_pooling(local: jax.Array, local_lengths: jax.Array, guide: jax.Array
                             ) -> tuple[jax.Array, jax.Array]:
  """Chen eqs. 10-11: alpha_i = softmax_i(cos(c_i, s~)) over the real local vectors; s = sum_i alpha_i c_i.

  Args:
    local: float [B, K, D] local vectors c_i (zero at slots >= local_lengths).
    local_lengths: int [B] real slots (>= 1).
    guide: float [B, D] the Tree-LSTM sentence vector s~.

  Returns:
    (s [B, D], alpha [B, K], zero at padding).
  """
  dot = jnp.einsum('bkd,bd->bk', local, guide)
  norms = jnp.sqrt(jnp.sum(local * local, -1) + _EPS) * jnp.sqrt(jnp.sum(guide * guide, -1) + _EPS)[:, None]
  scores = dot / norms
  valid = masks.sequence_mask(local_lengths, local.shape[1])
  scores = jnp.where(valid, scores, -jnp.inf)
  alpha = jax.nn.softmax(scores, axis=-1)
  alpha = jnp.where(valid, alpha, 0.0)
  return jnp.einsum('bk,bkd->bd', alpha, local), alpha


def _branches(value) -> tuple[tuple[int, ...], ...]:
  """config `branches` (one tuple of layer widths per parallel DCNN) as a tuple of int tuples."""
  try:
    out = tuple(tuple(int(w) for w in b) for b in value)
  except TypeError:
    raise ValueError(f'config.model.encoder.branches={value!r}: one tuple of layer widths per parallel DCNN, '
                     'e.g. ((7, 5),) or ((7, 5), (5, 3))') from None
  if not out or any(not b for b in out):
    raise ValueError(f'config.model.encoder.branches={value!r}: at least one DCNN of at least one layer')
  return out


class _ParallelDCNN(nn.Module):
  """Parallel DCNNs of different widths (Chen sec. 2.2): per branch local vectors, and word states."""
  branches: Sequence[Sequence[int]]
  features: int
  k_top: int
  convolution: str

  @nn.compact
  def __call__(self, x, lengths):
    """x [B, T, E], lengths [B] -> (list of (local [B, k_top, D], local_lengths [B]), states [B, T, nb * F1])."""
    outs, states = [], []
    for n, widths in enumerate(_branches(self.branches)):
      local, local_lengths, first = dcnn_lib.DCNN(widths, self.features, self.k_top, self.convolution,
                                                  name=f'dcnn_{n}')(x, lengths)
      outs.append((local, local_lengths))
      states.append(first)
    return outs, jnp.concatenate(states, -1)


@encoders.register('dcnn')
class DCNNEncoder(encoders.Encoder):
  """Parallel DCNNs (Kalchbrenner et al. 2014; Chen et al. 2017 eqs. 2-3 and sec. 2.2).

  States [..., T, len(branches) * F1]: the first layer's tanh feature maps of the window ending at each
  word (F1 = features; features * E for 'row'). Sentence [..., len(branches) * k_top * D]: each DCNN's
  top layer (k_top local vectors of D = features, or features * E / 2 for 'row'), flattened, concatenated
  (Kalchbrenner's input to the fully connected layer).

  Attributes:
    branches: one tuple of layer widths per parallel DCNN (Chen: (7, 5)).
    features: feature maps per layer (Chen: 100).
    k_top: the top layer's k (Kalchbrenner's SST net: 4).
    convolution: 'full' (Chen eq. 2) | 'row' (Kalchbrenner's row-wise maps with folding).
  """
  branches: Sequence[Sequence[int]] = ((7, 5),)
  features: int = 100
  k_top: int = 4
  convolution: str = 'full'

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del structure, train, sow_prefix, sow_splits
    x, lengths, _, lead = flatten.flatten_leading(x, lengths)
    outs, states = _ParallelDCNN(self.branches, self.features, self.k_top, self.convolution,
                                 name='dcnn')(x, lengths)
    sentence = jnp.concatenate([local.reshape(local.shape[0], -1) for local, _ in outs], -1)
    sentence = jnp.where((lengths > 0)[:, None], sentence, 0.0)  # an empty padding row pools nothing
    return encoders.EncoderOutput(*flatten.unflatten_leading(lead, states, sentence))


@encoders.register('tree_lstm')
class BinaryTreeLSTMEncoder(encoders.Encoder):
  """Binary (N-ary) Tree-LSTM over binarised constituency trees (Tai et al. 2015 sec. 3.2; Chen eqs. 4-9).

  Needs 'tree_children' and 'tree_heights' (`config.data.binary_trees=True` with the sst loader). States
  [..., T, H]: the leaves' h (word j is leaf j); sentence [..., H]: the root's h; nodes [..., 2T - 1, H]:
  every node's h in node-id order (`nn.tree_lstm.states_by_node_id`; phrase-level supervision, Tai et al.
  sec. 5.1, classifies them: 'classifier.sentence' with `phrase_logits=True`). Also sows the internal
  nodes' h as `<sow_prefix>tree_nodes` [..., T - 1, H].

  Attributes:
    hidden_size: H (Tai et al.: 150 for the constituency model).
  """
  hidden_size: int = 150
  STRUCTURE_INPUTS: ClassVar[tuple[str, ...]] = ('tree_children', 'tree_heights')

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del train, sow_splits
    structure = _require(structure, self.STRUCTURE_INPUTS, 'tree_lstm')
    x, lengths, structure, lead = flatten.flatten_leading(x, lengths, structure)
    leaf_h, node_h, root_h = tree_lstm_lib.BinaryTreeLSTM(self.hidden_size, name='tree_lstm')(
        x, lengths, structure['tree_children'], structure['tree_heights'])
    self.sow('intermediates', sow_prefix + 'tree_nodes', node_h.reshape(lead + node_h.shape[1:]))
    nodes = tree_lstm_lib.states_by_node_id(leaf_h, node_h, lengths)
    return encoders.EncoderOutput(*flatten.unflatten_leading(lead, leaf_h, root_h, nodes))


@encoders.register('child_sum_tree_lstm')
class ChildSumTreeLSTMEncoder(encoders.Encoder):
  """Child-Sum Tree-LSTM over dependency trees (Tai et al. 2015 sec. 3.1, eqs. 2-8).

  Needs 'heads' (-1 = ROOT; gold from CoNLL-U or predicted by our parser). States [..., T, H]: every
  word's h; sentence [..., H]: the root word's h.

  Attributes:
    hidden_size: H (Tai et al.: 150 for the dependency model on SST, 168 for relatedness).
  """
  hidden_size: int = 150
  STRUCTURE_INPUTS: ClassVar[tuple[str, ...]] = ('heads',)

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del train, sow_prefix, sow_splits
    structure = _require(structure, self.STRUCTURE_INPUTS, 'child_sum_tree_lstm')
    x, lengths, structure, lead = flatten.flatten_leading(x, lengths, structure)
    h, root_h = tree_lstm_lib.ChildSumTreeLSTM(self.hidden_size, name='tree_lstm')(
        x, lengths, structure['heads'])
    return encoders.EncoderOutput(*flatten.unflatten_leading(lead, h, root_h))


def _require(structure, keys, name):
  missing = [k for k in keys if structure is None or k not in structure]
  if missing:
    raise KeyError(f'encoder {name!r} needs structure input(s) {missing}: for SST trees set '
                   "config.data.binary_trees=True; for 'heads' use a dataset with dependency heads")
  return structure


class _APDCNN(encoders.Encoder):
  """AP-DCNN (Chen et al. 2017, eqs. 2-12): DCNN local vectors attention-pooled by a Tree-LSTM.

  For each parallel DCNN b, the top layer's local vectors c_i (D = features) are compared with the
  Tree-LSTM sentence vector s~ (hidden size D, so both live in one space: Chen sec. 2.4) by cosine
  similarity, alpha = softmax(cos(c_i, s~)) (eq. 10), s_b = sum_i alpha_i c_i (eq. 11); s = [s_1; ...].
  Sentence vector (the classifier input, eq. 12), `classifier_input`:
    'paper': [s; 0] in training, [s; s~] at test, as eq. 12 is written (the s~ block of the output weights
             gets no gradient in training; only weight decay moves it);
    'both':  [s; s~] in training and at test (a consistent variant).
  States [..., T, len(branches) * F1 + D]: the DCNN's first-layer word states and the Tree-LSTM's word
  (leaf) states. Sows `<sow_prefix>attention_pooling` [..., len(branches), k_top] (alpha per DCNN).
  Nodes (where the Tree-LSTM has phrase nodes: 'ap_dcnn') [..., N, len(s) + D]: [0; h_k] for every
  node k, so phrase-level supervision (Tai et al. 2015 sec. 5.1; `phrase_logits` with
  `train.phrase_loss_weight`) classifies each phrase's Tree-LSTM state with the s~ block of the one
  output layer, the block eq. 12 reads at test. Under 'paper' nothing else trains that block; the
  paper does not say whether its Tree-LSTM sees phrase labels (its Tree-LSTM row, Tai et al.'s, did).

  Attributes:
    branches, features, k_top, convolution: the DCNN (as 'dcnn').
    classifier_input: 'paper' | 'both'.
  """
  branches: Sequence[Sequence[int]] = ((7, 5),)
  features: int = 100
  k_top: int = 4
  convolution: str = 'full'
  classifier_input: str = 'paper'

  def _tree(self, x, lengths, structure, hidden):
    """(word states [B, T, hidden], sentence vector s~ [B, hidden], node states [B, N, hidden] in
    node-id order or None); abstract: the two registered subclasses below define it."""
    raise NotImplementedError(f'{type(self).__name__} is abstract; use ap_dcnn or ap_dcnn_dependency')

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del sow_splits
    if self.classifier_input not in CLASSIFIER_INPUTS:
      raise ValueError(f'config.model.encoder.classifier_input={self.classifier_input!r}; valid: '
                       f'{CLASSIFIER_INPUTS}')
    structure = _require(structure, self.STRUCTURE_INPUTS, type(self).__name__)
    x, lengths, structure, lead = flatten.flatten_leading(x, lengths, structure)
    outs, dcnn_states = _ParallelDCNN(self.branches, self.features, self.k_top, self.convolution,
                                      name='dcnn')(x, lengths)
    hidden = outs[0][0].shape[-1]
    tree_states, guide, tree_nodes = self._tree(x, lengths, structure, hidden)
    pooled, alphas = [], []
    for local, local_lengths in outs:
      s, alpha = cosine_attention_pooling(local, local_lengths, guide)
      pooled.append(s)
      alphas.append(alpha)
    self.sow('intermediates', sow_prefix + 'attention_pooling',
             jnp.stack(alphas, 1).reshape(lead + (len(alphas), -1)))
    s = jnp.concatenate(pooled, -1)
    if self.classifier_input == 'paper' and train:
      guide = jnp.zeros_like(guide)
    nonempty = (lengths > 0)[:, None]
    sentence = jnp.where(nonempty, jnp.concatenate([s, guide], -1), 0.0)
    states = jnp.concatenate([dcnn_states, tree_states], -1)
    nodes = None if tree_nodes is None else jnp.concatenate(
        [jnp.zeros(tree_nodes.shape[:-1] + s.shape[-1:], s.dtype), tree_nodes], -1)
    return encoders.EncoderOutput(*flatten.unflatten_leading(lead, states, sentence, nodes))


@encoders.register('ap_dcnn')
class APDCNNEncoder(_APDCNN):
  __doc__ = _APDCNN.__doc__ + """
  This one: the binary Tree-LSTM over SST's binarised trees ('tree_children', 'tree_heights';
  `config.data.binary_trees=True`), Chen et al.'s choice (sec. 2.3).
  """
  STRUCTURE_INPUTS: ClassVar[tuple[str, ...]] = ('tree_children', 'tree_heights')

  def _tree(self, x, lengths, structure, hidden):
    leaf_h, node_h, root_h = tree_lstm_lib.BinaryTreeLSTM(hidden, name='tree_lstm')(
        x, lengths, structure['tree_children'], structure['tree_heights'])
    return leaf_h, root_h, tree_lstm_lib.states_by_node_id(leaf_h, node_h, lengths)


@encoders.register('ap_dcnn_dependency')
class APDCNNDependencyEncoder(_APDCNN):
  __doc__ = _APDCNN.__doc__ + """
  This one: the Child-Sum Tree-LSTM over dependency 'heads' (gold or parsed), so any dataset with heads
  can use it.
  """
  STRUCTURE_INPUTS: ClassVar[tuple[str, ...]] = ('heads',)

  def _tree(self, x, lengths, structure, hidden):
    h, root_h = tree_lstm_lib.ChildSumTreeLSTM(hidden, name='tree_lstm')(x, lengths, structure['heads'])
    return h, root_h, None
