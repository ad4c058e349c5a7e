r"""Liu & Lapata (2018), Table 4: congressional floor debates (2 classes) with the hierarchical document model.

  python -m launch.train --config=configs/liu_lapata/debates.py --workdir=/tmp/debates
  python -m launch.train --config=configs/liu_lapata/debates.py:both --workdir=/tmp/debates_both

Data: the congressional floor debates (convote) of Thomas et al. (2006) (`document_classification` loader, builder config `convote`). No copy is
shipped: put the upstream files in ~/tensorflow_datasets/downloads/manual/convote or set
`--config.data.manual_dir` (the builder's MANUAL_DOWNLOAD_INSTRUCTIONS say where to get them).

Model and training as in sec. 4.2: words seen more than five times (min_count 6, others -> UNK),
200-d word2vec vectors trained on the train + dev splits, sentence- and document-level BiLSTMs with
hidden size 100 per direction split into 75 semantic + 25 structure features (eq. 7), dropout 0.3 on
the input and output layers, Adagrad with learning rate 0.05, L2 1e-4 on every parameter except the
word embeddings, mini-batches of 32 documents grouped by length (the loader's buckets). The paper does
not name the pooling; max pooling at both levels is the default of the authors' released code (30
epochs there; we stop early on dev accuracy). Documents are truncated to 100 sentences of
200 words to bound the padded shapes (counted in TaskData.skipped).

Options (comma-separated after the file name):
  ''                                 `variants`: the five Table 4 rows side by side (none, simple,
                                     sentence, document, both).
  none|simple|sentence|document|both that row only.
  tiny                               small sizes and 30 steps, for a CPU smoke run.
Paper test accuracy (Table 4): none 73.7, simple 75.3, sentence 74.6, document 75.2, both 76.5.
"""
import os

import ml_collections

from jax_structured.data import loaders
from jax_structured.training import config as training_config

# Table 4 rows: (sentence_attention, document_attention, hidden size per direction).
VARIANTS = {
    'none': ('none', 'none', 75),  # "75D No Attention"
    'simple': ('simple', 'simple', 100),  # "100D Simple Attention"
    'sentence': ('structured', 'none', 100),  # "Structured Attention (sentence-level)"
    'document': ('none', 'structured', 100),  # "Structured Attention (document-level)"
    'both': ('structured', 'structured', 100),  # "Structured Attention (both levels)"
}
PAPER_TEST_ACCURACY = {'none': 73.7, 'simple': 75.3, 'sentence': 74.6, 'document': 75.2, 'both': 76.5}


def _variant_overrides(name):
  sentence, document, hidden = VARIANTS[name]
  return {'model': {'sentence_attention': sentence, 'document_attention': document,
                    'hidden_size': hidden}}


def _options(text):
  variant, tiny = None, False
  for option in [o.strip() for o in (text or '').split(',') if o.strip()]:
    if option in VARIANTS and variant is None:
      variant = option
    elif option == 'tiny':
      tiny = True
    else:
      raise ValueError(f'configs/liu_lapata/debates.py: unknown or repeated option {option!r}; known: '
                       f'{sorted(VARIANTS)} (at most one), tiny')
  return variant, tiny


def get_config(options=''):
  """The Table 4 config for congressional floor debates (2 classes); `options` as in the module docstring."""
  variant, tiny = _options(options)
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = 'document'
  config.parallel = 'shard_map'
  config.distributed = False

  config.data = loaders.default_config('document_classification')
  config.data.config = 'convote'
  # The upstream files (override with --config.data.manual_dir=PATH); TFDS's usual manual folder.
  config.data.manual_dir = os.path.expanduser('~/tensorflow_datasets/downloads/manual/convote')
  config.data.min_count = 6
  config.data.max_sentences = 100
  config.data.max_sentence_length = 200
  config.data.embeddings = 'word2vec'
  config.data.embedding_dim = 200
  config.data.batch_size = 32

  config.model = ml_collections.ConfigDict()
  config.model.name = 'liu_lapata.document_classifier'
  config.model.embedding_dim = 200
  config.model.freeze_embeddings = False
  config.model.hidden_size = 100
  config.model.semantic_size = 75
  config.model.num_layers = 1
  config.model.sentence_attention = 'structured'
  config.model.document_attention = 'structured'
  config.model.pooling = 'max'
  config.model.mlp_hidden = 0
  config.model.dropout_rate = 0.3
  config.model.single_root = True

  config.optimizer = training_config.optimizer_defaults()
  config.optimizer.name = 'adagrad'
  config.optimizer.learning_rate = 0.05
  config.optimizer.weight_decay = 1e-4  # L2 on non-embedding parameters only

  config.train = training_config.train_defaults()
  config.train.num_epochs = 30
  config.train.eval_every_steps = 0
  config.train.checkpoint_every_steps = 0
  config.train.log_every_steps = 100
  config.train.early_stopping_patience = 5

  config.variants = ml_collections.ConfigDict()
  if variant is None:
    for name in VARIANTS:
      config.variants[name] = _variant_overrides(name)
  else:
    config.model.update(_variant_overrides(variant)['model'])

  if tiny:
    config.data.embeddings = ''
    config.data.embedding_dim = 16
    config.data.batch_size = 8
    config.model.embedding_dim = 16
    config.model.hidden_size = 8
    config.model.semantic_size = 6
    for name in config.variants:
      config.variants[name].model.hidden_size = 8
    config.train.num_epochs = 1
    config.train.num_steps = 30
    config.train.eval_every_steps = 0
    config.train.checkpoint_every_steps = 0
    config.train.log_every_steps = 10
  return config
