r"""Speed of the Liu & Lapata (2018) models: Table 2 (SNLI) and the Yelp epoch time of sec. 4.2.

  python -m launch.benchmark liu_lapata [--sizes=32x16x8] [--batch_size=32] [--doc_shape=9x17]
      [--repeats=20] [--dtype=float32] [--parts=snli,document,breakdown] [--variants=...]
      [--vocab_size=40000] [--model_overrides=hidden_size=16,...]

What is measured (median seconds over `--repeats` calls after one warm-up/compile call, each ended
with `block_until_ready`), on random batches of the padded shapes below:

* **SNLI** (`liu_lapata.pair_classifier`, sec. 4.1, Table 2): for every `--sizes` item
  `BATCHxPREMISExHYPOTHESIS` (default `32x16x8`: batch 32; SNLI test premises / hypotheses average
  13.9 / 7.5 words, padded to the 16 / 8 buckets of `data.batching`) and every attention variant
  (no attention / simple / matrix inversion / inside-outside):
  - *train*: one `training.steps.train_step` (forward + backward + Adagrad update, optimiser built by
    `training.optimizers.build` from the config) driven by `training.parallel.Runner` on one device,
    i.e. exactly the compiled step `launch.train` runs;
  - *infer*: one `training.steps.eval_step` through the same runner (forward pass + metrics), the
    evaluation users run; Table 2 of the paper times the SNLI test set.
  Seconds per instance = step time / batch; the ratio to simple attention is printed next to the
  paper's (GTX Titan X, Table 2: 0.0033 / 0.0042 / 0.0045 / 0.038 s per instance on average).
* **documents** (`liu_lapata.document_classifier`, sec. 3.3 / 4.2, Table 4 variants): training steps at
  Yelp-like sizes, `--batch_size` documents (32) of `--doc_shape` SENTENCESxWORDS (9x17: Yelp averages
  8.9 sentences and 151.6 words per document, Table 3); documents/s and the implied time of one epoch
  of 335K documents (Yelp's size in Table 3; the paper: 20 minutes per epoch, and 5 hours for
  inside-outside, footnote 4). The epoch estimate assumes every batch has this average shape.
* **breakdown** (where the time of a structured attention layer goes): at the first SNLI size's premise
  shape and the paper's dimensions, forward and forward+backward milliseconds of the BiLSTM, of each
  normaliser alone (softmax / matrix-tree / projective inside-outside), of the whole attention layer
  (eqs. 7-18) with each normaliser, and of the LU + inverse at the core of the matrix-tree marginals.

Models and optimisers come from `configs/liu_lapata/snli.py` and `configs/liu_lapata/yelp13.py`
(`config.model` with the per-variant keys of `config.variants`, and `config.optimizer`) when those
files exist, otherwise from the paper's settings (`paper_snli_config`,
`paper_document_config` in `launch/benchmarks/_liu_lapata_inputs.py`); the printout says which.
Word embeddings are random (same cost as pretrained ones) with `--vocab_size` rows and are trained,
as in the paper, so the Adagrad update touches the whole table every step.

`--model_overrides=key=value,...` changes `config.model` keys of both models (e.g. tiny sizes for a CPU
smoke run); `--variants` keeps only the named variants (SNLI: none, simple, structured,
inside_outside; documents: none, simple, structured_sentence, structured_document, structured,
inside_outside).

The issue's goals (one H100, float32) are printed with the measured value; on another device the
verdicts are labelled with that device, since only the ratios carry over.
"""
import dataclasses
import functools
from typing import Any, Callable, Mapping, Optional, Sequence

from absl import flags
from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from jax_structured import models
from jax_structured import nn as jsnn
from jax_structured import trees
from jax_structured.models import liu_lapata
from jax_structured import config as config_lib
from jax_structured.training import optimizers
from jax_structured.training import parallel
from jax_structured.training import steps
from jax_structured.training import tasks
from launch import benchmarks
from launch.benchmarks import _liu_lapata_inputs as inputs
from launch.benchmarks import trees as trees_benchmark

