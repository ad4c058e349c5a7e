r"""Table 2 of Cheng, Dong & Lapata (2016): sentiment classification on the Stanford Sentiment Treebank.

  python -m launch.train --config=configs/cheng/sst.py --workdir=/tmp/sst_lstmn
  python -m launch.train --config=configs/cheng/sst.py:binary,lstmn2 --workdir=/tmp/sst2_lstmn2
  python -m launch.train --config=configs/cheng/sst.py:glove=/data/glove.840B.300d.txt --workdir=...

Section 5.2: fine-grained (5 classes; 8544/1101/2210 sentences) or binary (neutral removed;
6920/872/1821) sentence labels; 1- and 2-layer LSTMN with memory size 168; the averaged hidden vector
goes to a 2-layer ReLU classifier with dropout 0.5; Adam (0.9, 0.999) with learning rate 2e-3, L2
constant 1e-4, mini-batches of 5; 300-d GloVe 840B embeddings whose gradient is scaled by 0.35 in the
first epoch. Paper test accuracies: LSTMN 47.6 / 86.3, 2-layer LSTMN 47.9 / 87.0 (fine / binary).

Embeddings: `glove=PATH` (or `--config.data.embeddings=PATH --config.optimizer.embedding_grad_scale=0.35`)
reads a GloVe/word2vec text or binary file (cased 840B vectors, so the text is not lowercased);
without a file, 300-d word2vec vectors are trained on train + dev (`data.embeddings='word2vec'`) and
updated normally. The hidden size of the ReLU layer is not given in the paper; we use 168.
Not stated either: the number of epochs (we train 10, keep the best dev accuracy, stop after 3
evaluations without improvement).

Options (comma-separated, after the file name):
  ''             LSTMN-1 base, `variants` = 1- and 2-layer LSTMN (Table 2), fine-grained labels.
  lstmn1|lstmn2|lstm1|lstm2  that one model only (lstm* = the LSTM baselines of Tai et al.).
  fine|binary    the label set (default fine).
  glove=PATH     pretrained vectors from PATH, gradient scale 0.35 in epoch 1.
  tiny           small sizes for a CPU smoke run (embeddings 16, memory 16, batch 8, no word2vec).
"""
from configs import cheng
from configs import common

MODELS = {'lstmn1': ('lstmn', 1), 'lstmn2': ('lstmn', 2), 'lstm1': ('lstm', 1), 'lstm2': ('lstm', 2)}
PAPER_TEST_ACCURACY = {'fine': {'lstmn1': 47.6, 'lstmn2': 47.9, 'lstm1': 46.4, 'lstm2': 46.0},
                       'binary': {'lstmn1': 86.3, 'lstmn2': 87.0, 'lstm1': 84.9, 'lstm2': 86.3}}


def get_config(options=''):
  """The Table 2 config; `options` as in the module docstring."""
  opts = common.parse_options(options, 'configs/cheng/sst.py',
                              choices={'model': tuple(MODELS), 'labels': ('fine', 'binary')},
                              paths=('glove',))
  cell, layers = MODELS[opts.model or 'lstmn1']
  config = common.experiment(
      'sentence', 'sst',
      data={'config': opts.labels or 'fine', 'manual_dir': common.shared('sst'), 'batch_size': 5,
            'embeddings': opts.glove or 'word2vec', 'embedding_dim': 300, 'lowercase': not opts.glove},
      model={'name': 'lstmn.sentence_classifier', 'cell': cell, 'num_layers': layers,
             'embedding_dim': 300, 'hidden_size': 168, 'mlp_size': 168, 'dropout_rate': 0.5},
      optimizer={'name': 'adam', 'learning_rate': 2e-3, 'b1': 0.9, 'b2': 0.999, 'weight_decay': 1e-4,
                 'embedding_grad_scale': 0.35 if opts.glove else 1.0, 'embedding_scale_epochs': 1},
      train={'num_epochs': 10, 'early_stopping_patience': 3, 'eval_batch_size': 50,
             'log_every_steps': 200})
  if opts.model is None:
    common.add_variants(config, {name: {'model': {'cell': MODELS[name][0], 'num_layers': MODELS[name][1]}}
                                 for name in ('lstmn1', 'lstmn2')}, None)
  if opts.tiny:
    cheng.shrink_classifier(config, batch_size=8, keep_embeddings=bool(opts.glove))
  return config
