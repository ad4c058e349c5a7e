"""Graph-based non-projective dependency parser trained with the matrix-tree CRF (issue 5).

Architecture (Dozat & Manning 2017, "Deep biaffine attention for neural dependency parsing"):
word embeddings (+ optional byte-level character CNN) (+ UPOS tag embeddings) -> multi-layer BiLSTM
(masked by `lengths`) -> four MLPs (arc-head, arc-dependent, label-head, label-dependent) ->

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

Evaluation (`attachment_metrics`, the 'parse' task's `eval_metrics`: `training.parse_task.ParseTask`,
which lives in the training layer): trees decoded on device with `trees.mst` (single root,
Chu-Liu-Edmonds), relations = argmax of the relation logits at the predicted heads; UAS / LAS over
all real words ('uas', 'las': punctuation included, as in the CoNLL 2018 shared task; 'las' is the
dev metric) and with punctuation excluded ('uas_nopunct', 'las_nopunct': words whose
GOLD UPOS is PUNCT or SYM are left out, the CoNLL-2006/2007 convention applied by tag), UPOS tagging
accuracy 'upos'. Metrics are (sum, count) pairs over real words of real examples (`example_mask`).
"""
from __future__ import annotations

import functools
import gzip
import html
import json
import os
import re
import time
from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jax_structured import nn as jsnn
from jax_structured import trees
from jax_structured.data import loaders
from jax_structured.data import text
from jax_structured.models import registry

Array = jax.Array

LOSSES = ('crf', 'local')
TAG_INPUTS = ('predicted', 'gold', 'none')
PUNCT_UPOS = ('PUNCT', 'SYM')
# Tag and relation ids 0 and 1 are `<pad>` and `<unk>` of `data.Vocabulary`: never predicted.
_RESERVED_IDS = (0, 1)

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


def decode(outputs: Mapping[str, Array], lengths: Array) -> tuple[Array, Array]:
  """Predicted trees (Chu-Liu-Edmonds, single root, on device) and relations at the predicted heads.

  Args:
    outputs: the model outputs ('arc_scores' [B, n, n], 'root_scores' [B, n], 'relation_logits'
      [B, n + 1, n, R]).
    lengths: int[B].

  Returns:
    (heads int32[B, n] with -1 = ROOT and on padding, relations int32[B, n] (never the reserved
    ids 0 = `<pad>`, 1 = `<unk>` of the data's relation vocabulary), 0 on padding).
  """
  heads = trees.mst(outputs['arc_scores'], outputs['root_scores'], lengths, single_root=True)
  heads = heads.astype(jnp.int32)
  relations = predict_labels(relation_logits_at(outputs['relation_logits'], heads))
  mask = word_mask(lengths, heads.shape[-1])
  return heads, jnp.where(mask, relations, 0).astype(jnp.int32)


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
  """int32[...]: argmax over the last axis, never the reserved ids 0 (`<pad>`) and 1 (`<unk>`).

  Tag and relation vocabularies of the data (`data.Vocabulary`) reserve ids 0 and 1; with at most
  two classes nothing is excluded.
  """
  if logits.shape[-1] > len(_RESERVED_IDS):
    reserved = jnp.arange(logits.shape[-1]) < len(_RESERVED_IDS)
    logits = jnp.where(reserved, -jnp.inf, logits)
  return jnp.argmax(logits, axis=-1).astype(jnp.int32)


predict_tags = predict_labels


# ----------------------------------------------------------------------------------------------
# The model.
# ----------------------------------------------------------------------------------------------


class BiaffineMLP(nn.Module):
  """One hidden layer with leaky ReLU (the arc/label MLPs of Dozat & Manning 2017) and dropout."""
  features: int
  dropout: float = 0.0

  @nn.compact
  def __call__(self, x: Array, *, train: bool) -> Array:
    x = nn.leaky_relu(nn.Dense(self.features)(x), negative_slope=0.1)
    return nn.Dropout(self.dropout, deterministic=not train)(x)


