r"""Luo & Zhu (MHS-RNN), Table I rows on Debian package descriptions (16 sections; no paper result).

  python -m launch.train --config=configs/luo_zhu/debian.py --workdir=/tmp/luo_zhu_debian
  python -m launch.train --config=configs/luo_zhu/debian.py:mhs_rnn_attention --workdir=/tmp/mhs_att_debian

Options, model and training (sec. IV-B), paper figures: configs/luo_zhu/__init__.py.
"""
from configs import luo_zhu

get_config = luo_zhu.dataset_task('debian')
