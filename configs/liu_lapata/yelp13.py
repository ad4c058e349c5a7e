r"""Liu & Lapata (2018), Table 4: Yelp 2013 reviews (5 classes) with the hierarchical document model.

  python -m launch.train --config=configs/liu_lapata/yelp13.py --workdir=/tmp/yelp13
  python -m launch.train --config=configs/liu_lapata/yelp13.py:both --workdir=/tmp/yelp13_both

Data: Yelp 2013 reviews in the split of Tang et al. (2015a), 80/10/10 (`document_classification` loader, builder config `yelp13`). No copy is
shipped: put the upstream files in ~/tensorflow_datasets/downloads/manual/yelp13 or set
`--config.data.manual_dir` (the builder's MANUAL_DOWNLOAD_INSTRUCTIONS say where to get them).

Options, model and training (sec. 4.2), paper figures: configs/liu_lapata/__init__.py.
"""
from configs import liu_lapata

get_config = liu_lapata.document_task('yelp13')
