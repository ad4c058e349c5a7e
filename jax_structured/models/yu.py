"""Yu et al. (2018), "Sentence encoding with tree-constrained relation networks" (ICLR workshop / arXiv
1811.10475): the relation-network sentence encoders, registered under the encoder contract
(`models.encoders`). The experiment configs live in configs/yu.

Every encoder runs a BiLSTM over the embedded words (appendix A.1: "the output of BiLSTM is fed as input
to the RNs"; 300 per direction, dropout `dropout_rate` on its output, the head's `embedding_dropout` on
its input), giving the objects o_1..o_n, and a learned ROOT object o_0; then (`nn.relation_networks`):

- 'rn':               the RN of eq. 1 / the tree-constrained RN of eq. 3: the encoder's own sentence
                      vector s = f_phi(agg_{(h,m)} w[h, m] g_theta(o_h, o_m)); states are the objects o.
                      Use with `pooling='encoder'`.
- 'rn_intra_attn':    structured intra-attention word-in-context vectors (sec. 3.1): latent / no tree
                      p_i = f(agg_h w[h, i] g(o_h, o_i)), c_i = f(agg_m w[i, m] g(o_i, o_m)),
                      r_i = [p_i; c_i]; supervised r_i = f(g(o_head(i), o_i)); then
                      s_i = tanh(W_r [r_i; o_i]). States s; pool them (max, appendix A.1).
- 'recurrent_rn':     recurrent RNs with tree constraints (sec. 3.2, Palm et al. 2017): h^1 = o;
                      supervised m_i^t = g(h_head(i)^{t-1}, h_i^{t-1}); latent / no tree
                      m_i^{t,p} = agg_h w[h, i] g(h_h^{t-1}, h_i^{t-1}),
                      m_i^{t,c} = agg_m w[i, m] g(h_i^{t-1}, h_m^{t-1}) with the SAME weights at every
                      step; h_i^t = f_phi(h_i^{t-1}, [o_i; m_i^t]) with f_phi an LSTM cell; states h^T.

`tree` is 'none' | 'supervised' (heads from the batch: `structure['heads']`) | 'latent' (matrix-tree
marginals of the bilinear potentials of eq. 4; sown as `arc_scores`, `root_scores`, `lengths`,
`arc_marginals`, `root_marginals` for tree evaluation and rendering). A supervised tree is used by
gathering each word's head (n relations, not n^2), which equals the all-pairs formula with 0/1 weights.
`STRUCTURE_INPUTS` is ('heads',) on an encoder instance with tree='supervised', () otherwise.
"""
from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured import nn as jsnn
from jax_structured.models import encoders
from jax_structured.nn import relation_networks as rn_lib


class _TreeInputs:
  """`STRUCTURE_INPUTS` of an RN encoder: ('heads',) on an instance with tree='supervised', else ()."""

  def __get__(self, obj, objtype=None):
    if obj is None:
      return ()
    return ('heads',) if getattr(obj, 'tree', None) == 'supervised' else ()


class _RelationEncoder(encoders.Encoder):
  """Fields shared by the three encoders (the appendix A.1 settings as defaults).

  Attributes:
    hidden_size: BiLSTM units per direction (objects o have 2 * hidden_size features).
    relation_size: hidden units of every layer of g_theta and f_phi (300; 512 for translation).
    tree: 'none' | 'supervised' | 'latent'.
    aggregation: 'sum' | 'max' over relations (see `nn.relation_networks`).
    single_root: the latent tree has exactly one word under ROOT.
    dropout_rate: dropout on the BiLSTM output (when training).
  """
  hidden_size: int = 300
  relation_size: int = 300
  tree: str = 'none'
  aggregation: str = 'sum'
  single_root: bool = True
  dropout_rate: float = 0.5
  STRUCTURE_INPUTS = _TreeInputs()

  def _objects(self, x, lengths, train):
    """(o [..., n, 2 * hidden_size], lengths int [...], the ROOT object o_0 [2 * hidden_size])."""
    rn_lib.check_choice(self.tree, rn_lib.TREES, 'tree')
    rn_lib.check_choice(self.aggregation, rn_lib.AGGREGATIONS, 'aggregation')
    lengths = jnp.asarray(lengths, jnp.int32)
    objects = jsnn.BiLSTM(self.hidden_size, name='bilstm')(x, lengths)
    objects = nn.Dropout(self.dropout_rate)(objects, deterministic=not train)
    objects = rn_lib.masked_states(objects, lengths)
    root = self.param('root', nn.initializers.normal(stddev=0.1), (objects.shape[-1],))
    return objects, lengths, root


