r"""Training speed of the LSTMN language model against the LSTM of the same size (Cheng et al. 2016).

  python -m launch.benchmark lstmn [--sizes=40x35] [--repeats=20] [--dtype=float32]

`--sizes` lists `BATCHxSTEPS` or `BATCHxSTEPSxHIDDEN` problems (default `40x35x300`: the PTB setting
of Table 1, batch 40, windows of 35 tokens, hidden/memory 300; embeddings 150 and a 10k vocabulary
always). For each size one table row gives training tokens/s (B * T / median seconds of one jitted
SGD step: forward, softmax cross-entropy over the vocabulary, backward, update; `--repeats` timed
steps after a compile/warm-up step) of LSTM-1, LSTMN-1, sLSTM-3 and LSTMN-3, and the slowdown
LSTM/LSTMN of the same depth. The issue's goal (on a GPU): LSTMN at most 2x slower than the LSTM.
Random token ids are used (speed does not depend on them).
"""
import statistics
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from jax_structured import models
from launch import benchmarks

DEFAULT_SIZES = '40x35x300'
VOCAB_SIZE = 10_000
EMBEDDING_DIM = 150
MODELS = (('LSTM-1', 'lstm', 1), ('LSTMN-1', 'lstmn', 1), ('sLSTM-3', 'lstm', 3), ('LSTMN-3', 'lstmn', 3))
GOAL = 2.0


def parse_sizes(text):
  """'40x35,8x35x64' -> [(40, 35, 300), (8, 35, 64)]; raises ValueError naming the bad item."""
  return benchmarks.parse_sizes(text, ('BATCH', 'STEPS', 'HIDDEN'), default=300)


def train_step_fn(cell, num_layers, hidden, dtype=jnp.float32, learning_rate=0.65):
  """(init(key, batch) -> (params, opt_state), step(params, opt_state, batch) -> (params, opt_state,
  loss)) for the Table 1 language model; `step` is jitted with donated parameters."""
  model = models.build(ml_collections.ConfigDict(dict(
      name='lstmn.language_model', cell=cell, num_layers=num_layers, hidden_size=hidden,
      embedding_dim=EMBEDDING_DIM)), vocab_size=VOCAB_SIZE, num_classes=0)
  tx = optax.chain(optax.clip_by_global_norm(5.0), optax.sgd(learning_rate))

  def init(key, batch):
    params = model.init(key, batch)['params']
    params = jax.tree.map(lambda x: x.astype(dtype), params)
    return params, tx.init(params)

  def loss_fn(params, batch):
    logits = model.apply({'params': params}, batch).astype(jnp.float32)
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, batch['targets'][..., None], -1))

  @jax.jit
  def step(params, opt_state, batch):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  return init, step


def measure(cell, num_layers, batch, steps, hidden, *, repeats=20, dtype='float32', seed=0):
  """Median seconds of one training step and the tokens/s it gives."""
  rng = np.random.default_rng(seed)
  tokens = jnp.asarray(rng.integers(1, VOCAB_SIZE, size=(batch, steps + 1)), jnp.int32)
  data = {'inputs': tokens[:, :-1], 'targets': tokens[:, 1:]}
  init, step = train_step_fn(cell, num_layers, hidden, jnp.dtype(dtype))
  params, opt_state = init(jax.random.key(seed), data)
  params, opt_state, loss = step(params, opt_state, data)  # compile + warm-up
  jax.block_until_ready(loss)
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    params, opt_state, loss = step(params, opt_state, data)
    jax.block_until_ready(loss)
    times.append(time.perf_counter() - start)
  if not np.isfinite(float(loss)):
    raise FloatingPointError(f'{cell}-{num_layers}: non-finite loss {float(loss)}')
  seconds = statistics.median(times)
  return seconds, batch * steps / seconds


def run(sizes, repeats=20, dtype='float32', models=MODELS):
  """One row per size: {'size', name: tokens/s, name + ' ms': ms, 'slowdown k': LSTM-k / LSTMN-k
  tokens/s} for the `models` (a subset of `MODELS`; a slowdown needs both models of its depth)."""
  rows = []
  for batch, steps, hidden in sizes:
    row = {'size': f'{batch}x{steps} h{hidden}'}
    for name, cell, layers in models:
      seconds, rate = measure(cell, layers, batch, steps, hidden, repeats=repeats, dtype=dtype)
      row[name], row[name + ' ms'] = rate, 1e3 * seconds
    for depth, lstm in (('1', 'LSTM-1'), ('3', 'sLSTM-3')):
      if lstm in row and f'LSTMN-{depth}' in row:
        row[f'slowdown {depth}'] = row[lstm] / row[f'LSTMN-{depth}']
    rows.append(row)
  return rows


