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

Config builders for configs/liu_lapata/*.py (the paper's settings; each file adds its data set, table
figures and options): `document_config` (Table 4), `sentence_config`, `pair_config` (Table 1),
`parse_options`, and the SNLI dev-as-train links `snli_dev_as_train_dir` / `shared_snli_manual_dir`
(also used by configs/cheng/snli.py).
"""
import os
import pathlib
from typing import Any, Callable, Mapping, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jax_structured import nn as jsnn
from jax_structured.data import loaders
from jax_structured.models import registry
from jax_structured.training import config as training_config

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
  """The model's word embedding `embed` (dropout on the input layer): [...] int -> [..., E]."""
  return jsnn.WordEmbedding(module.vocab_size, module.embedding_dim,
                            embedding_init=module.embedding_init, freeze=module.freeze_embeddings,
                            dropout_rate=module.dropout_rate, name='embed')(
                                tokens, deterministic=not train)


def _encoder(module: nn.Module, attention_key: str, name: str) -> _Encoder:
  """The `_Encoder` of one level of `module`, with the attention variant of its field `attention_key`."""
  return _Encoder(module.hidden_size, module.semantic_size, getattr(module, attention_key),
                  attention_key, num_layers=module.num_layers, single_root=module.single_root,
                  name=name)


class _WordModel(nn.Module):
  """The fields every Liu & Lapata model has, first in its field order (defaults: sec. 4.2).

  Attributes:
    vocab_size, num_classes, embedding_init: filled in by `models.build`.
    embedding_dim: word vector size.
    freeze_embeddings: keep the (pretrained) word vectors fixed.
    hidden_size: BiLSTM hidden size per direction.
    semantic_size: per-direction semantic part of the BiLSTM output (eq. 7); the rest is structure.
    num_layers: stacked BiLSTM layers.
  """
  vocab_size: int
  num_classes: int
  embedding_init: Optional[Callable[..., Any]] = None
  embedding_dim: int = 200
  freeze_embeddings: bool = False
  hidden_size: int = 100
  semantic_size: int = 75
  num_layers: int = 1


@registry.register('liu_lapata.sentence_classifier')
class SentenceClassifier(_WordModel):
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
  attention: str = 'structured'
  pooling: str = 'max'
  mlp_hidden: int = 0
  dropout_rate: float = 0.3
  single_root: bool = True

  @nn.compact
  def __call__(self, batch: Mapping[str, jax.Array], *, train: bool = False) -> jax.Array:
    tokens, lengths = batch['tokens'], jnp.asarray(batch['lengths'], jnp.int32)
    x = _embed(self, tokens, train)
    r = _encoder(self, 'attention', 'encoder')(x, lengths, train=train)
    v = jsnn.Pooling(self.pooling, name='pooling')(r, lengths)
    return _classifier(v, self.mlp_hidden, self.num_classes, self.dropout_rate, train)


@registry.register('liu_lapata.document_classifier')
class DocumentClassifier(_WordModel):
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
    words = _encoder(self, 'sentence_attention', 'sentence_encoder')(
        x, sentence_lengths, train=train, sow_prefix='sentence_')
    v = jsnn.Pooling(self.pooling, name='sentence_pooling')(words, sentence_lengths)  # [B, S, D]
    sentences = _encoder(self, 'document_attention', 'document_encoder')(
        v, num_sentences, train=train, sow_prefix='document_')
    y = jsnn.Pooling(self.pooling, name='document_pooling')(sentences, num_sentences)
    return _classifier(y, self.mlp_hidden, self.num_classes, self.dropout_rate, train)


@registry.register('liu_lapata.pair_classifier')
class PairClassifier(_WordModel):
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
  embedding_dim: int = 300  # sec. 4.1 defaults (these three keep their place in the field order)
  hidden_size: int = 150
  semantic_size: int = 100
  attention: str = 'structured'
  mlp_hidden: int = 200
  dropout_rate: float = 0.2
  single_root: bool = True

  @nn.compact
  def __call__(self, batch: Mapping[str, jax.Array], *, train: bool = False) -> jax.Array:
    premise_lengths = jnp.asarray(batch['premise_lengths'], jnp.int32)
    hypothesis_lengths = jnp.asarray(batch['hypothesis_lengths'], jnp.int32)
    batch_size, n = batch['premise'].shape
    m = batch['hypothesis'].shape[1]
    width = max(n, m)
    tokens = jnp.concatenate([jnp.pad(batch['premise'], ((0, 0), (0, width - n))),
                              jnp.pad(batch['hypothesis'], ((0, 0), (0, width - m)))], 0)
    encoded = _encoder(self, 'attention', 'encoder')(
        _embed(self, tokens, train), jnp.concatenate([premise_lengths, hypothesis_lengths], 0),
        train=train, sow_splits=(('premise_', batch_size), ('hypothesis_', batch_size)))
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