DEFAULT_BATCH_SIZE = 32
DEFAULT_DOC_SHAPE = '9x17'
DEFAULT_VOCAB_SIZE = 40000
# `--batch_size` is also defined by launch/parse.py (same meaning: examples per batch, default 32);
# allow_override lets both modules be imported in one process (e.g. a test session).
BATCH_SIZE = flags.DEFINE_integer('batch_size', DEFAULT_BATCH_SIZE, 'Documents per batch of the '
                                  'document model (SNLI batches are set by --sizes).', lower_bound=1,
                                  allow_override=True)
DOC_SHAPE = flags.DEFINE_string('doc_shape', DEFAULT_DOC_SHAPE, 'SENTENCESxWORDS of every document '
                                'batch (Yelp averages: 8.9 sentences, 17 words per sentence).')
VOCAB_SIZE = flags.DEFINE_integer('vocab_size', DEFAULT_VOCAB_SIZE, 'Rows of the (trained) word '
                                  'embedding table.', lower_bound=2)
PARTS = flags.DEFINE_string('parts', 'snli,document,breakdown',
                            'Comma-separated parts to run: snli, document, breakdown.')
VARIANTS = flags.DEFINE_string('variants', None, 'Comma-separated variant keys to keep (None: all).')
MODEL_OVERRIDES = flags.DEFINE_string('model_overrides', '',
                                      'key=value,... applied to config.model of both models.')

DEFAULT_SIZES = '32x16x8'
PARTS_KNOWN = ('snli', 'document', 'breakdown')
YELP_DOCUMENTS = 335_000  # Table 3

# Table 2 (GTX TITAN X Pascal): seconds per instance on the SNLI test set, (max, avg).
PAPER_SNLI = {'none': (0.0050, 0.0033), 'simple': (0.0057, 0.0042),
              'structured': (0.0070, 0.0045), 'inside_outside': (0.1200, 0.0380)}
# Sec. 4.2: "20 minutes for one training epoch on the largest dataset" (structured attention, both
# levels); footnote 4: inside-outside "5 hours of training for one epoch".
PAPER_EPOCH_MINUTES = {'structured': 20.0, 'inside_outside': 300.0}
# The goals on one H100, float32.
GOAL_STRUCTURED_OVER_SIMPLE = 1.3
GOAL_EPOCH_MINUTES = 1.0
GOAL_IO_SPEEDUP = 10.0  # our inside-outside / matrix-inversion ratio <= the paper's ratio / 10
GOAL_DEVICE = 'H100'

# key, label, attention (config.model.attention).
SNLI_VARIANTS = (('none', 'no attention', 'none'), ('simple', 'simple attention', 'simple'),
                 ('structured', 'matrix inversion', 'structured'),
                 ('inside_outside', 'inside-outside', 'inside_outside'))
# key, label, sentence_attention, document_attention, name in the config's `variants` (Table 4; the
# single-level structured variants have no attention on the other level: 842K parameters vs 860K for
# both levels and simple). Inside-outside is not a Table 4 row (footnote 4: 5 hours per epoch).
DOCUMENT_VARIANTS = (
    ('none', 'no attention', 'none', 'none', 'none'),
    ('simple', 'simple attention', 'simple', 'simple', 'simple'),
    ('structured_sentence', 'structured (sentence)', 'structured', 'none', 'sentence'),
    ('structured_document', 'structured (document)', 'none', 'structured', 'document'),
    ('structured', 'structured (both)', 'structured', 'structured', 'both'),
    ('inside_outside', 'inside-outside (both)', 'inside_outside', 'inside_outside', None),
)


# ----------------------------------------------------------------------------------------------
# Timing the real train / eval steps.


def _cast_floats(tree: Any, dtype: jnp.dtype) -> Any:
  return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)


@dataclasses.dataclass
class StepBench:
  """A model with its train state, runner and one device batch, ready to be timed.

  Attributes:
    model: the Linen module from `models.build`.
    runner: `parallel.Runner` on one device with `steps.train_step` / `steps.eval_step` bound.
    state: the replicated `TrainState` (replaced by every `train` call: the step donates it).
    batch: the device batch (sharded over the runner's one-device mesh).
    rng: the run's base PRNG key on the runner's devices.
    tx: the optax transformation of the config.
  """
  model: Any
  runner: parallel.Runner
  state: Any
  batch: dict[str, Any]
  rng: jax.Array
  tx: Any

  def train(self):
    """One training step (forward + backward + optimiser update); returns its metrics."""
    self.state, metrics = self.runner.train(self.state, self.batch, self.rng)
    return metrics

  def evaluate(self):
    """One evaluation step (forward pass + metric sums)."""
    return self.runner.evaluate(self.state, self.batch)


