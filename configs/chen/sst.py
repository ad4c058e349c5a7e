r"""Table 1 of Chen et al. (2017), "Tree-LSTM guided attention pooling of DCNN": SST fine-grained / binary.

  python -m launch.train --config=configs/chen/sst.py --workdir=/tmp/chen_sst
  python -m launch.train --config=configs/chen/sst.py:binary,ap_dcnn --workdir=/tmp/chen_sst2_ap
  python -m launch.train --config=configs/chen/sst.py:tiny --workdir=/tmp/chen_tiny

Every row runs in the same code on the same data: the 'classifier.sentence' head (one embedding layer,
dropout 0.5 on the penultimate layer, a linear softmax classifier: Chen eqs. 12-13) over one encoder of
`models.chen` / `models.encoders`. The sst loader runs with `data.binary_trees=True` for every row (the binary
Tree-LSTM needs the trees; the tokens are then the tree leaves for all rows alike).

Rows (`variants`; pick one with its name):
  cnn_non_static  Kim (2014) CNN, widths 3/4/5, 100 maps each, max over time (the encoder's vector).
  cnn_multichannel  the same CNN over two channels of the same vectors, one fine-tuned, one static
                  (`model.static_channel`: each filter applied to both and the results added, Kim 2014).
  dcnn            DCNN, wide convolutions of widths 7 then 5, 100 feature maps, dynamic k-max pooling,
                  k_top 4, tanh (Kalchbrenner et al. 2014; Chen eqs. 2-3).
  lstm, bilstm    LSTM / BiLSTM of Tai et al.'s sizes (168 / 168 per direction), max pooling.
  tree_lstm       binary Tree-LSTM of 150 units over SST's trees, the root's h (Tai et al.; Chen 4-9);
                  trained on every labelled phrase too (Tai et al. sec. 5.1: `model.phrase_logits`,
                  `train.phrase_loss_weight` 1: the root's NLL plus the mean NLL of the other nodes).
  ap_dcnn         AP-DCNN as eq. 12 is written: classifier input s in training, [s, s~] at test.
  ap_dcnn_both    AP-DCNN with [s, s~] in training and at test (a consistent variant).
  ap_dcnn_phrases AP-DCNN as written, its Tree-LSTM trained on every labelled phrase too, as the
                  tree_lstm row's: each node's h classified by the s~ block of the output layer (the
                  block eq. 12 adds at test, which nothing else trains), weight 1 (models/chen.py).
                  With [s, s~] in training too: `--config.model.encoder.classifier_input=both`.

Training (sec. 3.1): Adadelta (rho 0.95, eps 1e-6) with learning rate 0.05, L2 1e-4 per minibatch
(`optimizer.weight_decay`), dropout 0.5 on the penultimate layer, batches of 50, 300-d vectors updated
in training; 10 epochs, the best dev accuracy kept, early stop after 3 evaluations without improvement
(the paper gives no epoch count). Adadelta's rate 0.05 is the paper's as written; it scales Zeiler's step
(optax's `learning_rate`) and learns slowly: AP-DCNN on SST-5 with GloVe 50-d was at 35.8% dev after the
10 epochs, still rising, against 38.9% after 7 with `--config.optimizer.learning_rate=1.0` (Zeiler's rule
unscaled, as Kim's code runs it); the README's Table 1 figures use 1.0. The L2-norm (max-norm) constraint on the output weights (sec. 2.5;
Kim's s = 3, the paper gives none): `optimizer.max_norm` 3 in the CNN and AP-DCNN rows (Kim's and
Chen's), off in the DCNN, LSTM and Tree-LSTM rows (whose papers use none). Word vectors: `embeddings=NAME_OR_PATH` (e.g.
word2vec-google-news-300, the paper's; see data/embeddings.py), else word2vec trained on SST train+dev.

Options (comma-separated after the file name):
  ''                    every row as `variants`, fine-grained labels.
  <row>                 that row only.
  fine | binary         the label set (default fine).
  embeddings=NAME|PATH  pretrained vectors (300-d).
  phrases               train on every labelled phrase of the training trees as an example of its own
                        (`data.train_phrases`: its words and its subtree, root first), as Kim (2014) and
                        Kalchbrenner et al. (2014) train their SST models (the paper's CNN / DCNN rows);
                        dev / test stay whole sentences. Rows with node supervision keep it (turn it off
                        with --config.model.phrase_logits=False --config.train.phrase_loss_weight=0).
                        With GloVe 50-d it lifts every SST-2 row (+3.7 to +6.3), SST-5 rows by 0.2 at most (69% of
                        SST-5's training phrases are neutral, 19% of its sentences): README "AP-DCNN".
  tiny                  small sizes and 30 steps for a CPU smoke run (16-d random vectors, batch 8).
Paper test accuracy (Table 1, fine / binary): CNN-non-static 48.0 / 87.2, CNN-multichannel 47.4 / 88.1,
DCNN 48.5 / 86.8, LSTM 46.4 / 84.9, Bidirectional LSTM 49.1 / 87.5, Tree-LSTM 51.0 / 88.0, AP-DCNN
50.6 / 88.7 (the paper's column layout is garbled; these are its rows in order).
"""
import ml_collections

