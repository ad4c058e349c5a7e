r"""Luo & Zhu (MHS-RNN), Table I rows on Yelp 2013 reviews (5 classes).

  python -m launch.train --config=configs/luo_zhu/yelp13.py --workdir=/tmp/luo_zhu_yelp13
  python -m launch.train --config=configs/luo_zhu/yelp13.py:mhs_rnn_attention --workdir=/tmp/mhs_att_yelp13

Options, model and training (sec. IV-B), paper figures: configs/luo_zhu/__init__.py.
"""
from configs import luo_zhu

get_config = luo_zhu.dataset_task('yelp13')
