"""Liu & Lapata (2018), "Learning Structured Text Representations" (TACL 6): the three task models,
as presets of the shared heads (`models.heads`) over the 'liu_lapata' encoder (`models.encoders`),
with the paper's flat `config.model` keys.

- 'liu_lapata.sentence_classifier': embeddings -> BiLSTM -> attention -> pooling
  -> MLP (the sentence model of sec. 3.1, used on SST and the synthetic default job).
- 'liu_lapata.document_classifier': the hierarchical model of sec. 3.3: a
  sentence BiLSTM + attention + pooling gives sentence vectors v_i, a document BiLSTM + attention +
  pooling gives the document vector y, then the classifier (Table 4).
- 'liu_lapata.pair_classifier': sec. 4.1, SNLI: structured intra-sentence attention
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

Experiment configs (the paper's settings per data set) live in configs/liu_lapata.
"""
from typing import Any, Mapping

import numpy as np

from jax_structured.models import encoders
from jax_structured.models import heads
from jax_structured.models import registry

ATTENTIONS = encoders.ATTENTIONS  # variant name (configs, Tables 1 and 4) -> normalizer

# The presets' flat `config.model` keys and their defaults (sec. 4.2; pairs: sec. 4.1).
_WORD_MODEL = {'embedding_dim': 200, 'freeze_embeddings': False, 'hidden_size': 100,
               'semantic_size': 75, 'num_layers': 1, 'mlp_hidden': 0, 'dropout_rate': 0.3,
               'single_root': True}
SENTENCE_DEFAULTS = {**_WORD_MODEL, 'attention': 'structured', 'pooling': 'max'}
DOCUMENT_DEFAULTS = {**_WORD_MODEL, 'sentence_attention': 'structured',
                     'document_attention': 'structured', 'pooling': 'max'}
PAIR_DEFAULTS = {**_WORD_MODEL, 'embedding_dim': 300, 'hidden_size': 150, 'semantic_size': 100,
                 'attention': 'structured', 'mlp_hidden': 200, 'dropout_rate': 0.2}


def _preset_values(config, defaults: Mapping[str, Any], model_name: str) -> dict[str, Any]:
  """`defaults` updated with `config`'s keys (an error naming unknown ones)."""
  registry.check_keys(config, defaults, model_name)
  return {**defaults, **{k: v for k, v in config.items() if k != 'name'}}


def _encoder(values: Mapping[str, Any], attention_key: str) -> encoders.LiuLapataEncoder:
  """The BiLSTM + attention encoder of one level, with the variant of `values[attention_key]`."""
  encoders.attention_normalizer(values[attention_key], attention_key)
  return encoders.LiuLapataEncoder(
      hidden_size=values['hidden_size'], semantic_size=values['semantic_size'],
      attention=values[attention_key], num_layers=values['num_layers'],
      single_root=values['single_root'])


def _head_values(values: Mapping[str, Any]) -> dict[str, Any]:
  """The shared head fields of a preset (dropout on the input and output layers, sec. 4.2)."""
  return {'embedding_dim': values['embedding_dim'], 'freeze_embeddings': values['freeze_embeddings'],
          'embedding_dropout': values['dropout_rate'], 'dropout_rate': values['dropout_rate'],
          'mlp_hidden': values['mlp_hidden']}


@registry.register('liu_lapata.sentence_classifier')
def sentence_classifier(config, *, vocab_size: int, num_classes: int, embeddings=None):
  """Sentence model (sec. 3.1): embeddings -> BiLSTM -> attention -> pooling -> MLP, as the
  'classifier.sentence' head over the 'liu_lapata' encoder. Keys: `SENTENCE_DEFAULTS`
  (attention: 'none' | 'simple' | 'structured' | 'inside_outside'; pooling: 'max' | 'mean' | 'sum' |
  'attention'). Batch: tokens [B, T], lengths [B] -> logits [B, num_classes]."""
  values = _preset_values(config, SENTENCE_DEFAULTS, 'liu_lapata.sentence_classifier')
  return heads.build_head(
      'classifier.sentence', {**_head_values(values), 'pooling': values['pooling']},
      vocab_size=vocab_size, num_classes=num_classes, embeddings=embeddings,
      encoders={'encoder': _encoder(values, 'attention')}, model_name='liu_lapata.sentence_classifier')


@registry.register('liu_lapata.document_classifier')
def document_classifier(config, *, vocab_size: int, num_classes: int, embeddings=None):
  """Hierarchical document model (sec. 3.3, Figure 4; Table 4) as the 'classifier.document' head.

  Words of each sentence: BiLSTM -> `sentence_attention` -> pooling gives v_i; sentences of the
  document: BiLSTM -> `document_attention` -> pooling gives y; then the classifier (hidden_size and
  semantic_size at both levels, as in the paper: 100 = 75 semantic + 25 structure). Keys:
  `DOCUMENT_DEFAULTS`. Batch: tokens [B, S, T], sentence_lengths [B, S], num_sentences [B]. Real
  documents must have >= 1 sentence: check batches with `validate_batch` at data time.
  """
  values = _preset_values(config, DOCUMENT_DEFAULTS, 'liu_lapata.document_classifier')
  return heads.build_head(
      'classifier.document',
      {**_head_values(values), 'pooling': values['pooling'], 'document_pooling': values['pooling']},
      vocab_size=vocab_size, num_classes=num_classes, embeddings=embeddings,
      encoders={'encoder': _encoder(values, 'sentence_attention'),
                'document_encoder': _encoder(values, 'document_attention')},
      model_name='liu_lapata.document_classifier')


@registry.register('liu_lapata.pair_classifier')
def pair_classifier(config, *, vocab_size: int, num_classes: int, embeddings=None):
  """Natural language inference model of sec. 4.1 (Table 1) as the 'classifier.pair' head.

  A shared encoder (embeddings -> BiLSTM -> intra-sentence `attention`) reads premise and hypothesis
  in one stacked pass, then the decomposable inter-attention of eqs. 20-23 with perceptrons of
  `mlp_hidden` (paper: 200) and dropout_rate on the embeddings and every perceptron layer. Keys:
  `PAIR_DEFAULTS`. Batch: premise [B, n], premise_lengths [B], hypothesis [B, m], hypothesis_lengths.
  """
  values = _preset_values(config, PAIR_DEFAULTS, 'liu_lapata.pair_classifier')
  return heads.build_head(
      'classifier.pair', {**_head_values(values), 'interaction': 'decomposable'},
      vocab_size=vocab_size, num_classes=num_classes, embeddings=embeddings,
      encoders={'encoder': _encoder(values, 'attention')}, model_name='liu_lapata.pair_classifier')


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
