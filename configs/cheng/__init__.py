"""Configs of Cheng, Dong & Lapata (2016), "Long Short-Term Memory-Networks for Machine Reading".

  ptb_lm.py  Table 1: language modelling on the Penn Treebank (LSTM-1, LSTMN-1, sLSTM-3, LSTMN-3).
  sst.py     Table 2: fine-grained / binary sentiment on the Stanford Sentiment Treebank (1-, 2-layer).
  snli.py    Table 3: natural language inference on SNLI (no / shallow / deep fusion, h = 100/300/450).

Each `get_config(options)` takes a comma-separated option string after the file name
(`--config=configs/cheng/ptb_lm.py:tiny,lstmn1`); every file accepts `tiny` (a small CPU-sized model).
"""
from configs import common

# The `tiny` option of the classifiers (Tables 2 and 3): 16-d embeddings, hidden and MLP sizes.
TINY_SIZES = {'hidden_size': 16, 'mlp_size': 16}


def shrink_classifier(config, *, batch_size: int, keep_embeddings: bool):
  """The `tiny` option of configs/cheng/{sst,snli}.py, in place: 16-d sizes, 40 steps of one epoch;
  random 16-d vectors unless `keep_embeddings` (a user-given `glove=` file stays, with its size)."""
  common.shrink(config, TINY_SIZES, batch_size=batch_size, num_steps=40, keep_embeddings=keep_embeddings)
  config.train.eval_batch_size = 64
  return config