from jax_structured.data import loaders
from jax_structured import config as training_config

# Row -> (encoder section, pooling).
ROWS = {
    'cnn_non_static': ({'name': 'cnn', 'widths': (3, 4, 5), 'features': 100}, 'encoder'),
    'cnn_multichannel': ({'name': 'cnn', 'widths': (3, 4, 5), 'features': 100}, 'encoder'),
    'dcnn': ({'name': 'dcnn', 'branches': ((7, 5),), 'features': 100, 'k_top': 4}, 'encoder'),
    'lstm': ({'name': 'lstm', 'hidden_size': 168}, 'max'),
    'bilstm': ({'name': 'bilstm', 'hidden_size': 168}, 'max'),
    'tree_lstm': ({'name': 'tree_lstm', 'hidden_size': 150}, 'encoder'),
    'ap_dcnn': ({'name': 'ap_dcnn', 'branches': ((7, 5),), 'features': 100, 'k_top': 4,
                 'classifier_input': 'paper'}, 'encoder'),
    'ap_dcnn_both': ({'name': 'ap_dcnn', 'branches': ((7, 5),), 'features': 100, 'k_top': 4,
                      'classifier_input': 'both'}, 'encoder'),
    'ap_dcnn_phrases': ({'name': 'ap_dcnn', 'branches': ((7, 5),), 'features': 100, 'k_top': 4,
                         'classifier_input': 'paper'}, 'encoder'),
}
# Row -> its other settings (every row sets every key, so that no row inherits another's).
ROW_DEFAULTS = {'model': {'static_channel': False, 'phrase_logits': False}, 'optimizer': {'max_norm': 0.0},
                'train': {'phrase_loss_weight': 0.0}}
ROW_SETTINGS = {
    'cnn_non_static': {'optimizer': {'max_norm': 3.0}},
    'cnn_multichannel': {'model': {'static_channel': True}, 'optimizer': {'max_norm': 3.0}},
    'tree_lstm': {'model': {'phrase_logits': True}, 'train': {'phrase_loss_weight': 1.0}},
    'ap_dcnn': {'optimizer': {'max_norm': 3.0}},
    'ap_dcnn_both': {'optimizer': {'max_norm': 3.0}},
    'ap_dcnn_phrases': {'model': {'phrase_logits': True}, 'optimizer': {'max_norm': 3.0},
                        'train': {'phrase_loss_weight': 1.0}},
}
PAPER_TEST_ACCURACY = {
    'fine': {'cnn_non_static': 48.0, 'cnn_multichannel': 47.4, 'dcnn': 48.5, 'lstm': 46.4, 'bilstm': 49.1,
             'tree_lstm': 51.0, 'ap_dcnn': 50.6},
    'binary': {'cnn_non_static': 87.2, 'cnn_multichannel': 88.1, 'dcnn': 86.8, 'lstm': 84.9, 'bilstm': 87.5,
               'tree_lstm': 88.0, 'ap_dcnn': 88.7}}
