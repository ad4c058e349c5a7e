r"""Training speed of MHS-RNN (Luo & Zhu) against HAN, HM-RNN and a flat LSTM of the same width.

  python -m launch.benchmark mhs_rnn [--sizes=64x200] [--repeats=20] [--dtype=float32]

`--sizes` lists `BATCHxTOKENS` or `BATCHxTOKENSxHIDDEN` problems (default `64x200x50`: the paper's batch
of 64 documents, 200 tokens per document, every layer 50-d; 100-d embeddings over a 20k vocabulary).
Every model is 'luo_zhu.document_classifier' over the same flat batch (a static boundary every
`SENTENCE` tokens, 5 classes) with one encoder: MHS-RNN with and without attention, HN-ATT, HM-RNN
(3 layers) and a flat one-layer LSTM of the same width ('lstm', mean pooling). A row gives training
tokens/s (B * T / median seconds of one jitted SGD-with-momentum step: forward, cross-entropy, backward,
update; `--repeats` timed steps after a compile/warm-up step) and each model's time over the flat
LSTM's (the ratio is what the CPU can tell). Random token ids (speed does not depend on them).
"""
import statistics
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from jax_structured import models
from jax_structured.models import encoders
from launch import benchmarks

DEFAULT_SIZES = '64x200x50'
VOCAB_SIZE = 20_000
EMBEDDING_DIM = 100
SENTENCE = 12
MODELS = (('LSTM', 'lstm', {}, 'mean'),
          ('MHS-RNN+att', 'mhs_rnn', {'attention': True}, 'encoder'),
          ('MHS-RNN', 'mhs_rnn', {'attention': False}, 'encoder'),
          ('HN-ATT', 'han', {'attention': True}, 'encoder'),
          ('HM-RNN', 'hm_rnn', {'num_layers': 3}, 'encoder'))


def parse_sizes(text):
  """'64x200,8x50x16' -> [(64, 200, 50), (8, 50, 16)]; raises ValueError naming the bad item."""
  return benchmarks.parse_sizes(text, ('BATCH', 'TOKENS', 'HIDDEN'), default=50)


def make_batch(batch, steps, seed=0):
  """A flat document batch: tokens [B, T], lengths [B] (all full), boundaries every SENTENCE tokens."""
  rng = np.random.default_rng(seed)
  bounds = np.zeros((batch, steps), np.float32)
  bounds[:, SENTENCE - 1::SENTENCE] = 1.0
  return {'tokens': jnp.asarray(rng.integers(2, VOCAB_SIZE, size=(batch, steps)), jnp.int32),
          'lengths': jnp.full((batch,), steps, jnp.int32), 'boundaries': jnp.asarray(bounds),
          'label': jnp.asarray(rng.integers(0, 5, size=(batch,)), jnp.int32)}


def _init(model, tx, key, data, dtype):
  params = jax.tree.map(lambda x: x.astype(dtype), model.init(key, data)['params'])
  return params, tx.init(params)


def measure(encoder, fields, pooling, batch, steps, hidden, *, repeats=20, dtype='float32', seed=0):
  """Median seconds of one training step and the tokens/s it gives."""
  section = {**encoders.default_config(encoder), **fields, 'hidden_size': hidden}
  if encoder == 'lstm':
    section['num_layers'] = 1
  model = models.build(ml_collections.ConfigDict({
      'name': 'luo_zhu.document_classifier', 'embedding_dim': EMBEDDING_DIM, 'pooling': pooling,
      'encoder': section}), vocab_size=VOCAB_SIZE, num_classes=5)
  data = make_batch(batch, steps, seed)
  tx = optax.sgd(0.05, momentum=0.9)
  # Initialised in one compiled call (eagerly, every small op of the scans' setup compiles by itself).
  params, opt_state = jax.jit(lambda key: _init(model, tx, key, data, dtype))(jax.random.key(seed))

  def loss_fn(params):
    logits = model.apply({'params': params}, data, train=True).astype(jnp.float32)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), data['label'][:, None], -1))

  @jax.jit
  def step(params, opt_state):
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  params, opt_state, loss = step(params, opt_state)  # compile + warm-up
  jax.block_until_ready(loss)
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    params, opt_state, loss = step(params, opt_state)
    jax.block_until_ready(loss)
    times.append(time.perf_counter() - start)
  if not np.isfinite(float(loss)):
    raise FloatingPointError(f'{encoder}: non-finite loss {float(loss)}')
  seconds = statistics.median(times)
  return seconds, batch * steps / seconds


def run(sizes, repeats=20, dtype='float32'):
  """One row per size: {'size', name + ' tok/s', name + ' ms', name + '/LSTM' (time ratio)}."""
  rows = []
  for batch, steps, hidden in sizes:
    row = {'B x T, hidden': f'{batch}x{steps} h{hidden}'}
    for name, encoder, fields, pooling in MODELS:
      seconds, rate = measure(encoder, fields, pooling, batch, steps, hidden, repeats=repeats, dtype=dtype)
      row[f'{name} tok/s'], row[f'{name} ms'] = rate, 1e3 * seconds
    for name, *_ in MODELS[1:]:
      row[f'{name}/LSTM'] = row[f'{name} ms'] / row['LSTM ms']
    rows.append(row)
  return rows


def format_table(rows):
  """Markdown table of `run`'s rows."""
  columns = list(rows[0])
  lines = ['| ' + ' | '.join(columns) + ' |', '|---' + '|---:' * (len(columns) - 1) + '|']
  for r in rows:
    cells = [r[c] if isinstance(r[c], str) else (f'{r[c]:.2f}' if '/' in c else f'{r[c]:,.1f}')
             for c in columns]
    lines.append('| ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


def main(argv):
  del argv
  sizes = parse_sizes(benchmarks.SIZES.value or DEFAULT_SIZES)
  benchmarks.print_device(f'vocabulary {VOCAB_SIZE}, embeddings {EMBEDDING_DIM}, a sentence every '
                          f'{SENTENCE} tokens')
  print(format_table(run(sizes, repeats=benchmarks.REPEATS.value, dtype=benchmarks.DTYPE.value)))


QUICK_SIZES = ((2, 24, 8),)


def report_tables(report_run):
  """The report's MHS-RNN family (`python -m launch.benchmark report`)."""
  rows = report_run.rows('mhs_rnn', QUICK_SIZES if report_run.quick else parse_sizes(DEFAULT_SIZES),
                         lambda size: run([size], repeats=report_run.repeats, dtype=report_run.dtype))
  if rows:
    yield benchmarks.Table(
        f'training tokens/s and ms per SGD-momentum step of luo_zhu.document_classifier (embeddings '
        f'{EMBEDDING_DIM}, a sentence every {SENTENCE} tokens); X/LSTM = time over a flat 1-layer LSTM '
        'of the same width', rows)