def build_bench(config: ml_collections.ConfigDict, kind: str, batch: Mapping[str, np.ndarray], *,
                vocab_size: int, num_classes: int, dtype: str = 'float32') -> StepBench:
  """Builds the model of `config.model`, its optimiser (`optimizers.build` of `config.optimizer`) and
  the compiled one-device train / eval steps, as `training.train_and_evaluate` does.

  Args:
    config: a config with `model`, `optimizer` (and optionally `task`, `seed`).
    kind: the data kind ('pair' or 'document'; 'parse' for the parser benchmark): the task when
      `config.task` is empty.
    batch: a numpy batch (its shapes are the compiled shapes); sentence, pair and document batches
      are checked with `liu_lapata.validate_batch`, others are the caller's to build correctly.
    vocab_size: rows of the word embedding table.
    num_classes: number of labels.
    dtype: floating dtype of the parameters (and hence of the computation).
  """
  if kind in ('sentence', 'pair', 'document'):
    liu_lapata.validate_batch(batch, kind)
  config = config_lib.resolve(config)
  model = models.build(config.model, vocab_size=vocab_size, num_classes=num_classes)
  key = jax.random.PRNGKey(config.seed)
  rngs = {'params': jax.random.fold_in(key, 0), 'dropout': jax.random.fold_in(key, 1)}
  variables = jax.jit(functools.partial(model.init, train=False))(rngs, dict(batch))
  variables = {k: v for k, v in variables.items() if k != 'intermediates'}
  variables['params'] = _cast_floats(variables['params'], jnp.dtype(dtype))
  tx, _ = optimizers.build(config.optimizer, variables['params'], total_steps=1)
  embed_mask = optimizers.embedding_mask(variables['params'], config.optimizer.embedding_pattern)
  task = tasks.build(config, kind)
  runner = parallel.Runner('none', **parallel.model_steps(model.apply, task, tx, embed_mask))
  state = runner.replicate(jax.device_get(steps.create_state(variables, tx)))
  rng = runner.put_rng(jax.random.fold_in(key, 2))
  return StepBench(model, runner, state, runner.shard_batch(batch), rng, tx)


def _ratio(value: float, reference: Optional[float]) -> Any:
  return value / reference if reference else '-'


def run_snli(config: ml_collections.ConfigDict, sizes: Sequence[tuple[int, int, int]], *,
             repeats: int, vocab_size: int, dtype: str = 'float32',
             variants: Sequence[tuple] = SNLI_VARIANTS, overrides: Mapping[str, Any] = None,
             seed: int = 0) -> list[dict[str, Any]]:
  """Table 2: training and inference seconds per instance of every variant at every size.

  Returns:
    One row dict per (size, variant): 'size', 'model', 'train s/inst', 'train inst/s',
    'infer s/inst', 'infer inst/s', 'train x simple', 'infer x simple' (when simple attention is
    among the variants), 'compile s' (first train + eval call), and the paper's 'paper avg s/inst',
    'paper max s/inst', 'paper x simple'.
  """
  rows = []
  for batch_size, premise, hypothesis in sizes:
    batch = inputs.snli_batch(np.random.default_rng([seed, batch_size, premise, hypothesis]), batch_size,
                       premise, hypothesis, vocab_size)
    calls = {}
    for key, _, attention in variants:
      logging.info('SNLI %s at %dx%dx%d', key, batch_size, premise, hypothesis)
      bench = build_bench(inputs.variant_config(config, {'attention': attention}, overrides or {}, key),
                          'pair', batch, vocab_size=vocab_size, num_classes=inputs.SNLI_CLASSES, dtype=dtype)
      calls[key, 'train'], calls[key, 'infer'] = bench.train, bench.evaluate
    times = benchmarks.interleaved_medians(calls, repeats)
    size_rows = []
    for key, label, _ in variants:
      (train_s, train_first, _), (infer_s, infer_first, _) = times[key, 'train'], times[key, 'infer']
      paper_max, paper_avg = PAPER_SNLI[key]
      size_rows.append({
          'size': f'{batch_size}x{premise}x{hypothesis}', 'model': label, 'key': key,
          'train s/inst': train_s / batch_size, 'train inst/s': batch_size / train_s,
          'infer s/inst': infer_s / batch_size, 'infer inst/s': batch_size / infer_s,
          'compile s': train_first + infer_first - train_s - infer_s,
          'paper avg s/inst': paper_avg, 'paper max s/inst': paper_max})
    rows += add_snli_ratios(size_rows)
  return rows


