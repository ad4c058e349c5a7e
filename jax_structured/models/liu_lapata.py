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

Config builders for configs/liu_lapata/*.py (the paper's settings; each file adds its data set, table
figures and options): `document_config` (Table 4), `sentence_config`, `pair_config` (Table 1),
`parse_options`, and the SNLI dev-as-train links `snli_dev_as_train_dir` / `shared_snli_manual_dir`
(also used by configs/cheng/snli.py).
"""
import os
import pathlib
from typing import Any, Mapping, Optional, Sequence

import ml_collections
import numpy as np

from jax_structured.data import loaders
from jax_structured.models import encoders
from jax_structured.models import heads
from jax_structured.models import registry
from jax_structured import config as training_config

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


# --- Config builders (configs/liu_lapata/*.py state only what is specific to their data set) -------------

# Table 4 rows: variant -> (sentence_attention, document_attention, hidden size per direction).
DOCUMENT_VARIANTS = {
    'none': ('none', 'none', 75),  # "75D No Attention"
    'simple': ('simple', 'simple', 100),  # "100D Simple Attention"
    'sentence': ('structured', 'none', 100),  # "Structured Attention (sentence-level)"
    'document': ('none', 'structured', 100),  # "Structured Attention (document-level)"
    'both': ('structured', 'structured', 100),  # "Structured Attention (both levels)"
}
# Table 1 rows (SNLI), also the variants of the sentence model: the value of `model.attention`.
ATTENTION_VARIANTS = ('none', 'simple', 'inside_outside', 'structured')
SHARED_SNLI = '../shared/data/snli_1.0'  # the shared SNLI copy, relative to the repository root


def parse_options(options: Optional[str], file: str, variants: Sequence[str],
                  paths: Sequence[str] = ()) -> tuple[Optional[str], dict[str, str], bool]:
  """Parses the option string of a config file (`--config=FILE:OPTIONS`).

  Args:
    options: comma-separated options; '' or None for none. Blank entries are skipped.
    file: the config file, named in the error.
    variants: the variant names accepted (at most one may be given), in the order the error lists them.
    paths: keys accepted as `KEY=PATH` with a non-empty PATH (a repeated key keeps its last value).

  Returns:
    (variant or None, {key: path} of the keys given, whether `tiny` was given).

  Raises:
    ValueError naming `file` and the option for an unknown option, a second variant or an empty PATH.
  """
  variant, given, tiny = None, {}, False
  for option in [o.strip() for o in (options or '').split(',') if o.strip()]:
    key, _, value = option.partition('=')
    if option in variants and variant is None:
      variant = option
    elif key in paths and value:
      given[key] = value
    elif option == 'tiny':
      tiny = True
    else:
      keys = ''.join(f', {k}=PATH' for k in paths)
      raise ValueError(f'{file}: unknown or repeated option {option!r}; known: {list(variants)} '
                       f'(at most one){keys}, tiny')
  return variant, given, tiny


def snli_dev_as_train_dir(shared_dir: Any, cache_dir: Any) -> Optional[str]:
  """Creates (idempotently) `cache_dir/snli_dev_as_train` with train -> SNLI dev, test -> SNLI test.

  The `snli` loader builds its vocabulary on a `train` file; the shared copy has only dev and test, so
  configs train on SNLI dev through these symbolic links (`snli_1.0_train.jsonl.gz` -> dev,
  `snli_1.0_test.jsonl.gz` -> test, no dev file: `data.validation_fraction` holds out the dev split).

  Args:
    shared_dir: folder holding `snli_1.0_dev.jsonl.gz` and `snli_1.0_test.jsonl.gz`.
    cache_dir: where to create the folder of symbolic links (`~` is expanded).

  Returns:
    The folder, or None when `shared_dir` lacks those files.
  """
  shared_dir = pathlib.Path(shared_dir).resolve()
  links = {'snli_1.0_train.jsonl.gz': shared_dir / 'snli_1.0_dev.jsonl.gz',
           'snli_1.0_test.jsonl.gz': shared_dir / 'snli_1.0_test.jsonl.gz'}
  if not all(target.is_file() for target in links.values()):
    return None
  folder = pathlib.Path(cache_dir).expanduser() / 'snli_dev_as_train'
  folder.mkdir(parents=True, exist_ok=True)
  for name, target in links.items():
    link = folder / name
    if link.is_symlink() and pathlib.Path(os.readlink(link)) == target:
      continue
    if link.exists() or link.is_symlink():
      link.unlink()
    link.symlink_to(target)
  return str(folder)


def shared_snli_manual_dir(repo_root: Any) -> str:
  """`data.manual_dir` for training on the shared SNLI dev: the links of `snli_dev_as_train_dir` in
  `$JAX_STRUCTURED_CACHE` (default `~/.cache/jax_structured`), or `SHARED_SNLI` when the shared copy
  is absent (the loader then names the missing files).

  Args:
    repo_root: the repository root (`SHARED_SNLI` is relative to it).
  """
  cache = os.environ.get('JAX_STRUCTURED_CACHE', '~/.cache/jax_structured')
  return snli_dev_as_train_dir(pathlib.Path(repo_root) / SHARED_SNLI, cache) or SHARED_SNLI


def _config(task: str, loader: str, data: Mapping[str, Any], model: Mapping[str, Any],
            weight_decay: float, train: Mapping[str, Any]) -> ml_collections.ConfigDict:
  """The sections common to the three tasks; `data` is applied over the loader's defaults."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = task
  config.parallel = 'shard_map'
  config.distributed = False
  config.data = loaders.default_config(loader)  # every loader key, overridable from the command line
  unknown = sorted(set(data) - set(config.data))
  if unknown:
    raise ValueError(f'data key(s) {unknown} are not keys of the {loader!r} loader: '
                     f'{sorted(config.data)}')
  config.data.update(dict(data))
  config.model = ml_collections.ConfigDict(dict(model))
  config.optimizer = training_config.optimizer_defaults()
  config.optimizer.name = 'adagrad'
  config.optimizer.learning_rate = 0.05
  if weight_decay:
    config.optimizer.weight_decay = weight_decay  # L2 on non-embedding parameters only
  config.train = training_config.train_defaults()
  config.train.update(dict(train))
  config.variants = ml_collections.ConfigDict()
  return config


def _shrink(config: ml_collections.ConfigDict, keep_embeddings: bool = False) -> None:
  """The `tiny` option, in place on a config being built: 16-d vectors, BiLSTM 8 = 6 + 2, batches of
  8, 30 steps, no mid-epoch evaluation; word2vec is not trained unless `keep_embeddings` (a file)."""
  if not keep_embeddings:
    config.data.embeddings = ''
  config.data.embedding_dim = 16
  config.data.batch_size = 8
  config.model.embedding_dim = 16
  config.model.hidden_size = 8
  config.model.semantic_size = 6
  config.model.mlp_hidden = min(config.model.mlp_hidden, 8)
  for variant in config.variants.values():
    if 'hidden_size' in variant.get('model', {}):
      variant.model.hidden_size = 8
  config.train.num_epochs = 1
  config.train.num_steps = 30
  config.train.eval_every_steps = 0
  config.train.checkpoint_every_steps = 0
  config.train.log_every_steps = 10


def document_config(loader: str, data: Mapping[str, Any], *, variant: Optional[str] = None,
                    tiny: bool = False, eval_every_steps: int = 0) -> ml_collections.ConfigDict:
  """The Table 4 config of `DocumentClassifier` (sec. 4.2) on one data set.

  Sec. 4.2: words seen more than five times (min_count 6), 200-d word2vec vectors trained on train +
  dev, BiLSTMs of 100 per direction = 75 semantic + 25 structure (eq. 7) at both levels, max pooling
  (the authors' code), dropout 0.3 on the input and output layers, Adagrad 0.05, L2 1e-4 except the
  embeddings, batches of 32 documents; 30 epochs with early stopping on dev accuracy (patience 5).
  Documents are truncated to 100 sentences of 200 words.

  Args:
    loader: the `data` loader name ('document_classification', 'text_classification').
    data: the data set's loader keys (builder `config`, `manual_dir`, ...), applied last.
    variant: a `DOCUMENT_VARIANTS` row only; None: every row in `config.variants`.
    tiny: small sizes for a CPU smoke run (`_shrink`).
    eval_every_steps: evaluate and checkpoint every this many steps (0: every epoch).

  Returns:
    A new ConfigDict (seed, task, parallel, distributed, data, model, optimizer, train, variants).
  """
  config = _config(
      'document', loader,
      {'min_count': 6, 'max_sentences': 100, 'max_sentence_length': 200, 'embeddings': 'word2vec',
       'embedding_dim': 200, 'batch_size': 32, **data},
      {'name': 'liu_lapata.document_classifier', 'embedding_dim': 200, 'freeze_embeddings': False,
       'hidden_size': 100, 'semantic_size': 75, 'num_layers': 1, 'sentence_attention': 'structured',
       'document_attention': 'structured', 'pooling': 'max', 'mlp_hidden': 0, 'dropout_rate': 0.3,
       'single_root': True},
      1e-4,
      {'num_epochs': 30, 'eval_every_steps': eval_every_steps,
       'checkpoint_every_steps': eval_every_steps, 'log_every_steps': 100,
       'early_stopping_patience': 5})
  rows = {name: {'model': {'sentence_attention': sentence, 'document_attention': document,
                           'hidden_size': hidden}}
          for name, (sentence, document, hidden) in DOCUMENT_VARIANTS.items()}
  if variant is None:
    for name, overrides in rows.items():
      config.variants[name] = overrides
  else:
    config.model.update(rows[variant]['model'])
  if tiny:
    _shrink(config)
  return config


def sentence_config(loader: str, data: Mapping[str, Any], *, attention: Optional[str] = None,
                    tiny: bool = False) -> ml_collections.ConfigDict:
  """`SentenceClassifier` (sec. 3.1) with the document experiments' settings of sec. 4.2, but Adam.

  200-d word2vec vectors trained on train + dev, BiLSTM 100 per direction = 75 semantic + 25
  structure (eq. 7), max pooling, dropout 0.3 on the input and output layers, L2 1e-4 except the
  embeddings, batches of 32; 20 epochs with early stopping (patience 4). The paper has no sentence
  classification experiment; its document optimizer (Adagrad 0.05) underfits SST badly (train and
  test accuracy near 30% on SST-5 after 10 epochs), so the optimizer is Adam 2e-3, the setting of
  Cheng et al. (2016) for SST (39% SST-5 test after 3 epochs with otherwise identical settings).

  Args:
    loader: the `data` loader name (e.g. 'sst').
    data: the data set's loader keys (builder `config`, `manual_dir`, `min_count`, ...), applied last.
    attention: one of `ATTENTION_VARIANTS` only; None: all of them in `config.variants`.
    tiny: small sizes for a CPU smoke run (`_shrink`).

  Returns:
    A new ConfigDict.
  """
  config = _config(
      'sentence', loader, {'embeddings': 'word2vec', 'embedding_dim': 200, 'batch_size': 32, **data},
      {'name': 'liu_lapata.sentence_classifier', 'embedding_dim': 200, 'freeze_embeddings': False,
       'hidden_size': 100, 'semantic_size': 75, 'num_layers': 1,
       'attention': attention or 'structured', 'pooling': 'max', 'mlp_hidden': 0,
       'dropout_rate': 0.3, 'single_root': True},
      1e-4, {'num_epochs': 20, 'log_every_steps': 50, 'early_stopping_patience': 4})
  config.optimizer.name = 'adam'
  config.optimizer.learning_rate = 2e-3
  _attention_variants(config, attention)
  if tiny:
    _shrink(config)
  return config


def pair_config(data: Mapping[str, Any], *, attention: Optional[str] = None, glove: str = '',
                tiny: bool = False) -> ml_collections.ConfigDict:
  """The Table 1 config of `PairClassifier` on SNLI (sec. 4.1).

  LSTM 150 per direction = 100 semantic + 50 structure (eq. 7), 300-d GloVe 840B vectors (`glove`;
  without a file, 300-d word2vec trained on train + dev), every parameter including the embeddings
  trained with Adagrad 0.05 (no L2), perceptrons of 200, dropout 0.2, batches of 32; 20 epochs with
  early stopping (patience 4).

  Args:
    data: the `snli` loader keys of the data (`manual_dir`, `validation_fraction`), applied last.
    attention: one of `ATTENTION_VARIANTS` only; None: all of them in `config.variants`.
    glove: a pretrained vector file ('' for word2vec; kept by `tiny`).
    tiny: small sizes for a CPU smoke run (`_shrink`).

  Returns:
    A new ConfigDict.
  """
  config = _config(
      'pair', 'snli',
      {'embeddings': glove or 'word2vec', 'embedding_dim': 300, 'batch_size': 32, **data},
      {'name': 'liu_lapata.pair_classifier', 'embedding_dim': 300, 'freeze_embeddings': False,
       'hidden_size': 150, 'semantic_size': 100, 'num_layers': 1,
       'attention': attention or 'structured', 'mlp_hidden': 200, 'dropout_rate': 0.2,
       'single_root': True},
      0.0, {'num_epochs': 20, 'log_every_steps': 50, 'early_stopping_patience': 4})
  _attention_variants(config, attention)
  if tiny:
    _shrink(config, keep_embeddings=bool(glove))
  return config


def _attention_variants(config: ml_collections.ConfigDict, attention: Optional[str]) -> None:
  """Fills `config.variants` with one row per `ATTENTION_VARIANTS` when no `attention` was chosen."""
  if attention is None:
    for name in ATTENTION_VARIANTS:
      config.variants[name] = {'model': {'attention': name}}
