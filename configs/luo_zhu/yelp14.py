r"""Luo & Zhu (MHS-RNN), Table I rows on Yelp 2014 reviews (5 classes).

  python -m launch.train --config=configs/luo_zhu/yelp14.py --workdir=/tmp/luo_zhu_yelp14
  python -m launch.train --config=configs/luo_zhu/yelp14.py:mhs_rnn_attention --workdir=/tmp/mhs_att_yelp14

Options, model and training (sec. IV-B), paper figures: configs/luo_zhu/__init__.py.
"""
from configs import luo_zhu

get_config = luo_zhu.dataset_task('yelp14')
