"""Configs reproducing Luo & Zhu, "Recurrent Neural Networks with Mixed Hierarchical Structures"
(MHS-RNN), with its baselines HAN and HM-RNN: Table I on Yelp 2013-15, Yahoo Answers and Amazon (one
file each), and our own Debian package descriptions (debian.py).

Options (comma-separated after the file name):
  ''                      `variants`: mhs_rnn_attention, mhs_rnn, hn_att, hn_ave, hm_rnn side by side.
  <one of those>          that row only.
  tiny                    8-d layers, 20 steps, for a CPU smoke run.
This module holds the family's settings (`document_config`), its data sets (`DATASETS`) and the
paper's figures (`PAPER_TEST_ACCURACY`). Any text_classification folder works with
`--text_classification_dir=DIR`.
"""
from typing import Any, Callable, Mapping, Optional

import ml_collections

from configs import common
from jax_structured.models import encoders
from jax_structured.models import luo_zhu as models

# Table I rows we implement: name -> config.model.encoder overrides.
VARIANTS = {
    'mhs_rnn_attention': {'name': 'mhs_rnn', 'attention': True},
    'mhs_rnn': {'name': 'mhs_rnn', 'attention': False},
    'hn_att': {'name': 'han', 'attention': True},
    'hn_ave': {'name': 'han', 'attention': False},
    'hm_rnn': {'name': 'hm_rnn', 'num_layers': 3},
}
# config.model.static_boundaries per encoder: MHS-RNN's p_t on every punctuation mark (eq. 2); HAN's
# sentences are the loader's sentences (Yang et al.); HM-RNN reads no static boundary.
STATIC_BOUNDARIES_OF = {'mhs_rnn': 'punctuation', 'han': 'sentences', 'hm_rnn': 'sentences'}

# Config file name -> (loader, loader keys). Table I's upstream files go in TFDS's manual folder.
DATASETS = {
    **{name: ('document_classification', {'config': name, 'manual_dir': common.manual_dir(name)})
       for name in ('yelp13', 'yelp14', 'yelp15', 'yahoo', 'amazon')},
    'debian': ('text_classification',
               {'manual_dir': common.shared('debian_descriptions'), 'split_sentences': True}),
}

# Table I of Luo & Zhu: test accuracy (%) of the rows we implement, per data set.
PAPER_TEST_ACCURACY = {
    'yelp13': {'hn_ave': 65.6, 'hn_att': 66.0, 'hm_rnn': 64.0, 'mhs_rnn': 65.2, 'mhs_rnn_attention': 66.8},
    'yelp14': {'hn_ave': 67.3, 'hn_att': 68.9, 'hm_rnn': 64.5, 'mhs_rnn': 67.5, 'mhs_rnn_attention': 69.3},
    'yelp15': {'hn_ave': 67.8, 'hn_att': 69.4, 'hm_rnn': 64.9, 'mhs_rnn': 67.7, 'mhs_rnn_attention': 69.9},
    'yahoo': {'hn_ave': 71.8, 'hn_att': 73.8, 'hm_rnn': 71.0, 'mhs_rnn': 72.3, 'mhs_rnn_attention': 74.1},
    'amazon': {'hn_ave': 59.7, 'hn_att': 60.7, 'hm_rnn': 59.0, 'mhs_rnn': 59.7, 'mhs_rnn_attention': 61.2},
}

# The `tiny` option: 8-d vectors and layers, slope annealed over at most 10 steps, 20 steps.
TINY_SIZES = {'hidden_size': 8, 'slope_anneal_steps': 10}


def encoder_section(row: Mapping[str, Any]) -> dict[str, Any]:
  """A full encoder section: the row's encoder at its defaults, 50-d, slope 1 -> 5 over 2000 steps."""
  section = dict(encoders.default_config(row['name']))
  section.update(row)
  section['hidden_size'] = 50
  if 'slope' in section:
    section.update(slope=1.0, slope_end=5.0, slope_anneal_steps=2000)
  return section


def document_config(loader: str, data: Mapping[str, Any], *, variant: Optional[str] = None,
                    tiny: bool = False) -> ml_collections.ConfigDict:
  """The sec. IV-B setting on one data set.

  100-d word vectors (the paper: pretrained GloVe; here word2vec trained on train + dev unless `data`
  names a file), every layer 50-d, batches of 64 documents of similar length (length buckets), SGD
  with momentum 0.9 (learning rate 0.05, picked on dev as the paper does), 10% of train held out as
  dev where the data has no dev split, slope annealed 1 -> 5, every punctuation token mapped to 'p'
  (`data.punctuation='p'`; 'keep' keeps the tokens) and a static boundary for MHS-RNN
  (`model.static_boundaries`, per row `STATIC_BOUNDARIES_OF`).

  Args:
    loader: 'document_classification' or 'text_classification' (with split_sentences=True in `data`).
    data: the data set's loader keys, applied last.
    variant: a `VARIANTS` row only; None: every row in `config.variants`.
    tiny: 8-d layers, batches of 8, 20 steps, for a CPU smoke run.
  """
  encoder = {}
  for name in reversed(models.FAMILY):  # the union of the family's keys (see models.luo_zhu)
    encoder.update(encoder_section({'name': name}))
  config = common.experiment(
      'document', loader,
      data={'min_count': 6, 'max_sentences': 60, 'max_sentence_length': 80, 'embeddings': 'word2vec',
            'embedding_dim': 100, 'batch_size': 64, 'validation_fraction': 0.1, 'punctuation': 'p',
            **data},
      model={'name': 'luo_zhu.document_classifier', 'embedding_dim': 100, 'freeze_embeddings': False,
             'embedding_dropout': 0.0, 'dropout_rate': 0.0, 'mlp_hidden': 0, 'pooling': 'encoder',
             'static_boundaries': 'punctuation', 'encoder': encoder},
      optimizer={'name': 'sgd', 'momentum': 0.9, 'learning_rate': 0.05},
      train={'num_epochs': 10, 'log_every_steps': 50, 'early_stopping_patience': 3})
  rows = {name: {'model': {'static_boundaries': STATIC_BOUNDARIES_OF[row['name']],
                           'encoder': encoder_section(row)}} for name, row in VARIANTS.items()}
  common.add_variants(config, rows, variant)
  if tiny:
    common.shrink(config, TINY_SIZES, embedding_dim=8, num_steps=20)
  return config


def dataset_task(name: str) -> Callable[[str], ml_collections.ConfigDict]:
  """`get_config(options)` of configs/luo_zhu/<name>.py, a `DATASETS` entry (options: module docstring)."""

  def get_config(options: str = '') -> ml_collections.ConfigDict:
    opts = common.parse_options(options, f'configs/luo_zhu/{name}.py', choices={'row': sorted(VARIANTS)})
    loader, data = DATASETS[name]
    return document_config(loader, data, variant=opts.row, tiny=opts.tiny)
  return get_config
