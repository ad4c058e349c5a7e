"""Task heads, each written once, over any registered encoder (`models.encoders`).

Every head embeds token ids with ONE embedding layer (`embed`: pretrained init, freezing, input dropout;
its table `embed/embedding` is what the optimisers exclude from L2 and scale), runs the encoder it holds
and never knows which one that is:

- `SentenceClassifier` ('classifier.sentence'): encoder -> pooling (max / mean / sum / attention / the
  encoder's own sentence vector) -> classifier (dropout, optional hidden ReLU layer + dropout, logits).
- `PairClassifier` ('classifier.pair'): premise and hypothesis through the encoder (shared by default:
  both texts stacked into one pass), then `interaction`::

    'features':     q = [u; v; u * v; |u - v|] of the pooled vectors (Yu et al. 2018, sec. 4.1; Tai et al.
                    2015; Bowman et al. 2016) -> classifier;
    'concat':       q = [u; v] -> classifier (Cheng et al. 2016, sec. 5.3);
    'decomposable': the inter-attention of Parikh et al. (2016) as Liu & Lapata (2018, eqs. 20-23) use it:
                    o_ij = F(r^p_i)^T F(r^h_j); rbar^p_i = [r^p_i, sum_j softmax_j(o_ij) r^h_j],
                    rbar^h_j = [r^h_j, sum_i softmax_i(o_ij) r^p_i]; r^p = sum_i G(rbar^p_i),
                    r^h = sum_j G(rbar^h_j); logits = W H([r^p, r^h]) + b (F, G, H two-layer ReLU MLPs).

  `fusion` = 'shallow' | 'deep' reads the hypothesis with an LSTMN that attends to the premise's tapes
  (Cheng et al. 2016, Fig. 3): the pair encoder it is; it needs the 'lstmn' encoder.
- `DocumentClassifier` ('classifier.document'), in one of two readings (`reading`)::

    'sentences': the encoder over the words of every sentence, pooling -> sentence vectors, a
                 `document_encoder` over the sentences, `document_pooling` -> classifier (Liu & Lapata
                 2018, sec. 3.3; Yang et al. 2016's HAN with attention pooling);
    'flat':      the document's sentences concatenated into ONE sequence (`flatten_documents`), read by
                 the encoder with the structure input 'boundaries' (`static_boundaries`), pooling ->
                 classifier (Luo & Zhu 2018 eq. 12; the 'luo_zhu.document_classifier' preset).

- `LanguageModel` ('language_model'): a CAUSAL encoder -> dropout -> softmax over the vocabulary
  (Cheng et al. 2016, sec. 5.1); reads `context` tokens first when the batch has them.

Batches (docs/internals.md): sentence `tokens [B, T]`, `lengths [B]`; pair `premise [B, n]`,
`premise_lengths`, `hypothesis [B, m]`, `hypothesis_lengths`; document `tokens [B, S, T]`,
`sentence_lengths [B, S]`, `num_sentences [B]` (the 'flat' reading also takes `tokens [B, N]`, `lengths [B]`,
`boundaries [B, N]`, and per-token `punctuation` flags); lm `inputs [B, T]` (+ `context [B, C]`). An encoder's
STRUCTURE_INPUTS are taken from the batch under the same names (pairs: `premise_<key>` /
`hypothesis_<key>`); a missing one is an error naming the key. Every head returns logits
([B, num_classes], or [B, T, vocab] for the language model).

Config: `config.model.name` is the head, `config.model.encoder` (a ConfigDict with `name`) the encoder,
the other `config.model` keys the head's fields (`models.registry.build`). Paper families register
presets with the papers' flat keys (e.g. 'liu_lapata.sentence_classifier') that build these heads.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured import nn as jsnn
from jax_structured.models import encoders as encoders_lib
from jax_structured.models import registry
from jax_structured.nn import lstmn as lstmn_lib

POOLINGS = ('max', 'mean', 'sum', 'attention', 'encoder')
INTERACTIONS = ('features', 'concat', 'decomposable')
FUSIONS = ('none', 'shallow', 'deep')
READINGS = ('sentences', 'flat')
STATIC_BOUNDARIES = ('sentences', 'punctuation')


def embedder(module: nn.Module) -> jsnn.WordEmbedding:
  """The head's one word-embedding layer `embed` (input dropout inside): call it as
  `emb(tokens int [...], deterministic=not train) -> float [..., embedding_dim]`. Create it once per call
  of the head (it may be applied to several inputs). `module` has `_Head`'s embedding fields (vocab_size,
  embedding_dim, embedding_init, freeze_embeddings, embedding_dropout, static_channel): every head here
  and `translation.Seq2Seq`'s source side."""
  return jsnn.WordEmbedding(module.vocab_size, module.embedding_dim,
                            embedding_init=module.embedding_init, freeze=module.freeze_embeddings,
                            dropout_rate=module.embedding_dropout, static_channel=module.static_channel,
                            name='embed')


