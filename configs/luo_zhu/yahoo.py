r"""Luo & Zhu (MHS-RNN), Table I rows on Yahoo Answers (10 topics).

  python -m launch.train --config=configs/luo_zhu/yahoo.py --workdir=/tmp/luo_zhu_yahoo
  python -m launch.train --config=configs/luo_zhu/yahoo.py:mhs_rnn_attention --workdir=/tmp/mhs_att_yahoo

Model and training: sec. IV-B as `jax_structured.models.luo_zhu.document_config` sets them (its docstring
lists them); data as `luo_zhu.dataset_config` says. Any text_classification folder works with
`--text_classification_dir=DIR`.

Options (comma-separated after the file name):
  ''                      `variants`: mhs_rnn_attention, mhs_rnn, hn_att, hn_ave, hm_rnn side by side.
  <one of those>          that row only.
  tiny                    8-d layers, 20 steps, for a CPU smoke run.
Paper test accuracy (Table I): luo_zhu.PAPER_TEST_ACCURACY['yahoo'].
"""
from jax_structured.models import luo_zhu

VARIANTS = luo_zhu.VARIANTS
PAPER_TEST_ACCURACY = luo_zhu.PAPER_TEST_ACCURACY.get('yahoo', {})


def get_config(options=''):
  """The Luo & Zhu config for Yahoo Answers (10 topics); `options` as in the module docstring."""
  return luo_zhu.dataset_config('yahoo', options, 'configs/luo_zhu/yahoo.py')
