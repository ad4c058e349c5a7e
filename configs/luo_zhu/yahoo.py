r"""Luo & Zhu (MHS-RNN), Table I rows on Yahoo Answers (10 topics).

  python -m launch.train --config=configs/luo_zhu/yahoo.py --workdir=/tmp/luo_zhu_yahoo
  python -m launch.train --config=configs/luo_zhu/yahoo.py:mhs_rnn_attention --workdir=/tmp/mhs_att_yahoo

Options, model and training (sec. IV-B), paper figures: configs/luo_zhu/__init__.py.
"""
from configs import luo_zhu

get_config = luo_zhu.dataset_task('yahoo')