def add_snli_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
  """Adds 'train x simple', 'infer x simple' (ours, '-' without a simple row) and 'paper x simple'
  (Table 2 averages) to the rows of one size, in place; returns them."""
  simple = next((r for r in rows if r['key'] == 'simple'), None)
  for row in rows:
    row['train x simple'] = _ratio(row['train s/inst'], simple and simple['train s/inst'])
    row['infer x simple'] = _ratio(row['infer s/inst'], simple and simple['infer s/inst'])
    row['paper x simple'] = row['paper avg s/inst'] / PAPER_SNLI['simple'][1]
  return rows


def epoch_minutes(documents_per_second: float, documents: int = YELP_DOCUMENTS) -> float:
  """Minutes to train on `documents` documents at `documents_per_second`."""
  return documents / documents_per_second / 60.0


def run_documents(config: ml_collections.ConfigDict, batch_size: int, doc_shape: tuple[int, int], *,
                  repeats: int, vocab_size: int, dtype: str = 'float32',
                  variants: Sequence[tuple] = DOCUMENT_VARIANTS,
                  overrides: Mapping[str, Any] = None, seed: int = 0) -> list[dict[str, Any]]:
  """Training throughput of the document model's Table 4 variants at one batch shape.

  Returns:
    One row dict per variant: 'size', 'model', 's/step', 'docs/s', 'Yelp epoch min' (335K
    documents), 'x simple', 'compile s', 'paper epoch min' (where the paper gives one).
  """
  sentences, words = doc_shape
  batch = inputs.document_batch(np.random.default_rng([seed, batch_size, sentences, words]), batch_size,
                         sentences, words, vocab_size)
  calls, hidden = {}, {}
  for key, _, sentence_attention, document_attention, config_variant in variants:
    logging.info('documents %s at %dx%dx%d', key, batch_size, sentences, words)
    attention = {'sentence_attention': sentence_attention, 'document_attention': document_attention}
    variant = inputs.variant_config(config, attention, overrides or {}, config_variant)
    hidden[key] = variant.model.get('hidden_size', '-')
    calls[key] = build_bench(variant, 'document', batch, vocab_size=vocab_size,
                             num_classes=inputs.YELP_CLASSES, dtype=dtype).train
  times = benchmarks.interleaved_medians(calls, repeats)
  rows = []
  for key, label, *_ in variants:
    step_s, first, _ = times[key]
    rows.append({'size': f'{batch_size}x{sentences}x{words}', 'model': label, 'key': key,
                 'hidden': hidden[key], 's/step': step_s,
                 'docs/s': batch_size / step_s,
                 'Yelp epoch min': epoch_minutes(batch_size / step_s), 'compile s': first - step_s,
                 'paper epoch min': PAPER_EPOCH_MINUTES.get(key, '-')})
  simple = next((r for r in rows if r['key'] == 'simple'), None)
  for row in rows:
    row['x simple'] = _ratio(row['s/step'], simple and simple['s/step'])
  return rows


# ----------------------------------------------------------------------------------------------
# Where the time of one structured attention layer goes.


def _weighted_sum(outputs: Any, weights: Any) -> jax.Array:
  return sum(jnp.sum(o * w) for o, w in zip(jax.tree.leaves(outputs), jax.tree.leaves(weights)))


def _fwd_and_grad_calls(fn: Callable, args: tuple, key: jax.Array) -> tuple[Callable, Callable]:
  """Calls of jit(fn)(*args) and of the value and gradient (w.r.t. every float argument) of a
  random weighted sum of its outputs."""
  forward = jax.jit(fn)
  weights = jax.tree.map(lambda o: jax.random.normal(key, o.shape, o.dtype),
                         jax.eval_shape(fn, *args))
  float_args = tuple(i for i, a in enumerate(args)
                     if all(jnp.issubdtype(x.dtype, jnp.floating) for x in jax.tree.leaves(a)))
  backward = jax.jit(jax.value_and_grad(lambda *a: _weighted_sum(fn(*a), weights), float_args))
  return lambda: forward(*args), lambda: backward(*args)


