r"""Yu et al. (2018), Table 2b (en-vi column): IWSLT'15 English->Vietnamese with an attentive seq2seq
whose annotation vectors come from the row's encoder.

  python -m launch.train --config=configs/yu/iwslt15_en_vi.py --workdir=/tmp/yu_envi
  python -m launch.train --config=configs/yu/iwslt15_en_vi.py:rn_intra_attn_latent --workdir=/tmp/envi_rn
  python -m launch.train --config=configs/yu/iwslt15_en_vi.py:tiny --workdir=/tmp/envi_tiny
  python -m launch.translate --workdir=/tmp/envi_rn --input=my.en --output=my.vi --beam_size=10

DATA. We hold only the IWSLT'15 dev and test sets (../shared/data/iwslt15_en_vi: tst2012, 1553 pairs;
tst2013, 1268 pairs), not the 133k training pairs. The loader 'iwslt15_en_vi' reads them through the
TFDS builder of the same name (splits train <- train.*, validation <- tst2012.*, test <- tst2013.*) and
`config.data.train_split` / `validation_split` / `test_split` say which built split plays which role.
By DEFAULT this config TRAINS ON tst2012 (train_split='validation', 10% of it held out as validation)
and TESTS ON tst2013: a small-data run whose BLEU is NOT comparable to the paper's (which trains on the
133k pairs). `manual_dir=PATH` points at the full Stanford release (train.{en,vi}, tst2012, tst2013;
https://nlp.stanford.edu/projects/nmt/): train on train, validate on tst2012, test on tst2013,
vocabularies bounded as the release's (17,191 en / 7,709 vi words), the standard split of Luong &
Manning (2015) that the paper follows. Training pairs longer than 50 tokens
a side are dropped (Luong & Manning); evaluation pairs never are.

MODEL (sec. 4.2, appendix A.1): 'translation.seq2seq' (jax_structured/models/translation.py):
512-d source and target embeddings, Bahdanau attention (512), a 2-layer 512 LSTM decoder, dropout 0.5;
beam size 10 (length-normalised: log P / |Y|) for BLEU in every evaluation. Optimiser: SGD, learning
rate 0.2, gradients clipped to global norm 5 (our choice; the paper does not say), batches of 32,
12 epochs, early stopping on dev perplexity (patience 3; the paper selects on validation perplexity).

ROWS (`variants`; one row with `:<row>`), each encoder over the embedded English words, its states
the annotations:
  standard_attention     a 1-layer BiLSTM, 512 units per direction (Bahdanau et al. 2015)
  structured_attention   BiLSTM + structured attention (Liu & Lapata 2018; footnote 6 of Yu et al.)
  rn_intra_attn_latent   RN intra-attention with latent trees, s_i (sec. 3.1; the paper's best, 26.5)
  recurrent_rn_latent    recurrent RN with latent trees, h_i^T, 3 steps (sec. 3.2; also 26.5)
g and f are 512-unit MLPs. The supervised-tree rows need parses of the source sentences, which this
translation data does not carry; they are left out. BLEU: corpus BLEU-4 of sacrebleu on the tokenised
text (tokenize='none'), as the paper's tokenised BLEU.

Options (comma-separated after the file name): <row>, manual_dir=PATH, tiny (a CPU smoke run: the
first 200 pairs of each file, 16-d layers, beam 2, one epoch; its BLEU is a smoke figure only).
"""
from configs import common

FILE = 'configs/yu/iwslt15_en_vi.py'

# Table 2b, en-vi BLEU of the paper (average of 5 runs).
PAPER_TEST_BLEU = {'standard_attention': 26.2, 'structured_attention': 26.0,
                   'rn_intra_attn_latent': 26.5, 'recurrent_rn_latent': 26.5}


def _rn(name: str, **extra):
  return {'name': name, 'hidden_size': 512, 'relation_size': 512, 'tree': 'latent',
          'aggregation': 'max', 'dropout_rate': 0.0, **extra}


ROWS = {
    'standard_attention': {'name': 'bilstm', 'hidden_size': 512},
    'structured_attention': {'name': 'liu_lapata', 'hidden_size': 512, 'attention': 'structured',
                             'shared_features': True},
    'rn_intra_attn_latent': _rn('rn_intra_attn'),
    'recurrent_rn_latent': _rn('recurrent_rn', num_steps=3),
}
TINY_SIZES = {'hidden_size': 8, 'relation_size': 8, 'semantic_size': 6}


def _data(manual_dir: str) -> dict:
  if manual_dir:  # the full release: the builder's train / validation / test splits
    return {'manual_dir': manual_dir, 'train_split': 'train', 'validation_split': 'validation',
            'test_split': 'test', 'max_vocab_size': 17191, 'target_max_vocab_size': 7709,
            'max_length': 50, 'batch_size': 32}
  # what we hold: train on tst2012 (the builder's 'validation'; 10% held out), test on tst2013
  return {'manual_dir': common.shared('iwslt15_en_vi'), 'train_split': 'validation',
          'validation_split': '', 'validation_fraction': 0.1, 'test_split': 'test', 'max_length': 50,
          'batch_size': 32}


def get_config(options=''):
  """The config; `options` as in the module docstring."""
  opts = common.parse_options(options, FILE, choices={'row': tuple(ROWS)}, paths=('manual_dir',))
  config = common.experiment(
      'translation', 'iwslt15_en_vi', data=_data(opts.manual_dir),
      model={'name': 'translation.seq2seq', 'encoder': dict(ROWS[opts.row or 'standard_attention']),
             'embedding_dim': 512, 'target_embedding_dim': 512, 'decoder_size': 512, 'decoder_layers': 2,
             'attention_size': 512, 'input_feeding': False, 'dropout_rate': 0.5, 'embedding_dropout': 0.0,
             'eval_beam_size': 10, 'max_decode_ratio': 2.0, 'max_decode_extra': 10,
             'length_normalization': 'average'},
      optimizer={'name': 'sgd', 'learning_rate': 0.2, 'clip_norm': 5.0},
      train={'num_epochs': 12, 'log_every_steps': 50, 'early_stopping_patience': 3})
  if opts.row is None:
    common.add_variants(config, {name: {'model': {'encoder': dict(section)}}
                                 for name, section in ROWS.items()}, None)
  if opts.tiny:  # one epoch over the first 200 pairs, 16-d layers, beam 2
    config.data.update({'max_examples': 200, 'max_length': 20, 'batch_size': 16,
                        'bucket_boundaries': (16, 32)})
    config.model.update({'embedding_dim': 16, 'target_embedding_dim': 16, 'decoder_size': 16,
                         'attention_size': 16, 'eval_beam_size': 2, 'max_decode_ratio': 1.5,
                         'max_decode_extra': 2, 'dropout_rate': 0.0})
    for section in common.model_sections(config):
      for key, size in TINY_SIZES.items():
        if key in section:
          section[key] = min(section[key], size)
    config.optimizer.learning_rate = 1.0
    config.train.update({'num_epochs': 1, 'log_every_steps': 5, 'eval_every_steps': 0})
  return config