def embed(module: nn.Module, tokens: jax.Array, train: bool) -> jax.Array:
  """`embedder(module)` applied once: int [...] -> float [..., embedding_dim]."""
  return embedder(module)(tokens, deterministic=not train)


def classify(x: jax.Array, *, mlp_hidden: int, num_classes: int, dropout_rate: float,
             train: bool) -> jax.Array:
  """The classifier every head shares: dropout, [hidden ReLU layer `hidden` + dropout], `logits`.

  x [..., D] -> logits [..., num_classes]. Called inside a head's compact method (its layers are the
  head's `hidden` and `logits`).
  """
  x = nn.Dropout(dropout_rate)(x, deterministic=not train)
  if mlp_hidden:
    x = nn.relu(nn.Dense(mlp_hidden, name='hidden')(x))
    x = nn.Dropout(dropout_rate)(x, deterministic=not train)
  return nn.Dense(num_classes, name='logits')(x)


def structure_inputs(encoder: nn.Module, batch: Mapping[str, jax.Array], prefix: str = '',
                     ) -> Optional[dict[str, jax.Array]]:
  """{key: batch[prefix + key]} for the encoder's STRUCTURE_INPUTS (None when it needs none)."""
  keys = getattr(encoder, 'STRUCTURE_INPUTS', ())
  if not keys:
    return None
  missing = [prefix + k for k in keys if prefix + k not in batch]
  if missing:
    raise KeyError(f'encoder {type(encoder).__name__} needs batch key(s) {missing} (structure inputs; '
                   f'the batch has {sorted(batch)}): set config.data so the loader provides them, e.g. '
                   "data.trees for parsed heads")
  return {k: batch[prefix + k] for k in keys}


def pool(kind: str, output: encoders_lib.EncoderOutput, lengths: jax.Array, *, name: str) -> jax.Array:
  """Pools an encoder's output to [..., D]: `kind` in POOLINGS ('encoder': its own sentence vector)."""
  if kind == 'encoder':
    if output.sentence is None:
      raise ValueError("config.model pooling='encoder' but this encoder defines no sentence vector; "
                       f'use one of {POOLINGS[:-1]}')
    return output.sentence
  if kind not in POOLINGS:
    raise ValueError(f'unknown pooling {kind!r}; valid: {POOLINGS}')
  return jsnn.Pooling(kind, name=name)(output.states, lengths)