def format_table(rows):
  """Markdown table: tokens/s (and ms/step) per model, slowdowns LSTM/LSTMN."""
  head = ('| B x T, hidden | LSTM-1 tok/s | LSTMN-1 tok/s | slowdown | sLSTM-3 tok/s | LSTMN-3 tok/s '
          '| slowdown |')
  lines = [head, '|---|---:|---:|---:|---:|---:|---:|']
  for r in rows:
    cells = [f'{r[n]:,.0f} ({r[n + " ms"]:.1f} ms)' for n in ('LSTM-1', 'LSTMN-1')]
    cells3 = [f'{r[n]:,.0f} ({r[n + " ms"]:.1f} ms)' for n in ('sLSTM-3', 'LSTMN-3')]
    lines.append(f'| {r["size"]} | {cells[0]} | {cells[1]} | {r["slowdown 1"]:.2f}x | {cells3[0]} | '
                 f'{cells3[1]} | {r["slowdown 3"]:.2f}x |')
  return '\n'.join(lines)


def main(argv):
  del argv
  sizes = parse_sizes(benchmarks.SIZES.value or DEFAULT_SIZES)
  device = benchmarks.print_device(f'vocabulary {VOCAB_SIZE}, embeddings {EMBEDDING_DIM}')
  rows = run(sizes, repeats=benchmarks.REPEATS.value, dtype=benchmarks.DTYPE.value)
  print(format_table(rows))
  worst = max(max(r['slowdown 1'], r['slowdown 3']) for r in rows)
  verdict = 'met' if worst <= GOAL else 'NOT met'
  print(f'goal: LSTMN at most {GOAL:.0f}x slower than the LSTM of the same depth -> worst {worst:.2f}x, '
        f'{verdict} on {device.platform}' + ('' if device.platform == 'gpu' else
                                             ' (the goal is stated for a GPU)'))


QUICK_SIZES = ((2, 5, 8),)
QUICK_MODELS = MODELS[:2]  # LSTM-1, LSTMN-1


def report_tables(report_run):
  """The report's LSTMN family (`python -m launch.benchmark report`; `report_run` is a
  `benchmarks.ReportRun`): one row per size, as `run` (--quick: LSTM-1 and LSTMN-1 only), with the
  goal."""
  quick = report_run.quick
  rows = report_run.rows('lstmn', QUICK_SIZES if quick else parse_sizes(DEFAULT_SIZES),
                         lambda size: run([size], repeats=report_run.repeats, dtype=report_run.dtype,
                                          models=QUICK_MODELS if quick else MODELS))
  if not rows:
    return
  device = jax.devices()[0]
  worst = max(r[k] for r in rows for k in ('slowdown 1', 'slowdown 3') if k in r)
  where = f'on {device.device_kind}' + ('' if device.platform == 'gpu' else ' (the goal is for a GPU)')
  table_rows = []
  for r in rows:
    table_row = {'B x T, hidden': r['size']}
    for name, _, _ in MODELS:
      if name in r:
        table_row[f'{name} tok/s'], table_row[f'{name} ms'] = r[name], r[name + ' ms']
    for depth, lstm in (('1', 'LSTM-1'), ('3', 'sLSTM-3')):
      if f'slowdown {depth}' in r:
        table_row[f'LSTMN-{depth}/{lstm}'] = r[f'slowdown {depth}']
    table_rows.append(table_row)
  yield benchmarks.Table(
      f'training tokens/s and ms per SGD step (forward, softmax over {VOCAB_SIZE:,} words, backward, '
      f'update; embeddings {EMBEDDING_DIM}); LSTMN-k/LSTM-k = slowdown of the same depth', table_rows,
      [f'goal: LSTMN at most {GOAL:g}x slower than the LSTM of the same depth: worst {worst:.2f}x, '
       f'{"met" if worst <= GOAL else "missed"} {where}'])
