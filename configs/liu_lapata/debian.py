r"""The Liu & Lapata (2018) hierarchical document model on Debian package descriptions (16 sections).

  python -m launch.train --config=configs/liu_lapata/debian.py --workdir=/tmp/debian
  python -m launch.train --config=configs/liu_lapata/debian.py:both --workdir=/tmp/debian_both

Data: ../shared/data/debian_descriptions (Debian package descriptions, 16 section labels; see
/work/shared/data/PROVENANCE.md), read with the `text_classification` loader and split into
sentences (`split_sentences=True`, kind 'document'). The path is relative to the repository root
(run from there). No published result exists: this is the paper's document model on our own data.

Model and training: sec. 4.2 of the paper, as `jax_structured.models.liu_lapata.document_config`
sets them (its docstring lists every setting: min count, word2vec, BiLSTM split, dropout, Adagrad, L2,
batches, pooling, truncation).

Options (comma-separated after the file name):
  ''                                 `variants`: the five Table 4 rows side by side (none, simple,
                                     sentence, document, both).
  none|simple|sentence|document|both that row only.
  tiny                               small sizes and 30 steps, for a CPU smoke run.
There is no paper result for this data set.
"""
from jax_structured.models import liu_lapata

VARIANTS = liu_lapata.DOCUMENT_VARIANTS  # the Table 4 rows
PAPER_TEST_ACCURACY = {}


def get_config(options=''):
  """The Table 4 config for Debian package descriptions (16 sections); `options` as in the module docstring."""
  variant, _, tiny = liu_lapata.parse_options(options, 'configs/liu_lapata/debian.py',
                                              sorted(VARIANTS))
  data = {'manual_dir': '../shared/data/debian_descriptions', 'split_sentences': True}
  return liu_lapata.document_config('text_classification', data, variant=variant, tiny=tiny)
