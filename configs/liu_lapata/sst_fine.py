r"""The Liu & Lapata (2018) sentence model on the Stanford Sentiment Treebank, fine-grained (SST-5).

  python -m launch.train --config=configs/liu_lapata/sst_fine.py --workdir=/tmp/sst5
  python -m launch.train --config=configs/liu_lapata/sst_fine.py:structured --workdir=/tmp/sst5_s

Data: ../shared/data/sst (PTB-format trees; `sst` loader, config 'fine': five classes,
root labels only; every training word kept).
The sentence model of sec. 3.1 with the settings of `configs.liu_lapata.sentence_config`.

Options (one attention variant, tiny) and settings: configs/liu_lapata/__init__.py.
"""
from configs import liu_lapata

get_config = liu_lapata.sst_task('fine')
