"""Predictor throughput and time to the first prediction beside the eval step's inference examples/s.

  OPENBLAS_NUM_THREADS=1 taskset -c 1 python docs/decisions/2026-12-04-scripts/predict_speed.py [N_TEST]

Three families at their configs' sizes (not `tiny`), trained 2 steps on synthetic text (speed does not
depend on the weights): compare.py structured_attention (sentence), the same as a pair model (Quora
format), Luo & Zhu's MHS-RNN (document). First = Predictor() + predict of one text (restore and
compile included). Then, after one pass of each to compile every bucket, ROUNDS interleaved rounds of:
the eval step over the test split (`assembly.evaluate_split` of the restored best checkpoint: what
metrics.json's inference_examples_per_second times), `predict` and `encode` of the same test texts
read as raw lines; the best round of each, as examples/s (interleaved so that the load of a shared
machine falls on all three alike).
"""
import json
import os
import random
import sys
import tempfile
import time

from configs.encoders import compare
from configs.luo_zhu import document_config
from jax_structured import training
from jax_structured.training import assembly
from jax_structured.training import restore
from jax_structured.analysis import predict
from jax_structured.data import loaders

N_TEST = int(sys.argv[1]) if len(sys.argv) > 1 else 512
ROUNDS = 3
POS, NEG = 'good fine great lovely superb nice'.split(), 'bad dull awful poor boring weak'.split()
FILLER = 'the film was a story plot and it very one of its best parts ever seen by me'.split()


def texts(n, rng, sentences=1):
  rows = []
  for _ in range(n):
    y = rng.choice(['pos', 'neg'])
    parts = []
    for _ in range(rng.randint(1, sentences)):
      words = rng.sample(FILLER, rng.randint(4, 14)) + [rng.choice(POS if y == 'pos' else NEG)]
      rng.shuffle(words)
      parts.append(' '.join(words).capitalize() + '.')
    rows.append((y, ' '.join(parts)))
  return rows


def folder(path, sentences=1, pair=False):
  rng = random.Random(0)
  os.makedirs(path)
  names = {'train': 'train.tsv', 'dev': 'dev.txt' if pair else 'dev.tsv', 'test': 'test.tsv'}
  for split, n in (('train', 64), ('dev', 16), ('test', N_TEST)):
    with open(os.path.join(path, names[split]), 'w') as f:
      if pair:
        for i, (a, b) in enumerate(zip(texts(n, rng), texts(n, rng))):
          f.write(f'{int(a[0] == b[0])}\t{a[1]}\t{b[1]}\t{i}\n')
      else:
        f.writelines(f'{y}\t{t}\n' for y, t in texts(n, rng, sentences))
  return path


def configs(tmp):
  sentence = loaders.with_text_classification_data(compare.get_config('structured_attention'),
                                                   folder(f'{tmp}/s'))
  pair = compare.get_config('structured_attention,snli')
  pair.data = loaders.default_config('quora_qqp')
  pair.data.manual_dir = folder(f'{tmp}/q', pair=True)
  pair.data.batch_size = 32
  document = document_config('text_classification', {'manual_dir': folder(f'{tmp}/d', 4),
                                                     'split_sentences': True, 'embeddings': ''},
                             variant='mhs_rnn')
  return {'sentence (structured attention)': (sentence, f'{tmp}/s/test.tsv'),
          'pair (structured attention, features)': (pair, f'{tmp}/q/test.tsv'),
          'document (MHS-RNN)': (document, f'{tmp}/d/test.tsv')}


def eval_pass(workdir):
  """A function running the eval step of the best checkpoint over the test split (as the trainer's
  final evaluation and launch.evaluate do)."""
  config, files, _, parts = restore._assemble_saved_run(workdir, mode=None)  # pylint: disable=protected-access
  _, state = restore._restore_checkpoint(workdir, files['run_info'], parts.state, 'best')  # pylint: disable=protected-access
  split = restore.load_split(config, files['vocab'], 'test')
  placed = parts.runner.place(state)
  batch_size = config.train.eval_batch_size or int(config.data.batch_size)
  return lambda: assembly.evaluate_split(parts, placed, split, batch_size)


def main():
  tmp = tempfile.mkdtemp()
  rows = []
  for name, (config, test) in configs(tmp).items():
    config.data.data_dir, config.data.min_count = f'{tmp}/tfds', 1
    config.train.linear_baseline, config.train.num_steps, config.train.num_epochs = False, 2, 0
    workdir = f'{tmp}/{len(rows)}'
    metrics = training.train_and_evaluate(config, workdir)
    lines = [line.rstrip('\n').split('\t') for line in open(test)]
    inputs = [f'{r[1]}\t{r[2]}' if 'pair' in name else r[1] for r in lines]
    start = time.perf_counter()
    predictor = predict.Predictor(workdir)
    predictor.predict(inputs[:1])
    first = time.perf_counter() - start
    evaluate = eval_pass(workdir)
    passes = {'eval': evaluate, 'predict': lambda: predictor.predict(inputs),
              'encode': lambda: predictor.encode(inputs)}
    best = {}
    for round_ in range(ROUNDS + 1):  # round 0 compiles
      for key, fn in passes.items():
        start = time.perf_counter()
        fn()
        if round_:
          best[key] = min(best.get(key, float('inf')), time.perf_counter() - start)
    rows.append({'model': name, 'test': len(inputs), 'batch': predictor.batch_size,
                 'metrics_json_inference_per_s': metrics['inference_examples_per_second'],
                 'eval_step_examples_per_s': len(inputs) / best['eval'],
                 'predict_per_s': len(inputs) / best['predict'],
                 'encode_per_s': len(inputs) / best['encode'], 'first_prediction_s': first})
    print(json.dumps(rows[-1]), flush=True)
  print('| model | eval step examples/s | predict sentences/s | ratio | encode sentences/s | ratio | '
        'first prediction (restore + compile) |')
  print('|---|---|---|---|---|---|---|')
  for r in rows:
    e = r['eval_step_examples_per_s']
    print(f'| {r["model"]} | {e:.0f} | {r["predict_per_s"]:.0f} | {e / r["predict_per_s"]:.2f}x | '
          f'{r["encode_per_s"]:.0f} | {e / r["encode_per_s"]:.2f}x | {r["first_prediction_s"]:.1f} s |')


if __name__ == '__main__':
  main()
