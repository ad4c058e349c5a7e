"""The built-in demo job: no / simple / structured attention on sentences with PLANTED trees.

    python -m launch.train --config=configs/default.py --workdir=/tmp/default_run

Data: `synthetic_trees` (jax_structured/data/synthetic.py), generated from the seed, no download:
a verb, one or two animals each as a PAIR of nouns of different colours (one before the verb, one
after it), and coloured modifiers agreeing with an animal, anywhere in the sentence. Planted tree:
verb <- ROOT, nouns <- verb, modifier <- the noun of its animal on its side of the verb (the other
noun of the pair is a distractor; trees are often non-projective). Label: does SOME modifier have the
colour of its head noun? Given the bag of words the label is a fair coin (exactly, `pair_rate` 1), so
only the word order, through the tree, decides it.
Model: the Liu & Lapata (2018) sentence classifier (BiLSTM -> attention -> max pooling -> MLP) with
tiny sizes (max pooling computes the existential over words). `variants` trains the three Table 1
attention variants side by side into `<workdir>/{none,simple,structured}`; the comparison table
(`<workdir>/comparison.md`) shows test accuracy next to the UAS of the Chu-Liu-Edmonds trees induced
from the attention scores against the planted trees (simple and structured variants).
`train.render_trees` writes CoNLL-U trees and pictures of induced vs planted trees to
`<workdir>/<variant>/trees_test/` (open `sentence/index.html`) and the Table 5 statistics to
`<workdir>/<variant>/metrics.json`.

What it shows (measured, see README "The default job"): all three variants learn the task well
above chance, but the attention variants do NOT recover the planted trees (UAS far below the
planted structure): the BiLSTM solves the order-dependent lookup itself and the induced trees are
shallow hub trees, as Liu & Lapata (2018, sec. 5) also report for their induced trees.

Sized to finish in a few minutes on a 2-core CPU.
"""
import ml_collections

from jax_structured.data import synthetic
from jax_structured import config as training_config


def get_config() -> ml_collections.ConfigDict:
  """The default job's config (every key overridable, e.g. --config.train.num_steps=100)."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = ''  # the data kind: 'sentence' classification (+ UAS against the planted heads)
  config.parallel = 'none'  # tiny model: one device is fastest on a small CPU
  config.distributed = False

  config.data = synthetic.default_config()
  config.data.num_train = 20000  # generated in a few seconds; large enough that nothing is memorised
  config.data.num_dev = 500
  config.data.num_test = 500
  config.data.batch_size = 32

  config.model = ml_collections.ConfigDict()
  config.model.name = 'liu_lapata.sentence_classifier'
  config.model.embedding_dim = 32
  config.model.hidden_size = 32
  config.model.semantic_size = 24  # per direction; the remaining 8 per direction are structure (eq. 7)
  config.model.num_layers = 1
  config.model.attention = 'structured'
  config.model.pooling = 'max'  # the label is an existential over words
  config.model.mlp_hidden = 32
  config.model.dropout_rate = 0.0
  config.model.single_root = True

  config.optimizer = training_config.optimizer_defaults()
  config.optimizer.name = 'adam'
  config.optimizer.learning_rate = 3e-3
  config.optimizer.clip_norm = 5.0

  config.train = training_config.train_defaults()
  config.train.num_epochs = 0
  config.train.num_steps = 3000
  config.train.eval_every_steps = 1000
  config.train.log_every_steps = 100
  config.train.render_trees = 5

  config.variants = ml_collections.ConfigDict({
      'none': {'model': {'attention': 'none'}},
      'simple': {'model': {'attention': 'simple'}},
      'structured': {'model': {'attention': 'structured'}},
  })
  return config
