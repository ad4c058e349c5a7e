r"""The Liu & Lapata (2018) hierarchical document model on Debian package descriptions (16 sections).

  python -m launch.train --config=configs/liu_lapata/debian.py --workdir=/tmp/debian
  python -m launch.train --config=configs/liu_lapata/debian.py:both --workdir=/tmp/debian_both

Data: ../shared/data/debian_descriptions (Debian package descriptions, 16 section labels; see
/work/shared/data/PROVENANCE.md), read with the `text_classification` loader and split into
sentences (`split_sentences=True`, kind 'document'). The path is relative to the repository root
(run from there). No published result exists: this is the paper's document model on our own data.

Model and training as in sec. 4.2: words seen more than five times (min_count 6, others -> UNK),
200-d word2vec vectors trained on the train + dev splits, sentence- and document-level BiLSTMs with
hidden size 100 per direction split into 75 semantic + 25 structure features (eq. 7), dropout 0.3 on
the input and output layers, Adagrad with learning rate 0.05, L2 1e-4 on every parameter except the
word embeddings, mini-batches of 32 documents grouped by length (the loader's buckets). The paper does
not name the pooling; max pooling at both levels is the default of the authors' released code (30
epochs there; we stop early on dev accuracy). Documents are truncated to 100 sentences of
200 words to bound the padded shapes (counted in TaskData.skipped).

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
