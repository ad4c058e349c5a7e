r"""Luo & Zhu (MHS-RNN), Table I rows on Amazon reviews (5 classes).

  python -m launch.train --config=configs/luo_zhu/amazon.py --workdir=/tmp/luo_zhu_amazon
  python -m launch.train --config=configs/luo_zhu/amazon.py:mhs_rnn_attention --workdir=/tmp/mhs_att_amazon

Options, model and training (sec. IV-B), paper figures: configs/luo_zhu/__init__.py.
"""
from configs import luo_zhu

get_config = luo_zhu.dataset_task('amazon')