def run_breakdown(batch: int, length: int, *, hidden_size: int, semantic_size: int, input_size: int,
                  repeats: int, dtype: str = 'float32', seed: int = 0,
                  normalizers: Sequence[str] = ('softmax', 'matrix_tree', 'projective'),
                  ) -> list[dict[str, Any]]:
  """Forward and forward+backward ms of the parts of one attention layer at [batch, length].

  Rows: the BiLSTM (`input_size` -> `hidden_size` per direction); for each normaliser (softmax,
  matrix_tree, projective) the normaliser alone on random scores and the whole `StructuredAttention`
  layer (eqs. 7-18) on random BiLSTM outputs, with the normaliser's share of the layer; the batched
  LU + inverse of the matrix-tree theorem (`trees.lu_logdet_and_inverse`).
  """
  dtype = jnp.dtype(dtype)
  keys = jax.random.split(jax.random.key(seed), 8)
  lengths = jnp.asarray(inputs.random_lengths(np.random.default_rng(seed), (batch,), length))
  calls = {}

  def add(component, fn, args, key):
    calls[component, 'fwd ms'], calls[component, 'fwd+bwd ms'] = _fwd_and_grad_calls(fn, args, key)

  x = jax.random.normal(keys[0], (batch, length, input_size), dtype)
  bilstm = jsnn.BiLSTM(hidden_size)
  params = _cast_floats(bilstm.init(keys[1], x, lengths), dtype)
  add(f'BiLSTM {input_size}->2x{hidden_size}', lambda p, x: bilstm.apply(p, x, lengths), (params, x),
      keys[2])
  hidden = jax.random.normal(keys[3], (batch, length, 2 * hidden_size), dtype)
  arc = jax.random.normal(keys[4], (batch, length, length), dtype)
  root = jax.random.normal(keys[5], (batch, length), dtype)
  for normalizer in normalizers:
    add(f'{normalizer} normaliser', functools.partial(
        lambda a, r, normalizer: jsnn.normalize_attention(a, r, lengths, normalizer),
        normalizer=normalizer), (arc, root), keys[6])
    layer = jsnn.StructuredAttention(semantic_size, normalizer=normalizer)
    layer_params = _cast_floats(layer.init(keys[1], hidden, lengths), dtype)
    add(f'{normalizer} layer (eqs. 7-18)', lambda p, h, layer=layer: layer.apply(p, h, lengths),
        (layer_params, hidden), keys[7])
  eye = jnp.eye(length, dtype=dtype)
  lap = jax.random.uniform(keys[4], (batch, length, length), dtype) + length * eye
  add('LU + inverse (matrix-tree core)', trees.lu_logdet_and_inverse, (lap,),
      keys[6])
  times = benchmarks.interleaved_medians(calls, repeats)
  rows = {}
  for (component, column), (seconds, _, _) in times.items():
    rows.setdefault(component, {'component': component})[column] = 1e3 * seconds
  for normalizer in normalizers:
    alone, whole = rows[f'{normalizer} normaliser'], rows[f'{normalizer} layer (eqs. 7-18)']
    for column in ('fwd ms', 'fwd+bwd ms'):
      alone[f'share of layer {column[:-3]}'] = alone[column] / whole[column]
  return list(rows.values())


# ----------------------------------------------------------------------------------------------
# Goals and the printout.


