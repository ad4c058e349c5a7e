"""Graph-based non-projective dependency parser trained with the matrix-tree CRF (issue 5).

Architecture (Dozat & Manning 2017, "Deep biaffine attention for neural dependency parsing"):
word embeddings (+ optional byte-level character CNN) (+ UPOS tag embeddings) -> multi-layer BiLSTM
(`nn.BiLSTM`, masked by `lengths`) -> four one-layer leaky-ReLU MLPs (`nn.MLP`: arc-head, arc-dependent,
label-head, label-dependent) ->

- biaffine arc scorer (D&M: a bilinear term plus a head-prior term): for head h and modifier m,
    arc_scores[b, h, m] = H_head[h]^T U H_dep[m] + H_head[h]^T u,
  and the same with a learned ROOT representation r (passed through the arc-head MLP) as head:
    root_scores[b, m] = mlp_head(r)^T U H_dep[m] + mlp_head(r)^T u;
- biaffine label classifier (D&M: bilinear, linear and bias terms): for relation k,
    relation_logits[b, h, m, k] = L_head[h]^T U_k L_dep[m] + W_k [L_head[h]; L_dep[m]] + b_k,
  with the heads axis of size n + 1 whose LAST row is ROOT (so a head index of -1, the `trees`
  convention for ROOT, addresses it with numpy-style negative indexing; use `relation_logits_at`).
- a UPOS tagging head (its own one-layer BiLSTM over the word features) trained jointly; see "Tags".

Objectives (`config.model.loss`, the one place the choice lives):
- 'crf': -log P(gold tree) under the single-root non-projective tree CRF, i.e.
  `trees.log_partition - trees.score(gold)` (matrix-tree theorem, Koo et al. 2007), summed over the
  sentences of the batch and divided by the number of real words (a per-TOKEN average, so that 'crf' and
  'local' losses are on the same scale and long sentences weigh as much per word as in 'local');
- 'local': head selection (D&M 2017): for every word a softmax over its possible heads (the other
  words and ROOT), cross-entropy of the gold head, averaged per token.
Both add the relation cross-entropy at the GOLD heads and the UPOS tagging cross-entropy
(`tag_loss_weight`), each averaged per token.

Tags (`config.model.tag_input`): the parser never needs tags from the user.
- 'predicted' (default): the parser's tag embeddings are those of the tagging head's argmax (no
  gradient through the argmax), in training and at test time alike, so evaluation numbers are the
  numbers of the parse-time setting.
- 'gold': the tags of the batch (`batch['tags']`) are embedded when the batch has them (training and
  evaluation on treebanks, D&M's setting with given tags); a batch without tags (raw text at parse time)
  falls back to the tagging head's predictions.
- 'none': no tag embeddings; the tagging head is still trained (auxiliary loss) and writes UPOS.

Decoding (`config.model.decoding`): 'pipeline' (default), the tree by `trees.mst` (single root, on
device), then each word's argmax relation at its head; 'joint', the best labeled tree
(`trees.labeled_mst` of `labeled_scores`): the exact maximiser of `log P(tree) + sum_m log P(relation_m
| head_m, m)`, the product the two loss terms train (the pipeline maximises the tree alone).

Evaluation (`attachment_metrics`, the 'parse' task's `eval_metrics`: `training.parse_task.ParseTask`,
which lives in the training layer): trees and relations decoded on device (see Decoding); UAS / LAS over
all real words ('uas', 'las': punctuation included, as in the CoNLL 2018 shared task; 'las' is the
dev metric) and, given the ids of the punctuation tags, with punctuation excluded ('uas_nopunct',
'las_nopunct': words whose GOLD tag is one of them, the CoNLL-2006/2007 convention applied by tag;
`data.sentences.punct_tag_ids`), UPOS tagging accuracy 'upos'. Metrics are (sum, count) pairs over real
words of real examples (`example_mask`).

Config keys (`config.model`, `MODEL_KEYS`): the names the other models use (`embedding_dim`,
`hidden_size`, `num_layers`, `dropout_rate`) plus the parser's own; `RENAMED_KEYS` lists the keys of
workdirs trained before the rename, which `build` rejects with a message naming the new keys.
Reading and writing sentences (CoNLL-U and the other input formats) is `data.sentences`; parsing text
with a trained workdir is `analysis.parsing`.
"""
from __future__ import annotations

