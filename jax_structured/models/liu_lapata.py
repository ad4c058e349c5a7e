"""Liu & Lapata (2018), "Learning Structured Text Representations" (TACL 6): the three task models.

- `SentenceClassifier` ('liu_lapata.sentence_classifier'): embeddings -> BiLSTM -> attention -> pooling
  -> MLP (the sentence model of sec. 3.1, used on SST and the synthetic default job).
- `DocumentClassifier` ('liu_lapata.document_classifier'): the hierarchical model of sec. 3.3: a
  sentence BiLSTM + attention + pooling gives sentence vectors v_i, a document BiLSTM + attention +
  pooling gives the document vector y, then the classifier (Table 4).
- `PairClassifier` ('liu_lapata.pair_classifier'): sec. 4.1, SNLI: structured intra-sentence attention
  on premise and hypothesis, then the decomposable inter-attention of Parikh et al. (2016), eqs. 20-23
  (Table 1).

`attention` (per level for documents) picks the Table 1 / Table 4 variant:
'none' (BiLSTM outputs used directly), 'simple' (softmax intra-attention, eqs. 1-3), 'structured'
(non-projective matrix-tree marginals, eqs. 7-18, "matrix inversion") and 'inside_outside'
(projective marginals of Kim et al. 2017). Structured variants sow `arc_scores`, `root_scores`,
`lengths` (+ marginals) into 'intermediates' (documents: `sentence_*` and `document_*`; pairs:
`premise_*` and `hypothesis_*`).

Batches follow docs/internals.md; models are called as
`model.apply(variables, batch, train=bool, rngs={'dropout': key})` and return logits [B, num_classes].
The word embedding table is the parameter `embed/embedding` (optimisers exclude it from L2).
"""
from typing import Any, Callable, Mapping, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jax_structured import nn as jsnn
from jax_structured.models import registry

# Variant name (configs, Tables 1 and 4) -> StructuredAttention normalizer.
ATTENTIONS = {'none': 'none', 'simple': 'softmax', 'structured': 'matrix_tree',
              'inside_outside': 'projective'}


def _normalizer(attention: str, key: str) -> str:
  if attention not in ATTENTIONS:
    raise ValueError(f'config.model.{key}={attention!r}; valid: {sorted(ATTENTIONS)}')
  return ATTENTIONS[attention]


class _Encoder(nn.Module):
  """BiLSTM + (structured) attention over one level of text (words of sentences, or sentences).

  Returns r [..., n, D] (D = 2 * semantic_size with attention, 2 * hidden_size without).
  """
  hidden_size: int
  semantic_size: int
  attention: str
  attention_key: str
  num_layers: int = 1
  single_root: bool = True

  @nn.compact
  def __call__(self, x: jax.Array, lengths: jax.Array, *, train: bool, sow_prefix: str = '',
               sow_splits=()) -> jax.Array:
    normalizer = _normalizer(self.attention, self.attention_key)
    hidden = jsnn.BiLSTM(self.hidden_size, num_layers=self.num_layers, name='bilstm')(
        x, lengths, deterministic=not train)
    return jsnn.StructuredAttention(self.semantic_size, normalizer=normalizer,
                                    single_root=self.single_root, name='attention')(
                                        hidden, lengths, sow_prefix=sow_prefix,
                                        sow_splits=sow_splits)


def _classifier(x: jax.Array, mlp_hidden: int, num_classes: int, dropout_rate: float, train: bool,
                ) -> jax.Array:
  """Dropout on the output layer, then an optional hidden ReLU layer, then the logits."""
  x = nn.Dropout(dropout_rate)(x, deterministic=not train)
  if mlp_hidden:
    x = nn.relu(nn.Dense(mlp_hidden, name='hidden')(x))
    x = nn.Dropout(dropout_rate)(x, deterministic=not train)
  return nn.Dense(num_classes, name='logits')(x)


def _embed(module: nn.Module, tokens: jax.Array, train: bool) -> jax.Array:
  return jsnn.WordEmbedding(module.vocab_size, module.embedding_dim,
                            embedding_init=module.embedding_init, freeze=module.freeze_embeddings,
                            dropout_rate=module.dropout_rate, name='embed')(
                                tokens, deterministic=not train)


