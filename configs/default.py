"""The built-in demo job: no / simple / structured attention on sentences with PLANTED trees.

    python -m launch.train --config=configs/default.py --workdir=/tmp/default_run

Data: `synthetic_trees` (jax_structured/data/synthetic.py), generated from the seed, no download:
a verb, nouns before it (subjects) and after it (objects), and modifiers agreeing with a noun
scattered anywhere (non-projective planted trees). The label says whether the subjects or the objects
have more modifiers: a bag of words is at chance by construction, the label is a sum over the arcs of
the planted tree, so a model must relate each modifier to its planted head.
Model: the Liu & Lapata (2018) sentence classifier (BiLSTM -> attention -> sum pooling -> MLP) with
tiny sizes (sum pooling keeps the label linear in the attention marginals). `variants` trains the
three Table 1 attention variants side by side into `<workdir>/{none,simple,structured}`; the comparison table (`<workdir>/comparison.md`) shows test
accuracy next to the UAS of the Chu-Liu-Edmonds trees induced from the attention scores against the
planted trees (simple and structured variants). `train.render_trees` writes CoNLL-U trees and
pictures of induced vs planted trees to `<workdir>/<variant>/trees_test/` (open
`sentence/index.html`) and the Table 5 statistics to `<workdir>/<variant>/metrics.json`.

Sized to finish in a few minutes on a 2-core CPU.
"""
import ml_collections

from jax_structured.data import synthetic
from jax_structured.training import config as training_config


def get_config() -> ml_collections.ConfigDict:
  """The default job's config (every key overridable, e.g. --config.train.num_steps=100)."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = ''  # the data kind: 'sentence' classification (+ UAS against the planted heads)
  config.parallel = 'none'  # tiny model: one device is fastest on a small CPU
  config.distributed = False

  config.data = synthetic.default_config()
  config.data.num_train = 20000  # generated in ~2 s; large enough that nothing is memorised
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
  config.model.pooling = 'sum'
  config.model.mlp_hidden = 32
  config.model.dropout_rate = 0.0
  config.model.single_root = True

  config.optimizer = training_config.optimizer_defaults()
  config.optimizer.name = 'adam'
  config.optimizer.learning_rate = 3e-3
  config.optimizer.clip_norm = 5.0

  config.train = training_config.train_defaults()
  config.train.num_epochs = 0
  config.train.num_steps = 1200
  config.train.eval_every_steps = 400
  config.train.log_every_steps = 100
  config.train.render_trees = 5

  config.variants = ml_collections.ConfigDict({
      'none': {'model': {'attention': 'none'}},
      'simple': {'model': {'attention': 'simple'}},
      'structured': {'model': {'attention': 'structured'}},
  })
  return config
