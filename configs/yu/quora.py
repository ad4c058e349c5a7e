r"""Yu et al. (2018), Table 1b: Quora duplicate question detection (the partition of Wang et al. 2017).

  python -m launch.train --config=configs/yu/quora.py --workdir=/tmp/yu_quora
  python -m launch.train --config=configs/yu/quora.py:recurrent_rn_latent --workdir=/tmp/yu_quora_rrn
  python -m launch.train --config=configs/yu/quora.py:tiny --workdir=/tmp/yu_quora_tiny
  python -m launch.parse --annotate=configs/yu/quora.py:trees=PARSER    # once, for the supervised rows:
  python -m launch.train --config=configs/yu/quora.py:trees=PARSER --workdir=/tmp/yu_quora  # every row

**Only the dev and test files of the partition are held here** (../shared/data/quora_qqp_wang2017_partition):
by default the config TRAINS ON DEV (train.txt -> dev.txt links in $JAX_STRUCTURED_CACHE/quora_dev_as_train,
10% held out for validation) and TESTS ON TEST, 10k pairs instead of the paper's 384k, so accuracies are not
comparable with Table 1b. `manual_dir=PATH` takes the full release (train / dev / test .tsv or .txt).

Options (rows, trees=, glove=, word2vec, manual_dir=, paper_adam, adagrad, tiny), model and
training (sec. 4.1, appendix A.1), paper figures: configs/yu/__init__.py.
"""
from configs import yu

get_config = yu.classification_task('quora')