def goal_lines(snli_rows: Sequence[Mapping[str, Any]], document_rows: Sequence[Mapping[str, Any]],
               device_kind: str) -> list[str]:
  """The issue's goals with the measured values; verdicts say which device they were measured on."""
  on_goal_device = GOAL_DEVICE.lower() in device_kind.lower()
  where = f'on {device_kind}' + ('' if on_goal_device else f' (the goal is for one {GOAL_DEVICE})')

  def verdict(ok):
    return f'{"met" if ok else "missed"} {where}'

  lines = []
  by_key = {}
  for row in snli_rows:
    by_key.setdefault(row['size'], {})[row['key']] = row
  for size, rows in by_key.items():
    if 'structured' in rows and 'simple' in rows:
      for phase in ('train', 'infer'):
        ratio = rows['structured'][f'{phase} x simple']
        lines.append(f'goal: matrix inversion <= {GOAL_STRUCTURED_OVER_SIMPLE}x simple ({phase}, SNLI '
                     f'{size}): {ratio:.2f}x, {verdict(ratio <= GOAL_STRUCTURED_OVER_SIMPLE)}')
    if 'structured' in rows and 'inside_outside' in rows:
      paper = PAPER_SNLI['inside_outside'][1] / PAPER_SNLI['structured'][1]
      target = paper / GOAL_IO_SPEEDUP
      for phase in ('train', 'infer'):
        ours = rows['inside_outside'][f'{phase} s/inst'] / rows['structured'][f'{phase} s/inst']
        lines.append(f'goal: inside-outside / matrix inversion <= {target:.2f}x (paper {paper:.1f}x / '
                     f'{GOAL_IO_SPEEDUP:g}; {phase}, SNLI {size}): {ours:.2f}x, {verdict(ours <= target)}')
  for row in document_rows:
    if row['key'] == 'structured':
      minutes = row['Yelp epoch min']
      lines.append(f'goal: a Yelp-size epoch ({YELP_DOCUMENTS} documents, structured both levels, '
                   f'{row["size"]}) < {GOAL_EPOCH_MINUTES:g} min: {minutes:.2f} min, '
                   f'{verdict(minutes < GOAL_EPOCH_MINUTES)}')
  return lines


def _format_rows(rows: Sequence[Mapping[str, Any]], drop: Sequence[str] = ('key',)) -> str:
  def cell(value):
    if isinstance(value, float):
      return f'{value:.3g}' if abs(value) < 1 else f'{value:.2f}'
    return value
  return trees_benchmark.format_table(
      [{k: cell(v) for k, v in row.items() if k not in drop} for row in rows])