class CharCNN(nn.Module):
  """Byte-level character CNN word features (max-pooled convolution, Ma & Hovy 2016 style).

  Input int32[B, n, L] byte ids of `data.text.char_ids` (0 = padding); output float[B, n, features].
  """
  embed_dim: int
  features: int
  width: int = 3

  @nn.compact
  def __call__(self, chars: Array) -> Array:
    b, n, length = chars.shape
    x = nn.Embed(text.NUM_CHAR_IDS, self.embed_dim, name='embed')(chars.reshape(b * n, length))
    x = nn.Conv(self.features, (self.width,), padding='SAME', name='conv')(x)  # [B n, L, F]
    valid = (chars.reshape(b * n, length) > 0)[..., None]
    x = jnp.max(jnp.where(valid, x, -jnp.inf), axis=1)
    x = jnp.where(jnp.isfinite(x), x, 0.0)  # words with no characters (padding) -> 0
    return jnp.tanh(x).reshape(b, n, self.features)


class BiaffineParser(nn.Module):
  """Biaffine graph-based dependency parser (Dozat & Manning 2017) with a joint UPOS tagger.

  Attributes:
    vocab_size: number of word ids.
    num_relations: number of dependency relations R.
    num_tags: size of the UPOS tag vocabulary (incl. `<pad>`, `<unk>`); 0 = no tagger, no tags.
    word_dim: word embedding size.
    tag_dim: tag embedding size (used unless `tag_input == 'none'`).
    tag_input: 'predicted' | 'gold' | 'none' (module docstring).
    char_dim: byte embedding size of the character CNN; 0 = no character features. When > 0, batches
      must carry 'chars' int32[B, n, L] (`data.text.char_ids`; the
      `universal_dependencies` loader gives them with `data.max_chars > 0`).
    char_features: character CNN output size.
    lstm_hidden: BiLSTM units per direction.
    lstm_layers: BiLSTM layers.
    tagger_hidden: units per direction of the tagger's one-layer BiLSTM.
    arc_mlp: arc MLP size (D&M: 500).
    label_mlp: label MLP size (D&M: 100).
    dropout: dropout rate (embeddings, BiLSTM outputs, MLPs; D&M: 0.33).
    embeddings: optional float[vocab_size, word_dim] initial word vectors.
  """
  vocab_size: int
  num_relations: int
  num_tags: int = 0
  word_dim: int = 100
  tag_dim: int = 100
  tag_input: str = 'predicted'
  char_dim: int = 0
  char_features: int = 100
  lstm_hidden: int = 400
  lstm_layers: int = 3
  tagger_hidden: int = 100
  arc_mlp: int = 500
  label_mlp: int = 100
  dropout: float = 0.33
  embeddings: Any = None

  def _check(self):
    if self.tag_input not in TAG_INPUTS:
      raise ValueError(f'config.model.tag_input={self.tag_input!r}; expected one of {TAG_INPUTS}')
    if self.tag_input != 'none' and self.num_tags <= 0:
      raise ValueError(f'config.model.tag_input={self.tag_input!r} needs num_tags > 0')
    if self.embeddings is not None and tuple(np.shape(self.embeddings)) != (self.vocab_size,
                                                                            self.word_dim):
      raise ValueError(f'pretrained embeddings have shape {np.shape(self.embeddings)}, expected '
                       f'(vocab_size, word_dim) = ({self.vocab_size}, {self.word_dim})')

  @nn.compact
  def __call__(self, batch: Mapping[str, Array], *, train: bool = False) -> dict[str, Array]:
    """Scores of a 'parse' batch.

    Args:
      batch: 'tokens' int32[B, n], 'lengths' int32[B], optional 'tags' int32[B, n] (used when
        `tag_input == 'gold'`), 'chars' int32[B, n, L] when `char_dim > 0`.
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
    tokens, lengths = batch['tokens'], batch['lengths']
    n = tokens.shape[1]
    mask = word_mask(lengths, n)
    drop = functools.partial(nn.Dropout, self.dropout, deterministic=not train)

    if self.embeddings is not None:
      table = np.asarray(self.embeddings, np.float32)
      init = lambda *_: jnp.asarray(table)
    else:
      init = nn.initializers.normal(stddev=1.0)
    features = [nn.Embed(self.vocab_size, self.word_dim, embedding_init=init,
                         name='word_embed')(tokens)]
    if self.char_dim > 0:
      if 'chars' not in batch:
        raise KeyError('config.model.char_dim > 0 but the batch has no "chars" [B, n, L] (byte ids '
                       'of data.text.char_ids: set config.data.max_chars > 0)')
      features.append(CharCNN(self.char_dim, self.char_features, name='char_cnn')(batch['chars']))
    words = jnp.concatenate(features, axis=-1)

    outputs = {}
    tags = None
    if self.num_tags > 0:
      tagger_states = jsnn.BiLSTM(self.tagger_hidden, 1, name='tagger_lstm')(drop()(words), lengths)
      tagger_states = drop()(tagger_states)
      tag_logits = nn.Dense(self.num_tags, name='tag_out')(tagger_states)
      outputs['tag_logits'] = tag_logits
      predicted = predict_tags(jax.lax.stop_gradient(tag_logits))
      if self.tag_input == 'gold' and 'tags' in batch:
        tags = batch['tags'].astype(jnp.int32)
      else:
        tags = predicted
      tags = jnp.where(mask, tags, 0)
      outputs['tags'] = tags
    if self.tag_input != 'none':
      features.append(nn.Embed(self.num_tags, self.tag_dim, name='tag_embed')(tags))
    x = drop()(jnp.concatenate(features, axis=-1))
    states = jsnn.BiLSTM(self.lstm_hidden, self.lstm_layers, self.dropout, name='lstm')(
        x, lengths, deterministic=not train)  # [B, n, 2H], 0 on padding
    states = drop()(states)

    # Learned ROOT representation in the BiLSTM output space, shared by the head MLPs.
    root = self.param('root', nn.initializers.normal(stddev=1.0), (states.shape[-1],))
    root = jnp.broadcast_to(root, (states.shape[0], 1, states.shape[-1])).astype(states.dtype)
    heads_in = jnp.concatenate([states, root], axis=1)  # [B, n + 1, 2H], row n = ROOT

    arc_head = BiaffineMLP(self.arc_mlp, self.dropout, name='arc_head_mlp')(heads_in, train=train)
    arc_dep = BiaffineMLP(self.arc_mlp, self.dropout, name='arc_dep_mlp')(states, train=train)
    arc_u = self.param('arc_bilinear', nn.initializers.zeros, (self.arc_mlp, self.arc_mlp))
    arc_bias = self.param('arc_head_bias', nn.initializers.zeros, (self.arc_mlp,))
    # D&M arc scores: s[h, m] = H_head[h] U H_dep[m] + H_head[h] . u   -> [B, n + 1, n]
    scores = jnp.einsum('bhd,de,bme->bhm', arc_head, arc_u, arc_dep)
    scores = scores + jnp.einsum('bhd,d->bh', arc_head, arc_bias)[..., None]
    arc_scores, root_scores = scores[:, :n, :], scores[:, n, :]

    label_head = BiaffineMLP(self.label_mlp, self.dropout, name='label_head_mlp')(heads_in, train=train)
    label_dep = BiaffineMLP(self.label_mlp, self.dropout, name='label_dep_mlp')(states, train=train)
    r = self.num_relations
    label_u = self.param('label_bilinear', nn.initializers.zeros, (r, self.label_mlp,
                                                                   self.label_mlp))
    # D&M label scores: L_head[h] U_k L_dep[m] + W_k [L_head[h]; L_dep[m]] + b_k   -> [B, n + 1, n, R]
    bilinear = jnp.einsum('bhre,bme->bhmr', jnp.einsum('bhd,rde->bhre', label_head, label_u),
                          label_dep)
    linear = (nn.Dense(r, name='label_head_linear')(label_head)[:, :, None, :]
              + nn.Dense(r, use_bias=False, name='label_dep_linear')(label_dep)[:, None, :, :])
    relation_logits = bilinear + linear

    self.sow('intermediates', 'arc_scores', arc_scores)
    self.sow('intermediates', 'root_scores', root_scores)
    self.sow('intermediates', 'lengths', lengths)
    outputs.update(arc_scores=arc_scores, root_scores=root_scores, relation_logits=relation_logits)
    return outputs


# ----------------------------------------------------------------------------------------------
# Building from a config, the 'parse' task, registration.
# ----------------------------------------------------------------------------------------------

MODEL_KEYS = ('name', 'loss', 'num_tags', 'num_relations', 'word_dim', 'tag_dim', 'tag_input',
              'char_dim', 'char_features', 'lstm_hidden', 'lstm_layers', 'tagger_hidden', 'arc_mlp',
              'label_mlp', 'dropout', 'tag_loss_weight', 'single_root')
_TASK_ONLY_KEYS = ('name', 'loss', 'tag_loss_weight', 'single_root', 'num_relations')


def build(config, *, vocab_size: int, num_classes: int, embeddings=None) -> BiaffineParser:
  """`BiaffineParser` from `config.model` (the keys of `MODEL_KEYS`; unknown keys are errors).

  Args:
    config: the model ConfigDict (`config.model`). `num_relations` (> 0) fixes the number of
      dependency relations; 0 takes `num_classes`. `num_tags` must be at least the size of the data's
      tag vocabulary (UPOS: 17 tags + `<pad>` + `<unk>` = 19); ids outside the tables give NaN
      losses, never silent clamping. `loss`, `tag_loss_weight` and `single_root` are read by
      `training.parse_task.ParseTask`.
    vocab_size: number of word ids.
    num_classes: number of relations when the data's label names are the relation names.
    embeddings: optional float[vocab_size, word_dim] initial word vectors.

  Returns:
    An unbound `BiaffineParser`.
  """
  unknown = sorted(set(config.keys()) - set(MODEL_KEYS))
  if unknown:
    raise KeyError(f'unknown config.model key(s) {unknown} for parser.biaffine; valid: '
                   f'{sorted(MODEL_KEYS)}')
  if config.get('loss', 'crf') not in LOSSES:
    raise ValueError(f'config.model.loss={config.get("loss")!r}; expected one of {LOSSES}')
  if not config.get('single_root', True):
    raise ValueError('config.model.single_root=False: the parser decodes and trains single-root '
                     'trees (UD has exactly one root per sentence)')
  num_relations = int(config.get('num_relations', 0)) or int(num_classes)
  if num_relations <= 0:
    raise ValueError('parser.biaffine needs the number of dependency relations: set '
                     'config.model.num_relations (the data reported num_classes=0)')
  kwargs = {k: config[k] for k in MODEL_KEYS if k in config and k not in _TASK_ONLY_KEYS}
  return BiaffineParser(vocab_size=vocab_size, num_relations=num_relations, embeddings=embeddings,
                        **kwargs)


def punct_tag_ids(tag_vocab) -> tuple[int, ...]:
  """Ids of UPOS PUNCT and SYM in a tag `Vocabulary` (or a list of tag names)."""
  tokens = list(getattr(tag_vocab, 'tokens', tag_vocab))
  return tuple(tokens.index(t) for t in PUNCT_UPOS if t in tokens)


def attachment_metrics(outputs: Mapping[str, Array], batch: Mapping[str, Array], *,
                       punct_tag_ids: Sequence[int] | None = None) -> dict[str, tuple[Array, Array]]:
  """UAS / LAS (and tagging accuracy) of `decode`d trees against the batch's gold trees.

  Args:
    outputs: `BiaffineParser` outputs.
    batch: a 'parse' batch with gold heads, relations, tags, lengths and example_mask.
    punct_tag_ids: ids of PUNCT/SYM in the tag vocabulary; when given (even empty), also
      'uas_nopunct' / 'las_nopunct' over words whose GOLD tag is not one of them.

  Returns:
    {'uas', 'las', ['uas_nopunct', 'las_nopunct'], ['upos']: (correct, count)} float32 sums.
  """
  lengths, heads = batch['lengths'], batch['heads']
  n = heads.shape[-1]
  example_mask = batch.get('example_mask', jnp.ones(lengths.shape, jnp.float32)) > 0
  mask = word_mask(lengths, n) & example_mask[:, None]
  num_words = mask.sum()
  pred_heads, pred_relations = decode(outputs, lengths)
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
    correct = (predict_tags(outputs['tag_logits']) == batch['tags']) & mask
    metrics['upos'] = (correct.sum(), num_words)
  return {k: (jnp.asarray(s, jnp.float32), jnp.asarray(c, jnp.float32))
          for k, (s, c) in metrics.items()}


# ----------------------------------------------------------------------------------------------
# Parsing text with a trained model (launch/parse.py): readers, tokeniser, batching, CoNLL-U.
# ----------------------------------------------------------------------------------------------

INPUT_FORMATS = ('raw', 'tokenized', 'conllu', 'sst', 'trec', 'snli', 'quora', 'iwslt')

_ABBREVIATIONS = ('Mr', 'Mrs', 'Ms', 'Dr', 'Prof', 'St', 'Jr', 'Sr', 'vs', 'etc', 'Inc', 'Ltd', 'Co',
                  'Corp', 'Jan', 'Feb', 'Mar', 'Apr', 'Jun', 'Jul', 'Aug', 'Sep', 'Sept', 'Oct',
                  'Nov', 'Dec', 'No', 'Mt', 'Gov', 'Sen', 'Rep', 'Gen', 'Col', 'Lt', 'Capt')
_CLITICS = r"(?:[sSdDmM]|re|RE|ve|VE|ll|LL)"
_TOKEN_RE = re.compile(r"""
    (?:https?://|www\.)\S+?(?=[.,!?;:)\]]*(?:\s|$))  # URLs (without trailing punctuation)
  | [\w.+-]+@[\w-]+(?:\.[\w-]+)+                  # e-mail addresses
  | (?:[A-Za-z]\.){2,}                            # U.S. e.g. i.e.
  | (?:%s)\.                                      # Mr. Dr. etc.
  | \w+(?=[nN]'[tT]\b) | [nN]'[tT]\b               # do|n't  (UD EWT splits negation clitics)
  | '%s\b                                         # 's 're 've 'll 'd 'm
  | [A-Za-z]+'(?!%s\b)[A-Za-z]+                   # O'Brien
  | \d+(?:[.,:]\d+)*                              # 3.14 1,000 10:30
  | \w+                                           # words (hyphens split, as in UD EWT)
  | \.\.\.+ | --+ | ``|'' | [^\w\s]               # punctuation
""" % ('|'.join(_ABBREVIATIONS), _CLITICS, _CLITICS), re.VERBOSE)


def tokenize(text: str) -> list[str]:
  """Rule-based English tokeniser approximating UD English EWT tokens.

  Splits punctuation, negation and other clitics ("don't" -> do n't, "it's" -> it 's) and hyphens,
  keeps URLs, e-mail addresses, decimal numbers, dotted abbreviations (U.S., e.g.) and a list of
  titles/months ("Mr.") whole.

  Args:
    text: one sentence.

  Returns:
    The tokens (no whitespace tokens; an empty list for blank text).
  """
  return _TOKEN_RE.findall(text)


def _sentence(words, sent_id, *, text=None, tags=None, rows=None, comments=None) -> dict[str, Any]:
  return {'words': list(words), 'sent_id': sent_id, 'text': text if text is not None
          else ' '.join(words), 'tags': tags, 'rows': rows, 'comments': comments}


def _open(path: str):
  if path.endswith('.gz'):
    return gzip.open(path, 'rt', encoding='utf-8')
  return open(path, encoding='utf-8')


def _tree_leaves(tree: str, path: str, line_no: int) -> list[str]:
  """Leaves of a one-line PTB tree "(3 (2 It) (4 ...))" (SST) or binary parse "( ( A b ) c )"."""
  leaves = [t for t in tree.replace('(', ' ( ').replace(')', ' ) ').split() if t not in '()']
  labelled = re.findall(r'\(\s*\S+\s+([^()\s]+)\s*\)', tree)
  if tree.lstrip().startswith('(') and re.match(r'\(\d', tree.lstrip()):  # SST: drop labels
    leaves = labelled
  if not leaves:
    raise ValueError(f'{path}:{line_no}: no words in the tree {tree[:60]!r}')
  return leaves


def read_sentences(path: str, fmt: str) -> list[dict[str, Any]]:
  """Reads the sentences to parse from `path` in format `fmt`.

  Formats: 'raw' (one sentence per line, `tokenize`d), 'tokenized' (one sentence per line, tokens
  separated by whitespace), 'conllu' (FORM column; UPOS kept as input tags when given; comments,
  multiword-token lines and the other columns are kept for writing back; empty nodes are dropped),
  'sst' (PTB trees, one per line: the leaves), 'trec' (`LABEL:fine question`, tokenised as the
  `trec` loader does: Kim's clean_str, case kept), 'snli' (jsonl(.gz):
  premise and hypothesis of each pair, tokens of the binary parses), 'quora' (TSV `q1 q2 label` or
  BiMPM `label q1 q2 id`; both questions), 'iwslt' (one tokenised sentence per line; HTML entities
  such as &apos; unescaped). Blank lines are skipped in the line formats.

  Args:
    path: the input file.
    fmt: one of `INPUT_FORMATS`.

  Returns:
    A list of {'words', 'sent_id', 'text', 'tags' (list or None), 'rows', 'comments'}.

  Raises:
    FileNotFoundError naming the path; ValueError naming path:line for malformed input.
  """
  if fmt not in INPUT_FORMATS:
    raise ValueError(f'unknown input format {fmt!r}; expected one of {INPUT_FORMATS}')
  if not os.path.exists(path):
    raise FileNotFoundError(f'input file not found: {path}')
  if fmt == 'conllu':
    return _read_conllu(path)
  encoding = 'iso-8859-1' if fmt == 'trec' else 'utf-8'
  out = []
  opener = _open(path) if encoding == 'utf-8' else open(path, encoding=encoding)
  with opener as f:
    for line_no, line in enumerate(f, 1):
      line = line.rstrip('\r\n')
      if not line.strip():
        continue
      where = f'{path}:{line_no}'
      if fmt == 'raw':
        out.append(_sentence(tokenize(line), f'{line_no}', text=line.strip()))
      elif fmt == 'tokenized':
        out.append(_sentence(line.split(), f'{line_no}'))
      elif fmt == 'iwslt':
        out.append(_sentence(html.unescape(line).split(), f'{line_no}'))
      elif fmt == 'sst':
        out.append(_sentence(_tree_leaves(line, path, line_no), f'{line_no}'))
      elif fmt == 'trec':
        label, _, question = line.partition(' ')
        if ':' not in label or not question.strip():
          raise ValueError(f'{where}: expected "COARSE:fine question", got {line[:60]!r}')
        # The `trec` loader's words, so that the parses line up with a trained model's trees
        # (`launch.induce_trees --reference`).
        out.append(_sentence(loaders.trec_tokens(question), f'{line_no}', text=question.strip()))
      elif fmt == 'snli':
        try:
          pair = json.loads(line)
        except json.JSONDecodeError as e:
          raise ValueError(f'{where}: not JSON ({e})') from None
        for side, key in (('premise', 'sentence1'), ('hypothesis', 'sentence2')):
          if f'{key}_binary_parse' in pair:
            words = _tree_leaves(pair[f'{key}_binary_parse'], path, line_no)
          elif key in pair:
            words = tokenize(pair[key])
          else:
            raise ValueError(f'{where}: no {key!r} in the SNLI record')
          out.append(_sentence(words, f'{pair.get("pairID", line_no)}-{side}', text=pair.get(key)))
      elif fmt == 'quora':
        cols = line.split('\t')
        if len(cols) == 3 and cols[2] in ('0', '1'):
          questions = cols[:2]
        elif len(cols) == 4 and cols[0] in ('0', '1'):
          questions = cols[1:3]
        else:
          raise ValueError(f'{where}: expected "q1<TAB>q2<TAB>label" or "label<TAB>q1<TAB>q2<TAB>id", '
                           f'got {len(cols)} column(s)')
        for k, q in enumerate(questions, 1):
          out.append(_sentence(q.split(), f'{line_no}-q{k}'))
  empty = [s['sent_id'] for s in out if not s['words']]
  if empty:
    raise ValueError(f'{path}: sentence(s) without words: {empty[:5]}')
  return out


def _read_conllu(path: str) -> list[dict[str, Any]]:
  out, rows, comments, start = [], [], [], 1
  with _open(path) as f:
    lines = list(f) + ['\n']
  for line_no, line in enumerate(lines, 1):
    line = line.rstrip('\r\n')
    if not line.strip():
      if rows:
        words = [r[1] for r in rows if r[0].isdigit()]
        upos = [r[3] for r in rows if r[0].isdigit()]
        sent_id = next((c.split('=', 1)[1].strip() for c in comments
                        if c.startswith('# sent_id')), str(len(out) + 1))
        text = next((c.split('=', 1)[1].strip() for c in comments if c.startswith('# text')), None)
        out.append(_sentence(words, sent_id, text=text,
                             tags=None if any(t == '_' for t in upos) else upos,
                             rows=rows, comments=comments))
      elif comments:
        raise ValueError(f'{path}:{start}: comment lines without a sentence')
      rows, comments, start = [], [], line_no + 1
      continue
    if line.startswith('#'):
      comments.append(line)
      continue
    cols = line.split('\t')
    if len(cols) != 10:
      raise ValueError(f'{path}:{line_no}: expected 10 tab-separated CoNLL-U columns, got {len(cols)}')
    if '.' in cols[0]:
      continue  # empty node of the enhanced graph: not part of the basic tree
    if not re.fullmatch(r'\d+(-\d+)?', cols[0]):
      raise ValueError(f'{path}:{line_no}: bad ID {cols[0]!r}')
    if cols[0].isdigit() and int(cols[0]) != sum(r[0].isdigit() for r in rows) + 1:
      raise ValueError(f'{path}:{line_no}: word ID {cols[0]} out of sequence')
    rows.append(cols)
  return out


def to_conllu(sentence: Mapping[str, Any], heads: Sequence[int], relations: Sequence[str],
              upos: Sequence[str] | None = None) -> str:
  """One sentence as CoNLL-U (HEAD 1-based, 0 = ROOT; DEPREL; UPOS when given; DEPS '_').

  Args:
    sentence: a `read_sentences` record (its CoNLL-U rows and comments are kept when present).
    heads: 0-based heads, -1 = ROOT (the `trees` convention).
    relations: relation name of each word.
    upos: UPOS of each word (None: keep the input's, '_' if none).

  Returns:
    The sentence's lines, ending with the blank line.
  """
  words = sentence['words']
  if sentence.get('comments'):
    lines = list(sentence['comments'])
  else:
    lines = [f'# sent_id = {sentence["sent_id"]}', f'# text = {sentence["text"]}']
  rows = sentence.get('rows') or [[str(i + 1), w, '_', '_', '_', '_', '_', '_', '_', '_']
                                  for i, w in enumerate(words)]
  m = 0
  for row in rows:
    row = list(row)
    if row[0].isdigit():
      row[6], row[7], row[8] = str(int(heads[m]) + 1), relations[m], '_'
      if upos is not None:
        row[3] = upos[m]
      m += 1
    lines.append('\t'.join(row))
  return '\n'.join(lines) + '\n\n'


def _bucket(n: int) -> int:
  return max(8, 1 << (n - 1).bit_length())


def parse(trained, sentences: Sequence[Mapping[str, Any]], *, batch_size: int = 32,
          ) -> tuple[list[tuple[np.ndarray, list[str], list[str] | None]], dict[str, float]]:
  """Parses sentences with a trained parser (restored by `training.load_trained`), on device, batched.

  (`analysis.parsing.parse_file` restores a workdir and writes CoNLL-U; `analysis.parsing.annotate`
  caches the heads of a dataset for `config.data.trees`.)

  Sentences are sorted by length and padded to power-of-two lengths (>= 8) so each shape compiles
  once; trees are decoded with `trees.mst` inside the jitted function. Tags: with
  `config.model.tag_input == 'gold'` the input's UPOS (CoNLL-U input) are used when EVERY sentence has
  them, else the tagger head's predictions; 'predicted' and 'none' models always use (and write)
  their own predicted UPOS.

  Args:
    trained: a `training.Trained` of a 'parser.biaffine' model.
    sentences: `read_sentences` records.
    batch_size: sentences per device batch.

  Returns:
    ([(heads int32[n] (-1 = ROOT), relation names, UPOS names or None)] in input order,
     stats {'sentences', 'words', 'seconds', 'sentences_per_second' (all, compilation included),
     'seconds_first_batches' (the first batch of each padded length, compilation included),
     'sentences_per_second_compiled' (the other batches; NaN when there are none)}).
  """
  model = trained.model
  if not isinstance(model, BiaffineParser):
    raise TypeError(f'the workdir holds a {type(model).__name__}, not a parser.biaffine model')
  extras = trained.extras or {}
  if 'relation_names' not in extras:
    raise KeyError('the workdir extras.json has no "relation_names": was it trained on '
                   'universal_dependencies data?')
  relation_names = list(extras['relation_names'])
  tag_vocab = extras.get('tag_vocab')
  tag_names = list(getattr(tag_vocab, 'tokens', tag_vocab or []))
  check_data_sizes({'num_tags': model.num_tags, 'num_relations': model.num_relations},
                   tag_vocab=tag_names if model.num_tags else None, relation_names=relation_names)
  data_config = trained.config.get('data', {})
  lowercase = bool(data_config.get('lowercase', False))
  max_chars = int(data_config.get('max_chars', 0)) if model.char_dim > 0 else 0
  if model.char_dim > 0 and max_chars < 3:
    raise ValueError(f'the parser in this workdir reads characters (model.char_dim={model.char_dim}) '
                     f'but its config has data.max_chars={max_chars}')
  use_tags = (model.tag_input == 'gold' and sentences and
              all(s.get('tags') is not None for s in sentences))
  if use_tags:
    unknown = sorted({t for s in sentences for t in s['tags']} - set(tag_names))
    if unknown:
      raise ValueError(f'input UPOS tags {unknown} are not in the model tag vocabulary {tag_names}')

  @jax.jit
  def run(variables, batch):
    outputs = model.apply(variables, batch, train=False)
    heads, relations = decode(outputs, batch['lengths'])
    return heads, relations, outputs.get('tags', jnp.zeros_like(heads))

  variables = jax.device_put(trained.variables)
  order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]['words']))
  results: list[Any] = [None] * len(sentences)
  seen_shapes, first_seconds, first_sentences = set(), 0.0, 0
  start = time.perf_counter()
  for k in range(0, len(order), batch_size):
    index = order[k:k + batch_size]
    n = _bucket(max(len(sentences[i]['words']) for i in index))
    batch = {'tokens': np.zeros((batch_size, n), np.int32),
             'lengths': np.ones((batch_size,), np.int32)}  # padding rows: one word, ignored
    if use_tags:
      batch['tags'] = np.zeros((batch_size, n), np.int32)
    if max_chars:
      batch['chars'] = np.zeros((batch_size, n, max_chars), np.int32)
    for row, i in enumerate(index):
      words = sentences[i]['words']
      if max_chars:
        batch['chars'][row, :len(words)] = text.char_ids(words, max_chars)
      words = [w.lower() for w in words] if lowercase else words
      batch['tokens'][row, :len(words)] = trained.vocab.encode(words)
      batch['lengths'][row] = len(words)
      if use_tags:
        batch['tags'][row, :len(words)] = [tag_names.index(t) for t in sentences[i]['tags']]
    t0 = time.perf_counter()
    heads, relations, tags = jax.device_get(run(variables, batch))
    if n not in seen_shapes:  # the first batch of a padded length includes its compilation
      seen_shapes.add(n)
      first_seconds += time.perf_counter() - t0
      first_sentences += len(index)
    for row, i in enumerate(index):
      length = len(sentences[i]['words'])
      upos = ([tag_names[int(t)] for t in tags[row, :length]]
              if model.num_tags and tag_names else None)
      if use_tags:
        upos = None  # keep the input's
      results[i] = (heads[row, :length],
                    [relation_names[int(r)] for r in relations[row, :length]], upos)
  seconds = time.perf_counter() - start
  rest = len(sentences) - first_sentences
  stats = {'sentences': len(sentences), 'words': sum(len(s['words']) for s in sentences),
           'seconds': seconds, 'sentences_per_second': len(sentences) / max(seconds, 1e-9),
           'seconds_first_batches': first_seconds,
           'sentences_per_second_compiled': (rest / max(seconds - first_seconds, 1e-9) if rest
                                             else float('nan'))}
  return results, stats


def check_data_sizes(model_config, *, tag_vocab=None, relation_names=None, num_classes=0) -> None:
  """Checks `config.model.num_tags` / `num_relations` against the data's vocabularies.

  The model's tag and relation tables must match the data exactly: a smaller table would give NaN
  losses (out-of-range ids), a larger one would let the tagger predict ids with no tag name.

  Raises:
    ValueError naming the config key and the value to set.
  """
  model_config = model_config if model_config is not None else {}
  num_tags = int(model_config.get('num_tags', 0))
  if tag_vocab is not None and num_tags and len(tag_vocab) != num_tags:
    raise ValueError(f'config.model.num_tags={num_tags} but the data has {len(tag_vocab)} tags '
                     f'(<pad>, <unk> and {len(tag_vocab) - 2} seen in train): set '
                     f'config.model.num_tags={len(tag_vocab)}')
  num_relations = int(model_config.get('num_relations', 0)) or int(num_classes)
  if relation_names is not None and len(relation_names) != num_relations:
    raise ValueError(f'config.model.num_relations={num_relations} but the data has '
                     f'{len(relation_names)} relations (incl. <pad>, <unk>): set '
                     f'config.model.num_relations={len(relation_names)}')


registry.register('parser.biaffine')(build)
