r"""Liu & Lapata (2018), Table 1: natural language inference on SNLI (sec. 4.1).

  python -m launch.train --config=configs/liu_lapata/snli.py --workdir=/tmp/snli_ll
  python -m launch.train --config=configs/liu_lapata/snli.py:structured,glove=/data/glove.840B.300d.txt \
      --workdir=/tmp/snli_ll_structured

Model (`liu_lapata.pair_classifier`): premise and hypothesis are encoded by a shared BiLSTM with
intra-sentence attention, then compared by the decomposable attention of Parikh et al. (2016),
eqs. 20-23, with two-layer ReLU perceptrons of hidden size 200. Settings of the paper: LSTM hidden
size 150 per direction split into 100 semantic + 50 structure features (eq. 7), 300-d GloVe 840B
initial vectors (`glove=PATH`), every parameter including the embeddings trained with Adagrad at
learning rate 0.05, dropout 0.2, mini-batches of 32. (Table 1 labels its rows "175D" / "100D"; the
text gives the sizes used here.) Paper test accuracies: no attention 85.3, simple intra-sentence
attention 86.2, inside-outside 86.8, matrix inversion 86.9.

**Only SNLI dev and test are available here** (../shared/data/snli_1.0 lacks the training file, which
is larger than the copy limit; see its PROVENANCE.md). By default this config therefore TRAINS ON
SNLI-DEV (10% of it held out as our dev split by `data.validation_fraction`) and TESTS ON SNLI-TEST:
about 1.6% of the paper's training data, so accuracies are far below Table 1 and not comparable.
Because the `snli` loader reads a `train` file, `get_config` links `snli_1.0_train.jsonl.gz` -> SNLI
dev and `snli_1.0_test.jsonl.gz` -> SNLI test in `$JAX_STRUCTURED_CACHE/snli_dev_as_train` (default
`~/.cache/jax_structured`). With the real files use `snli_dir=PATH` (then no hold-out).

Options (comma-separated after the file name):
  ''                                     `variants`: the four Table 1 rows (none, simple,
                                         inside_outside, structured) side by side.
  none|simple|inside_outside|structured  that row only.
  glove=PATH                             300-d GloVe vectors (default: 300-d word2vec trained on
                                         our train + dev split).
  snli_dir=PATH                          a folder with the three SNLI 1.0 files.
  tiny                                   small sizes and 30 steps, for a CPU smoke run.
"""
from configs import common
from configs import liu_lapata


def get_config(options=''):
  """The Table 1 config; `options` as in the module docstring."""
  opts = common.parse_options(options, 'configs/liu_lapata/snli.py',
                              choices={'attention': liu_lapata.ATTENTION_VARIANTS},
                              paths=('glove', 'snli_dir'))
  if opts.snli_dir:
    data = {'manual_dir': opts.snli_dir, 'validation_fraction': 0.0}
  else:  # SNLI dev as the training set, 10% of it held out
    data = {'manual_dir': common.snli_dev_as_train(), 'validation_fraction': 0.1}
  return liu_lapata.pair_config(data, attention=opts.attention, glove=opts.glove, tiny=opts.tiny)