@registry.register('liu_lapata.sentence_classifier')
class SentenceClassifier(nn.Module):
  """Sentence model (sec. 3.1): embeddings -> BiLSTM -> attention -> pooling -> MLP.

  Batch: tokens [B, T] int32, lengths [B] int32. Returns logits [B, num_classes].

  Attributes:
    vocab_size, num_classes, embedding_init: filled in by `models.build`.
    embedding_dim: word vector size.
    freeze_embeddings: keep the (pretrained) word vectors fixed.
    hidden_size: BiLSTM hidden size per direction.
    semantic_size: per-direction semantic part of the BiLSTM output (eq. 7); the rest is structure.
    num_layers: stacked BiLSTM layers.
    attention: 'none' | 'simple' | 'structured' | 'inside_outside'.
    pooling: 'max' | 'mean' | 'sum' | 'attention' over the updated word vectors.
    mlp_hidden: hidden ReLU layer of the classifier (0: a linear classifier).
    dropout_rate: dropout on the input (embeddings) and output (classifier input) layers.
    single_root: one word hangs from ROOT (the paper's formulation).
  """
  vocab_size: int
  num_classes: int
  embedding_init: Optional[Callable[..., Any]] = None
  embedding_dim: int = 200
  freeze_embeddings: bool = False
  hidden_size: int = 100
  semantic_size: int = 75
  num_layers: int = 1
  attention: str = 'structured'
  pooling: str = 'max'
  mlp_hidden: int = 0
  dropout_rate: float = 0.3
  single_root: bool = True

  @nn.compact
  def __call__(self, batch: Mapping[str, jax.Array], *, train: bool = False) -> jax.Array:
    tokens, lengths = batch['tokens'], jnp.asarray(batch['lengths'], jnp.int32)
    x = _embed(self, tokens, train)
    r = _Encoder(self.hidden_size, self.semantic_size, self.attention, 'attention',
                 num_layers=self.num_layers, single_root=self.single_root, name='encoder')(
                     x, lengths, train=train)
    v = jsnn.Pooling(self.pooling, name='pooling')(r, lengths)
    return _classifier(v, self.mlp_hidden, self.num_classes, self.dropout_rate, train)


@registry.register('liu_lapata.document_classifier')
class DocumentClassifier(nn.Module):
  """Hierarchical document model (sec. 3.3, Figure 4; Table 4).

  Words of each sentence: BiLSTM -> `sentence_attention` -> pooling gives v_i; sentences of the
  document: BiLSTM -> `document_attention` -> pooling gives y; then the classifier. Sentence slots at or
  past `num_sentences` and empty sentences are masked; a document with 0 sentences (only padding
  examples, `example_mask` 0) gives finite logits. Real documents must have >= 1 sentence: check batches
  with `validate_batch` at data time.

  Batch: tokens [B, S, T], sentence_lengths [B, S], num_sentences [B]. Returns logits [B, num_classes].

  Attributes:
    as `SentenceClassifier` (hidden_size and semantic_size are used at both levels, as in the paper:
    100 = 75 semantic + 25 structure), plus
    sentence_attention / document_attention: 'none' | 'simple' | 'structured' | 'inside_outside'.
  """
  vocab_size: int
  num_classes: int
  embedding_init: Optional[Callable[..., Any]] = None
  embedding_dim: int = 200
  freeze_embeddings: bool = False
  hidden_size: int = 100
  semantic_size: int = 75
  num_layers: int = 1
  sentence_attention: str = 'structured'
  document_attention: str = 'structured'
  pooling: str = 'max'
  mlp_hidden: int = 0
  dropout_rate: float = 0.3
  single_root: bool = True

  @nn.compact
  def __call__(self, batch: Mapping[str, jax.Array], *, train: bool = False) -> jax.Array:
    tokens = batch['tokens']
    sentence_lengths = jnp.asarray(batch['sentence_lengths'], jnp.int32)
    num_sentences = jnp.asarray(batch['num_sentences'], jnp.int32)
    # Sentence slots past num_sentences never contribute, whatever their recorded length.
    slot_real = jsnn.sequence_mask(num_sentences, tokens.shape[-2])
    sentence_lengths = jnp.where(slot_real, sentence_lengths, 0)
    x = _embed(self, tokens, train)  # [B, S, T, E]
    words = _Encoder(self.hidden_size, self.semantic_size, self.sentence_attention,
                     'sentence_attention', num_layers=self.num_layers, single_root=self.single_root,
                     name='sentence_encoder')(x, sentence_lengths, train=train, sow_prefix='sentence_')
    v = jsnn.Pooling(self.pooling, name='sentence_pooling')(words, sentence_lengths)  # [B, S, D]
    sentences = _Encoder(self.hidden_size, self.semantic_size, self.document_attention,
                         'document_attention', num_layers=self.num_layers,
                         single_root=self.single_root, name='document_encoder')(
                             v, num_sentences, train=train, sow_prefix='document_')
    y = jsnn.Pooling(self.pooling, name='document_pooling')(sentences, num_sentences)
    return _classifier(y, self.mlp_hidden, self.num_classes, self.dropout_rate, train)


