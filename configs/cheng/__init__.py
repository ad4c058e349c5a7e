"""Configs of Cheng, Dong & Lapata (2016), "Long Short-Term Memory-Networks for Machine Reading".

  ptb_lm.py  Table 1: language modelling on the Penn Treebank (LSTM-1, LSTMN-1, sLSTM-3, LSTMN-3).
  sst.py     Table 2: fine-grained / binary sentiment on the Stanford Sentiment Treebank (1-, 2-layer).
  snli.py    Table 3: natural language inference on SNLI (no / shallow / deep fusion, h = 100/300/450).

Each `get_config(options)` takes a comma-separated option string after the file name
(`--config=configs/cheng/ptb_lm.py:tiny,lstmn1`); every file accepts `tiny` (a small CPU-sized model).
"""