from typing import Callable, Mapping, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured import nn as jsnn
from jax_structured import trees
from jax_structured.models import registry

Array = jax.Array

LOSSES = ('crf', 'local')
DECODINGS = ('pipeline', 'joint')
TAG_INPUTS = ('predicted', 'gold', 'none')
# The first RESERVED_LABELS ids of the tag and relation tables are never predicted: the label tables
# the parser is trained with keep them for padding and unknown labels (`data.Vocabulary`'s `<pad>` = 0,
# `<unk>` = 1; `training.parse_task.check_data_sizes` checks the data's tables).
RESERVED_LABELS = 2

# ----------------------------------------------------------------------------------------------
# Pure functions: masks, gathers, losses, decoding.
# ----------------------------------------------------------------------------------------------


def word_mask(lengths: Array, n: int) -> Array:
  """bool[..., n]: True for real words (position < lengths)."""
  return jnp.arange(n) < jnp.asarray(lengths)[..., None]


def relation_logits_at(relation_logits: Array, heads: Array) -> Array:
  """Relation logits of each word at the given heads.

  Args:
    relation_logits: float[B, n + 1, n, R]; row n of the heads axis is ROOT.
    heads: int[B, n] head of each word, -1 = ROOT (also on padding, where the result is unused).

  Returns:
    float[B, n, R]: `relation_logits[b, heads[b, m] (ROOT -> n), m]`.
  """
  n = relation_logits.shape[-2]
  rows = jnp.where(heads < 0, n, heads)  # [B, n]
  picked = jnp.take_along_axis(relation_logits, rows[:, None, :, None], axis=1)  # [B, 1, n, R]
  return picked[:, 0]


def head_selection_logits(arc_scores: Array, root_scores: Array, lengths: Array) -> Array:
  """Logits of each word's head for the local (head-selection) loss.

  Args:
    arc_scores: float[B, n, n], arc_scores[b, h, m] for head h -> modifier m.
    root_scores: float[B, n], ROOT -> m.
    lengths: int[B].

  Returns:
    float[B, n (modifier), n + 1 (head; last = ROOT)]; self-loops and padded heads are -inf.
  """
  n = arc_scores.shape[-1]
  logits = jnp.swapaxes(arc_scores, -1, -2)  # [B, m, h]
  allowed = word_mask(lengths, n)[:, None, :] & ~jnp.eye(n, dtype=bool)[None]
  logits = jnp.where(allowed, logits, -jnp.inf)
  return jnp.concatenate([logits, root_scores[..., None]], axis=-1)


def local_arc_nll(arc_scores: Array, root_scores: Array, heads: Array, lengths: Array) -> Array:
  """Per-word head-selection cross-entropy (Dozat & Manning 2017, section 3).

  -log softmax_h(s[h, m])[gold head], the softmax over the n - 1 other real words and ROOT.

  Args:
    arc_scores: float[B, n, n]; root_scores: float[B, n]; heads: int[B, n] (-1 = ROOT);
    lengths: int[B].

  Returns:
    float[B, n]: the NLL of each word's gold head; 0 on padding.
  """
  n = arc_scores.shape[-1]
  logits = head_selection_logits(arc_scores, root_scores, lengths)
  log_probs = jax.nn.log_softmax(logits, axis=-1)
  target = jnp.where(heads < 0, n, heads)
  nll = -jnp.take_along_axis(log_probs, target[..., None], axis=-1)[..., 0]
  return jnp.where(word_mask(lengths, n), nll, 0.0)


def crf_arc_nll(arc_scores: Array, root_scores: Array, heads: Array, lengths: Array,
                log_z: Array | None = None) -> Array:
  """-log P(gold tree) under the single-root non-projective tree CRF (Koo et al. 2007).

  log Z by the matrix-tree theorem (`trees.log_partition`, single root: Koo et al. 2007, Liu &
  Lapata 2018 eqs. 12-15) minus the gold tree's score (`trees.score`).

  Args:
    arc_scores: float[B, n, n]; root_scores: float[B, n]; heads: int[B, n] (-1 = ROOT, gold tree);
    lengths: int[B] (>= 1).
    log_z: float[B] log Z when the caller computed it (`loss_and_metrics`); None: computed here.

  Returns:
    float[B]: the negative log-likelihood of each sentence's gold tree.
  """
  if log_z is None:
    log_z = trees.log_partition(arc_scores, root_scores, lengths, single_root=True)
  gold = trees.score(arc_scores, root_scores, heads, lengths)
  return log_z - gold


