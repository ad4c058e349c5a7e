r"""Liu & Lapata (2018), Table 4: Czech CSFD movie reviews (3 classes) with the hierarchical document model.

  python -m launch.train --config=configs/liu_lapata/czech_movies.py --workdir=/tmp/czech_movies
  python -m launch.train --config=configs/liu_lapata/czech_movies.py:both --workdir=/tmp/czech_movies_both

Data: Czech CSFD movie reviews of Brychcin & Habernal (2013) (`document_classification` loader, builder config `csfd`). No copy is
shipped: put the upstream files in ~/tensorflow_datasets/downloads/manual/csfd or set
`--config.data.manual_dir` (the builder's MANUAL_DOWNLOAD_INSTRUCTIONS say where to get them). The paper reports 10-fold
cross-validation; this config trains one fold: the loader holds out `validation_fraction` of train
as dev (run it with other `data.seed` values for more folds).

Options, model and training (sec. 4.2), paper figures: configs/liu_lapata/__init__.py.
"""
from configs import liu_lapata

get_config = liu_lapata.document_task('czech_movies')