@encoders.register('rn')
class RelationNetworkEncoder(_RelationEncoder):
  """RN (eq. 1) and tree-constrained RN (eq. 3): sentence s = f_phi(agg w[h, m] g_theta(o_h, o_m)).

  Returns EncoderOutput(states = o [..., T, 2 * hidden_size], sentence = s [..., relation_size]);
  s is 0 for an empty sentence. See the module docstring for the fields.
  """

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    heads = rn_lib.supervised_heads(self.tree, structure, lengths, x.shape[:-1])
    objects, lengths, root = self._objects(x, lengths, train)
    g = rn_lib.PairRelation(self.relation_size, name='g')
    if heads is not None:  # the given tree: each word with its head
      relations = g.aligned(rn_lib.parent_objects(objects, heads, root), objects)  # [..., n, H]
      mask = jsnn.sequence_mask(lengths, objects.shape[-2]).astype(relations.dtype)
      pooled = rn_lib.aggregate(relations[..., None, :, :], mask[..., None, :], (-3, -2),
                                self.aggregation)
    else:
      weights = rn_lib.structure_weights(self, self.tree, objects, lengths, root, None,
                                         single_root=self.single_root, sow_prefix=sow_prefix,
                                         sow_splits=sow_splits)
      relations = g(rn_lib.with_root(objects, root), objects)  # [..., 1 + n, n, H]
      pooled = rn_lib.aggregate(relations, weights, (-3, -2), self.aggregation)  # eq. 1 / 3
    sentence = rn_lib.ResidualMLP(self.relation_size, name='f')(pooled)
    sentence = jnp.where((lengths > 0)[..., None], sentence, 0.0)
    return encoders.EncoderOutput(objects, sentence)


@encoders.register('rn_intra_attn')
class RelationIntraAttentionEncoder(_RelationEncoder):
  """Structured intra-attention from relations (sec. 3.1): s_i = tanh(W_r [r_i; o_i]).

  Latent / no tree: r_i = [p_i; c_i] with p_i = f(agg_h w[h, i] g(o_h, o_i)) (heads h include ROOT)
  and c_i = f(agg_m w[i, m] g(o_i, o_m)); supervised: r_i = f(g(o_head(i), o_i)). f_phi is shared by
  p and c. States s [..., T, output_size or 2 * hidden_size], 0 at padding; no sentence vector.

  Attributes (besides the shared ones):
    aggregation: default 'max' (appendix A.1).
    output_size: size of s_i (0: the size of o_i).
  """
  aggregation: str = 'max'
  output_size: int = 0

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    heads = rn_lib.supervised_heads(self.tree, structure, lengths, x.shape[:-1])
    objects, lengths, root = self._objects(x, lengths, train)
    g = rn_lib.PairRelation(self.relation_size, name='g')
    f = rn_lib.ResidualMLP(self.relation_size, name='f')
    if heads is not None:
      context = f(g.aligned(rn_lib.parent_objects(objects, heads, root), objects))  # r_i
    else:
      weights = rn_lib.structure_weights(self, self.tree, objects, lengths, root, None,
                                         single_root=self.single_root, sow_prefix=sow_prefix,
                                         sow_splits=sow_splits)
      relations = g(rn_lib.with_root(objects, root), objects)  # [..., 1 + n, n, H]
      parents = f(rn_lib.aggregate(relations, weights, -3, self.aggregation))  # p_i
      children = f(rn_lib.aggregate(relations[..., 1:, :, :], weights[..., 1:, :], -2,
                                    self.aggregation))  # c_i
      context = jnp.concatenate([parents, children], axis=-1)  # r_i
    size = self.output_size or objects.shape[-1]
    states = jnp.tanh(nn.Dense(size, use_bias=False, name='output')(
        jnp.concatenate([context, objects], axis=-1)))  # s_i = tanh(W_r [r_i; o_i])
    return encoders.EncoderOutput(rn_lib.masked_states(states, lengths))