# The tiny option's sizes for every encoder key it has.
TINY_SIZES = {'hidden_size': 8, 'features': 4, 'k_top': 2}


def _options(text):
  row, labels, vectors, tiny, phrases = None, 'fine', '', False, False
  for option in [o.strip() for o in (text or '').split(',') if o.strip()]:
    if option in ROWS:
      if row is not None:
        raise ValueError(f'configs/chen/sst.py: choose at most one row, got {row} and {option}')
      row = option
    elif option in ('fine', 'binary'):
      labels = option
    elif option.startswith('embeddings='):
      vectors = option[len('embeddings='):]
      if not vectors:
        raise ValueError('configs/chen/sst.py: embeddings= needs a registered name or a file path')
    elif option == 'tiny':
      tiny = True
    elif option == 'phrases':
      phrases = True
    else:
      raise ValueError(f'configs/chen/sst.py: unknown option {option!r}; known: one of {sorted(ROWS)}, '
                       'fine, binary, embeddings=NAME_OR_PATH, phrases, tiny')
  return row, labels, vectors, tiny, phrases


def get_config(options=''):
  """The Table 1 config; `options` as in the module docstring."""
  row, labels, vectors, tiny, phrases = _options(options)
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = 'sentence'
  config.parallel = 'shard_map'
  config.distributed = False

  config.data = loaders.default_config('sst')
  config.data.config = labels
  config.data.manual_dir = '../shared/data/sst'
  config.data.binary_trees = True
  config.data.train_phrases = phrases
  config.data.batch_size = 50
  config.data.embeddings = vectors or 'word2vec'
  config.data.embedding_dim = 300

  encoder, pooling = ROWS[row or 'ap_dcnn']
  config.model = ml_collections.ConfigDict()
  config.model.name = 'classifier.sentence'
  config.model.encoder = dict(encoder)
  config.model.pooling = pooling
  config.model.embedding_dim = 300
  config.model.freeze_embeddings = False
  config.model.embedding_dropout = 0.0
  config.model.dropout_rate = 0.5
  config.model.mlp_hidden = 0

  config.optimizer = training_config.optimizer_defaults()
  config.optimizer.name = 'adadelta'
  config.optimizer.learning_rate = 0.05
  config.optimizer.rho = 0.95
  config.optimizer.eps = 1e-6
  config.optimizer.weight_decay = 1e-4

  config.train = training_config.train_defaults()
  config.train.num_epochs = 10
  config.train.early_stopping_patience = 3
  config.train.eval_batch_size = 100
  config.train.log_every_steps = 50
  for section, values in row_settings(row or 'ap_dcnn').items():
    config[section].update(values)

  config.variants = ml_collections.ConfigDict()
  if row is None:
    for name, (section, pool) in ROWS.items():
      settings = row_settings(name)
      settings['model'].update({'encoder': dict(section), 'pooling': pool})
      config.variants[name] = settings

  if tiny:
    _shrink(config)
  return config


def row_settings(row):
  """{section: {key: value}} of `row` beyond its encoder and pooling: ROW_DEFAULTS under ROW_SETTINGS."""
  out = {section: dict(values) for section, values in ROW_DEFAULTS.items()}
  for section, values in ROW_SETTINGS.get(row, {}).items():
    out[section].update(values)
  return out


def _shrink(config):
  """The `tiny` option, in place: 16-d random vectors, tiny encoders, batches of 8, 30 steps."""
  config.data.embeddings = ''
  config.data.embedding_dim = 16
  config.data.batch_size = 8
  config.model.embedding_dim = 16
  config.optimizer.learning_rate = 1.0  # Adadelta's usual rate, so that 30 steps move the weights
  sections = [config.model.encoder] + [v.model.encoder for v in config.variants.values()]
  for section in sections:
    for key, size in TINY_SIZES.items():
      if key in section:
        section[key] = size
    if 'branches' in section:
      section['branches'] = ((3, 2),)
  config.train.num_epochs = 1
  config.train.num_steps = 30
  config.train.eval_every_steps = 0
  config.train.log_every_steps = 10
  config.train.eval_batch_size = 50