class _Head(nn.Module):
  """Fields every head has first (filled in by `models.build`: vocab_size, num_classes, embedding_init).

  Attributes:
    encoder: the encoder module (built from `config.model.encoder`).
    embedding_dim: word vector size.
    freeze_embeddings: keep the (pretrained) word vectors fixed.
    embedding_dropout: dropout on the looked-up word vectors (the input layer).
    dropout_rate: dropout on the classifier's input and hidden layer.
    mlp_hidden: hidden ReLU layer of the classifier (0: a linear classifier).
    static_channel: Kim (2014)'s CNN-multichannel input: a second, frozen copy of the word vectors
      (`embed/static_embedding`) added to the fine-tuned ones (`nn.WordEmbedding`: equal to applying
      the encoder's first linear layer to both channels and adding the results).
  """
  encoder: nn.Module
  vocab_size: int
  num_classes: int
  embedding_init: Optional[Callable[..., Any]] = None
  embedding_dim: int = 300
  freeze_embeddings: bool = False
  embedding_dropout: float = 0.0
  dropout_rate: float = 0.0
  mlp_hidden: int = 0
  static_channel: bool = False


class SentenceClassifier(_Head):
  """Sentence classification: embed -> encoder -> `pooling` -> classifier. Returns logits [B, C].

  With `phrase_logits` and `train=True` it returns {'logits': [B, C], 'node_logits': [B, N, C]}: the
  same classifier (dropout, `hidden`, `logits`) also applied to every tree node's state
  (`EncoderOutput.nodes`, node-id order, labelled by the batch's `tree_labels`), for phrase-level
  supervision (Tai et al. 2015 sec. 5.1: one softmax classifier over every node; the 'sentence' task
  adds the loss term with `config.train.phrase_loss_weight`). Evaluation (`train=False`) returns the
  sentence logits only.

  Besides the attributes of every head (`embedding_dim`, `encoder`, `mlp_hidden`, ...):

  Attributes:
    pooling: one of POOLINGS.
    phrase_logits: also classify the encoder's tree nodes in training (an encoder with `nodes`:
      'tree_lstm', 'ap_dcnn'; its node states must be the size of the pooled sentence vector, e.g.
      pooling 'encoder').
  """
  pooling: str = 'max'
  phrase_logits: bool = False

  @nn.compact
  def __call__(self, batch: Mapping[str, jax.Array], *, train: bool = False) -> Any:
    lengths = jnp.asarray(batch['lengths'], jnp.int32)
    x = embed(self, batch['tokens'], train)
    output = self.encoder(x, lengths, structure=structure_inputs(self.encoder, batch), train=train)
    v = pool(self.pooling, output, lengths, name='pooling')
    if not (self.phrase_logits and train):
      return classify(v, mlp_hidden=self.mlp_hidden, num_classes=self.num_classes,
                      dropout_rate=self.dropout_rate, train=train)
    if output.nodes is None:
      raise ValueError(f'config.model.phrase_logits=True but encoder {type(self.encoder).__name__} defines '
                       "no tree node states (EncoderOutput.nodes); use 'tree_lstm' or 'ap_dcnn', or set "
                       'phrase_logits=False')
    if output.nodes.shape[-1] != v.shape[-1]:
      raise ValueError(f'config.model.phrase_logits=True: the tree nodes have {output.nodes.shape[-1]} '
                       f'features but the classifier reads {v.shape[-1]} (pooling {self.pooling!r}); use '
                       "pooling='encoder' so that nodes and sentence share the classifier")
    both = jnp.concatenate([v[:, None], output.nodes.astype(v.dtype)], 1)  # [B, 1 + N, D]: one classifier
    logits = classify(both, mlp_hidden=self.mlp_hidden, num_classes=self.num_classes,
                      dropout_rate=self.dropout_rate, train=train)
    return {'logits': logits[:, 0], 'node_logits': logits[:, 1:]}


