"""A CPU-sized parser config (tests, smoke runs): tiny dimensions, few steps, short sentences.

python -m launch.train --config=configs/parser/ewt_tiny.py --workdir=/tmp/parser_tiny
Tests override `data.manual_dir` / `data.data_dir` to a tiny CoNLL-U treebank of their own.
"""
import ml_collections

from configs.parser import ewt


def get_config() -> ml_collections.ConfigDict:
  config = ewt.get_config()
  config.parallel = 'none'
  config.data.max_length = 30  # training sentences of at most 30 words
  config.data.batch_size = 16
  config.data.bucket_boundaries = (8, 16, 32, 64, 128, 256)
  config.model.word_dim = 32
  config.model.tag_dim = 16
  config.model.lstm_hidden = 32
  config.model.lstm_layers = 1
  config.model.tagger_hidden = 16
  config.model.arc_mlp = 32
  config.model.label_mlp = 16
  config.model.dropout = 0.2
  config.optimizer.schedule = 'constant'
  config.train.num_epochs = 0
  config.train.num_steps = 300
  config.train.eval_every_steps = 100
  config.train.early_stopping_patience = 0
  config.train.log_every_steps = 50
  return config
