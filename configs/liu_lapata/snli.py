r"""Liu & Lapata (2018), Table 1: natural language inference on SNLI (sec. 4.1).

  python -m launch.train --config=configs/liu_lapata/snli.py --workdir=/tmp/snli_ll
  python -m launch.train --config=configs/liu_lapata/snli.py:structured,glove=/data/glove.840B.300d.txt \
      --workdir=/tmp/snli_ll_structured

Model (`liu_lapata.pair_classifier`): premise and hypothesis are encoded by a shared BiLSTM with
intra-sentence attention, then compared by the decomposable attention of Parikh et al. (2016),
eqs. 20-23, with two-layer ReLU perceptrons of hidden size 200. Settings of the paper: LSTM hidden
size 150 per direction split into 100 semantic + 50 structure features (eq. 7), 300-d GloVe 840B
initial vectors (`glove=PATH`), every parameter including the embeddings trained with Adagrad at
learning rate 0.05, dropout 0.2, mini-batches of 32. (Table 1 labels its rows "175D" / "100D"; the
text gives the sizes used here.) Paper test accuracies: no attention 85.3, simple intra-sentence
attention 86.2, inside-outside 86.8, matrix inversion 86.9.

**Only SNLI dev and test are available here** (../shared/data/snli_1.0 lacks the training file, which
is larger than the copy limit; see its PROVENANCE.md). By default this config therefore TRAINS ON
SNLI-DEV (10% of it held out as our dev split by `data.validation_fraction`) and TESTS ON SNLI-TEST:
about 1.6% of the paper's training data, so accuracies are far below Table 1 and not comparable.
Because the `snli` loader reads a `train` file, `get_config` links `snli_1.0_train.jsonl.gz` -> SNLI
dev and `snli_1.0_test.jsonl.gz` -> SNLI test in `$JAX_STRUCTURED_CACHE/snli_dev_as_train` (default
`~/.cache/jax_structured`). With the real files use `snli_dir=PATH` (then no hold-out).

Options (comma-separated after the file name):
  ''                                     `variants`: the four Table 1 rows (none, simple,
                                         inside_outside, structured) side by side.
  none|simple|inside_outside|structured  that row only.
  glove=PATH                             300-d GloVe vectors (default: 300-d word2vec trained on
                                         our train + dev split).
  snli_dir=PATH                          a folder with the three SNLI 1.0 files.
  tiny                                   small sizes and 30 steps, for a CPU smoke run.
"""
import os
import pathlib

import ml_collections

from jax_structured.data import loaders
from jax_structured.training import config as training_config

ATTENTIONS = ('none', 'simple', 'inside_outside', 'structured')
PAPER_TEST_ACCURACY = {'none': 85.3, 'simple': 86.2, 'inside_outside': 86.8, 'structured': 86.9}
SHARED_SNLI = '../shared/data/snli_1.0'  # relative to the repository root


def dev_as_train_dir(shared_dir, cache_dir):
  """Creates (idempotently) `cache_dir/snli_dev_as_train` with train -> SNLI dev, test -> SNLI test.

  Args:
    shared_dir: folder holding `snli_1.0_dev.jsonl.gz` and `snli_1.0_test.jsonl.gz`.
    cache_dir: where to create the folder of symbolic links.

  Returns:
    The folder, or None when `shared_dir` lacks those files.
  """
  shared_dir = pathlib.Path(shared_dir).resolve()
  links = {'snli_1.0_train.jsonl.gz': shared_dir / 'snli_1.0_dev.jsonl.gz',
           'snli_1.0_test.jsonl.gz': shared_dir / 'snli_1.0_test.jsonl.gz'}
  if not all(target.is_file() for target in links.values()):
    return None
  folder = pathlib.Path(cache_dir).expanduser() / 'snli_dev_as_train'
  folder.mkdir(parents=True, exist_ok=True)
  for name, target in links.items():
    link = folder / name
    if link.is_symlink() and pathlib.Path(os.readlink(link)) == target:
      continue
    if link.exists() or link.is_symlink():
      link.unlink()
    link.symlink_to(target)
  return str(folder)


def _options(text):
  attention, glove, snli_dir, tiny = None, '', '', False
  for option in [o.strip() for o in (text or '').split(',') if o.strip()]:
    key, _, value = option.partition('=')
    if option in ATTENTIONS and attention is None:
      attention = option
    elif key in ('glove', 'snli_dir') and value:
      glove, snli_dir = (value, snli_dir) if key == 'glove' else (glove, value)
    elif option == 'tiny':
      tiny = True
    else:
      raise ValueError(f'configs/liu_lapata/snli.py: unknown or repeated option {option!r}; known: '
                       f'{list(ATTENTIONS)} (at most one), glove=PATH, snli_dir=PATH, tiny')
  return attention, glove, snli_dir, tiny


def get_config(options=''):
  """The Table 1 config; `options` as in the module docstring."""
  attention, glove, snli_dir, tiny = _options(options)
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = 'pair'
  config.parallel = 'shard_map'
  config.distributed = False

  config.data = loaders.default_config('snli')
  if snli_dir:
    config.data.manual_dir = snli_dir
    config.data.validation_fraction = 0.0
  else:
    repo = pathlib.Path(__file__).resolve().parents[2]
    cache = os.environ.get('JAX_STRUCTURED_CACHE', '~/.cache/jax_structured')
    config.data.manual_dir = dev_as_train_dir(repo / SHARED_SNLI, cache) or SHARED_SNLI
    config.data.validation_fraction = 0.1
  config.data.embeddings = glove or 'word2vec'
  config.data.embedding_dim = 300
  config.data.batch_size = 32

  config.model = ml_collections.ConfigDict()
  config.model.name = 'liu_lapata.pair_classifier'
  config.model.embedding_dim = 300
  config.model.freeze_embeddings = False
  config.model.hidden_size = 150
  config.model.semantic_size = 100
  config.model.num_layers = 1
  config.model.attention = attention or 'structured'
  config.model.mlp_hidden = 200
  config.model.dropout_rate = 0.2
  config.model.single_root = True

  config.optimizer = training_config.optimizer_defaults()
  config.optimizer.name = 'adagrad'
  config.optimizer.learning_rate = 0.05

  config.train = training_config.train_defaults()
  config.train.num_epochs = 20
  config.train.log_every_steps = 50
  config.train.early_stopping_patience = 4

  config.variants = ml_collections.ConfigDict()
  if attention is None:
    for name in ATTENTIONS:
      config.variants[name] = {'model': {'attention': name}}

  if tiny:
    if not glove:
      config.data.embeddings = ''
    config.data.embedding_dim = 16
    config.data.batch_size = 8
    config.model.embedding_dim = 16
    config.model.hidden_size = 8
    config.model.semantic_size = 6
    config.model.mlp_hidden = 8
    config.train.num_epochs = 1
    config.train.num_steps = 30
    config.train.log_every_steps = 10
  return config
