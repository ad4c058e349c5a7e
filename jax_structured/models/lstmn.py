"""LSTMN models of Cheng, Dong & Lapata (2016) and their LSTM baselines, in one code path.

- `LanguageModel` (section 5.1, Table 1): embeddings -> `num_layers` LSTMN (or LSTM) layers with skip
  connections -> softmax over the vocabulary. Batches: `inputs`, `targets`, `mask` [B, T] (kind 'lm');
  when the batch carries `context` [B, C] (the C tokens before the window; see
  `data.batching.lm_stream_batches(context=...)`), the model reads them first and scores only the window,
  so the memory tape reaches back across window boundaries without carrying state between steps.
- `SentenceClassifier` (section 5.2, Table 2): LSTMN/LSTM encoder -> averaged hidden vector -> 2-layer
  ReLU MLP with dropout.
- `PairClassifier` (section 5.3, Table 3): premise and hypothesis read by two LSTMNs; `fusion` = 'none'
  (independent encoders), 'shallow' or 'deep' (the hypothesis LSTMN attends to the premise tapes, Fig. 3);
  average pooling of both tapes, concatenated -> 2-layer ReLU MLP.
`cell` = 'lstmn' | 'lstm' selects the recurrent unit (LSTM = the baselines of Tables 1-3).
"""
from __future__ import annotations

from typing import Any, Callable, Optional

import flax.linen as nn
import jax.numpy as jnp

from jax_structured.models import registry
from jax_structured.nn import lstmn as lstmn_lib
from jax_structured.nn import pooling
from jax_structured.nn.embedding import WordEmbedding

__all__ = ['LanguageModel', 'SentenceClassifier', 'PairClassifier', 'shrink_classifier_config']


def _embedding(module):
  """The word-embedding layer (its table is the parameter `embedding`, which the optimiser finds to
  exclude it from L2 and to scale its gradient)."""
  return WordEmbedding(module.vocab_size, module.embedding_dim, embedding_init=module.embedding_init,
                       freeze=module.freeze_embeddings, dropout_rate=module.embedding_dropout,
                       name='word_embedding')


def _mlp(x, hidden, num_classes, dropout_rate, train):
  """The papers' 2-layer ReLU classifier with dropout."""
  x = nn.Dropout(dropout_rate, deterministic=not train)(x)
  x = nn.relu(nn.Dense(hidden, name='mlp_hidden')(x))
  x = nn.Dropout(dropout_rate, deterministic=not train)(x)
  return nn.Dense(num_classes, name='mlp_out')(x)


@registry.register('lstmn.language_model')
class LanguageModel(nn.Module):
  """Table 1 language model; returns logits [B, T, V] over the window (context positions excluded).

  `num_classes` is filled in by `models.build` and unused (the output layer spans the vocabulary).
  """
  vocab_size: int
  num_classes: int = 0
  embedding_init: Optional[Callable[..., Any]] = None
  freeze_embeddings: bool = False
  embedding_dropout: float = 0.0
  embedding_dim: int = 150
  hidden_size: int = 300
  num_layers: int = 1
  cell: str = 'lstmn'
  memory_span: int = 0  # attend to the last `memory_span` tokens only; 0 (or None) = all of them
  dropout_rate: float = 0.0

  @nn.compact
  def __call__(self, batch, *, train: bool = False):
    tokens = batch['inputs']
    window = tokens.shape[1]
    if 'context' in batch:
      tokens = jnp.concatenate([batch['context'], tokens], axis=1)
    lengths = jnp.full((tokens.shape[0],), tokens.shape[1], jnp.int32)
    x = nn.Dropout(self.dropout_rate, deterministic=not train)(_embedding(self)(tokens, deterministic=not train))
    h, _ = lstmn_lib.StackedLSTMN(self.hidden_size, self.num_layers, self.cell,
                                  memory_span=self.memory_span or None, dropout_rate=self.dropout_rate,
                                  name='encoder')(x, lengths, train=train)
    h = nn.Dropout(self.dropout_rate, deterministic=not train)(h[:, -window:])
    return nn.Dense(self.vocab_size, name='output')(h)