def crf_log_partition(outputs: Mapping[str, Array], lengths: Array) -> Array:
  """float[B] log Z of the tree CRF over the model's scores (`trees.log_partition`, single root):
  NaN for a sentence the LU error estimate flags inside a traced program (`nn.exactness`)."""
  return trees.log_partition(outputs['arc_scores'], outputs['root_scores'], lengths, single_root=True)


def labeled_scores(outputs: Mapping[str, Array]) -> tuple[Array, Array]:
  """Labeled arc scores of `outputs` (see `decode`) for joint decoding, in `trees.labeled_mst`'s layout:
  (arc float[B, n, n, R], root float[B, n, R]), `arc[b, h, m, l] = arc_scores[b, h, m] +
  log_softmax(relation_logits[b, h, m])[l]` (root: the ROOT row); the `RESERVED_LABELS` first -inf."""
  logits = outputs['relation_logits']
  n = logits.shape[-2]
  if logits.shape[-1] > RESERVED_LABELS:
    logits = jnp.where(jnp.arange(logits.shape[-1]) < RESERVED_LABELS, -jnp.inf, logits)
  log_p = jax.nn.log_softmax(logits, axis=-1)
  return (outputs['arc_scores'][..., None] + log_p[:, :n],
          outputs['root_scores'][..., None] + log_p[:, n])


def decode(outputs: Mapping[str, Array], lengths: Array, decoding: str = 'pipeline'
           ) -> tuple[Array, Array]:
  """Predicted trees (single root, on device) and their relations (module docstring, Decoding).

  Args:
    outputs: the model outputs ('arc_scores' [B, n, n], 'root_scores' [B, n], 'relation_logits'
      [B, n + 1, n, R]).
    lengths: int[B].
    decoding: 'pipeline' or 'joint' (`DECODINGS`).

  Returns:
    (heads int32[B, n] with -1 = ROOT and on padding, relations int32[B, n] (never one of the
    `RESERVED_LABELS` first ids), 0 on padding).
  """
  if decoding not in DECODINGS:
    raise ValueError(f'unknown parser decoding {decoding!r}; expected one of {DECODINGS}')
  if decoding == 'joint':
    heads, relations = trees.labeled_mst(*labeled_scores(outputs), lengths, single_root=True)
  else:
    heads = trees.mst(outputs['arc_scores'], outputs['root_scores'], lengths, single_root=True)
    relations = predict_labels(relation_logits_at(outputs['relation_logits'], heads.astype(jnp.int32)))
  mask = word_mask(lengths, heads.shape[-1])
  return heads.astype(jnp.int32), jnp.where(mask, relations, 0).astype(jnp.int32)


def _masked_ce(logits: Array, targets: Array) -> Array:
  """float[...]: cross-entropy of int targets [...] under logits [..., K]."""
  log_probs = jax.nn.log_softmax(logits, axis=-1)
  return -jnp.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]


