r"""Yu et al. (2018), Table 1a: natural language inference on SNLI 1.0 (Bowman et al. 2015).

  python -m launch.train --config=configs/yu/snli.py --workdir=/tmp/yu_snli
  python -m launch.train --config=configs/yu/snli.py:recurrent_rn_latent --workdir=/tmp/yu_snli_rrn
  python -m launch.train --config=configs/yu/snli.py:tiny --workdir=/tmp/yu_snli_tiny
  python -m launch.parse --annotate=configs/yu/snli.py:trees=PARSER    # once, for the supervised rows:
  python -m launch.train --config=configs/yu/snli.py:trees=PARSER --workdir=/tmp/yu_snli  # every row

**Only SNLI dev and test are held here** (../shared/data/snli_1.0): by default the config TRAINS ON SNLI DEV
(10% of it held out for validation) and TESTS ON SNLI TEST, about 2% of the paper's 550k training pairs, so
accuracies are not comparable with Table 1a. `manual_dir=PATH` takes the full release.

Options (rows, trees=, glove=, word2vec, manual_dir=, paper_adam, adagrad, tiny), model and
training (sec. 4.1, appendix A.1), paper figures: configs/yu/__init__.py.
"""
from configs import yu

get_config = yu.classification_task('snli')
