"""Tiny in-memory dataset and model for the training tests (no dependency on other subpackages' progress).

`tiny_sentences` (registered as data loader 'tiny_test_sentences'): sentence classification where the
label is 1 iff token 2 occurs more often than token 3 (learnable by a bag of embeddings); every
sentence carries gold `heads` (a chain: word m hangs from m-1, word 0 from ROOT).
`TinyModel` (registered with training as 'tiny_test_model'): embeddings -> masked mean -> dense, and
it sows bilinear `arc_scores` / `root_scores` / `lengths` so evaluation can decode trees.
"""
import os

import flax.linen as nn
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jax_structured import data
from jax_structured import models
from jax_structured import training
from jax_structured import config as config_lib
from jax_structured.training import optimizers
from jax_structured.training import parallel
from jax_structured.training import steps
from jax_structured.training import tasks

VOCAB = data.Vocabulary([f'w{i}' for i in range(2, 12)])  # 12 ids: <pad>, <unk>, w2..w11


class TinySplit(data.Split):
  """A Split with its own simple batching: fixed length 6, deterministic shuffle per (seed, epoch)."""

  def batches(self, batch_size, *, shuffle, seed=0, epoch=0, num_shards=1):
    if batch_size % num_shards:
      raise ValueError(f'batch_size={batch_size} not divisible by num_shards={num_shards}')
    order = np.arange(len(self.examples))
    if shuffle:
      order = np.random.default_rng([seed, epoch]).permutation(order)
    width = 6
    for start in range(0, len(order), batch_size):
      idx = list(order[start:start + batch_size])
      real = len(idx)
      idx += [idx[0]] * (batch_size - real)
      tokens = np.zeros((batch_size, width), np.int32)
      heads = np.full((batch_size, width), -1, np.int32)
      lengths = np.zeros((batch_size,), np.int32)
      for r, i in enumerate(idx):
        ex = self.examples[i]
        n = len(ex['tokens'])
        tokens[r, :n] = ex['tokens']
        heads[r, :n] = ex['heads']
        lengths[r] = n
      yield {'tokens': tokens, 'lengths': lengths,
             'label': np.asarray([self.examples[i]['label'] for i in idx], np.int32),
             'heads': heads, 'example_mask': (np.arange(batch_size) < real).astype(np.float32),
             'example_index': np.where(np.arange(batch_size) < real, np.asarray(idx), -1).astype(np.int32)}

  def num_batches(self, batch_size, num_shards=1):
    del num_shards
    return -(-len(self.examples) // batch_size)


def _examples(n, seed):
  rng = np.random.default_rng(seed)
  out = []
  for _ in range(n):
    length = int(rng.integers(2, 7))
    tokens = rng.integers(2, 12, size=length).astype(np.int32)
    label = int((tokens == 2).sum() > (tokens == 3).sum())
    heads = np.arange(-1, length - 1, dtype=np.int32)
    out.append({'tokens': tokens, 'label': label, 'heads': heads})
  return out


@data.register('tiny_test_sentences')
def tiny_sentences(config):
  """TaskData of config.num_train / num_eval examples (config.seed); 'label_offset' breaks labels."""
  seed = config.get('seed', 0)
  splits = {}
  for i, (name, n) in enumerate([('train', config.get('num_train', 48)),
                                 ('validation', config.get('num_eval', 16)),
                                 ('test', config.get('num_eval', 16))]):
    examples = _examples(n, seed * 10 + i)
    for ex in examples:
      ex['label'] += config.get('label_offset', 0)
    splits[name] = TinySplit(name, 'sentence', examples)
  return data.TaskData('sentence', VOCAB, ['negative', 'positive'], splits,
                       extras={'tag_vocab': data.Vocabulary(['NN', 'VB'])})


class TinyModel(nn.Module):
  """Bag of embeddings classifier that also sows bilinear tree scores."""
  vocab_size: int
  num_classes: int
  dim: int = 8
  dropout: float = 0.0
  sow_trees: bool = True

  @nn.compact
  def __call__(self, batch, train=False):
    x = nn.Embed(self.vocab_size, self.dim, name='embed')(batch['tokens'])
    mask = (jnp.arange(x.shape[1])[None] < batch['lengths'][:, None]).astype(x.dtype)
    bilinear = self.param('bilinear', nn.initializers.normal(1.0), (self.dim, self.dim), jnp.float32)
    arc_scores = jnp.einsum('bhd,de,bme->bhm', x, bilinear, x)
    root_scores = nn.Dense(1, name='root')(x)[..., 0]
    if self.sow_trees:
      self.sow('intermediates', 'arc_scores', arc_scores)
      self.sow('intermediates', 'root_scores', root_scores)
      self.sow('intermediates', 'lengths', batch['lengths'])
    pooled = (x * mask[..., None]).sum(1) / jnp.maximum(mask.sum(1, keepdims=True), 1.0)
    pooled = nn.Dropout(self.dropout, deterministic=not train)(pooled)
    hidden = nn.tanh(nn.Dense(self.dim, name='hidden')(pooled))
    return nn.Dense(self.num_classes, name='out')(hidden)


@models.register('tiny_test_model')
def build_tiny_model(model_config, *, vocab_size, num_classes, embeddings=None):
  del embeddings
  return TinyModel(vocab_size, num_classes, dim=model_config.get('dim', 8),
                   dropout=model_config.get('dropout', 0.0), sow_trees=model_config.get('sow_trees', True))


class Crash(Exception):
  """Raised by `crash_after`'s hook: a run dying after a step, for the resume tests."""


def crash_after(k):
  """A train hook raising `Crash` right after step `k`."""
  def hook(step):
    if step == k:
      raise Crash(f'simulated crash after step {k}')
  return hook


def make_config(**overrides):
  """A complete config for the tiny job; `overrides` are dotted keys."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = ''
  config.parallel = 'shard_map'
  config.data = ml_collections.ConfigDict({'name': 'tiny_test_sentences', 'batch_size': 8,
                                           'num_train': 48, 'num_eval': 16, 'seed': 0,
                                           'label_offset': 0})
  config.model = ml_collections.ConfigDict({'name': 'tiny_test_model', 'dim': 8, 'dropout': 0.0,
                                            'single_root': True, 'sow_trees': True})
  config.optimizer = config_lib.optimizer_defaults()
  config.optimizer.name = 'adam'
  config.optimizer.learning_rate = 0.05
  config.train = config_lib.train_defaults()
  config.train.num_epochs = 2
  config.train.log_every_steps = 2
  config.train.eval_every_steps = 0
  return config_lib.with_overrides(config, overrides) if overrides else config


def global_batches(num, batch_size=16, padding=5):
  """`num` batches of 16 rows, the last `padding` rows padding examples (so shards differ in counts)."""
  split = tiny_sentences(make_config(**{'data.num_train': 200}).data).splits['train']
  out = []
  for batch in split.batches(batch_size, shuffle=True, seed=3):
    batch['example_mask'][batch_size - padding:] = 0.0
    out.append(batch)
    if len(out) == num:
      return out
  raise AssertionError('not enough batches')


def run_steps(mode, batches, opt_overrides):
  """Trains the tiny model on `batches` with a `parallel.Runner` of `mode` (no train loop).

  Returns:
    (canonical state on the host, per-step global mean losses, eval sums on batches[0], runner).
  """
  config = config_lib.resolve(make_config(**opt_overrides))
  model = build_tiny_model(config.model, vocab_size=12, num_classes=2)
  task = tasks.Classification(config)
  variables = jax.jit(lambda b: model.init(jax.random.PRNGKey(0), b))(batches[0])
  opt = config.optimizer
  tx, _ = optimizers.build(opt, variables['params'], 100)
  emb = optimizers.embedding_mask(variables['params'], opt.embedding_pattern)
  runner = parallel.Runner(
      mode, parallel.bind(steps.train_step, apply_fn=model.apply, task=task, tx=tx, embed_mask=emb),
      parallel.bind(steps.eval_step, apply_fn=model.apply, task=task))
  state = runner.place(runner.replicate(jax.device_get(steps.create_state(variables, tx))))
  rng = runner.put_rng(jax.random.PRNGKey(1))
  losses = []
  for batch in batches:
    state, metrics = runner.train(state, runner.shard_batch(batch), rng)
    loss_sum, count = parallel.to_host(metrics['loss'])
    losses.append(float(loss_sum) / float(count))
  evaluated = runner.evaluate(state, runner.shard_batch(batches[0]))
  return parallel.to_host(runner.canonical(state)), losses, parallel.to_host(evaluated), runner


def read_scalars(workdir):
  """{tag: [(step, value)]} from the TensorBoard event files in `workdir` (tensorboardX protos)."""
  from tensorboardX.proto import event_pb2  # pylint: disable=g-import-not-at-top
  import struct  # pylint: disable=g-import-not-at-top
  out = {}
  for name in sorted(os.listdir(workdir)):
    if 'tfevents' not in name:
      continue
    with open(os.path.join(workdir, name), 'rb') as f:
      raw = f.read()
    pos = 0
    while pos < len(raw):
      (length,) = struct.unpack('<Q', raw[pos:pos + 8])
      event = event_pb2.Event.FromString(raw[pos + 12:pos + 12 + length])
      pos += 12 + length + 4
      for value in event.summary.value:
        out.setdefault(value.tag, []).append((event.step, value.simple_value))
  return out


def params_of(workdir, checkpoint='latest'):
  trained = training.load_trained(workdir, checkpoint)
  return jax.tree.map(np.asarray, trained.variables['params'])
