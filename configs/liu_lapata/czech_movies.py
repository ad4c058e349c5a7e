r"""Liu & Lapata (2018), Table 4: Czech CSFD movie reviews (3 classes) with the hierarchical document model.

  python -m launch.train --config=configs/liu_lapata/czech_movies.py --workdir=/tmp/czech_movies
  python -m launch.train --config=configs/liu_lapata/czech_movies.py:both --workdir=/tmp/czech_movies_both

Data: Czech CSFD movie reviews of Brychcin & Habernal (2013) (`document_classification` loader, builder config `csfd`). No copy is
shipped: put the upstream files in ~/tensorflow_datasets/downloads/manual/csfd or set
`--config.data.manual_dir` (the builder's MANUAL_DOWNLOAD_INSTRUCTIONS say where to get them). The paper reports 10-fold
cross-validation; this config trains one fold: the loader holds out `validation_fraction` of train
as dev (run it with other `data.seed` values for more folds).

Model and training: sec. 4.2 of the paper, as `jax_structured.models.liu_lapata.document_config`
sets them (its docstring lists every setting: min count, word2vec, BiLSTM split, dropout, Adagrad, L2,
batches, pooling, truncation).

Options (comma-separated after the file name):
  ''                                 `variants`: the five Table 4 rows side by side (none, simple,
                                     sentence, document, both).
  none|simple|sentence|document|both that row only.
  tiny                               small sizes and 30 steps, for a CPU smoke run.
Paper test accuracy (Table 4): none 80.5, simple 81.4, sentence 81.5, document 81.1, both 82.1.
"""
import os

from jax_structured.models import liu_lapata

VARIANTS = liu_lapata.DOCUMENT_VARIANTS  # the Table 4 rows
PAPER_TEST_ACCURACY = {'none': 80.5, 'simple': 81.4, 'sentence': 81.5, 'document': 81.1, 'both': 82.1}


def get_config(options=''):
  """The Table 4 config for Czech CSFD movie reviews (3 classes); `options` as in the module docstring."""
  variant, _, tiny = liu_lapata.parse_options(options, 'configs/liu_lapata/czech_movies.py',
                                              sorted(VARIANTS))
  # The upstream files in TFDS's usual manual folder (override with --config.data.manual_dir=PATH).
  data = {'config': 'csfd',
          'manual_dir': os.path.expanduser('~/tensorflow_datasets/downloads/manual/csfd')}
  return liu_lapata.document_config('document_classification', data, variant=variant, tiny=tiny,
                                    eval_every_steps=1000)
