r"""Liu & Lapata (2018), Table 4: IMDB reviews (10 classes) with the hierarchical document model.

  python -m launch.train --config=configs/liu_lapata/imdb.py --workdir=/tmp/imdb
  python -m launch.train --config=configs/liu_lapata/imdb.py:both --workdir=/tmp/imdb_both

Data: IMDB reviews of Diao et al. (2014) in the split of Tang et al. (2015a) (`document_classification` loader, builder config `imdb`). No copy is
shipped: put the upstream files in ~/tensorflow_datasets/downloads/manual/imdb or set
`--config.data.manual_dir` (the builder's MANUAL_DOWNLOAD_INSTRUCTIONS say where to get them).

Model and training: sec. 4.2 of the paper, as `jax_structured.models.liu_lapata.document_config`
sets them (its docstring lists every setting: min count, word2vec, BiLSTM split, dropout, Adagrad, L2,
batches, pooling, truncation).

Options (comma-separated after the file name):
  ''                                 `variants`: the five Table 4 rows side by side (none, simple,
                                     sentence, document, both).
  none|simple|sentence|document|both that row only.
  tiny                               small sizes and 30 steps, for a CPU smoke run.
Paper test accuracy (Table 4): none 47.5, simple 48.2, sentence 48.8, document 48.6, both 49.2.
"""
import os

from jax_structured.models import liu_lapata

VARIANTS = liu_lapata.DOCUMENT_VARIANTS  # the Table 4 rows
PAPER_TEST_ACCURACY = {'none': 47.5, 'simple': 48.2, 'sentence': 48.8, 'document': 48.6, 'both': 49.2}


def get_config(options=''):
  """The Table 4 config for IMDB reviews (10 classes); `options` as in the module docstring."""
  variant, _, tiny = liu_lapata.parse_options(options, 'configs/liu_lapata/imdb.py',
                                              sorted(VARIANTS))
  # The upstream files in TFDS's usual manual folder (override with --config.data.manual_dir=PATH).
  data = {'config': 'imdb',
          'manual_dir': os.path.expanduser('~/tensorflow_datasets/downloads/manual/imdb')}
  return liu_lapata.document_config('document_classification', data, variant=variant, tiny=tiny,
                                    eval_every_steps=2000)