class PairClassifier(_Head):
  """Sentence-pair classification (NLI, paraphrase). Returns logits [B, C].

  Besides the attributes of every head (`embedding_dim`, `encoder`, `mlp_hidden`, ...):

  Attributes:
    hypothesis_encoder: a second encoder for the hypothesis (None: the premise's encoder is shared and
      both texts go through it in one stacked pass).
    interaction: one of INTERACTIONS (module docstring).
    fusion: one of FUSIONS; 'shallow' / 'deep' need the 'lstmn' encoder (Cheng et al. 2016).
    pooling: one of POOLINGS (for 'features' and 'concat').
  """
  hypothesis_encoder: Optional[nn.Module] = None
  interaction: str = 'features'
  fusion: str = 'none'
  pooling: str = 'max'

  @nn.compact
  def __call__(self, batch: Mapping[str, jax.Array], *, train: bool = False) -> jax.Array:
    if self.interaction not in INTERACTIONS:
      raise ValueError(f'config.model.interaction={self.interaction!r}; valid: {INTERACTIONS}')
    if self.fusion not in FUSIONS:
      raise ValueError(f'config.model.fusion={self.fusion!r}; valid: {FUSIONS}')
    premise_lengths = jnp.asarray(batch['premise_lengths'], jnp.int32)
    hypothesis_lengths = jnp.asarray(batch['hypothesis_lengths'], jnp.int32)
    emb = embedder(self)
    embed_tokens = lambda tokens: emb(tokens, deterministic=not train)
    premise, hypothesis = self._encode(batch, embed_tokens, premise_lengths, hypothesis_lengths, train)
    if self.interaction == 'decomposable':
      return self._decomposable(premise.states, hypothesis.states, premise_lengths,
                                hypothesis_lengths, train)
    u = pool(self.pooling, premise, premise_lengths, name='premise_pooling')
    v = pool(self.pooling, hypothesis, hypothesis_lengths, name='hypothesis_pooling')
    features = [u, v] if self.interaction == 'concat' else [u, v, u * v, jnp.abs(u - v)]
    return classify(jnp.concatenate(features, -1), mlp_hidden=self.mlp_hidden,
                    num_classes=self.num_classes, dropout_rate=self.dropout_rate, train=train)

  def _encode(self, batch, embed_tokens, premise_lengths, hypothesis_lengths, train):
    """(premise, hypothesis) EncoderOutputs."""
    premise_tokens, hypothesis_tokens = batch['premise'], batch['hypothesis']
    if self.fusion != 'none':
      if not isinstance(self.encoder, encoders_lib.LSTMNEncoder) or self.encoder.cell != 'lstmn':
        raise ValueError(f"config.model.fusion={self.fusion!r} needs the 'lstmn' encoder with "
                         "cell='lstmn' (Cheng et al. 2016)")
      p_hidden, p_memory = self.encoder.tapes(embed_tokens(premise_tokens), premise_lengths,
                                              train=train)
      h_hidden = lstmn_lib.FusionLSTMN(self.encoder.hidden_size, self.fusion,
                                       name='hypothesis_decoder')(
                                           embed_tokens(hypothesis_tokens), hypothesis_lengths,
                                           p_hidden, p_memory, premise_lengths)
      return encoders_lib.EncoderOutput(p_hidden), encoders_lib.EncoderOutput(h_hidden)
    if self.hypothesis_encoder is not None:
      premise = self.encoder(embed_tokens(premise_tokens), premise_lengths,
                             structure=structure_inputs(self.encoder, batch, 'premise_'), train=train,
                             sow_prefix='premise_')
      hypothesis = self.hypothesis_encoder(
          embed_tokens(hypothesis_tokens), hypothesis_lengths,
          structure=structure_inputs(self.hypothesis_encoder, batch, 'hypothesis_'), train=train,
          sow_prefix='hypothesis_')
      return premise, hypothesis
    # One pass over the stacked texts, padded to a common length.
    batch_size, n = premise_tokens.shape
    m = hypothesis_tokens.shape[1]
    width = max(n, m)

    def stack(p, h):
      pad = lambda a, length: jnp.pad(a, ((0, 0), (0, width - length)) + ((0, 0),) * (a.ndim - 2),
                                      constant_values=-1 if a.dtype.kind == 'i' else 0)
      return jnp.concatenate([pad(p, n), pad(h, m)], 0)

    tokens = jnp.concatenate([jnp.pad(premise_tokens, ((0, 0), (0, width - n))),
                              jnp.pad(hypothesis_tokens, ((0, 0), (0, width - m)))], 0)
    structure = None
    if getattr(self.encoder, 'STRUCTURE_INPUTS', ()):
      p_struct = structure_inputs(self.encoder, batch, 'premise_')
      h_struct = structure_inputs(self.encoder, batch, 'hypothesis_')
      structure = {k: stack(p_struct[k], h_struct[k]) for k in p_struct}
    output = self.encoder(embed_tokens(tokens),
                          jnp.concatenate([premise_lengths, hypothesis_lengths], 0),
                          structure=structure, train=train,
                          sow_splits=(('premise_', batch_size), ('hypothesis_', batch_size)))
    premise = encoders_lib.EncoderOutput(
        output.states[:batch_size, :n],
        None if output.sentence is None else output.sentence[:batch_size])
    hypothesis = encoders_lib.EncoderOutput(
        output.states[batch_size:, :m],
        None if output.sentence is None else output.sentence[batch_size:])
    return premise, hypothesis

  def _decomposable(self, premise, hypothesis, premise_lengths, hypothesis_lengths, train):
    """Liu & Lapata (2018) eqs. 20-23 (Parikh et al. 2016); the printed eqs. 21-22 omit the aligned
    vectors r^h_j / r^p_i and mistype the sum bounds."""
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