def run(parts: Sequence[str], *, sizes: Sequence[tuple[int, int, int]], batch_size: int,
        doc_shape: tuple[int, int], repeats: int, vocab_size: int, dtype: str = 'float32',
        keep: Optional[str] = None, overrides: Mapping[str, Any] = None,
        print_fn: Callable[[str], None] = print) -> dict[str, Any]:
  """Runs the requested parts and prints their tables and the goals.

  Args:
    parts: subset of ('snli', 'document', 'breakdown').
    sizes: SNLI (batch, premise, hypothesis) padded shapes.
    batch_size: documents per batch.
    doc_shape: (sentences, words) per document.
    repeats: timed calls per measurement.
    vocab_size: word embedding rows.
    dtype: 'float32' or 'float64' parameters.
    keep: comma-separated variant keys to keep (None: all).
    overrides: `config.model` keys applied to both models.
    print_fn: where the report goes.

  Returns:
    {'snli': rows, 'document': rows, 'breakdown': rows, 'goals': lines, 'sources': {...}}.

  Raises:
    ValueError naming an unknown part.
  """
  unknown = sorted(set(parts) - set(PARTS_KNOWN))
  if unknown:
    raise ValueError(f'--parts: unknown {unknown}; known: {list(PARTS_KNOWN)}')
  overrides = dict(overrides or {})
  device = jax.devices()[0]
  print_fn(f'device: {device} ({device.device_kind}, platform {device.platform}), dtype: {dtype}, '
           f'repeats: {repeats}, jax {jax.__version__}, vocab_size {vocab_size}'
           + (f', model overrides {overrides}' if overrides else ''))
  if device.platform != GOAL_DEVICE.lower() and GOAL_DEVICE.lower() not in device.device_kind.lower():
    print_fn(f'NOTE: measured on {device.platform.upper()} ({device.device_kind}); the paper\'s figures '
             f'are a GTX Titan X and the goals are for one {GOAL_DEVICE}: compare ratios, not absolute '
             'times.')
  out = {'snli': [], 'document': [], 'breakdown': [], 'sources': {}}
  snli_config, snli_source = inputs.load_config(('snli',), inputs.paper_snli_config)
  doc_config, doc_source = inputs.load_config(('yelp13', 'yelp'), inputs.paper_document_config)
  out['sources'] = {'snli': snli_source, 'document': doc_source}
  if 'snli' in parts:
    print_fn(f'\nSNLI pair classifier (Table 2), model + optimiser from {snli_source}: '
             f'{dict(inputs.variant_config(snli_config, {}, overrides).model)}, optimizer '
             f'{snli_config.optimizer.name} lr {snli_config.optimizer.learning_rate}. train = '
             'forward + backward + update (steps.train_step), infer = steps.eval_step; s/inst = '
             'step time / batch; "paper" = Table 2, GTX Titan X (Pascal), SNLI test set')
    out['snli'] = run_snli(snli_config, sizes, repeats=repeats, vocab_size=vocab_size, dtype=dtype,
                           variants=inputs.select_variants(SNLI_VARIANTS, keep), overrides=overrides)
    print_fn(_format_rows(out['snli']))
  if 'document' in parts:
    print_fn(f'\nDocument classifier (Table 4 variants), training, model + optimiser from {doc_source}: '
             f'{dict(inputs.variant_config(doc_config, {}, overrides).model)}, optimizer '
             f'{doc_config.optimizer.name} lr {doc_config.optimizer.learning_rate}. size = documents x '
             f'sentences x words; Yelp epoch = {YELP_DOCUMENTS} documents / (docs/s); "paper" = sec. 4.2 '
             '(20 min, structured) and footnote 4 (5 h, inside-outside), GTX Titan X')
    out['document'] = run_documents(doc_config, batch_size, doc_shape, repeats=repeats,
                                    vocab_size=vocab_size, dtype=dtype,
                                    variants=inputs.select_variants(DOCUMENT_VARIANTS, keep),
                                    overrides=overrides)
    print_fn(_format_rows(out['document']))
  if 'breakdown' in parts:
    model = inputs.variant_config(snli_config, {}, overrides).model
    hidden_size = int(model.get('hidden_size', 150))
    semantic_size = int(model.get('semantic_size', 100))
    input_size = int(model.get('embedding_dim', 300))
    batch, length = sizes[0][0], sizes[0][1]
    print_fn(f'\nWhere the time goes: one SNLI premise batch [{batch}, {length}], BiLSTM '
             f'{input_size}->2x{hidden_size}, semantic {semantic_size}/direction (structure vectors '
             f'of {2 * (hidden_size - semantic_size)}); median ms; fwd+bwd = value and gradient of a '
             'random weighted sum of the outputs')
    out['breakdown'] = run_breakdown(batch, length, hidden_size=hidden_size,
                                     semantic_size=semantic_size, input_size=input_size,
                                     repeats=repeats, dtype=dtype)
    print_fn(_format_rows(out['breakdown']))
  out['goals'] = goal_lines(out['snli'], out['document'], device.device_kind)
  if out['goals']:
    print_fn('\n' + '\n'.join(out['goals']))
  return out


def main(argv):
  extra = [a for a in argv[2:] if not a.startswith('-')]
  if extra:
    raise ValueError(f'unexpected positional arguments {extra}; usage: python -m launch.benchmark '
                     'liu_lapata [--sizes=32x16x8] [--batch_size=32] [--doc_shape=9x17] [--repeats=20] '
                     '[--dtype=float32] [--parts=snli,document,breakdown] [--variants=...] '
                     '[--vocab_size=40000] [--model_overrides=key=value,...]')
  if benchmarks.DTYPE.value == 'float64':
    jax.config.update('jax_enable_x64', True)
  parts = [p.strip() for p in PARTS.value.split(',') if p.strip()]
  run(parts, sizes=inputs.parse_sizes(benchmarks.SIZES.value or DEFAULT_SIZES),
      batch_size=BATCH_SIZE.value, doc_shape=inputs.parse_doc_shape(DOC_SHAPE.value),
      repeats=benchmarks.REPEATS.value, vocab_size=VOCAB_SIZE.value, dtype=benchmarks.DTYPE.value,
      keep=VARIANTS.value, overrides=inputs.parse_overrides(MODEL_OVERRIDES.value))


# ----------------------------------------------------------------------------------------------
# The report's family (`python -m launch.benchmark report`).

# --quick: tiny models on tiny batches (the CPU smoke run of the report).
QUICK_OVERRIDES = {'embedding_dim': 6, 'hidden_size': 6, 'semantic_size': 4, 'mlp_hidden': 5,
                   'dropout_rate': 0.0}
