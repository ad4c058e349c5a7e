r"""Sentences/s of the biaffine tree-CRF parser at the UD English EWT size (Dozat & Manning 2017).

  python -m launch.benchmark parser [--sizes=32x16,32x32,32x64] [--repeats=20] [--dtype=float32]

A freshly initialised `parser.biaffine` model of configs/parser/ewt.py (3 BiLSTM layers of 400 per
direction, arc MLP 500, label MLP 100, predicted UPOS tags feeding the parser) with the sizes of EWT:
`EWT_VOCAB_SIZE` words (train words seen at least twice, `data.min_count=2`, + `<pad>`, `<unk>`),
19 tags and 53 relations. Speed does not depend on the weights, so neither data nor a checkpoint is
needed (the GPU machine has neither). `--sizes` lists `BATCHxLENGTH` padded shapes; real lengths are
uniform in (LENGTH / 2, LENGTH], the sentences a power-of-two bucket holds
(`analysis.parsing.parse` pads to powers of two >= 8; EWT train: 58% of sentences <= 16 words, 90% <=
32, 99.4% <= 64). Gold trees of the training batches are random single-root trees (each word but the
first attaches to an earlier one).

Columns (median seconds over `--repeats` round-robin calls after one compile call each, ended with
`block_until_ready`; sentences/s = batch / seconds):
* `parse`: what `launch.parse` runs per batch (the jitted function of `analysis.parsing.parse`): the forward
  pass and `parser.decode` (Chu-Liu-Edmonds `trees.mst` on the device, relations at the predicted
  heads, UPOS);
* `greedy`: the forward pass and each word's best head alone (argmax of
  `parser.head_selection_logits`, no tree constraint) with its relation: decoding without `trees.mst`;
* `scores`: the forward pass alone, so `decode share` = (parse - scores) / parse;
* `train crf` / `train local`: one `training.steps.train_step` (forward, backward, Adam update, as
  `launch.train` runs it) with the tree-CRF loss / D&M's local head-selection loss.
"""
from typing import Any, Mapping, Sequence

from absl import logging
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np

from configs.parser import ewt
from jax_structured.models import parser
from launch import benchmarks
from launch.benchmarks import _liu_lapata_inputs as liu_lapata_inputs
from launch.benchmarks import liu_lapata as liu_lapata_benchmark
from launch.benchmarks import trees as trees_benchmark

DEFAULT_SIZES = '32x16,32x32,32x64'
QUICK_SIZES = ((2, 8),)
QUICK_VOCAB_SIZE = 50
# Words of en_ewt-ud-train.conllu (UD 2) seen at least twice (9,873) + <pad> + <unk>.
EWT_VOCAB_SIZE = 9875