class FlatDocuments(NamedTuple):
  """`flatten_documents`' result; N = S * T.

  tokens: int32 [B, N] (0 past the document); lengths: int32 [B] (total words);
  sentence_ends: float32 [B, N] (1 at the last word of every sentence);
  sentence_index: int32 [B, N] (the sentence each flat position came from; S past the end);
  punctuation: float32 [B, N] 0/1 flags (0 past the end), or None when none were given.
  """
  tokens: jax.Array
  lengths: jax.Array
  sentence_ends: jax.Array
  sentence_index: jax.Array
  punctuation: Optional[jax.Array]


def flatten_documents(tokens: jax.Array, sentence_lengths: jax.Array, num_sentences: jax.Array,
                      punctuation: Optional[jax.Array] = None) -> FlatDocuments:
  """Concatenates each document's sentences into one token sequence.

  Args:
    tokens: int [B, S, T] (a document batch).
    sentence_lengths: int [B, S]; slots at or past num_sentences are ignored.
    num_sentences: int [B].
    punctuation: optional 0/1 [B, S, T] per-token flags (batch['punctuation'] of
      `config.data.punctuation`), moved to the same flat positions.

  Returns:
    `FlatDocuments`.
  """
  batch, slots, steps = tokens.shape
  slot_real = jsnn.sequence_mask(num_sentences, slots)
  lens = jnp.where(slot_real, jnp.asarray(sentence_lengths, jnp.int32), 0)
  ends = jnp.cumsum(lens, axis=-1)  # [B, S]
  total = ends[:, -1]
  n = jnp.arange(slots * steps)
  sent = jnp.sum(ends[:, None, :] <= n[None, :, None], axis=-1)  # [B, N]
  sent_c = jnp.minimum(sent, slots - 1)
  start = jnp.take_along_axis(ends - lens, sent_c, axis=1)
  pos = n[None, :] - start
  real = n[None, :] < total[:, None]
  pos_c = jnp.clip(pos, 0, steps - 1)
  rows = jnp.arange(batch)[:, None]
  flat = jnp.where(real, tokens[rows, sent_c, pos_c], 0)
  last = pos == jnp.take_along_axis(lens, sent_c, axis=1) - 1
  bounds = jnp.where(real & last, 1.0, 0.0)
  punct = None
  if punctuation is not None:
    punct = jnp.where(real & (jnp.asarray(punctuation)[rows, sent_c, pos_c] > 0), 1.0, 0.0)
  return FlatDocuments(flat.astype(jnp.int32), total.astype(jnp.int32), bounds,
                       jnp.where(real, sent, slots), punct)


