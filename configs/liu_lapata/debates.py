r"""Liu & Lapata (2018), Table 4: congressional floor debates (2 classes) with the hierarchical document model.

  python -m launch.train --config=configs/liu_lapata/debates.py --workdir=/tmp/debates
  python -m launch.train --config=configs/liu_lapata/debates.py:both --workdir=/tmp/debates_both

Data: the congressional floor debates (convote) of Thomas et al. (2006) (`document_classification` loader, builder config `convote`). No copy is
shipped: put the upstream files in ~/tensorflow_datasets/downloads/manual/convote or set
`--config.data.manual_dir` (the builder's MANUAL_DOWNLOAD_INSTRUCTIONS say where to get them).

Model and training: sec. 4.2 of the paper, as `jax_structured.models.liu_lapata.document_config`
sets them (its docstring lists every setting: min count, word2vec, BiLSTM split, dropout, Adagrad, L2,
batches, pooling, truncation).

Options (comma-separated after the file name):
  ''                                 `variants`: the five Table 4 rows side by side (none, simple,
                                     sentence, document, both).
  none|simple|sentence|document|both that row only.
  tiny                               small sizes and 30 steps, for a CPU smoke run.
Paper test accuracy (Table 4): none 73.7, simple 75.3, sentence 74.6, document 75.2, both 76.5.
"""
import os

from jax_structured.models import liu_lapata

VARIANTS = liu_lapata.DOCUMENT_VARIANTS  # the Table 4 rows
PAPER_TEST_ACCURACY = {'none': 73.7, 'simple': 75.3, 'sentence': 74.6, 'document': 75.2, 'both': 76.5}


def get_config(options=''):
  """The Table 4 config for congressional floor debates (2 classes); `options` as in the module docstring."""
  variant, _, tiny = liu_lapata.parse_options(options, 'configs/liu_lapata/debates.py',
                                              sorted(VARIANTS))
  # The upstream files in TFDS's usual manual folder (override with --config.data.manual_dir=PATH).
  data = {'config': 'convote',
          'manual_dir': os.path.expanduser('~/tensorflow_datasets/downloads/manual/convote')}
  return liu_lapata.document_config('document_classification', data, variant=variant, tiny=tiny)
