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

from configs import common
from jax_structured.data import text

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# ../shared/data resolved from the repository root (never copied into the repo).
EWT_DIR = os.path.normpath(os.path.join(_REPO, '..', 'shared', 'data', 'ud_english_ewt'))

# UD English EWT v2 train: 17 UPOS tags and 51 relations (with subtypes), + <pad> and <unk> each.
EWT_NUM_TAGS = 19
EWT_NUM_RELATIONS = 53


def get_config(options: str = '') -> ml_collections.ConfigDict:
  """The EWT parser config; options (comma-separated) as in the module docstring."""
  opts = common.parse_options(options, 'configs/parser/ewt.py', flags=('chars',))
  config = common.experiment(
      'parse', 'universal_dependencies',
      # D&M: trained embeddings for words seen at least twice
      data={'manual_dir': EWT_DIR, 'config': 'en_ewt', 'min_count': 2, 'lowercase': False,
            'batch_size': 32, 'embedding_dim': 100},
      model={'name': 'parser.biaffine',
             'loss': 'crf',  # 'crf' (tree CRF, per-token average) | 'local' (head selection)
             'decoding': 'pipeline',  # 'pipeline' (mst, then relations) | 'joint' (labeled_mst)
             'single_root': True, 'num_tags': EWT_NUM_TAGS,
             'num_relations': EWT_NUM_RELATIONS,  # 0 = the data's number of label names
             'embedding_dim': 100, 'tag_embedding_dim': 100,
             'tag_input': 'predicted',  # 'predicted' | 'gold' | 'none'
             'tag_loss_weight': 1.0,
             'char_embedding_dim': 0,  # > 0: byte CNN (needs data.max_chars > 0; the 'chars' option)
             'char_features': 100,
             'num_chars': text.NUM_CHAR_IDS,  # the byte ids of data.text.char_ids
             'hidden_size': 400, 'num_layers': 3, 'tagger_hidden_size': 200, 'arc_mlp_size': 500,
             'label_mlp_size': 100, 'dropout_rate': 0.33},
      optimizer={'name': 'adam', 'learning_rate': 2e-3, 'b1': 0.9, 'b2': 0.9, 'eps': 1e-12,
                 'clip_norm': 5.0, 'schedule': 'exponential', 'decay_rate': 0.75, 'decay_steps': 5000,
                 'embedding_pattern': '(?i)word_embed'},
      train={'num_epochs': 30, 'eval_every_steps': 0,  # every epoch
             'early_stopping_patience': 5, 'log_every_steps': 100})
  common.add_variants(config, {'crf': {'model': {'loss': 'crf'}}, 'local': {'model': {'loss': 'local'}}},
                      None)
  if opts.chars:
    config.data.max_chars = 20
    config.model.char_embedding_dim = 50
    config.model.char_features = 100
  return tiny(config) if opts.tiny else config


def tiny(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """CPU sizes (tests, smoke runs): tiny dimensions, 300 steps, training sentences <= 30 words.

  EWT train sentences of at most 30 words still hold all 17 UPOS tags and 51 relations, so
  `num_tags` / `num_relations` are unchanged.
  """
  config.parallel = 'none'
  config.data.update({'max_length': 30, 'batch_size': 16, 'bucket_boundaries': (8, 16, 32, 64, 128, 256)})
  config.model.update({'embedding_dim': 32, 'tag_embedding_dim': 16, 'hidden_size': 32, 'num_layers': 1,
                       'tagger_hidden_size': 16, 'arc_mlp_size': 32, 'label_mlp_size': 16,
                       'dropout_rate': 0.2})
  if config.model.char_embedding_dim:
    config.model.update({'char_embedding_dim': 8, 'char_features': 16})
  config.optimizer.schedule = 'constant'
  config.train.update({'num_epochs': 0, 'num_steps': 300, 'eval_every_steps': 100,
                       'early_stopping_patience': 0, 'log_every_steps': 50})
  return config
