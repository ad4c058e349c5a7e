r"""Sentences/s of the batched binary Tree-LSTM against a BiLSTM of the same width and against a
one-tree-at-a-time loop of the same cell (Chen et al. 2017 / Tai et al. 2015 sentence classifier).

  python -m launch.benchmark tree_lstm [--sizes=50x32] [--repeats=20] [--dtype=float32]

`--sizes` lists `BATCHxLENGTH` or `BATCHxLENGTHxHIDDEN` problems (default `50x32x150`: batches of 50
sentences padded to 32 words, SST's sizes; hidden 150 as Tai et al.'s constituency Tree-LSTM; 300-d
embeddings and a 20k vocabulary always). Sentence lengths are drawn uniformly from 2..LENGTH and each
tree is a random binary bracketing (its depth between log2 and the length).

Per size, sentences/s (and ms per batch) of, side by side in one run:
  tree-LSTM:        the 'classifier.sentence' head over the 'tree_lstm' encoder, the whole batch at once
                    (one lax.scan over tree levels, `nn.tree_lstm`);
  BiLSTM:           the same head over a BiLSTM of the same hidden size per direction (max pooling);
  one tree at a time: the same Tree-LSTM model called once per sentence (batch of 1, padded to the
                    sentence's own length, every length compiled before timing), the loop DGL and Tai
                    et al.'s Lua code run;
for inference (logits) and training (loss, gradients, one SGD update per batch; the one-tree loop sums
the per-sentence gradients and updates once). `--repeats` timed calls after a warm-up (compile) call;
medians. Ratios: batched/loop (how much batching buys) and Tree-LSTM/BiLSTM.
"""
import statistics
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from jax_structured import models
from jax_structured.data import tree_batching
from launch import benchmarks

DEFAULT_SIZES = '50x32x150'
VOCAB_SIZE = 20_000
EMBEDDING_DIM = 300
NUM_CLASSES = 5


def parse_sizes(text):
  """'50x32,8x16x64' -> [(50, 32, 150), (8, 16, 64)]; raises ValueError naming the bad item."""
  return benchmarks.parse_sizes(text, ('BATCH', 'LENGTH', 'HIDDEN'), default=150, minimum={'LENGTH': 2})


def random_tree(rng, length):
  """A random binary bracketing of `length` words in SST's format (every node labelled 2)."""
  nodes = [f'(2 w{i})' for i in range(length)]
  while len(nodes) > 1:
    i = int(rng.integers(0, len(nodes) - 1))
    nodes[i:i + 2] = [f'(2 {nodes[i]} {nodes[i + 1]})']
  return nodes[0]


def make_examples(rng, batch, length):
  """`batch` encoded sentences of random lengths 2..length with random trees and labels."""
  examples = []
  for _ in range(batch):
    n = int(rng.integers(2, length + 1))
    examples.append({'tokens': rng.integers(2, VOCAB_SIZE, n).astype(np.int32),
                     'label': int(rng.integers(0, NUM_CLASSES)),
                     **tree_batching.binary_tree_arrays(random_tree(rng, n))})
  return examples


def collate(examples, length):
  """A sentence batch padded to `length` words, with the tree arrays."""
  tokens = np.zeros((len(examples), length), np.int32)
  for b, e in enumerate(examples):
    tokens[b, :len(e['tokens'])] = e['tokens']
  batch = {'tokens': tokens, 'lengths': np.asarray([len(e['tokens']) for e in examples], np.int32),
           'label': np.asarray([e['label'] for e in examples], np.int32)}
  batch.update(tree_batching.collate_trees(examples, length))
  return {k: jnp.asarray(v) for k, v in batch.items() if k != 'tree_labels'}


def model_fns(encoder, pooling, dtype):
  """(init(batch) -> params, predict(params, batch) -> logits, grad(params, batch) -> (loss, grads),
  update(params, grads) -> params) for the sentence classifier over `encoder`; all jitted."""
  model = models.build(ml_collections.ConfigDict(dict(
      name='classifier.sentence', embedding_dim=EMBEDDING_DIM, encoder=encoder, pooling=pooling,
      mlp_hidden=0, dropout_rate=0.0)), vocab_size=VOCAB_SIZE, num_classes=NUM_CLASSES)
  tx = optax.sgd(0.1)

  def init(batch):
    params = jax.jit(model.init)(jax.random.key(0), batch)['params']
    return jax.tree.map(lambda x: x.astype(dtype), params)

  def loss_fn(params, batch):
    logits = model.apply({'params': params}, batch, train=True).astype(jnp.float32)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), batch['label'][:, None], -1))

  predict = jax.jit(lambda params, batch: model.apply({'params': params}, batch))
  grad = jax.jit(jax.value_and_grad(loss_fn))

  @jax.jit
  def update(params, grads):
    updates, _ = tx.update(grads, tx.init(params), params)
    return optax.apply_updates(params, updates)

  return init, predict, grad, update


