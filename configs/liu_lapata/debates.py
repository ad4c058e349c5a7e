r"""Liu & Lapata (2018), Table 4: congressional floor debates (2 classes) with the hierarchical document model.

  python -m launch.train --config=configs/liu_lapata/debates.py --workdir=/tmp/debates
  python -m launch.train --config=configs/liu_lapata/debates.py:both --workdir=/tmp/debates_both

Data: the congressional floor debates (convote) of Thomas et al. (2006) (`document_classification` loader, builder config `convote`). No copy is
shipped: put the upstream files in ~/tensorflow_datasets/downloads/manual/convote or set
`--config.data.manual_dir` (the builder's MANUAL_DOWNLOAD_INSTRUCTIONS say where to get them).

Options, model and training (sec. 4.2), paper figures: configs/liu_lapata/__init__.py.
"""
from configs import liu_lapata

get_config = liu_lapata.document_task('debates')
