r"""Luo & Zhu (MHS-RNN), Table I rows on Debian package descriptions (16 sections; no paper result).

  python -m launch.train --config=configs/luo_zhu/debian.py --workdir=/tmp/luo_zhu_debian
  python -m launch.train --config=configs/luo_zhu/debian.py:mhs_rnn_attention --workdir=/tmp/mhs_att_debian

Model and training: sec. IV-B as `jax_structured.models.luo_zhu.document_config` sets them (its docstring
lists them); data as `luo_zhu.dataset_config` says. Any text_classification folder works with
`--text_classification_dir=DIR`.

Options (comma-separated after the file name):
  ''                      `variants`: mhs_rnn_attention, mhs_rnn, hn_att, hn_ave, hm_rnn side by side.
  <one of those>          that row only.
  tiny                    8-d layers, 20 steps, for a CPU smoke run.
No published result: TF-IDF (1-2 grams) + logistic regression reaches 80.2% test (PROVENANCE).
"""
from jax_structured.models import luo_zhu

VARIANTS = luo_zhu.VARIANTS
PAPER_TEST_ACCURACY = luo_zhu.PAPER_TEST_ACCURACY.get('debian', {})


def get_config(options=''):
  """The Luo & Zhu config for Debian package descriptions (16 sections; no paper result); `options` as in the module docstring."""
  return luo_zhu.dataset_config('debian', options, 'configs/luo_zhu/debian.py')
