r"""Table 3 of Cheng, Dong & Lapata (2016): natural language inference on SNLI.

  python -m launch.train --config=configs/cheng/snli.py --workdir=/tmp/snli_lstmn
  python -m launch.train --config=configs/cheng/snli.py:deep,h300 --workdir=/tmp/snli_deep300

Section 5.3: two LSTMNs read premise and hypothesis; the hypothesis LSTMN either reads alone
(`fusion='none'`, "LSTMN") or attends to the premise tapes with shallow or deep fusion (Fig. 3);
average pooling of both hidden tapes, concatenated -> 2-layer ReLU classifier; Adam (0.9, 0.999),
learning rate 1e-3, mini-batches of 32 (the paper: 16 or 32), dropout chosen from 0.1-0.4 (we use
0.2), hidden/memory size 100, 300 or 450. Paper test accuracies: LSTMN 81.5 (h=100); shallow fusion
84.3 / 85.2 / 86.0 and deep fusion 84.5 / 85.7 / 86.3 for h = 100 / 300 / 450.

**Only SNLI dev and test are available here** (../shared/data/snli_1.0 has no training file: it is
larger than the copy limit, see its PROVENANCE.md). This config therefore TRAINS ON THE SNLI
VALIDATION SET and TESTS ON THE SNLI TEST SET: 10% of SNLI-dev (held out deterministically by
`data.validation_fraction`) is our dev split for model selection and the other 90% (about 8.9k pairs,
1.6% of the 550k training pairs of the paper) is our training set, so the accuracies are far below
Table 3 and not comparable to it. Because the `snli` loader builds its vocabulary on a `train` file,
`get_config` prepares a folder of symbolic links (`snli_1.0_train.jsonl.gz` -> SNLI dev,
`snli_1.0_test.jsonl.gz` -> SNLI test, no dev file) under `$JAX_STRUCTURED_CACHE` (default
`~/.cache/jax_structured`) and points `data.manual_dir` at it. With the real training file, set
`--config.data.manual_dir=/path/to/snli_1.0 --config.data.validation_fraction=0`.

Embeddings: `glove=PATH` reads 300-d GloVe vectors (the paper's; it updates only the vectors of OOV
words in epoch 1, which our optimiser cannot single out, so all vectors are trained from the start);
without a file, 300-d word2vec vectors are trained on our train + dev split.

Options (comma-separated, after the file name):
  ''                   `variants` = LSTMN, shallow fusion, deep fusion at the chosen size (Table 3).
  none|shallow|deep    that model only.
  h100|h300|h450       hidden/memory size (default 100).
  glove=PATH           pretrained vectors.
  tiny                 small sizes for a CPU smoke run (embeddings 16, hidden 16, 40 steps).
"""
from configs import cheng
from configs import common

FUSIONS = ('none', 'shallow', 'deep')
SIZES = {'h100': 100, 'h300': 300, 'h450': 450}
PAPER_TEST_ACCURACY = {('none', 100): 81.5, ('shallow', 100): 84.3, ('deep', 100): 84.5,
                       ('shallow', 300): 85.2, ('deep', 300): 85.7, ('shallow', 450): 86.0,
                       ('deep', 450): 86.3}


def get_config(options=''):
  """The Table 3 config; `options` as in the module docstring (creates the dev-as-train links)."""
  opts = common.parse_options(options, 'configs/cheng/snli.py',
                              choices={'fusion': FUSIONS, 'size': tuple(SIZES)}, paths=('glove',))
  hidden = SIZES[opts.size or 'h100']
  config = common.experiment(
      'pair', 'snli',
      data={'manual_dir': common.snli_dev_as_train(), 'validation_fraction': 0.1, 'batch_size': 32,
            'embeddings': opts.glove or 'word2vec', 'embedding_dim': 300},
      model={'name': 'lstmn.pair_classifier', 'fusion': opts.fusion or 'deep', 'cell': 'lstmn',
             'embedding_dim': 300, 'hidden_size': hidden, 'mlp_size': hidden, 'dropout_rate': 0.2},
      optimizer={'name': 'adam', 'learning_rate': 1e-3, 'b1': 0.9, 'b2': 0.999},
      train={'num_epochs': 20, 'early_stopping_patience': 4, 'eval_batch_size': 128,
             'log_every_steps': 50})
  if opts.fusion is None:
    common.add_variants(config, {name: {'model': {'fusion': name}} for name in FUSIONS}, None)
  if opts.tiny:
    cheng.shrink_classifier(config, batch_size=16, keep_embeddings=bool(opts.glove))
  return config
