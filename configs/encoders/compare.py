r"""Which encoder is best on MY data: every registered sentence encoder under ONE head and optimiser.

  python -m launch.train --config=configs/encoders/compare.py --workdir=/tmp/compare_trec
  python -m launch.train --config=configs/encoders/compare.py:sst --workdir=/tmp/compare_sst
  python -m launch.train --config=configs/encoders/compare.py:snli --workdir=/tmp/compare_snli
  python -m launch.train --config=configs/encoders/compare.py:bilstm_max,tiny --workdir=/tmp/c
  python -m launch.train --config=configs/encoders/compare.py:cnn --workdir=/tmp/compare_cnn_glove \
      --config.data.embeddings=glove-6b-50d
  python -m launch.train --config=configs/encoders/compare.py --workdir=/tmp/mine \
      --text_classification_dir=/path/to/my/tsv/folder

The papers are comparisons of encoders under one classifier (Yu et al. 2018, Tables 1-2: BoW, BiLSTM with
max pooling, structured attention, relation networks; Chen et al.: CNN, DCNN, LSTM, BiLSTM, Tree-LSTM;
Luo & Zhu: HAN, HM-RNN, MHS-RNN). This config is that comparison on any data: `variants` holds one row
per encoder in `ENCODERS` (an encoder section and its pooling), everything else is shared: the
'classifier.sentence' head (pairs: 'classifier.pair' with q = [u; v; u * v; |u - v|], Yu et al. sec. 4.1)
with a 1-hidden-layer ReLU MLP of 300 units, dropout 0.5 on the encoder's input (the embeddings) and
output (the classifier's input) as Yu et al. (appendix A.1), 300-d word vectors, Adam 1e-3 (Yu et al.
give Adam 1e-4 or Adagrad 0.01; 1e-3 reaches the same plateau in fewer CPU epochs), batches of 32,
trained to convergence: early stopping on dev accuracy (patience 10 evaluations, one per epoch) within
at most 50 epochs (the console says when the cap stopped a run whose dev accuracy was still
improving). Measured on the CNN row with glove-6b-50d on TREC: dev accuracy 0.820 after 10 epochs (the
old cap), a plateau at 0.866-0.870 from epoch 17 to 29, the best 0.892 at epoch 35 (test 0.902);
patience 3 or 5 stops on the plateau (epochs 20 / 22, dev 0.866), patience 10 at epoch 45 with 0.892.

Every run, one row or all, writes `<workdir>/comparison.md` (and comparison.json): per encoder, dev and
test accuracy, the number of parameters, training steps/s and inference examples/s, beside the row
`linear_baseline`, what a practitioner tries first: TF-IDF word 1-2-grams (+ char_wb 2-5-grams) and
logistic regression tuned on dev (jax_structured/training/linear_baseline.py; train.linear_baseline).
A one-row run's workdir holds that row's run itself; all rows: one folder per row.

Data: TREC (coarse, 6 classes; 500 of the 5452 training questions held out for validation as Yu et al.
do) from ../shared/data/trec; `sst` = SST-5 root labels (../shared/data/sst), `sst2` = SST-2 (neutral
sentences dropped); `snli` = SNLI dev as the
training set (10% held out), SNLI test as test (only dev and test are shared: see configs/liu_lapata/snli.py).
Word vectors: none by default (300-d, random init, trained); `--config.data.embeddings=glove-6b-50d`
(or any vectors file / registered name, see jax_structured/data/embeddings.py; 'word2vec' trains
300-d ones) to start from pretrained ones: the sizes follow the vectors (data.embedding_dim and
model.embedding_dim are 0, "the vectors' size", jax_structured/training/embedding_sizes.py).

Options (comma-separated after the file name):
  ''                     every encoder of ENCODERS as `variants`, on TREC.
  <encoder row>          one row of ENCODERS only (e.g. bilstm_max).
  sst | sst2 | snli      the data set (default TREC): SST-5 or SST-2 sentence roots, SNLI.
  tiny                   small sizes and 30 steps, for a CPU smoke run.
Paper families add their rows to ENCODERS (relation networks, DCNN / Tree-LSTM, MHS-RNN / HAN).
Rows that need SST's trees (Chen et al.'s Tree-LSTM and AP-DCNN) are in TREE_ENCODERS: `sst` / `sst2` only.
"""
from configs import common