def _median_seconds(fn, repeats):
  jax.block_until_ready(fn())  # compile + warm-up
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def measure(batch_size, length, hidden, *, repeats=20, dtype='float32', seed=0, loop=True):
  """{'size', '<model> <phase> sent/s', '<model> <phase> ms', ratios} for one size (module docstring)."""
  dtype = jnp.dtype(dtype)
  rng = np.random.default_rng(seed)
  examples = make_examples(rng, batch_size, length)
  batch = collate(examples, length)
  row = {'size': f'{batch_size}x{length} h{hidden}'}
  encoders = {'tree-LSTM': ({'name': 'tree_lstm', 'hidden_size': hidden}, 'encoder'),
              'BiLSTM': ({'name': 'bilstm', 'hidden_size': hidden}, 'max')}
  fns = {}
  for name, (encoder, pooling) in encoders.items():
    init, predict, grad, update = fns[name] = model_fns(encoder, pooling, dtype)
    params = init(batch)
    infer = _median_seconds(lambda: predict(params, batch), repeats)

    def train_step():
      loss, grads = grad(params, batch)
      return update(params, grads), loss

    train = _median_seconds(train_step, repeats)
    for phase, seconds in (('infer', infer), ('train', train)):
      row[f'{name} {phase} sent/s'], row[f'{name} {phase} ms'] = batch_size / seconds, 1e3 * seconds
  if loop:
    init, predict, grad, update = fns['tree-LSTM']
    params = init(batch)
    singles = [collate([e], len(e['tokens'])) for e in examples]
    for single in {len(e['tokens']): s for e, s in zip(examples, singles)}.values():  # compile each length
      jax.block_until_ready(predict(params, single))
      jax.block_until_ready(grad(params, single))

    def infer_loop():
      return [predict(params, s) for s in singles]

    def train_loop():
      total = None
      for s in singles:
        _, grads = grad(params, s)
        total = grads if total is None else jax.tree.map(jnp.add, total, grads)
      return update(params, total)

    loop_repeats = max(1, repeats // 4)
    for phase, fn in (('infer', infer_loop), ('train', train_loop)):
      seconds = _median_seconds(fn, loop_repeats)
      row[f'one-at-a-time {phase} sent/s'] = batch_size / seconds
      row[f'one-at-a-time {phase} ms'] = 1e3 * seconds
      row[f'batched/loop {phase}'] = row[f'tree-LSTM {phase} sent/s'] / row[f'one-at-a-time {phase} sent/s']
  for phase in ('infer', 'train'):
    row[f'tree-LSTM/BiLSTM {phase}'] = row[f'tree-LSTM {phase} sent/s'] / row[f'BiLSTM {phase} sent/s']
  return row


def run(sizes, repeats=20, dtype='float32', loop=True):
  return [measure(b, t, h, repeats=repeats, dtype=dtype, loop=loop) for b, t, h in sizes]


def format_table(rows):
  """Markdown: sentences/s (ms per batch) of each model and phase, and the ratios."""
  lines = []
  for phase in ('infer', 'train'):
    lines += [f'{phase}:',
              '| B x T, hidden | tree-LSTM sent/s | BiLSTM sent/s | one-at-a-time sent/s | batched/loop '
              '| tree-LSTM/BiLSTM |', '|---|---:|---:|---:|---:|---:|']
    for r in rows:
      cell = lambda n: (f'{r[f"{n} {phase} sent/s"]:,.0f} ({r[f"{n} {phase} ms"]:.1f} ms)'
                        if f'{n} {phase} sent/s' in r else '-')
      ratio = f'{r[f"batched/loop {phase}"]:.1f}x' if f'batched/loop {phase}' in r else '-'
      lines.append(f'| {r["size"]} | {cell("tree-LSTM")} | {cell("BiLSTM")} | {cell("one-at-a-time")} | '
                   f'{ratio} | {r[f"tree-LSTM/BiLSTM {phase}"]:.2f}x |')
  return '\n'.join(lines)


def main(argv):
  del argv
  sizes = parse_sizes(benchmarks.SIZES.value or DEFAULT_SIZES)
  benchmarks.print_device(f'embeddings {EMBEDDING_DIM}, vocabulary {VOCAB_SIZE} (loop: a quarter of the '
                          'calls)')
  print(format_table(run(sizes, repeats=benchmarks.REPEATS.value, dtype=benchmarks.DTYPE.value)))


QUICK_SIZES = ((4, 8, 8),)


def report_tables(report_run):
  """The report's Tree-LSTM family (`python -m launch.benchmark report`): one row per size, as `run`."""
  rows = report_run.rows('tree_lstm', QUICK_SIZES if report_run.quick else parse_sizes(DEFAULT_SIZES),
                         lambda size: run([size], repeats=report_run.repeats, dtype=report_run.dtype))
  if not rows:
    return
  yield benchmarks.Table(
      f'sentences/s of the binary Tree-LSTM sentence classifier (embeddings {EMBEDDING_DIM}), the whole '
      'batch level by level vs a BiLSTM of the same width vs one tree at a time; inference and training '
      '(forward, backward, SGD update)', rows,
      ['batched/loop = how much batching the trees buys (DGL reports several times for its batched '
       'Tree-LSTM)'])
