r"""The Liu & Lapata (2018) sentence model on the Stanford Sentiment Treebank, fine-grained (SST-5).

  python -m launch.train --config=configs/liu_lapata/sst_fine.py --workdir=/tmp/sst5
  python -m launch.train --config=configs/liu_lapata/sst_fine.py:structured --workdir=/tmp/sst5_s

Data: ../shared/data/sst (PTB-format trees; `sst` loader, config 'fine': five classes,
root labels only; path relative to the repository root). The paper evaluates its sentence model on
SNLI only (Table 1); this config applies the sentence model of sec. 3.1 (embeddings -> BiLSTM ->
attention -> pooling -> classifier) with the document experiments' settings of sec. 4.2: 200-d
word2vec vectors trained on train + dev, BiLSTM hidden 100 per direction = 75 semantic + 25 structure
(eq. 7), max pooling, dropout 0.3 on the input and output layers, Adagrad 0.05, L2 1e-4 except
embeddings, batches of 32 grouped by length. SST is small, so every training word is kept
(min_count 1).

Options (comma-separated after the file name):
  ''                                   `variants`: none / simple / inside_outside / structured.
  none|simple|inside_outside|structured  that attention only.
  tiny                                 small sizes and 30 steps, for a CPU smoke run.
"""
import ml_collections

from jax_structured.data import loaders
from jax_structured.training import config as training_config

SST_CONFIG = 'fine'
ATTENTIONS = ('none', 'simple', 'inside_outside', 'structured')


def _options(text, file):
  attention, tiny = None, False
  for option in [o.strip() for o in (text or '').split(',') if o.strip()]:
    if option in ATTENTIONS and attention is None:
      attention = option
    elif option == 'tiny':
      tiny = True
    else:
      raise ValueError(f'{file}: unknown or repeated option {option!r}; known: {list(ATTENTIONS)} '
                       '(at most one), tiny')
  return attention, tiny


def get_config(options=''):
  """The SST config; `options` as in the module docstring."""
  attention, tiny = _options(options, f'configs/liu_lapata/sst_{SST_CONFIG}.py')
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = 'sentence'
  config.parallel = 'shard_map'
  config.distributed = False

  config.data = loaders.default_config('sst')
  config.data.config = SST_CONFIG
  config.data.manual_dir = '../shared/data/sst'
  config.data.min_count = 1
  config.data.embeddings = 'word2vec'
  config.data.embedding_dim = 200
  config.data.batch_size = 32

  config.model = ml_collections.ConfigDict()
  config.model.name = 'liu_lapata.sentence_classifier'
  config.model.embedding_dim = 200
  config.model.freeze_embeddings = False
  config.model.hidden_size = 100
  config.model.semantic_size = 75
  config.model.num_layers = 1
  config.model.attention = attention or 'structured'
  config.model.pooling = 'max'
  config.model.mlp_hidden = 0
  config.model.dropout_rate = 0.3
  config.model.single_root = True

  config.optimizer = training_config.optimizer_defaults()
  config.optimizer.name = 'adagrad'
  config.optimizer.learning_rate = 0.05
  config.optimizer.weight_decay = 1e-4

  config.train = training_config.train_defaults()
  config.train.num_epochs = 20
  config.train.log_every_steps = 50
  config.train.early_stopping_patience = 4

  config.variants = ml_collections.ConfigDict()
  if attention is None:
    for name in ATTENTIONS:
      config.variants[name] = {'model': {'attention': name}}

  if tiny:
    config.data.embeddings = ''
    config.data.embedding_dim = 16
    config.data.batch_size = 8
    config.model.embedding_dim = 16
    config.model.hidden_size = 8
    config.model.semantic_size = 6
    config.train.num_epochs = 1
    config.train.num_steps = 30
    config.train.log_every_steps = 10
  return config