def parse_batch(rng: np.random.Generator, batch: int, length: int, *, vocab_size: int, num_tags: int,
                num_relations: int) -> dict[str, np.ndarray]:
  """A random 'parse' batch of padded shape [batch, length].

  Returns:
    {'tokens' int32[B, n] in [2, vocab_size) (0 past the lengths), 'lengths' int32[B] uniform in
     (n / 2, n], 'heads' int32[B, n] (a single-root tree: word 0 hangs from ROOT = -1, word m > 0 from
     a word < m; -1 past the lengths), 'relations' int32[B, n] in [2, num_relations), 'tags' int32[B, n]
     in [2, num_tags) (ids 0 / 1 are <pad> / <unk>; 0 past the lengths), 'example_mask' float32[B]}.
  """
  if vocab_size < 3 or num_tags < 3 or num_relations < 3:
    raise ValueError(f'parse_batch needs vocab_size, num_tags and num_relations >= 3 (ids 0 and 1 are '
                     f'reserved), got {vocab_size}, {num_tags}, {num_relations}')
  lengths = rng.integers(length // 2 + 1, length + 1, size=batch).astype(np.int32)
  real = np.arange(length) < lengths[:, None]
  positions = np.broadcast_to(np.arange(length), (batch, length))
  heads = np.floor(rng.random((batch, length)) * positions).astype(np.int32)  # uniform in [0, m)
  heads[:, 0] = -1

  def ids(high):
    return np.where(real, rng.integers(2, high, size=(batch, length)), 0).astype(np.int32)

  return {'tokens': ids(vocab_size), 'lengths': lengths, 'heads': np.where(real, heads, -1),
          'relations': ids(num_relations), 'tags': ids(num_tags),
          'example_mask': np.ones((batch,), np.float32)}


def greedy_decode(outputs: Mapping[str, jax.Array], lengths: jax.Array) -> tuple[jax.Array, jax.Array]:
  """The decoding baseline without a tree constraint: each word's best head and its relation.

  Args:
    outputs: `BiaffineParser` outputs ('arc_scores' [B, n, n], 'root_scores' [B, n],
      'relation_logits' [B, n + 1, n, R]).
    lengths: int[B].

  Returns:
    (heads int32[B, n]: argmax over the other real words and ROOT (-1) of
     `parser.head_selection_logits`, -1 on padding; relations int32[B, n] at those heads, 0 on padding).
  """
  n = outputs['arc_scores'].shape[-1]
  best = jnp.argmax(parser.head_selection_logits(outputs['arc_scores'], outputs['root_scores'],
                                                 lengths), axis=-1)
  mask = parser.word_mask(lengths, n)
  heads = jnp.where(mask & (best < n), best, -1).astype(jnp.int32)
  relations = parser.predict_labels(parser.relation_logits_at(outputs['relation_logits'], heads))
  return heads, jnp.where(mask, relations, 0).astype(jnp.int32)


def ewt_config(quick: bool = False) -> ml_collections.ConfigDict:
  """configs/parser/ewt.py (its 'tiny' CPU sizes when `quick`)."""
  return ewt.get_config('tiny' if quick else '')


def measure(config: ml_collections.ConfigDict, batch_size: int, length: int, *, vocab_size: int,
            repeats: int, dtype: str = 'float32', seed: int = 0) -> dict[str, Any]:
  """One table row: the columns of the module docstring at one padded shape."""
  model_config = config.model
  batch = parse_batch(np.random.default_rng([seed, batch_size, length]), batch_size, length,
                      vocab_size=vocab_size, num_tags=model_config.num_tags,
                      num_relations=model_config.num_relations)
  benches = {}
  for loss in ('crf', 'local'):
    logging.info('parser: train %s at %dx%d', loss, batch_size, length)
    variant = liu_lapata_inputs.variant_config(config, {}, {}, loss)
    benches[loss] = liu_lapata_benchmark.build_bench(
        variant, 'parse', batch, vocab_size=vocab_size, num_classes=model_config.num_relations,
        dtype=dtype)
  bench = benches['crf']
  model = bench.model
  inputs = jax.device_put({'tokens': batch['tokens'], 'lengths': batch['lengths']})

  def variables():  # read at call time: every train call donates and replaces the state
    return {'params': bench.state.params, **bench.state.model_state}

  def forward(v, b):
    return model.apply(v, b, train=False)

  @jax.jit
  def parse(v, b):  # the jitted function of analysis.parsing.parse
    outputs = forward(v, b)
    heads, relations = parser.decode(outputs, b['lengths'])
    return heads, relations, outputs.get('tags', jnp.zeros_like(heads))

  @jax.jit
  def greedy(v, b):
    outputs = forward(v, b)
    heads, relations = greedy_decode(outputs, b['lengths'])
    return heads, relations, outputs.get('tags', jnp.zeros_like(heads))

  scores = jax.jit(forward)
  calls = {'parse': lambda: parse(variables(), inputs), 'greedy': lambda: greedy(variables(), inputs),
           'scores': lambda: scores(variables(), inputs),
           'train crf': benches['crf'].train, 'train local': benches['local'].train}
  times = benchmarks.interleaved_medians(calls, repeats)
  for loss in ('crf', 'local'):
    loss_sum, count = jax.device_get(calls[f'train {loss}']()['loss'])
    if not np.isfinite(loss_sum / count):
      raise FloatingPointError(f'parser {loss} training loss is {loss_sum / count} at '
                               f'{batch_size}x{length}')
  return row(batch_size, length, times)


def row(batch_size: int, length: int, times: Mapping[str, tuple[float, float]]) -> dict[str, Any]:
  """The table row of one size from {'parse', 'greedy', 'scores', 'train crf', 'train local':
  (median seconds, seconds of the first (compile) call, timed calls)} (`benchmarks.interleaved_medians`)."""
  seconds = {name: median for name, (median, _, _) in times.items()}
  return {'size': f'{batch_size}x{length}',
          'parse sent/s': batch_size / seconds['parse'], 'parse ms': 1e3 * seconds['parse'],
          'greedy ms': 1e3 * seconds['greedy'], 'parse/greedy': seconds['parse'] / seconds['greedy'],
          'scores ms': 1e3 * seconds['scores'],
          'decode share': (seconds['parse'] - seconds['scores']) / seconds['parse'],
          'train crf sent/s': batch_size / seconds['train crf'],
          'train crf ms': 1e3 * seconds['train crf'], 'train local ms': 1e3 * seconds['train local'],
          'crf/local': seconds['train crf'] / seconds['train local'],
          'compile s': sum(first - median for median, first, _ in times.values())}


def run(sizes: Sequence[tuple[int, int]], *, repeats: int, dtype: str = 'float32', quick: bool = False,
        ) -> list[dict[str, Any]]:
  """One `measure` row per (batch, length); `quick` uses the tiny config and a 50-word vocabulary."""
  config = ewt_config(quick)
  vocab_size = QUICK_VOCAB_SIZE if quick else EWT_VOCAB_SIZE
  return [measure(config, batch, length, vocab_size=vocab_size, repeats=repeats, dtype=dtype)
          for batch, length in sizes]


def _title(quick: bool) -> str:
  model = ewt_config(quick).model
  vocab_size = QUICK_VOCAB_SIZE if quick else EWT_VOCAB_SIZE
  return (f'parser.biaffine, freshly initialised at the EWT size{" (tiny: --quick)" if quick else ""}: '
          f'{model.num_layers} BiLSTM layers of {model.hidden_size}, arc MLP {model.arc_mlp_size}, label '
          f'MLP {model.label_mlp_size}, {vocab_size:,} words, {model.num_tags} tags, {model.num_relations} '
          'relations; size = batch x padded length; parse = forward + Chu-Liu-Edmonds decoding '
          '(launch.parse), greedy = forward + best head per word (no tree), scores = forward only; '
          'train = forward + backward + Adam')


def report_tables(report_run):
  """The report's parser family (`report_run`: a `benchmarks.ReportRun`); one unit per size."""
  rows = []
  for batch, length in QUICK_SIZES if report_run.quick else trees_benchmark.parse_sizes(DEFAULT_SIZES):
    if report_run.unit(f'parser {batch}x{length}'):
      rows += run([(batch, length)], repeats=report_run.repeats, dtype=report_run.dtype,
                  quick=report_run.quick)
  if rows:
    yield benchmarks.Table(_title(report_run.quick), rows)


def main(argv):
  extra = [a for a in argv[2:] if not a.startswith('-')]
  if extra:
    raise ValueError(f'unexpected positional arguments {extra}; usage: python -m launch.benchmark parser '
                     '[--sizes=32x16,32x32,32x64] [--repeats=20] [--dtype=float32]')
  if benchmarks.DTYPE.value == 'float64':
    jax.config.update('jax_enable_x64', True)
  sizes = trees_benchmark.parse_sizes(benchmarks.SIZES.value or DEFAULT_SIZES)
  device = jax.devices()[0]
  print(f'device: {device} ({device.device_kind}), dtype: {benchmarks.DTYPE.value}, repeats: '
        f'{benchmarks.REPEATS.value}, jax {jax.__version__}')
  print(_title(False))
  rows = run(sizes, repeats=benchmarks.REPEATS.value, dtype=benchmarks.DTYPE.value)
  cell = lambda v: f'{v:.3g}' if isinstance(v, float) and abs(v) < 1 else v  # noqa: E731
  print(trees_benchmark.format_table([{k: cell(v) for k, v in row.items()} for row in rows]))
