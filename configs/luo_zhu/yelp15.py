r"""Luo & Zhu (MHS-RNN), Table I rows on Yelp 2015 reviews (5 classes).

  python -m launch.train --config=configs/luo_zhu/yelp15.py --workdir=/tmp/luo_zhu_yelp15
  python -m launch.train --config=configs/luo_zhu/yelp15.py:mhs_rnn_attention --workdir=/tmp/mhs_att_yelp15

Options, model and training (sec. IV-B), paper figures: configs/luo_zhu/__init__.py.
"""
from configs import luo_zhu

get_config = luo_zhu.dataset_task('yelp15')