def loss_and_metrics(outputs: Mapping[str, Array], batch: Mapping[str, Array], *,
                     loss: str = 'crf', tag_loss_weight: float = 1.0, log_z: Array | None = None
                     ) -> tuple[Array, dict[str, tuple[Array, Array]]]:
  """Parser objective for one batch (per real word), with its parts as (sum, count) metrics.

  Args:
    outputs: `BiaffineParser` outputs.
    batch: a 'parse' batch (docs/internals.md): heads, relations, tags, lengths [B], example_mask [B].
    loss: 'crf' or 'local' (module docstring); both add the relation CE at the gold heads.
    tag_loss_weight: weight of the UPOS tagging cross-entropy (0 = off).
    log_z: float[B] log Z of the CRF when the caller computed it (`crf_log_partition`).

  Returns:
    (loss: scalar = 'loss' sum / number of real words; {name: (sum, count)} with 'loss', 'arc_nll',
    'rel_nll', 'tag_nll' (per word) and, for 'crf', 'sentence_nll' (per sentence)).
  """
  if loss not in LOSSES:
    raise ValueError(f'unknown parser loss {loss!r}; expected one of {LOSSES}')
  arc_scores, root_scores = outputs['arc_scores'], outputs['root_scores']
  heads, lengths = batch['heads'], batch['lengths']
  n = arc_scores.shape[-1]
  example_mask = batch.get('example_mask', jnp.ones(lengths.shape, jnp.float32)) > 0
  mask = word_mask(lengths, n) & example_mask[:, None]
  num_words = mask.sum().astype(jnp.float32)

  metrics = {}
  if loss == 'crf':
    sentence_nll = crf_arc_nll(arc_scores, root_scores, heads, lengths, log_z)
    arc_sum = jnp.where(example_mask, sentence_nll, 0.0).sum()
    metrics['sentence_nll'] = (arc_sum, example_mask.sum())
  else:
    arc_sum = jnp.where(mask, local_arc_nll(arc_scores, root_scores, heads, lengths), 0.0).sum()
  metrics['arc_nll'] = (arc_sum, num_words)
  rel_logits_gold = relation_logits_at(outputs['relation_logits'], heads)
  rel_sum = jnp.where(mask, _masked_ce(rel_logits_gold, batch['relations']), 0.0).sum()
  metrics['rel_nll'] = (rel_sum, num_words)
  total = arc_sum + rel_sum
  if 'tag_logits' in outputs and 'tags' in batch and tag_loss_weight:
    tag_sum = jnp.where(mask, _masked_ce(outputs['tag_logits'], batch['tags']), 0.0).sum()
    metrics['tag_nll'] = (tag_sum, num_words)
    total = total + tag_loss_weight * tag_sum
  metrics['loss'] = (total, num_words)
  metrics = {k: (jnp.asarray(s, jnp.float32), jnp.asarray(c, jnp.float32))
             for k, (s, c) in metrics.items()}
  return total / jnp.maximum(num_words, 1.0), metrics


def predict_labels(logits: Array) -> Array:
  """int32[...]: argmax over the last axis (tags or relations), never one of the first
  `RESERVED_LABELS` ids (padding, unknown); with at most that many classes nothing is excluded.

  Args:
    logits: float[..., K].
  """
  if logits.shape[-1] > RESERVED_LABELS:
    reserved = jnp.arange(logits.shape[-1]) < RESERVED_LABELS
    logits = jnp.where(reserved, -jnp.inf, logits)
  return jnp.argmax(logits, axis=-1).astype(jnp.int32)


# ----------------------------------------------------------------------------------------------
# The model.
# ----------------------------------------------------------------------------------------------


def _leaky_relu(x: Array) -> Array:
  """Dozat & Manning's MLP nonlinearity: leaky ReLU with slope 0.1."""
  return nn.leaky_relu(x, negative_slope=0.1)


def biaffine_mlp(features: int, dropout_rate: float, name: str) -> jsnn.MLP:
  """One of D&M's arc / label MLPs: a leaky-ReLU layer, dropout on its output; [..., D] -> [..., F]."""
  return jsnn.MLP((features,), activation=_leaky_relu, dropout_rate=dropout_rate,
                  dropout_position='output', name=name)


class CharCNN(nn.Module):
  """Byte-level character CNN word features (max-pooled convolution, Ma & Hovy 2016 style).

  Input int32[B, n, L] byte ids (0 = padding; `data.text.char_ids` writes 1 = begin, 2 = end,
  3 + byte); output float[B, n, features].

  Attributes:
    num_chars: size of the character id table (`data.text.NUM_CHAR_IDS`).
    embedding_dim: byte embedding size.
    features: convolution filters (the output size).
    width: convolution width in bytes.
  """
  num_chars: int
  embedding_dim: int
  features: int
  width: int = 3

  @nn.compact
  def __call__(self, chars: Array) -> Array:
    b, n, length = chars.shape
    flat = chars.reshape(b * n, length)
    x = jsnn.WordEmbedding(self.num_chars, self.embedding_dim,
                           embedding_init=nn.linear.default_embed_init, name='embed')(flat)
    x = nn.Conv(self.features, (self.width,), padding='SAME', name='conv')(x)  # [B n, L, F]
    valid = (flat > 0)[..., None]
    x = jnp.max(jnp.where(valid, x, -jnp.inf), axis=1)
    x = jnp.where(jnp.isfinite(x), x, 0.0)  # words with no characters (padding) -> 0
    return jnp.tanh(x).reshape(b, n, self.features)