class _StepMessages(rn_lib.PairRelation):
  """One recurrent step's messages from all pairs (sec. 3.2): g_theta over every (head or ROOT, word)
  pair of h^{t-1}, aggregated into m^{t,p} (over heads) and, with `child_messages`, m^{t,c} (over
  modifiers). Parameters are g_theta's (`PairRelation`'s names).

  Attributes (besides `PairRelation`'s):
    aggregation: 'sum' | 'max'.
    child_messages: also m^{t,c}.
  """
  aggregation: str = 'max'
  child_messages: bool = True

  def __call__(self, heads: jax.Array, modifiers: jax.Array, weights: jax.Array) -> jax.Array:
    """heads [..., 1 + n, d] (ROOT first), modifiers [..., n, d], weights [..., 1 + n, n] ->
    [m^{t,p}; m^{t,c}] [..., n, features or 2 * features]."""
    relations = super().__call__(heads, modifiers)
    messages = [rn_lib.aggregate(relations, weights, -3, self.aggregation)]  # m^{t,p}
    if self.child_messages:
      messages.append(rn_lib.aggregate(relations[..., 1:, :, :], weights[..., 1:, :], -2,
                                       self.aggregation))  # m^{t,c}
    return jnp.concatenate(messages, axis=-1)


@encoders.register('recurrent_rn')
class RecurrentRelationEncoder(_RelationEncoder):
  """Recurrent RNs with tree constraints (sec. 3.2): `num_steps` message-passing steps, f_phi an LSTM
  cell (hidden size 2 * hidden_size, so that h^1 = o_i), carry c^1 = 0; the ROOT state is the learned
  o_0 at every step. States h^T [..., T, 2 * hidden_size], 0 at padding; no sentence vector (pool the
  states: max, appendix A.1).

  Attributes (besides the shared ones):
    aggregation: default 'max' (appendix A.1).
    num_steps: recurrent steps T (3, appendix A.1).
    child_messages: latent / no tree: add the children's message m^{t,c} (footnote 3: parents matter,
      children add a little); False: parents only.
  """
  aggregation: str = 'max'
  num_steps: int = 3
  child_messages: bool = True

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    if self.num_steps < 1:
      raise ValueError(f'config.model.encoder.num_steps={self.num_steps} must be >= 1')
    heads = rn_lib.supervised_heads(self.tree, structure, lengths, x.shape[:-1])
    supervised = heads is not None
    objects, lengths, root = self._objects(x, lengths, train)
    weights = None
    if not supervised:
      weights = rn_lib.structure_weights(self, self.tree, objects, lengths, root, None,
                                         single_root=self.single_root, sow_prefix=sow_prefix,
                                         sow_splits=sow_splits)  # fixed across steps

    def step(module, carry, _):
      """h^{t-1} -> h^t; g_theta ('g') and f_phi ('f') are the encoder's (shared by every step)."""
      memory, hidden = carry
      g = _StepMessages(self.relation_size, aggregation=self.aggregation,
                        child_messages=self.child_messages, parent=module, name='g')
      if supervised:
        messages = g.aligned(rn_lib.parent_objects(hidden, heads, root), hidden)  # m^t
      else:
        messages = g(rn_lib.with_root(hidden, root), hidden, weights)  # [m^{t,p}; m^{t,c}]
      cell = nn.LSTMCell(objects.shape[-1], parent=module, name='f')
      (memory, hidden), _ = cell((memory, hidden), jnp.concatenate([objects, messages], axis=-1))
      return (rn_lib.masked_states(memory, lengths), rn_lib.masked_states(hidden, lengths)), None

    # A scan over the steps with a rematerialised body: the backward pass recomputes one step's
    # [..., 1 + n, n, relation_size] pair tensors at a time instead of keeping all T steps' (the
    # latent model's peak memory; a Python loop with remat let XLA schedule every recomputation at
    # once). The supervised tree has n pairs a step, nothing worth recomputing, and its scan is
    # unrolled: rolled, it stacked every step's residuals (training step at 32 x 64, hidden 300:
    # peak 472 MiB rolled, 374 unrolled, 291 rematerialised but 1.35x the time).
    body = step if supervised else nn.remat(step, prevent_cse=False)
    steps = nn.scan(body, variable_broadcast='params', split_rngs={'params': False},
                    length=self.num_steps, unroll=self.num_steps if supervised else 1)
    (_, hidden), _ = steps(self, (jnp.zeros_like(objects), objects), None)
    return encoders.EncoderOutput(hidden)