# Row name -> (encoder section, pooling). Sizes follow Yu et al. (BiLSTM 300 per direction) where the
# papers agree; the CNN is Kim (2014)'s (widths 3-5, 100 maps each, its own max-over-time vector).
ENCODERS = {
    'bow': ({'name': 'bow'}, 'mean'),
    'bilstm_max': ({'name': 'bilstm', 'hidden_size': 300}, 'max'),
    'lstm': ({'name': 'lstm', 'hidden_size': 300}, 'max'),
    'cnn': ({'name': 'cnn', 'widths': (3, 4, 5), 'features': 100}, 'encoder'),
    'lstmn': ({'name': 'lstmn', 'hidden_size': 300, 'num_layers': 1}, 'mean'),
    # Liu & Lapata's structured attention as Yu et al. re-implement it (their footnote 6): the same o_i
    # for attention and summation.
    'structured_attention': ({'name': 'liu_lapata', 'hidden_size': 150, 'attention': 'structured',
                              'shared_features': True}, 'max'),
    # Yu et al. (2018): relation networks with latent trees (models/yu.py; appendix A.1 sizes).
    'rn_latent': ({'name': 'rn', 'tree': 'latent', 'aggregation': 'sum'}, 'encoder'),
    'rn_intra_attn_latent': ({'name': 'rn_intra_attn', 'tree': 'latent'}, 'max'),
    'recurrent_rn_latent': ({'name': 'recurrent_rn', 'tree': 'latent'}, 'max'),
    # Chen et al. (2017): DCNN (widths 7 then 5, 100 maps, k_top 4; its own k-max vector).
    'dcnn': ({'name': 'dcnn', 'branches': ((7, 5),), 'features': 100, 'k_top': 4}, 'encoder'),
}
# Rows that need SST's binarised trees (`sst` / `sst2` only; data.binary_trees=True): Chen et al.'s Tree-LSTM and AP-DCNN.
TREE_ENCODERS = {
    'tree_lstm': ({'name': 'tree_lstm', 'hidden_size': 150}, 'encoder'),
    'ap_dcnn': ({'name': 'ap_dcnn', 'branches': ((7, 5),), 'features': 100, 'k_top': 4,
                 'classifier_input': 'both'}, 'encoder'),
}
DATASETS = ('trec', 'sst', 'sst2', 'snli')
TINY_SIZES = {'hidden_size': 8, 'projection': 8, 'features': 4, 'relation_size': 8, 'semantic_size': 6,
              'mlp_hidden': 8}




def _data(dataset: str) -> tuple[str, dict]:
  """(loader, loader keys) of `dataset`."""
  sizes = {'batch_size': 32, 'embeddings': '', 'embedding_dim': 0}  # 0: the vectors', else 300
  if dataset == 'trec':  # Yu et al.: 500 of train for validation
    return 'trec', {'manual_dir': common.shared('trec'), 'validation_fraction': 500 / 5452, **sizes}
  if dataset in ('sst', 'sst2'):  # binary_trees: the tree rows' structure inputs (tokens: the tree leaves)
    return 'sst', {'manual_dir': common.shared('sst'), 'config': 'fine' if dataset == 'sst' else 'binary',
                   'binary_trees': True, **sizes}
  return 'snli', {'manual_dir': common.snli_dev_as_train(), 'validation_fraction': 0.1, **sizes}


def get_config(options=''):
  """The encoder comparison; `options` as in the module docstring."""
  opts = common.parse_options(options, 'configs/encoders/compare.py',
                              choices={'row': sorted({**ENCODERS, **TREE_ENCODERS}), 'dataset': DATASETS})
  dataset = opts.dataset or 'trec'
  trees = dataset in ('sst', 'sst2')
  if opts.row in TREE_ENCODERS and not trees:
    raise ValueError(f'configs/encoders/compare.py: row {opts.row!r} needs SST trees; add the option sst '
                     'or sst2')
  rows = {**ENCODERS, **(TREE_ENCODERS if trees else {})}
  encoder, pooling = rows[opts.row or 'bilstm_max']
  pair = dataset == 'snli'
  loader, data = _data(dataset)
  config = common.experiment(
      'pair' if pair else 'sentence', loader, data=data,
      model={'name': 'classifier.pair' if pair else 'classifier.sentence', 'encoder': dict(encoder),
             'pooling': pooling, 'embedding_dim': 0, 'freeze_embeddings': False,
             'embedding_dropout': 0.5, 'dropout_rate': 0.5, 'mlp_hidden': 300,
             **({'interaction': 'features'} if pair else {})},
      optimizer={'name': 'adam', 'learning_rate': 1e-3},
      train={'num_epochs': 50, 'early_stopping_patience': 10, 'log_every_steps': 50,
             'linear_baseline': True})
  if opts.row is None:
    common.add_variants(config, {name: {'model': {'encoder': dict(section), 'pooling': pool}}
                                 for name, (section, pool) in rows.items()}, None)
  return common.shrink(config, TINY_SIZES) if opts.tiny else config
