"""Configs reproducing Liu & Lapata (2018), "Learning Structured Text Representations" (TACL 6).

Table 1 (snli.py), Table 4 (yelp13.py, imdb.py, czech_movies.py, debates.py), and our own document
(debian.py) and sentence (sst_binary.py, sst_fine.py) tasks. This module holds the family's settings
(`document_config`, `sentence_config`, `pair_config`), its data sets (`DOCUMENTS`) and the paper's
figures (`PAPER_TEST_ACCURACY`); each file holds its data.

Options of the document files (comma-separated after the file name):
  ''                                  `variants`: the five Table 4 rows side by side.
  none|simple|sentence|document|both  that row only.
  tiny                                small sizes and 30 steps, for a CPU smoke run.
Options of sst_binary.py / sst_fine.py: none|simple|inside_outside|structured (that attention only;
default: all four as `variants`), tiny. snli.py documents its own.
"""
from typing import Any, Callable, Mapping, Optional

import ml_collections

from configs import common
from jax_structured.models import liu_lapata as models

# Table 4 rows: name -> (sentence attention, document attention, BiLSTM hidden size).
DOCUMENT_VARIANTS = {
    'none': ('none', 'none', 75),  # "75D No Attention"
    'simple': ('simple', 'simple', 100),  # "100D Simple Attention"
    'sentence': ('structured', 'none', 100),  # "Structured Attention (sentence-level)"
    'document': ('none', 'structured', 100),  # "Structured Attention (document-level)"
    'both': ('structured', 'structured', 100),  # "Structured Attention (both levels)"
}
# Table 1 rows (SNLI), also the variants of the sentence model: the value of `model.attention`.
ATTENTION_VARIANTS = ('none', 'simple', 'inside_outside', 'structured')

# The document data sets: config file name -> loader, loader keys, evaluation period (steps; 0: each
# epoch). Table 4's upstream files go in TFDS's manual folder (`--config.data.manual_dir` overrides).
DOCUMENTS = {
    'yelp13': ('document_classification', {'config': 'yelp13', 'manual_dir': common.manual_dir('yelp13')},
               2000),
    'imdb': ('document_classification', {'config': 'imdb', 'manual_dir': common.manual_dir('imdb')}, 2000),
    'czech_movies': ('document_classification', {'config': 'csfd', 'manual_dir': common.manual_dir('csfd')},
                     1000),
    'debates': ('document_classification',
                {'config': 'convote', 'manual_dir': common.manual_dir('convote')}, 0),
    'debian': ('text_classification',
               {'manual_dir': common.shared('debian_descriptions'), 'split_sentences': True}, 0),
}

# Test accuracy (%) of the paper: Table 4 (documents) and Table 1 (SNLI).
PAPER_TEST_ACCURACY = {
    'yelp13': {'none': 66.7, 'simple': 67.7, 'sentence': 68.0, 'document': 67.8, 'both': 68.6},
    'imdb': {'none': 47.5, 'simple': 48.2, 'sentence': 48.8, 'document': 48.6, 'both': 49.2},
    'czech_movies': {'none': 80.5, 'simple': 81.4, 'sentence': 81.5, 'document': 81.1, 'both': 82.1},
    'debates': {'none': 73.7, 'simple': 75.3, 'sentence': 74.6, 'document': 75.2, 'both': 76.5},
    'snli': {'none': 85.3, 'simple': 86.2, 'inside_outside': 86.8, 'structured': 86.9},
}

# The `tiny` option: 16-d vectors, BiLSTM 8 = 6 + 2, MLP at most 8.
TINY_SIZES = {'hidden_size': 8, 'semantic_size': 6, 'mlp_hidden': 8}


def _config(task: str, loader: str, data: Mapping[str, Any], model: Mapping[str, Any],
            weight_decay: float, train: Mapping[str, Any]) -> ml_collections.ConfigDict:
  """The sections common to the three tasks: Adagrad 0.05 (sec. 4.2), L2 on non-embedding weights."""
  optimizer = {'name': 'adagrad', 'learning_rate': 0.05}
  if weight_decay:
    optimizer['weight_decay'] = weight_decay
  return common.experiment(task, loader, data=data, model=model, optimizer=optimizer, train=train)


