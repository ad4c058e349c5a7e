r"""Cost of the relation-network encoders (Yu et al. 2018) against a BiLSTM-max of the same width.

  python -m launch.benchmark relation_networks [--sizes=32x16,32x32,32x64] [--repeats=20] [--dtype=float32]

`--sizes` lists `BATCHxN` or `BATCHxNxHIDDEN` problems (default 32x16,32x32,32x64 at hidden 300: the
paper's BiLSTM of 300 per direction, g / f of 300; embeddings 300, vocabulary 10k). For every size and
model of `MODELS` (under the 'classifier.sentence' head with the pooling of its configs/yu row, 6
classes, random tokens and, for the supervised row, random trees), one row gives the median seconds of a
jitted training step (forward, softmax cross-entropy, backward, SGD update) and of a jitted forward pass
(`--repeats` timed calls after a compile / warm-up call), the compiled peak memory of the training step
(XLA memory_analysis: arguments + outputs + temporaries) and the ratios of all three to BiLSTM-max
(`x bilstm`). g_theta's separable first layer keeps the pair tensors at [B, 1 + n, n, hidden]: memory
linear in the batch, quadratic in n; the recurrent model recomputes one step's at a time in the
backward pass (a rematerialised scan over its steps).
"""
import statistics
import time

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax

from configs import yu as yu_configs
from jax_structured import models
from launch import benchmarks

DEFAULT_SIZES = '32x16,32x32,32x64'
VOCAB_SIZE = 10_000
EMBEDDING_DIM = 300
NUM_CLASSES = 6
BASELINE = 'bilstm_max'
MODELS = ('bilstm_max', 'rn_none', 'rn_latent', 'rn_intra_attn_latent', 'recurrent_rn_supervised',
          'recurrent_rn_latent')
QUICK_SIZES = ((4, 6, 8),)
# --quick: the baseline, the latent-tree RN and the recurrent one (every code path of the others is
# one of these with another tree or aggregation); half the family's compiles.
QUICK_MODELS = ('bilstm_max', 'rn_latent', 'recurrent_rn_latent')


def parse_sizes(text):
  """'32x16,8x64x100' -> [(32, 16, 300), (8, 64, 100)]; raises ValueError naming the bad item."""
  return benchmarks.parse_sizes(text, ('BATCH', 'N', 'HIDDEN'), default=300)


def model_config(row, hidden):
  """The 'classifier.sentence' config of a configs/yu row with every width set to `hidden`."""
  section, pooling = yu_configs.ROWS[row]
  encoder = dict(section)
  for key in ('hidden_size', 'relation_size'):
    if key in encoder:
      encoder[key] = hidden
  return ml_collections.ConfigDict({
      'name': 'classifier.sentence', 'encoder': encoder, 'pooling': pooling,
      'embedding_dim': EMBEDDING_DIM, 'embedding_dropout': 0.5, 'dropout_rate': 0.5,
      'mlp_hidden': hidden})


def make_batch(rng, batch, n):
  """Random tokens of n words per sentence and random trees (each word's head an earlier word)."""
  heads = np.full((batch, n), -1, np.int32)
  for b in range(batch):
    heads[b, 1:] = [rng.integers(0, m) for m in range(1, n)]
  return {'tokens': jnp.asarray(rng.integers(1, VOCAB_SIZE, (batch, n)), jnp.int32),
          'lengths': jnp.full((batch,), n, jnp.int32), 'heads': jnp.asarray(heads),
          'label': jnp.asarray(rng.integers(0, NUM_CLASSES, batch), jnp.int32)}


def step_fns(row, hidden, dtype):
  """(init, train_step, infer) of one row; train_step(params, opt_state, batch, key) is jitted."""
  model = models.build(model_config(row, hidden), vocab_size=VOCAB_SIZE, num_classes=NUM_CLASSES)
  tx = optax.sgd(0.1)

  @jax.jit  # one program (op by op, the init dispatched ~70 small compiles per model)
  def init(batch):
    params = model.init(jax.random.key(0), batch)['params']
    params = jax.tree.map(lambda x: x.astype(dtype), params)
    return params, tx.init(params)

  def loss_fn(params, batch, key):
    logits = model.apply({'params': params}, batch, train=True, rngs={'dropout': key})
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32),
                                                           batch['label']).mean()

  @jax.jit
  def train_step(params, opt_state, batch, key):
    loss, grads = jax.value_and_grad(loss_fn)(params, batch, key)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss

  @jax.jit
  def infer(params, batch):
    return model.apply({'params': params}, batch)

  return init, train_step, infer