@registry.register('liu_lapata.pair_classifier')
class PairClassifier(nn.Module):
  """Natural language inference model of sec. 4.1 (Table 1).

  A shared encoder (embeddings -> BiLSTM -> intra-sentence `attention`) gives r^p [n, D] and r^h [m, D]
  (premises and hypotheses are padded to max(n, m) and encoded in ONE pass over the stacked [2B, .]
  batch; the sown `premise_*` / `hypothesis_*` structures therefore have that common length);
  then, with F, G, H two-layer ReLU perceptrons (Parikh et al. 2016):
    o_ij = F(r^p_i)^T F(r^h_j)                                  (eq. 20)
    rbar^p_i = [r^p_i, sum_j softmax_j(o_ij) r^h_j]             (eq. 21)
    rbar^h_j = [r^h_j, sum_i softmax_i(o_ij) r^p_i]             (eq. 22)
    r^p = sum_i G(rbar^p_i),  r^h = sum_j G(rbar^h_j)           (eq. 23, over real words)
    logits = W H([r^p, r^h]) + b                                (softmax layer)
  (the printed eqs. 21-22 omit the aligned vectors r^h_j / r^p_i and mistype the sum bounds.)

  Batch: premise [B, n], premise_lengths [B], hypothesis [B, m], hypothesis_lengths [B].

  Attributes:
    as `SentenceClassifier`, with mlp_hidden the size of every layer of F, G and H (paper: 200) and
    dropout_rate applied to the embeddings and to the input of every perceptron layer.
  """
  vocab_size: int
  num_classes: int
  embedding_init: Optional[Callable[..., Any]] = None
  embedding_dim: int = 300
  freeze_embeddings: bool = False
  hidden_size: int = 150
  semantic_size: int = 100
  num_layers: int = 1
  attention: str = 'structured'
  mlp_hidden: int = 200
  dropout_rate: float = 0.2
  single_root: bool = True

  @nn.compact
  def __call__(self, batch: Mapping[str, jax.Array], *, train: bool = False) -> jax.Array:
    premise_lengths = jnp.asarray(batch['premise_lengths'], jnp.int32)
    hypothesis_lengths = jnp.asarray(batch['hypothesis_lengths'], jnp.int32)
    embed = jsnn.WordEmbedding(self.vocab_size, self.embedding_dim,
                               embedding_init=self.embedding_init, freeze=self.freeze_embeddings,
                               dropout_rate=self.dropout_rate, name='embed')
    encoder = _Encoder(self.hidden_size, self.semantic_size, self.attention, 'attention',
                       num_layers=self.num_layers, single_root=self.single_root, name='encoder')
    batch_size, n = batch['premise'].shape
    m = batch['hypothesis'].shape[1]
    width = max(n, m)
    tokens = jnp.concatenate([jnp.pad(batch['premise'], ((0, 0), (0, width - n))),
                              jnp.pad(batch['hypothesis'], ((0, 0), (0, width - m)))], 0)
    encoded = encoder(embed(tokens, deterministic=not train),
                      jnp.concatenate([premise_lengths, hypothesis_lengths], 0), train=train,
                      sow_splits=(('premise_', batch_size), ('hypothesis_', batch_size)))
    premise, hypothesis = encoded[:batch_size, :n], encoded[batch_size:, :m]

    def mlp(name):
      return jsnn.MLP((self.mlp_hidden, self.mlp_hidden), dropout_rate=self.dropout_rate, name=name)

    attend = mlp('attend')  # F
    scores = jnp.einsum('bid,bjd->bij', attend(premise, deterministic=not train),
                        attend(hypothesis, deterministic=not train))  # eq. 20
    beta, alpha = jsnn.inter_attention(scores, premise, hypothesis, premise_lengths,
                                       hypothesis_lengths)  # eqs. 21-22
    compare = mlp('compare')  # G
    premise_sum = jsnn.masked_sum(
        compare(jnp.concatenate([premise, beta], -1), deterministic=not train), premise_lengths)
    hypothesis_sum = jsnn.masked_sum(
        compare(jnp.concatenate([hypothesis, alpha], -1), deterministic=not train),
        hypothesis_lengths)  # eq. 23
    aggregated = mlp('aggregate')(jnp.concatenate([premise_sum, hypothesis_sum], -1),
                                  deterministic=not train)  # H
    return nn.Dense(self.num_classes, name='logits')(aggregated)


