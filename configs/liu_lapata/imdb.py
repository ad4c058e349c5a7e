r"""Liu & Lapata (2018), Table 4: IMDB reviews (10 classes) with the hierarchical document model.

  python -m launch.train --config=configs/liu_lapata/imdb.py --workdir=/tmp/imdb
  python -m launch.train --config=configs/liu_lapata/imdb.py:both --workdir=/tmp/imdb_both

Data: IMDB reviews of Diao et al. (2014) in the split of Tang et al. (2015a) (`document_classification` loader, builder config `imdb`). No copy is
shipped: put the upstream files in ~/tensorflow_datasets/downloads/manual/imdb or set
`--config.data.manual_dir` (the builder's MANUAL_DOWNLOAD_INSTRUCTIONS say where to get them).

Options, model and training (sec. 4.2), paper figures: configs/liu_lapata/__init__.py.
"""
from configs import liu_lapata

get_config = liu_lapata.document_task('imdb')