class BiaffineParser(nn.Module):
  """Biaffine graph-based dependency parser (Dozat & Manning 2017) with a joint UPOS tagger.

  Attributes:
    vocab_size: number of word ids.
    num_relations: number of dependency relations R.
    embedding_init: initializer of the word table (`registry.embedding_initializer` of pretrained
      vectors); None: N(0, 1).
    num_tags: size of the UPOS tag vocabulary (incl. the reserved ids); 0 = no tagger, no tags.
    embedding_dim: word embedding size.
    tag_embedding_dim: tag embedding size (used unless `tag_input == 'none'`).
    tag_input: 'predicted' | 'gold' | 'none' (module docstring).
    char_embedding_dim: byte embedding size of the character CNN; 0 = no character features. When
      > 0, batches must carry 'chars' int32[B, n, L] (`data.text.char_ids`; the
      `universal_dependencies` loader gives them with `data.max_chars > 0`).
    char_features: character CNN output size.
    num_chars: size of the character id table (`data.text.NUM_CHAR_IDS`; needed with characters).
    hidden_size: BiLSTM units per direction.
    num_layers: BiLSTM layers.
    tagger_hidden_size: units per direction of the tagger's one-layer BiLSTM.
    arc_mlp_size: arc MLP size (D&M: 500).
    label_mlp_size: label MLP size (D&M: 100).
    dropout_rate: dropout (embeddings, between and after the BiLSTM layers, MLPs; D&M: 0.33).
  """
  vocab_size: int
  num_relations: int
  embedding_init: Optional[Callable[..., Array]] = None
  num_tags: int = 0
  embedding_dim: int = 100
  tag_embedding_dim: int = 100
  tag_input: str = 'predicted'
  char_embedding_dim: int = 0
  char_features: int = 100
  num_chars: int = 0
  hidden_size: int = 400
  num_layers: int = 3
  tagger_hidden_size: int = 100
  arc_mlp_size: int = 500
  label_mlp_size: int = 100
  dropout_rate: float = 0.33

  def _check(self):
    if self.tag_input not in TAG_INPUTS:
      raise ValueError(f'config.model.tag_input={self.tag_input!r}; expected one of {TAG_INPUTS}')
    if self.tag_input != 'none' and self.num_tags <= 0:
      raise ValueError(f'config.model.tag_input={self.tag_input!r} needs num_tags > 0')
    if self.char_embedding_dim > 0 and self.num_chars <= 0:
      raise ValueError(f'config.model.char_embedding_dim={self.char_embedding_dim} needs the size of '
                       'the character id table: set config.model.num_chars (data.text.NUM_CHAR_IDS)')

  def _dropout(self, x: Array, train: bool) -> Array:
    return nn.Dropout(self.dropout_rate, deterministic=not train)(x)

  def _word_features(self, batch: Mapping[str, Array]) -> list[Array]:
    """[word vectors float[B, n, embedding_dim], (character features float[B, n, char_features])]."""
    init = self.embedding_init or nn.initializers.normal(stddev=1.0)
    features = [jsnn.WordEmbedding(self.vocab_size, self.embedding_dim, embedding_init=init,
                                   name='word_embed')(batch['tokens'])]
    if self.char_embedding_dim > 0:
      if 'chars' not in batch:
        raise KeyError('config.model.char_embedding_dim > 0 but the batch has no "chars" [B, n, L] '
                       '(byte ids of data.text.char_ids: set config.data.max_chars > 0)')
      features.append(CharCNN(self.num_chars, self.char_embedding_dim, self.char_features,
                              name='char_cnn')(batch['chars']))
    return features

  def _tagger(self, words: Array, batch: Mapping[str, Array], mask: Array, train: bool,
              ) -> tuple[Array, Array]:
    """The joint UPOS tagger over the word features float[B, n, D].

    Returns:
      (tag_logits float[B, n, num_tags], the tags fed to the parser int32[B, n]: gold when
      `tag_input == 'gold'` and the batch has 'tags', else predicted; 0 on padding).
    """
    states = jsnn.BiLSTM(self.tagger_hidden_size, 1, name='tagger_lstm')(
        self._dropout(words, train), batch['lengths'])
    tag_logits = nn.Dense(self.num_tags, name='tag_out')(self._dropout(states, train))
    if self.tag_input == 'gold' and 'tags' in batch:
      tags = batch['tags'].astype(jnp.int32)
    else:
      tags = predict_labels(jax.lax.stop_gradient(tag_logits))
    return tag_logits, jnp.where(mask, tags, 0)

  def _biaffine_arcs(self, heads_in: Array, states: Array, train: bool) -> tuple[Array, Array]:
    """D&M arc scores s[h, m] = H_head[h] U H_dep[m] + H_head[h] . u.

    Args:
      heads_in: float[B, n + 1, 2H] BiLSTM states with the ROOT row last; states: float[B, n, 2H].

    Returns:
      (arc_scores float[B, n, n] (head, modifier), root_scores float[B, n]).
    """
    n = states.shape[1]
    arc_head = biaffine_mlp(self.arc_mlp_size, self.dropout_rate, 'arc_head_mlp')(
        heads_in, deterministic=not train)
    arc_dep = biaffine_mlp(self.arc_mlp_size, self.dropout_rate, 'arc_dep_mlp')(
        states, deterministic=not train)
    arc_u = self.param('arc_bilinear', nn.initializers.zeros, (self.arc_mlp_size, self.arc_mlp_size))
    arc_bias = self.param('arc_head_bias', nn.initializers.zeros, (self.arc_mlp_size,))
    scores = jnp.einsum('bhd,de,bme->bhm', arc_head, arc_u, arc_dep)  # [B, n + 1, n]
    scores = scores + jnp.einsum('bhd,d->bh', arc_head, arc_bias)[..., None]
    return scores[:, :n, :], scores[:, n, :]

  def _biaffine_relations(self, heads_in: Array, states: Array, train: bool) -> Array:
    """D&M label scores L_head[h] U_k L_dep[m] + W_k [L_head[h]; L_dep[m]] + b_k.

    Returns:
      relation_logits float[B, n + 1, n, R] (heads row n = ROOT).
    """
    label_head = biaffine_mlp(self.label_mlp_size, self.dropout_rate, 'label_head_mlp')(
        heads_in, deterministic=not train)
    label_dep = biaffine_mlp(self.label_mlp_size, self.dropout_rate, 'label_dep_mlp')(
        states, deterministic=not train)
    r = self.num_relations
    label_u = self.param('label_bilinear', nn.initializers.zeros,
                         (r, self.label_mlp_size, self.label_mlp_size))
    bilinear = jnp.einsum('bhre,bme->bhmr', jnp.einsum('bhd,rde->bhre', label_head, label_u),
                          label_dep)
    linear = (nn.Dense(r, name='label_head_linear')(label_head)[:, :, None, :]
              + nn.Dense(r, use_bias=False, name='label_dep_linear')(label_dep)[:, None, :, :])
    return bilinear + linear

  @nn.compact
  def __call__(self, batch: Mapping[str, Array], *, train: bool = False) -> dict[str, Array]:
    """Scores of a 'parse' batch.

    Args:
      batch: 'tokens' int32[B, n], 'lengths' int32[B], optional 'tags' int32[B, n] (used when
        `tag_input == 'gold'`), 'chars' int32[B, n, L] when `char_embedding_dim > 0`.
      train: enables dropout (needs rngs={'dropout': key}).

    Returns:
      {'arc_scores': float32[B, n, n] (head, modifier), 'root_scores': float32[B, n],
       'relation_logits': float32[B, n + 1, n, R] (heads row n = ROOT),
       'tag_logits': float32[B, n, num_tags] and 'tags' int32[B, n] (the tags fed to the parser:
       gold or predicted) when num_tags > 0}.
      Entries for padded words are finite but meaningless. `arc_scores`, `root_scores` and `lengths`
      are also sown in 'intermediates' (like the structured-attention models).
    """
    self._check()
    lengths = batch['lengths']
    features = self._word_features(batch)
    outputs = {}
    if self.num_tags > 0:
      mask = word_mask(lengths, batch['tokens'].shape[1])
      outputs['tag_logits'], outputs['tags'] = self._tagger(
          jnp.concatenate(features, axis=-1), batch, mask, train)
    if self.tag_input != 'none':
      features.append(jsnn.WordEmbedding(self.num_tags, self.tag_embedding_dim,
                                         embedding_init=nn.linear.default_embed_init,
                                         name='tag_embed')(outputs['tags']))
    x = self._dropout(jnp.concatenate(features, axis=-1), train)
    states = jsnn.BiLSTM(self.hidden_size, self.num_layers, self.dropout_rate, name='lstm')(
        x, lengths, deterministic=not train)  # [B, n, 2H], 0 on padding
    states = self._dropout(states, train)
    # Learned ROOT representation in the BiLSTM output space, shared by the head MLPs.
    root = self.param('root', nn.initializers.normal(stddev=1.0), (states.shape[-1],))
    root = jnp.broadcast_to(root, (states.shape[0], 1, states.shape[-1])).astype(states.dtype)
    heads_in = jnp.concatenate([states, root], axis=1)  # [B, n + 1, 2H], row n = ROOT
    arc_scores, root_scores = self._biaffine_arcs(heads_in, states, train)
    relation_logits = self._biaffine_relations(heads_in, states, train)
    self.sow('intermediates', 'arc_scores', arc_scores)
    self.sow('intermediates', 'root_scores', root_scores)
    self.sow('intermediates', 'lengths', lengths)
    outputs.update(arc_scores=arc_scores, root_scores=root_scores, relation_logits=relation_logits)
    return outputs