def document_config(loader: str, data: Mapping[str, Any], *, variant: Optional[str] = None,
                    tiny: bool = False, eval_every_steps: int = 0) -> ml_collections.ConfigDict:
  """The Table 4 config of the document model (sec. 4.2) on one data set.

  Sec. 4.2: words seen more than five times (min_count 6), 200-d word2vec vectors trained on train +
  dev, BiLSTMs of 100 per direction = 75 semantic + 25 structure (eq. 7) at both levels, max pooling
  (the authors' code), dropout 0.3 on the input and output layers, Adagrad 0.05, L2 1e-4 except the
  embeddings, batches of 32 documents; 30 epochs with early stopping on dev accuracy (patience 5).
  Documents are truncated to 100 sentences of 200 words.

  Args:
    loader: the `data` loader name ('document_classification', 'text_classification').
    data: the data set's loader keys (builder `config`, `manual_dir`, ...), applied last.
    variant: a `DOCUMENT_VARIANTS` row only; None: every row in `config.variants`.
    tiny: small sizes for a CPU smoke run (`common.shrink` with `TINY_SIZES`).
    eval_every_steps: evaluate and checkpoint every this many steps (0: every epoch).
  """
  config = _config(
      'document', loader,
      {'min_count': 6, 'max_sentences': 100, 'max_sentence_length': 200, 'embeddings': 'word2vec',
       'embedding_dim': 200, 'batch_size': 32, **data},
      {'name': 'liu_lapata.document_classifier', **models.DOCUMENT_DEFAULTS},
      1e-4,
      {'num_epochs': 30, 'eval_every_steps': eval_every_steps,
       'checkpoint_every_steps': eval_every_steps, 'log_every_steps': 100,
       'early_stopping_patience': 5})
  rows = {name: {'model': {'sentence_attention': sentence, 'document_attention': document,
                           'hidden_size': hidden}}
          for name, (sentence, document, hidden) in DOCUMENT_VARIANTS.items()}
  common.add_variants(config, rows, variant)
  return common.shrink(config, TINY_SIZES) if tiny else config


def sentence_config(loader: str, data: Mapping[str, Any], *, attention: Optional[str] = None,
                    tiny: bool = False) -> ml_collections.ConfigDict:
  """The sentence model (sec. 3.1) with the document experiments' settings of sec. 4.2, but Adam.

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
    tiny: small sizes for a CPU smoke run.
  """
  config = _config(
      'sentence', loader, {'embeddings': 'word2vec', 'embedding_dim': 200, 'batch_size': 32, **data},
      {'name': 'liu_lapata.sentence_classifier', **models.SENTENCE_DEFAULTS},
      1e-4, {'num_epochs': 20, 'log_every_steps': 50, 'early_stopping_patience': 4})
  config.optimizer.name = 'adam'
  config.optimizer.learning_rate = 2e-3
  common.add_variants(config, {name: {'model': {'attention': name}} for name in ATTENTION_VARIANTS},
                      attention)
  return common.shrink(config, TINY_SIZES) if tiny else config


def pair_config(data: Mapping[str, Any], *, attention: Optional[str] = None, glove: str = '',
                tiny: bool = False) -> ml_collections.ConfigDict:
  """The Table 1 config of the pair model on SNLI (sec. 4.1).

  LSTM 150 per direction = 100 semantic + 50 structure (eq. 7), 300-d GloVe 840B vectors (`glove`;
  without a file, 300-d word2vec trained on train + dev), every parameter including the embeddings
  trained with Adagrad 0.05 (no L2), perceptrons of 200, dropout 0.2, batches of 32; 20 epochs with
  early stopping (patience 4).

  Args:
    data: the `snli` loader keys of the data (`manual_dir`, `validation_fraction`), applied last.
    attention: one of `ATTENTION_VARIANTS` only; None: all of them in `config.variants`.
    glove: a pretrained vector file ('' for word2vec; `tiny` keeps it and its size).
    tiny: small sizes for a CPU smoke run.
  """
  config = _config(
      'pair', 'snli',
      {'embeddings': glove or 'word2vec', 'embedding_dim': 300, 'batch_size': 32, **data},
      {'name': 'liu_lapata.pair_classifier', **models.PAIR_DEFAULTS},
      0.0, {'num_epochs': 20, 'log_every_steps': 50, 'early_stopping_patience': 4})
  common.add_variants(config, {name: {'model': {'attention': name}} for name in ATTENTION_VARIANTS},
                      attention)
  return common.shrink(config, TINY_SIZES, keep_embeddings=bool(glove)) if tiny else config


def document_task(name: str) -> Callable[[str], ml_collections.ConfigDict]:
  """`get_config(options)` of configs/liu_lapata/<name>.py, a `DOCUMENTS` data set."""

  def get_config(options: str = '') -> ml_collections.ConfigDict:
    opts = common.parse_options(options, f'configs/liu_lapata/{name}.py',
                                choices={'row': sorted(DOCUMENT_VARIANTS)})
    loader, data, eval_every_steps = DOCUMENTS[name]
    return document_config(loader, data, variant=opts.row, tiny=opts.tiny,
                           eval_every_steps=eval_every_steps)
  return get_config


def sst_task(labels: str) -> Callable[[str], ml_collections.ConfigDict]:
  """`get_config(options)` of configs/liu_lapata/sst_<labels>.py ('binary' or 'fine'). SST is small:
  every training word is kept."""

  def get_config(options: str = '') -> ml_collections.ConfigDict:
    opts = common.parse_options(options, f'configs/liu_lapata/sst_{labels}.py',
                                choices={'attention': ATTENTION_VARIANTS})
    data = {'config': labels, 'manual_dir': common.shared('sst'), 'min_count': 1}
    return sentence_config('sst', data, attention=opts.attention, tiny=opts.tiny)
  return get_config
