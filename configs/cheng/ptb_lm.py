r"""Table 1 of Cheng, Dong & Lapata (2016): language modelling on the Penn Treebank.

  python -m launch.train --config=configs/cheng/ptb_lm.py --workdir=/tmp/ptb_lstmn
  python -m launch.train --config=configs/cheng/ptb_lm.py:lstmn3 --workdir=/tmp/ptb_lstmn3
  python -m launch.train --config=configs/cheng/ptb_lm.py:tiny --workdir=/tmp/ptb_tiny \
      --config.train.num_steps=3

Section 5.1: Mikolov's PTB (10k vocabulary), perplexity exp(NLL / T) on valid/test; SGD with learning
rate 0.65 decayed by 0.85 when the validation perplexity does not improve (checked every epoch),
gradient norm renormalised to 5, mini-batches of 40, word embeddings 150, hidden/memory size 300 for
every model. Paper figures (test perplexity): LSTM-1 115, LSTMN-1 108, sLSTM-3 115, LSTMN-3 102.
The paper does not state dropout, unroll length or number of epochs: we use no dropout, windows of
35 tokens (Zaremba et al. 2014) and 40 epochs. The learning rate 0.65 is one for the Torch LM
objective, the NLL summed over a window's 35 steps and averaged over the batch (`train.lm_loss =
'sequence'`): with the per-token mean instead, each update is 35 times smaller, and after one
epoch the LSTMN was still at validation perplexity 677.

The text is cut into 40 contiguous streams (`data.batching.lm_stream_batches`). The generic train
loop does not carry recurrent state from one window to the next; instead each window is preceded by
its `data.context` (35) previous stream tokens, which the model reads into its memory tape (and LSTM
state) without scoring them, so the LSTMN attends across window boundaries (up to context + 35
tokens back).

Options (comma-separated, after the file name):
  ''                         LSTMN-1 as the base, `variants` = the four models of Table 1.
  lstm1|lstmn1|slstm3|lstmn3 that one model only (no variants).
  tiny                       small sizes for a CPU smoke run (embeddings 16, hidden 32, batch 8,
                             windows of 10, 40 steps).
"""
from configs import common

# Table 1 models: name -> (cell, layers).
MODELS = {'lstm1': ('lstm', 1), 'lstmn1': ('lstmn', 1), 'slstm3': ('lstm', 3), 'lstmn3': ('lstmn', 3)}
# Test perplexities reported in Table 1.
PAPER_TEST_PERPLEXITY = {'lstm1': 115.0, 'lstmn1': 108.0, 'slstm3': 115.0, 'lstmn3': 102.0}


def get_config(options=''):
  """The Table 1 config; `options` as in the module docstring."""
  opts = common.parse_options(options, 'configs/cheng/ptb_lm.py', choices={'model': tuple(MODELS)})
  cell, layers = MODELS[opts.model or 'lstmn1']
  config = common.experiment(
      'lm', 'ptb_lm',
      # context: stream tokens before each window, read into the tapes, not scored
      data={'manual_dir': common.shared('ptb_lm'), 'batch_size': 40, 'num_steps': 35, 'context': 35},
      model={'name': 'lstmn.language_model', 'cell': cell, 'num_layers': layers, 'embedding_dim': 150,
             'hidden_size': 300, 'memory_span': 0,  # 0 = attend to every token of the tape
             'dropout_rate': 0.0},
      optimizer={'name': 'sgd', 'learning_rate': 0.65, 'clip_norm': 5.0, 'plateau_factor': 0.85,
                 'plateau_patience': 1},
      # evaluation every epoch (the plateau decay is per epoch)
      train={'num_epochs': 40, 'eval_every_steps': 0, 'log_every_steps': 100, 'lm_loss': 'sequence'})
  if opts.model is None:
    common.add_variants(config, {name: {'model': {'cell': c, 'num_layers': n}}
                                 for name, (c, n) in MODELS.items()}, None)
  if opts.tiny:
    config.data.update({'batch_size': 8, 'num_steps': 10, 'context': 10})
    config.model.update({'embedding_dim': 16, 'hidden_size': 32})
    config.optimizer.learning_rate = 1.0
    config.train.update({'num_epochs': 1, 'num_steps': 40, 'log_every_steps': 10})
  return config