# ----------------------------------------------------------------------------------------------
# Building from a config, metrics, registration.
# ----------------------------------------------------------------------------------------------

# Read by `training.parse_task.ParseTask`, not by the module (`num_relations` is given to it).
_TASK_KEYS = ('loss', 'tag_loss_weight', 'single_root', 'num_relations', 'decoding')
MODEL_KEYS = ('name', 'num_tags', 'embedding_dim', 'tag_embedding_dim', 'tag_input',
              'char_embedding_dim', 'char_features', 'num_chars', 'hidden_size', 'num_layers',
              'tagger_hidden_size', 'arc_mlp_size', 'label_mlp_size', 'dropout_rate') + _TASK_KEYS
# Keys of parser workdirs and configs written before the parser took the other models' key names.
RENAMED_KEYS = {'word_dim': 'embedding_dim', 'tag_dim': 'tag_embedding_dim',
                'char_dim': 'char_embedding_dim', 'lstm_hidden': 'hidden_size',
                'lstm_layers': 'num_layers', 'tagger_hidden': 'tagger_hidden_size',
                'arc_mlp': 'arc_mlp_size', 'label_mlp': 'label_mlp_size', 'dropout': 'dropout_rate'}


def check_config(config) -> None:
  """Checks the keys and values of a parser `config.model` (before any data is read).

  Raises:
    KeyError naming keys of the old names (`RENAMED_KEYS`: a workdir or config written before the
    rename, with the command that retrains it) or other unknown keys (listing the valid ones);
    ValueError for a bad `loss` or `decoding`, or `single_root=False`.
  """
  old = [k for k in RENAMED_KEYS if k in config]
  if old:
    renames = ', '.join(f'{k} -> {RENAMED_KEYS[k]}' for k in old)
    raise KeyError(f"config.model of parser.biaffine uses the parser's old key names ({renames}): a "
                   "config, or the config.json of a workdir trained before the parser's keys were "
                   'renamed (its MLP parameters were renamed too, so its checkpoint cannot be '
                   'restored). Rename the keys in your config; retrain the workdir with '
                   'configs/parser/ewt.py')
  registry.check_keys(config, MODEL_KEYS, 'parser.biaffine')
  if config.get('loss', 'crf') not in LOSSES:
    raise ValueError(f'config.model.loss={config.get("loss")!r}; expected one of {LOSSES}')
  if config.get('decoding', 'pipeline') not in DECODINGS:
    raise ValueError(f'config.model.decoding={config.get("decoding")!r}; expected one of {DECODINGS}')
  if not config.get('single_root', True):
    raise ValueError('config.model.single_root=False: the parser decodes and trains single-root '
                     'trees (UD has exactly one root per sentence)')