def _median_seconds(fn, repeats):
  jax.block_until_ready(fn())  # compile + warm-up
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    jax.block_until_ready(fn())
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def peak_bytes(compiled):
  """Arguments + outputs + temporaries of a compiled function (XLA memory_analysis), or None."""
  analysis = compiled.memory_analysis()
  if analysis is None:
    return None
  return analysis.argument_size_in_bytes + analysis.output_size_in_bytes + analysis.temp_size_in_bytes


def measure(row, batch_size, n, hidden, *, repeats=20, dtype='float32', seed=0):
  """{'train ms', 'infer ms', 'peak MiB'} of one row at one size."""
  batch = make_batch(np.random.default_rng(seed), batch_size, n)
  init, train_step, infer = step_fns(row, hidden, jnp.dtype(dtype))
  params, opt_state = init(batch)
  key = jax.random.key(seed)
  compiled = train_step.lower(params, opt_state, batch, key).compile()
  loss = compiled(params, opt_state, batch, key)[2]
  if not np.isfinite(float(loss)):
    raise FloatingPointError(f'{row} at {batch_size}x{n}: non-finite loss {float(loss)}')
  train = _median_seconds(lambda: compiled(params, opt_state, batch, key)[2], repeats)
  inference = _median_seconds(lambda: infer(params, batch), repeats)
  peak = peak_bytes(compiled)
  return {'train ms': 1e3 * train, 'infer ms': 1e3 * inference,
          'peak MiB': None if peak is None else peak / 2 ** 20}


def run(sizes, repeats=20, dtype='float32', rows=MODELS):
  """One table row per (size, model), with the ratios to BiLSTM-max of the same size."""
  out = []
  for batch_size, n, hidden in sizes:
    measured = {row: measure(row, batch_size, n, hidden, repeats=repeats, dtype=dtype) for row in rows}
    base = measured.get(BASELINE)
    for row, values in measured.items():
      line = {'size': f'{batch_size}x{n} h{hidden}', 'model': row, **values}
      if base:
        line['train x bilstm'] = values['train ms'] / base['train ms']
        line['infer x bilstm'] = values['infer ms'] / base['infer ms']
        line['peak x bilstm'] = (values['peak MiB'] / base['peak MiB']
                                 if values['peak MiB'] and base['peak MiB'] else '-')
      out.append(line)
  return out


def format_table(rows):
  """Markdown table of `run`'s rows."""
  lines = ['| B x n, hidden | model | train ms | x bilstm | infer ms | x bilstm | peak MiB | x bilstm |',
           '|---|---|---:|---:|---:|---:|---:|---:|']
  fmt = lambda v, spec: '-' if v is None or isinstance(v, str) else format(v, spec)
  for r in rows:
    lines.append(f'| {r["size"]} | {r["model"]} | {fmt(r["train ms"], ".1f")} | '
                 f'{fmt(r.get("train x bilstm"), ".2f")} | {fmt(r["infer ms"], ".1f")} | '
                 f'{fmt(r.get("infer x bilstm"), ".2f")} | {fmt(r["peak MiB"], ".1f")} | '
                 f'{fmt(r.get("peak x bilstm"), ".2f")} |')
  return '\n'.join(lines)


def main(argv):
  del argv
  sizes = parse_sizes(benchmarks.SIZES.value or DEFAULT_SIZES)
  benchmarks.print_device(f'embeddings {EMBEDDING_DIM}')
  print(format_table(run(sizes, repeats=benchmarks.REPEATS.value, dtype=benchmarks.DTYPE.value)))


def report_tables(report_run):
  """The report's relation_networks family (`python -m launch.benchmark report`): `run` per size
  (--quick: `QUICK_MODELS`)."""
  rows = report_run.rows(
      'relation_networks', QUICK_SIZES if report_run.quick else parse_sizes(DEFAULT_SIZES),
      lambda size: run([size], repeats=report_run.repeats, dtype=report_run.dtype,
                       rows=QUICK_MODELS if report_run.quick else MODELS))
  if not rows:
    return
  yield benchmarks.Table(
      'relation-network sentence classifiers (Yu et al. 2018) vs BiLSTM-max of the same width: '
      'training step (forward, backward, SGD) and inference ms, compiled peak memory of the training '
      'step, ratios to BiLSTM-max', rows,
      ['the pair tensors [B, 1 + n, n, hidden] of g_theta set the memory: linear in B, quadratic in n'])
