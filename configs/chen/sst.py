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
from configs import common

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


def get_config(options=''):
  """The Table 1 config; `options` as in the module docstring."""
  opts = common.parse_options(options, 'configs/chen/sst.py',
                              choices={'row': sorted(ROWS), 'labels': ('fine', 'binary')},
                              paths=('embeddings',), flags=('phrases',))
  encoder, pooling = ROWS[opts.row or 'ap_dcnn']
  config = common.experiment(
      'sentence', 'sst',
      data={'config': opts.labels or 'fine', 'manual_dir': common.shared('sst'), 'binary_trees': True,
            'train_phrases': opts.phrases, 'batch_size': 50, 'embeddings': opts.embeddings or 'word2vec',
            'embedding_dim': 300},
      model={'name': 'classifier.sentence', 'encoder': dict(encoder), 'pooling': pooling,
             'embedding_dim': 300, 'freeze_embeddings': False, 'embedding_dropout': 0.0,
             'dropout_rate': 0.5, 'mlp_hidden': 0},
      optimizer={'name': 'adadelta', 'learning_rate': 0.05, 'rho': 0.95, 'eps': 1e-6,
                 'weight_decay': 1e-4},
      train={'num_epochs': 10, 'early_stopping_patience': 3, 'eval_batch_size': 100,
             'log_every_steps': 50})
  for section, values in row_settings(opts.row or 'ap_dcnn').items():
    config[section].update(values)
  if opts.row is None:
    rows = {}
    for name, (section, pool) in ROWS.items():
      rows[name] = row_settings(name)
      rows[name]['model'].update({'encoder': dict(section), 'pooling': pool})
    common.add_variants(config, rows, None)
  return _shrink(config) if opts.tiny else config


def row_settings(row):
  """{section: {key: value}} of `row` beyond its encoder and pooling: ROW_DEFAULTS under ROW_SETTINGS."""
  out = {section: dict(values) for section, values in ROW_DEFAULTS.items()}
  for section, values in ROW_SETTINGS.get(row, {}).items():
    out[section].update(values)
  return out


def _shrink(config):
  """The `tiny` option, in place: 16-d random vectors, tiny encoders with one (3, 2) branch, batches of
  8, 30 steps, Adadelta's usual learning rate 1.0 (so that 30 steps move the weights)."""
  common.shrink(config, TINY_SIZES)
  for section in common.model_sections(config):
    if 'branches' in section:
      section['branches'] = ((3, 2),)
  config.optimizer.learning_rate = 1.0
  config.train.eval_batch_size = 50
  return config