@registry.register('lstmn.sentence_classifier')
class SentenceClassifier(nn.Module):
  """Table 2 sentiment classifier: averaged hidden tape -> 2-layer ReLU MLP -> logits [B, C]."""
  vocab_size: int
  num_classes: int
  embedding_init: Optional[Callable[..., Any]] = None
  freeze_embeddings: bool = False
  embedding_dropout: float = 0.0
  embedding_dim: int = 300
  hidden_size: int = 168
  num_layers: int = 1
  cell: str = 'lstmn'
  mlp_size: int = 168
  dropout_rate: float = 0.5

  @nn.compact
  def __call__(self, batch, *, train: bool = False):
    x = _embedding(self)(batch['tokens'], deterministic=not train)
    h, _ = lstmn_lib.StackedLSTMN(self.hidden_size, self.num_layers, self.cell, name='encoder')(
        x, batch['lengths'], train=train)
    return _mlp(pooling.masked_mean(h, batch['lengths']), self.mlp_size, self.num_classes,
                self.dropout_rate, train)


@registry.register('lstmn.pair_classifier')
class PairClassifier(nn.Module):
  """Table 3 NLI model: premise LSTMN, hypothesis LSTMN with no / shallow / deep fusion -> MLP."""
  vocab_size: int
  num_classes: int
  embedding_init: Optional[Callable[..., Any]] = None
  freeze_embeddings: bool = False
  embedding_dropout: float = 0.0
  embedding_dim: int = 300
  hidden_size: int = 100
  fusion: str = 'deep'
  cell: str = 'lstmn'
  mlp_size: int = 100
  dropout_rate: float = 0.2

  @nn.compact
  def __call__(self, batch, *, train: bool = False):
    if self.fusion not in ('none', 'shallow', 'deep'):
      raise ValueError(f"fusion must be 'none', 'shallow' or 'deep', got {self.fusion!r}")
    if self.fusion != 'none' and self.cell != 'lstmn':
      raise ValueError("shallow/deep fusion is defined for cell='lstmn'")
    p_len, h_len = batch['premise_lengths'], batch['hypothesis_lengths']
    embed = _embedding(self)
    premise = embed(batch['premise'], deterministic=not train)
    hypothesis = embed(batch['hypothesis'], deterministic=not train)
    p_hidden, p_memory = lstmn_lib.StackedLSTMN(self.hidden_size, 1, self.cell, name='premise_encoder')(
        premise, p_len, train=train)
    if self.fusion == 'none':
      h_hidden, _ = lstmn_lib.StackedLSTMN(self.hidden_size, 1, self.cell, name='hypothesis_encoder')(
          hypothesis, h_len, train=train)
    else:
      h_hidden = lstmn_lib.FusionLSTMN(self.hidden_size, self.fusion, name='hypothesis_decoder')(
          hypothesis, h_len, p_hidden, p_memory, p_len)
    features = jnp.concatenate([pooling.masked_mean(p_hidden, p_len),
                                pooling.masked_mean(h_hidden, h_len)], -1)
    return _mlp(features, self.mlp_size, self.num_classes, self.dropout_rate, train)


def shrink_classifier_config(config, *, batch_size: int, keep_embeddings: bool) -> None:
  """Makes a Table 2/3 classifier config (`configs/cheng/{sst,snli}.py`) CPU-smoke-run sized, in place.

  16-d embeddings and hidden/MLP sizes, 40 steps of one epoch; the embeddings setting becomes random
  init ('') unless `keep_embeddings` (a user-given `glove=` vector file stays configured).
  """
  if not keep_embeddings:
    config.data.embeddings = ''
  config.data.embedding_dim = 16
  config.data.batch_size = batch_size
  config.model.embedding_dim = 16
  config.model.hidden_size = 16
  config.model.mlp_size = 16
  config.train.num_epochs = 1
  config.train.num_steps = 40
  config.train.eval_batch_size = 64
  config.train.log_every_steps = 10