QUICK_SNLI_SIZE = (2, 4, 3)
QUICK_DOC = (2, (2, 3))  # documents per batch, (sentences, words)
QUICK_VOCAB_SIZE = 50
QUICK_SNLI_VARIANTS = 'simple,structured'
QUICK_DOCUMENT_VARIANTS = 'structured'


def report_tables(report_run):
  """Table 2 (SNLI), the attention breakdown and the Yelp epoch (documents), as `run` measures them.

  Args:
    report_run: a `benchmarks.ReportRun`. Each part (SNLI at one size, the breakdown, the documents)
      is one unit of its budget. --quick (`QUICK_OVERRIDES` models) runs SNLI simple and matrix
      inversion and the structured document model only, without the breakdown (16 more compiles).

  Yields:
    `benchmarks.Table`s: SNLI (s/inst, inst/s, ratios to simple attention, the paper's Table 2), the
    breakdown (ms, shares) and the documents (s/step, docs/s, Yelp epoch minutes), goals as notes.
  """
  quick, repeats, dtype = report_run.quick, report_run.repeats, report_run.dtype
  overrides = dict(QUICK_OVERRIDES) if quick else {}
  vocab_size = QUICK_VOCAB_SIZE if quick else DEFAULT_VOCAB_SIZE
  sizes = [QUICK_SNLI_SIZE] if quick else inputs.parse_sizes(DEFAULT_SIZES)
  device_kind = jax.devices()[0].device_kind
  snli_config, snli_source = inputs.load_config(('snli',), inputs.paper_snli_config)
  drop = ('key',)
  snli_rows = []
  for size in sizes:
    if report_run.unit(f'liu_lapata SNLI {"x".join(map(str, size))}'):
      snli_rows += run_snli(snli_config, [size], repeats=repeats, vocab_size=vocab_size, dtype=dtype,
                            variants=inputs.select_variants(SNLI_VARIANTS, QUICK_SNLI_VARIANTS if quick else None),
                            overrides=overrides)
  if snli_rows:
    yield benchmarks.Table(
        f'SNLI pair classifier, Table 2 (model + optimiser from {snli_source}; size = batch x premise x '
        'hypothesis; train = forward + backward + update, infer = eval step; "x simple" = time / simple '
        'attention\'s; "paper" = Table 2, GTX Titan X)',
        [{k: v for k, v in row.items() if k not in drop} for row in snli_rows],
        goal_lines(snli_rows, [], device_kind))
  if not quick and report_run.unit('liu_lapata breakdown'):
    model = inputs.variant_config(snli_config, {}, overrides).model
    batch, length = sizes[0][0], sizes[0][1]
    rows = run_breakdown(batch, length, hidden_size=int(model.get('hidden_size', 150)),
                         semantic_size=int(model.get('semantic_size', 100)),
                         input_size=int(model.get('embedding_dim', 300)), repeats=repeats, dtype=dtype)
    yield benchmarks.Table(
        f'where the time of one structured attention layer goes: an SNLI premise batch [{batch}, '
        f'{length}], median ms; fwd+bwd = value and gradient of a random weighted sum of the outputs',
        rows)
  if report_run.unit('liu_lapata documents'):
    doc_config, doc_source = inputs.load_config(('yelp13', 'yelp'), inputs.paper_document_config)
    batch_size, doc_shape = QUICK_DOC if quick else (DEFAULT_BATCH_SIZE, inputs.parse_doc_shape(DEFAULT_DOC_SHAPE))
    rows = run_documents(doc_config, batch_size, doc_shape, repeats=repeats, vocab_size=vocab_size,
                         dtype=dtype,
                         variants=inputs.select_variants(DOCUMENT_VARIANTS,
                                                  QUICK_DOCUMENT_VARIANTS if quick else None),
                         overrides=overrides)
    yield benchmarks.Table(
        f'document classifier, Table 4 variants, training (model + optimiser from {doc_source}; size = '
        f'documents x sentences x words; Yelp epoch = {YELP_DOCUMENTS:,} documents / (docs/s); "paper" = '
        'sec. 4.2 and footnote 4, GTX Titan X)',
        [{k: v for k, v in row.items() if k not in drop} for row in rows],
        goal_lines([], rows, device_kind))