class DocumentClassifier(_Head):
  """Document classification in one of two readings, `reading` (module docstring). Returns logits [B, C].

  'sentences' (hierarchical: Liu & Lapata 2018 sec. 3.3; Yang et al. 2016): the word-level encoder
  (attribute `sentence_encoder`) over [B, S, T] words -> `pooling` -> sentence vectors [B, S, D] ->
  `document_encoder` over the sentences -> `document_pooling` -> classifier. Sentence slots at or past
  `num_sentences` are masked whatever their recorded length; a document with 0 sentences (padding
  examples) gives finite logits. Sows with the prefixes `'sentence_'` and `'document_'`.

  'flat' (Luo & Zhu 2018 eq. 12): embed -> `flatten_documents` -> `encoder` (structure 'boundaries'
  and, when the batch has it, the int train 'step' for slope annealing) -> `pooling` -> classifier.
  The batch is a document batch or a flat one (`tokens [B, N]`, `lengths [B]`, `boundaries [B, N]`).
  Sows (prefix `'document_'`) what the encoder sows plus `document_tokens` and `document_sentence_ends`
  (flat [B, N]). MHS-RNN carries its states across sentence ends, which the 'sentences' reading cuts.

  Besides the attributes of every head (`encoder`: the flat reading's encoder; the builder passes the
  'sentences' reading's word-level encoder as `sentence_encoder` instead):

  Attributes:
    reading: one of READINGS.
    document_encoder, document_pooling: the 'sentences' reading's sentence level.
    pooling: one of POOLINGS (the 'sentences' reading: of each sentence's words).
    static_boundaries: the 'flat' reading's 'boundaries', one of STATIC_BOUNDARIES: 'sentences' (the last
      word of every sentence of the loader's split; HAN as Yang et al.) or 'punctuation' (those and every
      punctuation token, from batch['punctuation'] of `config.data.punctuation`: Luo & Zhu's p_t, eq. 2).
  """
  sentence_encoder: Optional[nn.Module] = None
  document_encoder: Optional[nn.Module] = None
  reading: str = 'sentences'
  pooling: str = 'max'
  document_pooling: str = 'max'
  static_boundaries: str = 'sentences'

  @nn.compact
  def __call__(self, batch: Mapping[str, jax.Array], *, train: bool = False) -> jax.Array:
    if self.reading == 'sentences':
      y = self._sentences(batch, train)
    elif self.reading == 'flat':
      y = self._flat(batch, train)
    else:
      raise ValueError(f'config.model.reading={self.reading!r}; valid: {READINGS}')
    return classify(y, mlp_hidden=self.mlp_hidden, num_classes=self.num_classes,
                    dropout_rate=self.dropout_rate, train=train)

  def _sentences(self, batch, train):
    """The document vector [B, D] of the hierarchical reading."""
    tokens = batch['tokens']
    sentence_lengths = jnp.asarray(batch['sentence_lengths'], jnp.int32)
    num_sentences = jnp.asarray(batch['num_sentences'], jnp.int32)
    slot_real = jsnn.sequence_mask(num_sentences, tokens.shape[-2])
    sentence_lengths = jnp.where(slot_real, sentence_lengths, 0)
    x = embed(self, tokens, train)  # [B, S, T, E]
    words = self.sentence_encoder(x, sentence_lengths, train=train, sow_prefix='sentence_',
                                  structure=structure_inputs(self.sentence_encoder, batch))
    v = pool(self.pooling, words, sentence_lengths, name='sentence_pooling')  # [B, S, D]
    sentences = self.document_encoder(v, num_sentences, train=train, sow_prefix='document_')
    return pool(self.document_pooling, sentences, num_sentences, name='document_pooling')

  def _flat(self, batch, train):
    """The document vector [B, D] of the flat reading."""
    flat, lengths, bounds = self._flat_inputs(batch)
    x = embed(self, flat, train)
    structure = {'boundaries': bounds}
    if 'step' in batch:
      structure['step'] = batch['step']
    output = self.encoder(x, lengths, structure=structure, train=train, sow_prefix='document_')
    return pool(self.pooling, output, lengths, name='pooling')

  def _flat_inputs(self, batch):
    """(tokens [B, N], lengths [B], static boundaries [B, N]) of a document or flat batch; sows the
    tokens and sentence ends."""
    if self.static_boundaries not in STATIC_BOUNDARIES:
      raise ValueError(f'config.model.static_boundaries={self.static_boundaries!r}; expected one of '
                       f'{STATIC_BOUNDARIES}')
    tokens = jnp.asarray(batch['tokens'])
    punct = batch.get('punctuation')
    if self.static_boundaries == 'punctuation' and punct is None:
      raise KeyError("config.model.static_boundaries='punctuation' needs per-token flags "
                     "batch['punctuation']: set config.data.punctuation='p' (Luo & Zhu) or 'keep', or "
                     "config.model.static_boundaries='sentences'")
    if punct is not None and jnp.shape(punct) != tokens.shape:
      raise ValueError(f"batch['punctuation'] has shape {jnp.shape(punct)}; expected the shape of "
                       f"batch['tokens'] {tokens.shape}")
    if tokens.ndim == 3:
      if 'sentence_lengths' not in batch or 'num_sentences' not in batch:
        raise KeyError("a document batch tokens [B, S, T] needs 'sentence_lengths' and 'num_sentences'")
      flat, lengths, ends, _, punct = flatten_documents(tokens, batch['sentence_lengths'],
                                                        batch['num_sentences'], punct)
    elif tokens.ndim == 2:
      if 'boundaries' not in batch:
        raise KeyError("a flat batch tokens [B, N] needs batch['boundaries'] [B, N] (1 at the last "
                       "token of each sentence) for the flat document reading")
      flat, lengths = tokens, jnp.asarray(batch['lengths'], jnp.int32)
      real = jsnn.sequence_mask(lengths, tokens.shape[1])
      ends = jnp.where(real, jnp.asarray(batch['boundaries'], jnp.float32), 0.0)
      if punct is not None:
        punct = jnp.where(real & (jnp.asarray(punct) > 0), 1.0, 0.0)
    else:
      raise ValueError(f"batch['tokens'] has shape {tokens.shape}: expected [B, S, T] documents or "
                       '[B, N] flat documents')
    self.sow('intermediates', 'document_tokens', flat)
    self.sow('intermediates', 'document_sentence_ends', ends)
    bounds = ends if self.static_boundaries == 'sentences' else jnp.maximum(ends, punct)
    return flat, lengths, bounds


