"""Biaffine tree-CRF parser on UD English EWT (Dozat & Manning 2017 hyperparameters).

python -m launch.train --config=configs/parser/ewt.py --workdir=/tmp/parser_ewt
python -m launch.train --config=configs/parser/ewt.py:tiny --workdir=/tmp/parser_tiny  (CPU sizes;
    the same as configs/parser/ewt_tiny.py)
python -m launch.train --config=configs/parser/ewt.py:chars --workdir=/tmp/parser_ewt_chars

Options (comma-separated): 'tiny' (CPU sizes), 'chars' (add a byte-level character CNN, 50-d bytes
-> 100 features, over words of up to 20 bytes; `data.max_chars` makes the loader give them).

Dozat & Manning (2017): 100-d word and tag embeddings, 3 BiLSTM layers of 400 units per direction,
500-d arc MLPs, 100-d label MLPs, dropout 0.33, Adam (lr 2e-3, beta1 = beta2 = 0.9), gradient norm
clipped at 5, lr * 0.75^(t / 5000). Scaled for the budget: 30 epochs (~11.8k steps of 32 sentences)
with early stopping instead of D&M's 50k steps of 5000 tokens, and no pretrained GloVe vectors
(set `data.embeddings` to a GloVe file with `data.embedding_dim=model.embedding_dim=100` to add them).

`variants` trains the matrix-tree CRF objective ('crf', -log P(gold tree), Koo et al. 2007) and D&M's
local head-selection objective ('local') side by side with otherwise identical settings.
Tags: the joint UPOS tagger's predictions feed the parser (`model.tag_input='predicted'`), so the
reported dev/test scores are those of raw-text parsing (launch/parse.py) with no given tags.
"""
import os

import ml_collections

from jax_structured.data import loaders
from jax_structured.data import text
from jax_structured import config as config_lib

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# ../shared/data resolved from the repository root (never copied into the repo).
EWT_DIR = os.path.normpath(os.path.join(_REPO, '..', 'shared', 'data', 'ud_english_ewt'))

# UD English EWT v2 train: 17 UPOS tags and 51 relations (with subtypes), + <pad> and <unk> each.
EWT_NUM_TAGS = 19
EWT_NUM_RELATIONS = 53


def get_config(options: str = '') -> ml_collections.ConfigDict:
  """The EWT parser config; options (comma-separated) as in the module docstring."""
  chosen = [o.strip() for o in options.split(',') if o.strip()]
  unknown = sorted(set(chosen) - {'tiny', 'chars'})
  if unknown:
    raise ValueError(f'configs/parser/ewt.py: unknown option(s) {unknown}; known: "tiny", "chars"')
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = 'parse'
  config.parallel = 'shard_map'
  config.distributed = False

  config.data = loaders.default_config('universal_dependencies')
  config.data.manual_dir = EWT_DIR
  config.data.config = 'en_ewt'
  config.data.min_count = 2  # D&M: trained embeddings for words seen at least twice
  config.data.lowercase = False
  config.data.batch_size = 32
  config.data.embedding_dim = 100

  config.model = ml_collections.ConfigDict()
  config.model.name = 'parser.biaffine'
  config.model.loss = 'crf'  # 'crf' (tree CRF, per-token average) | 'local' (head selection)
  config.model.single_root = True
  config.model.num_tags = EWT_NUM_TAGS
  config.model.num_relations = EWT_NUM_RELATIONS  # 0 = the data's number of label names
  config.model.embedding_dim = 100
  config.model.tag_embedding_dim = 100
  config.model.tag_input = 'predicted'  # 'predicted' | 'gold' | 'none'
  config.model.tag_loss_weight = 1.0
  config.model.char_embedding_dim = 0  # > 0: byte CNN (needs data.max_chars > 0; the 'chars' option)
  config.model.char_features = 100
  config.model.num_chars = text.NUM_CHAR_IDS  # the byte ids of data.text.char_ids
  config.model.hidden_size = 400
  config.model.num_layers = 3
  config.model.tagger_hidden_size = 200
  config.model.arc_mlp_size = 500
  config.model.label_mlp_size = 100
  config.model.dropout_rate = 0.33

  config.optimizer = config_lib.optimizer_defaults()
  config.optimizer.name = 'adam'
  config.optimizer.learning_rate = 2e-3
  config.optimizer.b1 = 0.9
  config.optimizer.b2 = 0.9
  config.optimizer.eps = 1e-12
  config.optimizer.clip_norm = 5.0
  config.optimizer.schedule = 'exponential'
  config.optimizer.decay_rate = 0.75
  config.optimizer.decay_steps = 5000
  config.optimizer.embedding_pattern = '(?i)word_embed'

  config.train = config_lib.train_defaults()
  config.train.num_epochs = 30
  config.train.eval_every_steps = 0  # every epoch
  config.train.early_stopping_patience = 5
  config.train.log_every_steps = 100

  # Nested overrides (ConfigDict keys cannot contain dots): --config.variants.local.model.loss=...
  config.variants = ml_collections.ConfigDict({
      'crf': {'model': {'loss': 'crf'}},
      'local': {'model': {'loss': 'local'}},
  })
  if 'chars' in chosen:
    config.data.max_chars = 20
    config.model.char_embedding_dim = 50
    config.model.char_features = 100
  return tiny(config) if 'tiny' in chosen else config


def tiny(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """CPU sizes (tests, smoke runs): tiny dimensions, 300 steps, training sentences <= 30 words.

  EWT train sentences of at most 30 words still hold all 17 UPOS tags and 51 relations, so
  `num_tags` / `num_relations` are unchanged.
  """
  config.parallel = 'none'
  config.data.max_length = 30
  config.data.batch_size = 16
  config.data.bucket_boundaries = (8, 16, 32, 64, 128, 256)
  config.model.embedding_dim = 32
  config.model.tag_embedding_dim = 16
  config.model.hidden_size = 32
  config.model.num_layers = 1
  config.model.tagger_hidden_size = 16
  config.model.arc_mlp_size = 32
  config.model.label_mlp_size = 16
  if config.model.char_embedding_dim:
    config.model.char_embedding_dim = 8
    config.model.char_features = 16
  config.model.dropout_rate = 0.2
  config.optimizer.schedule = 'constant'
  config.train.num_epochs = 0
  config.train.num_steps = 300
  config.train.eval_every_steps = 100
  config.train.early_stopping_patience = 0
  config.train.log_every_steps = 50
  return config