@registry.register('parser.biaffine')
def build(config, *, vocab_size: int, num_classes: int, embeddings=None) -> BiaffineParser:
  """`BiaffineParser` from `config.model` (the keys of `MODEL_KEYS`; unknown keys are errors).

  Args:
    config: the model ConfigDict (`config.model`). `num_relations` (> 0) fixes the number of
      dependency relations; 0 takes `num_classes`. `num_tags` must equal the size of the data's tag
      vocabulary (UPOS: 17 tags + `<pad>` + `<unk>` = 19; `training.parse_task` checks it); ids outside
      the tables give NaN losses, never silent clamping. `loss`, `tag_loss_weight`, `single_root` and
      `decoding` are read by `training.parse_task.ParseTask` (`decoding` also by `analysis.parsing`).
    vocab_size: number of word ids.
    num_classes: number of relations when the data's label names are the relation names.
    embeddings: optional float[vocab_size, embedding_dim] initial word vectors.

  Returns:
    An unbound `BiaffineParser`.

  Raises:
    KeyError / ValueError of `check_config`; ValueError without relations or for embeddings of the
    wrong shape.
  """
  check_config(config)
  num_relations = int(config.get('num_relations', 0)) or int(num_classes)
  if num_relations <= 0:
    raise ValueError('parser.biaffine needs the number of dependency relations: set '
                     'config.model.num_relations (the data reported num_classes=0)')
  kwargs = {k: config[k] for k in MODEL_KEYS if k in config and k not in _TASK_KEYS + ('name',)}
  if embeddings is not None:
    kwargs['embedding_init'] = registry.embedding_initializer(
        embeddings, vocab_size=vocab_size,
        dim=kwargs.get('embedding_dim', BiaffineParser.embedding_dim), model_name='parser.biaffine')
  return BiaffineParser(vocab_size=vocab_size, num_relations=num_relations, **kwargs)