def validate_batch(batch: Mapping[str, Any], kind: str) -> None:
  """Host-side check of a numpy batch before it reaches a model (call it at data time).

  Real examples (`example_mask` 1, or all when absent) must have >= 1 token (sentences, pairs) or
  >= 1 sentence (documents); sentence slots past `num_sentences` must be empty; lengths must fit the
  padded shapes. Padding examples (`example_mask` 0) may be empty.

  Raises:
    ValueError naming the batch key and example index.
  """
  example_mask = batch.get('example_mask')
  keys = {'sentence': [('tokens', 'lengths')], 'pair': [('premise', 'premise_lengths'),
                                                       ('hypothesis', 'hypothesis_lengths')],
          'document': [('tokens', 'num_sentences')]}
  if kind not in keys:
    raise ValueError(f'validate_batch: unknown kind {kind!r}; valid: {sorted(keys)}')
  for array_key, length_key in keys[kind]:
    for key in (array_key, length_key):
      if key not in batch:
        raise ValueError(f'{kind} batch is missing key {key!r} (has {sorted(batch)})')
    lengths = np.asarray(batch[length_key])
    axis = -2 if kind == 'document' else -1
    limit = np.shape(batch[array_key])[axis]
    real = np.ones(lengths.shape, bool) if example_mask is None else np.asarray(example_mask) > 0
    bad = np.flatnonzero(real & (lengths <= 0))
    if bad.size:
      unit = 'sentences' if kind == 'document' else 'tokens'
      raise ValueError(f'batch[{length_key!r}][{bad[0]}] = {lengths[bad[0]]}: example {bad[0]} has no '
                       f'{unit} (an empty {"document" if kind == "document" else "text"} would be '
                       'silently ignored); drop it when loading the data')
    over = np.flatnonzero((lengths < 0) | (lengths > limit))
    if over.size:
      raise ValueError(f'batch[{length_key!r}][{over[0]}] = {lengths[over[0]]} does not fit '
                       f'{array_key!r} padded to {limit}')
  if kind == 'document':
    sentence_lengths = np.asarray(batch['sentence_lengths'])
    num_sentences = np.asarray(batch['num_sentences'])
    slots = np.arange(sentence_lengths.shape[-1])[None, :]
    stray = np.argwhere((slots >= num_sentences[:, None]) & (sentence_lengths > 0))
    if stray.size:
      b, s = stray[0]
      raise ValueError(f"batch['sentence_lengths'][{b}, {s}] = {sentence_lengths[b, s]} but "
                       f"batch['num_sentences'][{b}] = {num_sentences[b]}")
    too_long = np.argwhere(sentence_lengths > np.shape(batch['tokens'])[-1])
    if too_long.size:
      b, s = too_long[0]
      raise ValueError(f"batch['sentence_lengths'][{b}, {s}] = {sentence_lengths[b, s]} exceeds the "
                       f"padded sentence length {np.shape(batch['tokens'])[-1]}")
