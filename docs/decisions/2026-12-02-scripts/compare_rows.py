r"""Every row of configs/encoders/compare.py beside the linear baseline, one run per row, on one core.

  python docs/decisions/2026-12-02-scripts/compare_rows.py run CORE OUT DATASET:ROW ...
  python docs/decisions/2026-12-02-scripts/compare_rows.py table OUT

`run` trains each DATASET:ROW[+key=value...] (DATASET: trec, sst2, sst, debian; ROW: a row of compare.py's ENCODERS /
TREE_ENCODERS) in turn with compare.py's defaults and glove-6b-50d, pinned to core CORE
(`taskset -c CORE`, OPENBLAS_NUM_THREADS=1), into OUT/DATASET/ROW, its console in OUT/DATASET/ROW.log
and its wall time (process start to exit: data, compilation, training, evaluation) in
OUT/DATASET/ROW.wall.json. The linear baseline is fitted in the first row of each dataset that sets
BASELINE (the row `bow` by default), not in every row: on one core its fits take 3-20 s on sentences
but minutes on the Debian documents. `table` prints one Markdown table per dataset from those files.
"""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..', '..'))
BASELINE_ROW = 'bow'
DATASETS = {  # name -> (compare.py option, extra flags, what it is)
    'trec': ('', [], 'TREC coarse (6 classes; 500 of train held out as dev)'),
    'sst2': ('sst2', [], 'SST-2 (sentence roots, neutral dropped)'),
    'sst': ('sst', [], 'SST-5 (sentence roots)'),
    'debian': ('', ['--text_classification_dir=../shared/data/debian_descriptions'],
               'Debian package descriptions (16 sections; its train / dev / test files)'),
}


def command(dataset: str, row: str, workdir: str) -> list[str]:
  """ROW is a row name, optionally with `+key=value` config overrides (a variation of that row)."""
  option, extra, _ = DATASETS[dataset]
  row, *overrides = row.split('+')
  options = ','.join(o for o in (row, option) if o)
  return ['python', '-m', 'launch.train', f'--config=configs/encoders/compare.py:{options}',
          f'--workdir={workdir}', '--config.data.embeddings=glove-6b-50d',
          f'--config.train.linear_baseline={row == BASELINE_ROW and not overrides}', *extra,
          *(f'--config.{o}' for o in overrides)]


def run(core: str, out: str, jobs: list[str]) -> None:
  env = dict(os.environ, OPENBLAS_NUM_THREADS='1', OMP_NUM_THREADS='1')
  for job in jobs:
    dataset, row = job.split(':')
    workdir = os.path.join(out, dataset, row)
    if os.path.exists(workdir + '.wall.json'):
      continue
    os.makedirs(os.path.dirname(workdir), exist_ok=True)
    cmd = ['taskset', '-c', core, *command(dataset, row, workdir)]
    start = time.time()
    with open(workdir + '.log', 'w') as log:
      rc = subprocess.call(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    with open(workdir + '.wall.json', 'w') as f:
      json.dump({'seconds': time.time() - start, 'rc': rc, 'command': ' '.join(cmd[3:])}, f)


def table(out: str) -> None:
  for dataset, (_, _, title) in DATASETS.items():
    folder = os.path.join(out, dataset)
    if not os.path.isdir(folder):
      continue
    rows, baseline = [], None
    for name in sorted(os.listdir(folder)):
      if not name.endswith('.wall.json'):
        continue
      row = name[:-len('.wall.json')]
      wall = json.load(open(os.path.join(folder, name)))
      metrics_file = os.path.join(folder, row, 'metrics.json')
      if wall['rc'] != 0 or not os.path.exists(metrics_file):
        rows.append((row, None, None, f'rc {wall["rc"]}', '', '', f'{wall["seconds"]:.0f}'))
        continue
      m = json.load(open(metrics_file))
      stop = f'{m["epochs_completed"]} (best step {m["best_step"]})'
      rows.append((row, m['validation']['accuracy'], (m.get('test') or {}).get('accuracy'), stop,
                   f'{m["num_parameters"]:,}', f'{m["steps_per_second"]:.1f}', f'{wall["seconds"]:.0f}'))
      comparison = os.path.join(folder, row, 'comparison.json')
      if os.path.exists(comparison):
        baseline = json.load(open(comparison)).get('linear_baseline', baseline)
    print(f'\n### {title}\n')
    print('| row | dev acc | test acc | epochs (best step) | parameters | train steps/s | wall s |')
    print('|---|---:|---:|---|---:|---:|---:|')
    fmt = lambda v: '' if v is None else f'{v:.3f}'
    for r in sorted(rows, key=lambda r: -(r[1] or 0)):
      print(f'| {r[0]} | {fmt(r[1])} | {fmt(r[2])} | {" | ".join(r[3:])} |')
    if baseline:
      lb = baseline['linear_baseline']
      print(f'| linear_baseline ({lb["features"]}, C = {lb["C"]:g}) | {fmt(baseline["validation"]["accuracy"])} | '
            f'{fmt((baseline.get("test") or {}).get("accuracy"))} |  | {baseline["num_parameters"]:,} |  |  |')


if __name__ == '__main__':
  if sys.argv[1] == 'run':
    run(sys.argv[2], sys.argv[3], sys.argv[4:])
  else:
    table(sys.argv[2])
