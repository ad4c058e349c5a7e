"""The built-in demo job: no / simple / structured attention over a CONTEXT-FREE word encoder, on
sentences with PLANTED dependency trees.

    python -m launch.train --config=configs/default.py --workdir=runs/default

Data: `synthetic_trees` (jax_structured/data/synthetic.py; its docstring gives the grammar and why
each part is there), generated from `data.seed`, no download: two verbs of different colours, an
animal as a pair of nouns of different colours, and coloured modifiers of the animal, in a random
order. Planted tree: the first verb <- ROOT, the second verb <- the first, every noun <- the NEARER
verb, every modifier <- the NEARER noun (the farther candidate is the distractor). Label: does SOME
word have the colour of its head? Given the bag of words it is a fair coin (exactly), so only the
order, through the tree, decides it.

Model: the 'classifier.sentence' head over the 'context_free' encoder (models/context_free.py): each
word's vectors from the word alone (no BiLSTM), word order only through the arc scores (a fixed
penalty of 1 per word of distance, ALiBi-style), then the attention of Liu & Lapata (2018): 'none' (a
bag of words: at chance by construction), 'simple' (a softmax over each word's candidate heads) or
'structured' (matrix-tree marginals); max pooling (the label is an existential over words); MLP.
The attention is the model's only route from a word to its head. A fourth variant, 'parser', trains
the biaffine tree-CRF parser on the planted trees themselves (the UAS upper bound). `variants` trains
the four into `<workdir>/{none,parser,simple,structured}`; `<workdir>/comparison.md` shows accuracy
and the UAS of the Chu-Liu-Edmonds trees decoded from the arc scores against the planted trees.
`train.render_trees` draws induced vs planted trees in `<workdir>/<variant>/trees_test/` (open
`sentence/index.html`).

What it shows (3 seeds, README "The default job"): none at chance, both attention variants near 100%
accuracy, induced trees well above chance (structured 64-84% UAS, simple 69-70%: above it on the
mean, not beyond the seed range), the parser 100%.

Sized to finish in a few minutes on a 2-core CPU.
"""
import ml_collections

from jax_structured import config as training_config
from jax_structured.data import core
from jax_structured.data import synthetic


def get_config() -> ml_collections.ConfigDict:
  """The default job's config (every key overridable, e.g. --config.train.num_steps=100)."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = ''  # the data kind: 'sentence' classification (+ UAS against the planted heads)
  config.parallel = 'none'  # tiny model: one device is fastest on a small CPU

  config.data = synthetic.default_config()
  # Short sentences of one animal: 2 verbs, 2 nouns, 1-3 modifiers (5-7 words), 3 colours, 4 animals.
  config.data.update({'max_pairs': 1, 'max_modifiers': 3, 'min_length': 5, 'max_length': 7,
                      'num_colours': 3, 'num_keys': 4, 'num_train': 20000, 'num_dev': 500,
                      'num_test': 500, 'batch_size': 32})

  config.model = ml_collections.ConfigDict({
      'name': 'classifier.sentence',
      'encoder': {'name': 'context_free', 'hidden_size': 16, 'semantic_size': 8,
                  'attention': 'structured', 'position': 'distance', 'distance_slope': 1.0,
                  'single_root': True},
      'embedding_dim': 32,
      'pooling': 'max',  # the label is an existential over words
      'mlp_hidden': 32, 'dropout_rate': 0.0})

  config.optimizer = training_config.optimizer_defaults()
  config.optimizer.update({'name': 'adam', 'learning_rate': 3e-3, 'clip_norm': 5.0})

  config.train = training_config.train_defaults()
  config.train.update({'num_epochs': 0, 'num_steps': 2000, 'eval_every_steps': 500,
                       'log_every_steps': 100, 'render_trees': 5,
                       'comparison_metrics': ('accuracy', 'uas')})

  config.variants = ml_collections.ConfigDict({
      'none': {'model': {'encoder': {'attention': 'none'}}},
      'simple': {'model': {'encoder': {'attention': 'simple'}}},
      'structured': {'model': {'encoder': {'attention': 'structured'}}},
      # The UAS upper bound: the biaffine tree-CRF parser (models/parser.py) trained ON the planted
      # trees (the same sentences as a treebank), a BiLSTM that sees the order directly. It has no
      # label: its rows report UAS / LAS only.
      'parser': {'data': {'kind': 'parse'}, 'model': {
          'name': 'parser.biaffine', 'loss': 'crf', 'single_root': True, 'num_tags': 0,
          'tag_input': 'none', 'num_relations': len(core.Vocabulary(synthetic.RELATION_NAMES)),
          'embedding_dim': 32, 'hidden_size': 32, 'num_layers': 1, 'arc_mlp_size': 32,
          'label_mlp_size': 16, 'dropout_rate': 0.0}},
  })
  return config
