"""LSTMN models of Cheng, Dong & Lapata (2016) and their LSTM baselines, in one code path: presets of
the shared heads (`models.heads`) over the 'lstmn' encoder (`models.encoders`) with the paper's keys.

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

from jax_structured.models import encoders
from jax_structured.models import heads
from jax_structured.models import registry

__all__ = ['language_model', 'sentence_classifier', 'pair_classifier']


LANGUAGE_MODEL_DEFAULTS = {'freeze_embeddings': False, 'embedding_dropout': 0.0, 'embedding_dim': 150,
                           'hidden_size': 300, 'num_layers': 1, 'cell': 'lstmn', 'memory_span': 0,
                           'dropout_rate': 0.0}
SENTENCE_DEFAULTS = {'freeze_embeddings': False, 'embedding_dropout': 0.0, 'embedding_dim': 300,
                     'hidden_size': 168, 'num_layers': 1, 'cell': 'lstmn', 'mlp_size': 168,
                     'dropout_rate': 0.5}
PAIR_DEFAULTS = {'freeze_embeddings': False, 'embedding_dropout': 0.0, 'embedding_dim': 300,
                 'hidden_size': 100, 'fusion': 'deep', 'cell': 'lstmn', 'mlp_size': 100,
                 'dropout_rate': 0.2}


def _values(config, defaults, model_name):
  registry.check_keys(config, defaults, model_name)
  return {**defaults, **{k: v for k, v in config.items() if k != 'name'}}


def _head(values, **extra):
  return {'embedding_dim': values['embedding_dim'], 'freeze_embeddings': values['freeze_embeddings'],
          'embedding_dropout': values['embedding_dropout'], 'dropout_rate': values['dropout_rate'],
          **extra}


@registry.register('lstmn.language_model')
def language_model(config, *, vocab_size: int, num_classes: int, embeddings=None):
  """Table 1 language model: embeddings -> dropout -> `num_layers` LSTMN (or LSTM) layers with skip
  connections -> dropout -> softmax over the vocabulary; the 'language_model' head over the 'lstmn'
  encoder. Keys: `LANGUAGE_MODEL_DEFAULTS` (memory_span: attend to the last `memory_span` tokens only,
  0 = all). Returns logits [B, T, V] over the window (context positions excluded)."""
  values = _values(config, LANGUAGE_MODEL_DEFAULTS, 'lstmn.language_model')
  encoder = encoders.LSTMNEncoder(hidden_size=values['hidden_size'], num_layers=values['num_layers'],
                                  cell=values['cell'], memory_span=values['memory_span'] or 0,
                                  dropout_rate=values['dropout_rate'])
  return heads.build_head('language_model', _head(values), vocab_size=vocab_size,
                          num_classes=num_classes, embeddings=embeddings,
                          encoders={'encoder': encoder}, model_name='lstmn.language_model')


@registry.register('lstmn.sentence_classifier')
def sentence_classifier(config, *, vocab_size: int, num_classes: int, embeddings=None):
  """Table 2 sentiment classifier: LSTMN/LSTM encoder -> averaged hidden tape -> 2-layer ReLU MLP
  (`mlp_size`) with dropout -> logits [B, C]; the 'classifier.sentence' head. Keys: `SENTENCE_DEFAULTS`."""
  values = _values(config, SENTENCE_DEFAULTS, 'lstmn.sentence_classifier')
  encoder = encoders.LSTMNEncoder(hidden_size=values['hidden_size'], num_layers=values['num_layers'],
                                  cell=values['cell'])
  return heads.build_head('classifier.sentence',
                          _head(values, pooling='mean', mlp_hidden=values['mlp_size']),
                          vocab_size=vocab_size, num_classes=num_classes, embeddings=embeddings,
                          encoders={'encoder': encoder}, model_name='lstmn.sentence_classifier')


@registry.register('lstmn.pair_classifier')
def pair_classifier(config, *, vocab_size: int, num_classes: int, embeddings=None):
  """Table 3 NLI model: premise LSTMN, hypothesis LSTMN with no (two independent encoders) / shallow /
  deep fusion; average pooling of both tapes, concatenated -> 2-layer ReLU MLP; the 'classifier.pair'
  head with interaction 'concat'. Keys: `PAIR_DEFAULTS`."""
  values = _values(config, PAIR_DEFAULTS, 'lstmn.pair_classifier')
  if values['fusion'] not in heads.FUSIONS:
    raise ValueError(f"fusion must be 'none', 'shallow' or 'deep', got {values['fusion']!r}")
  if values['fusion'] != 'none' and values['cell'] != 'lstmn':
    raise ValueError("shallow/deep fusion is defined for cell='lstmn'")
  make = lambda: encoders.LSTMNEncoder(hidden_size=values['hidden_size'], num_layers=1,
                                       cell=values['cell'])
  built = {'encoder': make()}
  if values['fusion'] == 'none':
    built['hypothesis_encoder'] = make()
  return heads.build_head('classifier.pair',
                          _head(values, pooling='mean', mlp_hidden=values['mlp_size'],
                                interaction='concat', fusion=values['fusion']),
                          vocab_size=vocab_size, num_classes=num_classes, embeddings=embeddings,
                          encoders=built, model_name='lstmn.pair_classifier')