def attachment_metrics(outputs: Mapping[str, Array], batch: Mapping[str, Array], *,
                       punct_tag_ids: Sequence[int] | None = None, decoding: str = 'pipeline'
                       ) -> dict[str, tuple[Array, Array]]:
  """UAS / LAS (and tagging accuracy) of `decode`d trees against the batch's gold trees.

  Args:
    outputs: `BiaffineParser` outputs.
    batch: a 'parse' batch with gold heads, relations, tags, lengths and example_mask.
    punct_tag_ids: ids of the punctuation tags in the tag vocabulary (`data.sentences.punct_tag_ids`);
      when given (even empty), also 'uas_nopunct' / 'las_nopunct' over words whose GOLD tag is not one
      of them.
    decoding: see `decode`.

  Returns:
    {'uas', 'las', ['uas_nopunct', 'las_nopunct'], ['upos']: (correct, count)} float32 sums.
  """
  lengths, heads = batch['lengths'], batch['heads']
  n = heads.shape[-1]
  example_mask = batch.get('example_mask', jnp.ones(lengths.shape, jnp.float32)) > 0
  mask = word_mask(lengths, n) & example_mask[:, None]
  num_words = mask.sum()
  pred_heads, pred_relations = decode(outputs, lengths, decoding)
  head_ok = (pred_heads == heads) & mask
  label_ok = head_ok & (pred_relations == batch['relations'])
  metrics = {'uas': (head_ok.sum(), num_words), 'las': (label_ok.sum(), num_words)}
  if punct_tag_ids is not None:
    not_punct = mask
    for tag_id in punct_tag_ids:
      not_punct = not_punct & (batch['tags'] != tag_id)
    metrics['uas_nopunct'] = ((head_ok & not_punct).sum(), not_punct.sum())
    metrics['las_nopunct'] = ((label_ok & not_punct).sum(), not_punct.sum())
  if 'tag_logits' in outputs and 'tags' in batch:
    correct = (predict_labels(outputs['tag_logits']) == batch['tags']) & mask
    metrics['upos'] = (correct.sum(), num_words)
  return {k: (jnp.asarray(s, jnp.float32), jnp.asarray(c, jnp.float32))
          for k, (s, c) in metrics.items()}
