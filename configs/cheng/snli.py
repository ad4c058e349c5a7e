r"""Table 3 of Cheng, Dong & Lapata (2016): natural language inference on SNLI.

  python -m launch.train --config=configs/cheng/snli.py --workdir=/tmp/snli_lstmn
  python -m launch.train --config=configs/cheng/snli.py:deep,h300 --workdir=/tmp/snli_deep300

Section 5.3: two LSTMNs read premise and hypothesis; the hypothesis LSTMN either reads alone
(`fusion='none'`, "LSTMN") or attends to the premise tapes with shallow or deep fusion (Fig. 3);
average pooling of both hidden tapes, concatenated -> 2-layer ReLU classifier; Adam (0.9, 0.999),
learning rate 1e-3, mini-batches of 32 (the paper: 16 or 32), dropout chosen from 0.1-0.4 (we use
0.2), hidden/memory size 100, 300 or 450. Paper test accuracies: LSTMN 81.5 (h=100); shallow fusion
84.3 / 85.2 / 86.0 and deep fusion 84.5 / 85.7 / 86.3 for h = 100 / 300 / 450.

**Only SNLI dev and test are available here** (../shared/data/snli_1.0 has no training file: it is
larger than the copy limit, see its PROVENANCE.md). This config therefore TRAINS ON THE SNLI
VALIDATION SET and TESTS ON THE SNLI TEST SET: 10% of SNLI-dev (held out deterministically by
`data.validation_fraction`) is our dev split for model selection and the other 90% (about 8.9k pairs,
1.6% of the 550k training pairs of the paper) is our training set, so the accuracies are far below
Table 3 and not comparable to it. Because the `snli` loader builds its vocabulary on a `train` file,
`get_config` prepares a folder of symbolic links (`snli_1.0_train.jsonl.gz` -> SNLI dev,
`snli_1.0_test.jsonl.gz` -> SNLI test, no dev file) under `$JAX_STRUCTURED_CACHE` (default
`~/.cache/jax_structured`) and points `data.manual_dir` at it. With the real training file, set
`--config.data.manual_dir=/path/to/snli_1.0 --config.data.validation_fraction=0`.

Embeddings: `glove=PATH` reads 300-d GloVe vectors (the paper's; it updates only the vectors of OOV
words in epoch 1, which our optimiser cannot single out, so all vectors are trained from the start);
without a file, 300-d word2vec vectors are trained on our train + dev split.

Options (comma-separated, after the file name):
  ''                   `variants` = LSTMN, shallow fusion, deep fusion at the chosen size (Table 3).
  none|shallow|deep    that model only.
  h100|h300|h450       hidden/memory size (default 100).
  glove=PATH           pretrained vectors.
  tiny                 small sizes for a CPU smoke run (embeddings 16, hidden 16, 40 steps).
"""
import pathlib

import ml_collections

from jax_structured.data import loaders
from jax_structured.models import lstmn as lstmn_models
from jax_structured.models import liu_lapata
from jax_structured import config as training_config

FUSIONS = ('none', 'shallow', 'deep')
SIZES = {'h100': 100, 'h300': 300, 'h450': 450}
PAPER_TEST_ACCURACY = {('none', 100): 81.5, ('shallow', 100): 84.3, ('deep', 100): 84.5,
                       ('shallow', 300): 85.2, ('deep', 300): 85.7, ('shallow', 450): 86.0,
                       ('deep', 450): 86.3}
# The dev-as-train links shared with configs/liu_lapata/snli.py (the SNLI helpers live beside the
# Liu & Lapata models, which own the other SNLI config).
SHARED_SNLI = liu_lapata.SHARED_SNLI  # relative to the repository root
dev_as_train_dir = liu_lapata.snli_dev_as_train_dir


def _options(text):
  opts = [o.strip() for o in (text or '').split(',') if o.strip()]
  fusion, hidden, glove, tiny = None, 100, '', False
  for o in opts:
    if o in FUSIONS:
      if fusion is not None:
        raise ValueError(f'configs/cheng/snli.py: choose at most one fusion, got {fusion} and {o}')
      fusion = o
    elif o in SIZES:
      hidden = SIZES[o]
    elif o.startswith('glove='):
      glove = o[len('glove='):]
      if not glove:
        raise ValueError('configs/cheng/snli.py: glove= needs a file path')
    elif o == 'tiny':
      tiny = True
    else:
      raise ValueError(f'configs/cheng/snli.py: unknown option {o!r}; known: {list(FUSIONS)}, '
                       f'{sorted(SIZES)}, glove=PATH, tiny')
  return fusion, hidden, glove, tiny


def get_config(options=''):
  """The Table 3 config; `options` as in the module docstring (creates the dev-as-train links)."""
  fusion, hidden, glove, tiny = _options(options)
  manual_dir = liu_lapata.shared_snli_manual_dir(pathlib.Path(__file__).resolve().parents[2])

  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = 'pair'
  config.parallel = 'shard_map'

  config.data = loaders.default_config('snli')  # every loader key, overridable from the command line
  config.data.manual_dir = manual_dir
  config.data.validation_fraction = 0.1
  config.data.batch_size = 32
  config.data.embeddings = glove or 'word2vec'
  config.data.embedding_dim = 300

  config.model = ml_collections.ConfigDict()
  config.model.name = 'lstmn.pair_classifier'
  config.model.fusion = fusion or 'deep'
  config.model.cell = 'lstmn'
  config.model.embedding_dim = 300
  config.model.hidden_size = hidden
  config.model.mlp_size = hidden
  config.model.dropout_rate = 0.2

  config.optimizer = training_config.optimizer_defaults()
  config.optimizer.name = 'adam'
  config.optimizer.learning_rate = 1e-3
  config.optimizer.b1 = 0.9
  config.optimizer.b2 = 0.999

  config.train = training_config.train_defaults()
  config.train.num_epochs = 20
  config.train.early_stopping_patience = 4
  config.train.eval_batch_size = 128
  config.train.log_every_steps = 50

  config.variants = ml_collections.ConfigDict()
  if fusion is None:
    for name in FUSIONS:
      config.variants[name] = {'model': {'fusion': name}}

  if tiny:
    lstmn_models.shrink_classifier_config(config, batch_size=16, keep_embeddings=bool(glove))
  return config
