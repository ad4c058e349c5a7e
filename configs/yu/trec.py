r"""Yu et al. (2018), Table 2a: TREC question type classification (6 coarse classes; Li & Roth 2002).

  python -m launch.train --config=configs/yu/trec.py --workdir=/tmp/yu_trec
  python -m launch.train --config=configs/yu/trec.py:recurrent_rn_latent --workdir=/tmp/yu_trec_rrn
  python -m launch.train --config=configs/yu/trec.py:tiny --workdir=/tmp/yu_trec_tiny
  python -m launch.parse --annotate=configs/yu/trec.py:trees=PARSER    # once, for the supervised rows:
  python -m launch.train --config=configs/yu/trec.py:trees=PARSER --workdir=/tmp/yu_trec  # every row

TREC from ../shared/data/trec: 5452 training questions, 500 of them held out for validation as the paper does (sec. 4.1), the 500 TREC-10 questions as test.

Options (rows, trees=, glove=, word2vec, manual_dir=, paper_adam, adagrad, tiny), model and
training (sec. 4.1, appendix A.1), paper figures: configs/yu/__init__.py.
"""
from configs import yu

get_config = yu.classification_task('trec')
