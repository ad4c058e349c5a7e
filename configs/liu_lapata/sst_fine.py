r"""The Liu & Lapata (2018) sentence model on the Stanford Sentiment Treebank, fine-grained (SST-5).

  python -m launch.train --config=configs/liu_lapata/sst_fine.py --workdir=/tmp/sst5
  python -m launch.train --config=configs/liu_lapata/sst_fine.py:structured --workdir=/tmp/sst5_s

Data: ../shared/data/sst (PTB-format trees; `sst` loader, config 'fine': five classes,
root labels only; path relative to the repository root). The paper evaluates its sentence model on
SNLI only (Table 1); this config applies the sentence model of sec. 3.1 (embeddings -> BiLSTM ->
attention -> pooling -> classifier) with the document experiments' settings of sec. 4.2: 200-d
word2vec vectors trained on train + dev, BiLSTM hidden 100 per direction = 75 semantic + 25 structure
(eq. 7), max pooling, dropout 0.3 on the input and output layers, L2 1e-4 except embeddings,
batches of 32 grouped by length, but Adam 2e-3 (Cheng et al. 2016's SST setting) instead of
Adagrad 0.05, which underfits here (see `liu_lapata.sentence_config`). SST is small, so every
training word is kept (min_count 1).

Options (comma-separated after the file name):
  ''                                   `variants`: none / simple / inside_outside / structured.
  none|simple|inside_outside|structured  that attention only.
  tiny                                 small sizes and 30 steps, for a CPU smoke run.
"""
from jax_structured.models import liu_lapata

SST_CONFIG = 'fine'
ATTENTIONS = liu_lapata.ATTENTION_VARIANTS


def get_config(options=''):
  """The SST config; `options` as in the module docstring."""
  attention, _, tiny = liu_lapata.parse_options(options, f'configs/liu_lapata/sst_{SST_CONFIG}.py',
                                                ATTENTIONS)
  data = {'config': SST_CONFIG, 'manual_dir': '../shared/data/sst', 'min_count': 1}
  return liu_lapata.sentence_config('sst', data, attention=attention, tiny=tiny)
