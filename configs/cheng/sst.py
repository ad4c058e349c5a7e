r"""Table 2 of Cheng, Dong & Lapata (2016): sentiment classification on the Stanford Sentiment Treebank.

  python -m launch.train --config=configs/cheng/sst.py --workdir=/tmp/sst_lstmn
  python -m launch.train --config=configs/cheng/sst.py:binary,lstmn2 --workdir=/tmp/sst2_lstmn2
  python -m launch.train --config=configs/cheng/sst.py:glove=/data/glove.840B.300d.txt --workdir=...

Section 5.2: fine-grained (5 classes; 8544/1101/2210 sentences) or binary (neutral removed;
6920/872/1821) sentence labels; 1- and 2-layer LSTMN with memory size 168; the averaged hidden vector
goes to a 2-layer ReLU classifier with dropout 0.5; Adam (0.9, 0.999) with learning rate 2e-3, L2
constant 1e-4, mini-batches of 5; 300-d GloVe 840B embeddings whose gradient is scaled by 0.35 in the
first epoch. Paper test accuracies: LSTMN 47.6 / 86.3, 2-layer LSTMN 47.9 / 87.0 (fine / binary).

Embeddings: `glove=PATH` (or `--config.data.embeddings=PATH --config.optimizer.embedding_grad_scale=0.35`)
reads a GloVe/word2vec text or binary file (cased 840B vectors, so the text is not lowercased);
without a file, 300-d word2vec vectors are trained on train + dev (`data.embeddings='word2vec'`) and
updated normally. The hidden size of the ReLU layer is not given in the paper; we use 168.
Not stated either: the number of epochs (we train 10, keep the best dev accuracy, stop after 3
evaluations without improvement).

Options (comma-separated, after the file name):
  ''             LSTMN-1 base, `variants` = 1- and 2-layer LSTMN (Table 2), fine-grained labels.
  lstmn1|lstmn2|lstm1|lstm2  that one model only (lstm* = the LSTM baselines of Tai et al.).
  fine|binary    the label set (default fine).
  glove=PATH     pretrained vectors from PATH, gradient scale 0.35 in epoch 1.
  tiny           small sizes for a CPU smoke run (embeddings 16, memory 16, batch 8, no word2vec).
"""
import ml_collections

from jax_structured.data import loaders
from jax_structured.models import lstmn as lstmn_models
from jax_structured import config as training_config

MODELS = {'lstmn1': ('lstmn', 1), 'lstmn2': ('lstmn', 2), 'lstm1': ('lstm', 1), 'lstm2': ('lstm', 2)}
PAPER_TEST_ACCURACY = {'fine': {'lstmn1': 47.6, 'lstmn2': 47.9, 'lstm1': 46.4, 'lstm2': 46.0},
                       'binary': {'lstmn1': 86.3, 'lstmn2': 87.0, 'lstm1': 84.9, 'lstm2': 86.3}}


def _options(text):
  opts = [o.strip() for o in (text or '').split(',') if o.strip()]
  model, labels, glove, tiny = None, 'fine', '', False
  for o in opts:
    if o in MODELS:
      if model is not None:
        raise ValueError(f'configs/cheng/sst.py: choose at most one model, got {model} and {o}')
      model = o
    elif o in ('fine', 'binary'):
      labels = o
    elif o.startswith('glove='):
      glove = o[len('glove='):]
      if not glove:
        raise ValueError('configs/cheng/sst.py: glove= needs a file path')
    elif o == 'tiny':
      tiny = True
    else:
      raise ValueError(f'configs/cheng/sst.py: unknown option {o!r}; known: {sorted(MODELS)}, fine, '
                       'binary, glove=PATH, tiny')
  return model, labels, glove, tiny


def get_config(options=''):
  """The Table 2 config; `options` as in the module docstring."""
  model_name, labels, glove, tiny = _options(options)
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = 'sentence'
  config.parallel = 'shard_map'

  config.data = loaders.default_config('sst')  # every loader key, overridable from the command line
  config.data.config = labels
  config.data.manual_dir = '../shared/data/sst'
  config.data.batch_size = 5
  config.data.embeddings = glove or 'word2vec'
  config.data.embedding_dim = 300
  config.data.lowercase = not glove

  cell, layers = MODELS[model_name or 'lstmn1']
  config.model = ml_collections.ConfigDict()
  config.model.name = 'lstmn.sentence_classifier'
  config.model.cell = cell
  config.model.num_layers = layers
  config.model.embedding_dim = 300
  config.model.hidden_size = 168
  config.model.mlp_size = 168
  config.model.dropout_rate = 0.5

  config.optimizer = training_config.optimizer_defaults()
  config.optimizer.name = 'adam'
  config.optimizer.learning_rate = 2e-3
  config.optimizer.b1 = 0.9
  config.optimizer.b2 = 0.999
  config.optimizer.weight_decay = 1e-4
  config.optimizer.embedding_grad_scale = 0.35 if glove else 1.0
  config.optimizer.embedding_scale_epochs = 1

  config.train = training_config.train_defaults()
  config.train.num_epochs = 10
  config.train.early_stopping_patience = 3
  config.train.eval_batch_size = 50
  config.train.log_every_steps = 200

  config.variants = ml_collections.ConfigDict()
  if model_name is None:
    for name in ('lstmn1', 'lstmn2'):
      c, n = MODELS[name]
      config.variants[name] = {'model': {'cell': c, 'num_layers': n}}

  if tiny:
    lstmn_models.shrink_classifier_config(config, batch_size=8, keep_embeddings=bool(glove))
  return config