class LanguageModel(_Head):
  """Language model: embed -> dropout -> causal encoder -> dropout -> `output` over the vocabulary.

  Returns logits [B, T, V] over the window `inputs` (the `context` positions, read first when the batch
  carries them, are excluded). `num_classes` is unused (the output layer spans the vocabulary).
  """

  @nn.compact
  def __call__(self, batch: Mapping[str, jax.Array], *, train: bool = False) -> jax.Array:
    if not getattr(self.encoder, 'CAUSAL', False):
      raise ValueError(f'config.model.encoder.name: {type(self.encoder).__name__} reads words to the '
                       'right of each position, so it cannot be a language model; use a causal '
                       f'encoder ({[n for n in encoders_lib.names() if encoders_lib.get(n).CAUSAL]})')
    tokens = batch['inputs']
    window = tokens.shape[1]
    if 'context' in batch:
      tokens = jnp.concatenate([batch['context'], tokens], axis=1)
    lengths = jnp.full((tokens.shape[0],), tokens.shape[1], jnp.int32)
    x = nn.Dropout(self.dropout_rate, deterministic=not train)(embed(self, tokens, train))
    h = self.encoder(x, lengths, train=train).states
    h = nn.Dropout(self.dropout_rate, deterministic=not train)(h[:, -window:])
    return nn.Dense(self.vocab_size, name='output')(h)


# --- Registration: generic heads configured by `config.model.encoder` ---------------------------------

HEADS = {'classifier.sentence': SentenceClassifier, 'classifier.pair': PairClassifier,
         'classifier.document': DocumentClassifier, 'language_model': LanguageModel}
_ENCODER_KEYS = {'classifier.pair': ('encoder', 'hypothesis_encoder'),
                 'classifier.document': ('encoder', 'document_encoder')}


def head_keys(head_name: str) -> list[str]:
  """Valid `config.model` keys of a generic head."""
  cls = HEADS[head_name]
  fields = set(registry.config_fields(cls)) - {'encoder', 'sentence_encoder'}
  return sorted(fields | set(_ENCODER_KEYS.get(head_name, ('encoder',))))


def _encoder_keys(head_name: str, config: Mapping[str, Any]) -> tuple[str, ...]:
  """The encoder sections of a head's config (the flat document reading has one, `encoder`)."""
  if head_name == 'classifier.document' and config.get('reading') == 'flat':
    return ('encoder',)
  return _ENCODER_KEYS.get(head_name, ('encoder',))


def build_head(head_name: str, config: Mapping[str, Any], *, vocab_size: int, num_classes: int,
               embeddings: Optional[Any] = None, encoders: Optional[Mapping[str, nn.Module]] = None,
               model_name: Optional[str] = None) -> nn.Module:
  """Instantiates the head `head_name` from `config` (a `config.model`-like mapping).

  Args:
    head_name: a key of HEADS.
    config: head fields, plus the encoder sections (`encoder`, and `hypothesis_encoder` /
      `document_encoder` where the head has them: not in the flat document reading) unless `encoders`
      gives the modules.
    vocab_size, num_classes, embeddings: as `models.build`.
    encoders: already built encoder modules by key (family presets build theirs).
    model_name: the registered model name, for errors.

  Raises:
    KeyError naming unknown keys (listing the valid ones) or a missing encoder section.
  """
  cls = HEADS[head_name]
  model_name = model_name or head_name
  encoder_keys = _encoder_keys(head_name, config)
  valid = set(registry.config_fields(cls)) - {'encoder', 'sentence_encoder', 'hypothesis_encoder',
                                               'document_encoder'}
  registry.check_keys({k: None for k in config.keys() if k not in encoder_keys}, valid, model_name)
  built = dict(encoders or {})
  for key in encoder_keys:
    if key in built:
      continue
    section = config.get(key) if hasattr(config, 'get') else None
    if section is None:
      if key == 'hypothesis_encoder':
        continue
      raise KeyError(f'config.model.{key} is missing for model {model_name!r}: a section with the '
                     f"encoder's name and keys, e.g. {{'name': 'bilstm', 'hidden_size': 300}}; "
                     f'registered encoders: {encoders_lib.names()}')
    built[key] = encoders_lib.build(section, where=f'config.model.{key}')
  kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in config.items()
            if k != 'name' and k not in encoder_keys}
  if head_name == 'classifier.document' and 'document_encoder' in encoder_keys:
    kwargs['sentence_encoder'] = built.pop('encoder')
    kwargs['encoder'] = None
  kwargs.update(built)
  kwargs['vocab_size'] = vocab_size
  kwargs['num_classes'] = num_classes
  if embeddings is not None:
    kwargs['embedding_init'] = registry.embedding_initializer(
        embeddings, vocab_size=vocab_size, dim=kwargs.get('embedding_dim', cls.embedding_dim),
        model_name=model_name)
  return cls(**kwargs)


def _register_generic(head_name: str):
  def builder(config, *, vocab_size, num_classes, embeddings=None):
    return build_head(head_name, config, vocab_size=vocab_size, num_classes=num_classes,
                      embeddings=embeddings)
  builder.__qualname__ = builder.__name__ = 'build_' + head_name.replace('.', '_')
  registry.register(head_name)(builder)


for _name in HEADS:
  _register_generic(_name)
