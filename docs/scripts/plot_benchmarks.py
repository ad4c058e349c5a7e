r"""Plots of benchmark reports (`python -m launch.benchmark report` JSON) for the documentation.

    python docs/scripts/plot_benchmarks.py docs/benchmarks/*.json --out=docs/_static/benchmarks

For every report `NAME.json` with a trees family it writes, into `--out`:
  NAME_trees_marg.svg    median ms of the marginals per size: ours, inv-AD, naive (slogdet + autodiff)
                         and torch-struct where the report has them
  NAME_trees_grad.svg    the same for value + gradient of a loss through the marginals ("+grad")
  NAME_trees_ratios.svg  the trees ratio table (< 1: ours faster) as grouped bars, one group per size
The other families' tables are short and read best as tables (docs/benchmarks.md). File names depend
only on the report's file name, so the docs can link them. Matplotlib with the Agg backend (no display); SVG output with a
fixed hash salt and no date, so the same JSON gives the same bytes.
"""
import argparse
import json
import os
import sys
from typing import Any

import matplotlib

matplotlib.use('Agg')
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

SERIES = (('ours', '#1f4e9c'), ('inv-AD', '#7f7f7f'), ('naive', '#d62728'), ('ts', '#2e8b57'))
LABELS = {'ours': 'ours (trees.marginals)', 'inv-AD': 'inverse + autodiff', 'naive': 'slogdet + autodiff',
          'ts': 'torch-struct'}
RATIO_COLUMNS = ('ours/naive marg', 'ours/naive +grad', 'ours/inv-AD marg', 'ours/inv-AD +grad',
                 'ours/ts marg', 'ours/ts +grad', 'mst/TurboParser')


def _number(value: Any) -> float | None:
  return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _trees_tables(report: dict[str, Any]) -> tuple[dict | None, dict | None]:
  """The trees family's absolute (ms) table and its ratio table (None where absent)."""
  for family in report.get('families', []):
    if family['name'] != 'trees':
      continue
    absolute = next((t for t in family['tables'] if 'ours marg' in t['columns']), None)
    ratios = next((t for t in family['tables'] if 'ours/naive marg' in t['columns']), None)
    return absolute, ratios
  return None, None


def _device(report: dict[str, Any]) -> str:
  env = report.get('environment', {})
  return f'{env.get("device", "?")}, commit {env.get("commit", "?")}'


def _save(fig, path: str) -> None:
  fig.tight_layout()
  fig.savefig(path, format='svg', metadata={'Date': None})
  plt.close(fig)


def plot_times(table: dict[str, Any], what: str, title: str, path: str) -> bool:
  """Grouped bars of median ms per size for the series of `SERIES` present; False if none is."""
  sizes = [row['size'] for row in table['rows']]
  present = [(name, colour) for name, colour in SERIES
             if any(_number(row.get(f'{name} {what}')) is not None for row in table['rows'])]
  if not present:
    return False
  fig, ax = plt.subplots(figsize=(6.4, 3.6))
  width = 0.8 / len(present)
  for i, (name, colour) in enumerate(present):
    values = [_number(row.get(f'{name} {what}')) for row in table['rows']]
    xs = [j + (i - (len(present) - 1) / 2) * width for j in range(len(sizes))]
    ax.bar([x for x, v in zip(xs, values) if v is not None], [v for v in values if v is not None],
           width, label=LABELS[name], color=colour)
  ax.set_xticks(range(len(sizes)), sizes)
  ax.set_xlabel('batch x sentence length')
  ax.set_ylabel('median ms per call')
  ax.set_yscale('log')
  ax.set_title(title, fontsize=10)
  ax.legend(fontsize=8)
  _save(fig, path)
  return True


def plot_ratios(table: dict[str, Any], title: str, path: str) -> bool:
  """Grouped bars of the numeric ratio columns of `RATIO_COLUMNS`, one group per size, a line at 1."""
  sizes = [row['size'] for row in table['rows']]
  columns = [c for c in RATIO_COLUMNS if any(_number(row.get(c)) is not None for row in table['rows'])]
  if not columns:
    return False
  fig, ax = plt.subplots(figsize=(7.2, 3.8))
  width = 0.8 / len(sizes)
  colours = ('#1f4e9c', '#ff7f0e', '#2e8b57', '#9467bd')
  for i, size in enumerate(sizes):
    row = table['rows'][i]
    values = [_number(row.get(c)) for c in columns]
    xs = [j + (i - (len(sizes) - 1) / 2) * width for j in range(len(columns))]
    ax.bar([x for x, v in zip(xs, values) if v is not None], [v for v in values if v is not None],
           width, label=size, color=colours[i % len(colours)])
  ax.axhline(1.0, color='black', linewidth=0.8)
  ax.set_xticks(range(len(columns)), columns, rotation=30, ha='right', fontsize=8)
  ax.set_ylabel('ratio (< 1: ours faster)')
  ax.set_yscale('log')
  ax.set_title(title, fontsize=10)
  ax.legend(fontsize=8, title='size')
  _save(fig, path)
  return True


def plot_report(path: str, out_dir: str) -> list[str]:
  """The plots of one report JSON file; returns the files written."""
  with open(path, encoding='utf-8') as f:
    report = json.load(f)
  name = os.path.splitext(os.path.basename(path))[0]
  absolute, ratios = _trees_tables(report)
  written = []
  device = _device(report)
  if absolute is not None:
    for what, label in (('marg', 'marginals'), ('+grad', 'value + gradient through the marginals')):
      target = os.path.join(out_dir, f'{name}_trees_{"marg" if what == "marg" else "grad"}.svg')
      if plot_times(absolute, what, f'trees: {label} ({device})', target):
        written.append(target)
  if ratios is not None:
    target = os.path.join(out_dir, f'{name}_trees_ratios.svg')
    if plot_ratios(ratios, f'trees: ratios ({device})', target):
      written.append(target)
  return written


def main(argv: list[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('reports', nargs='+', help='report.json files of `python -m launch.benchmark report`')
  parser.add_argument('--out', required=True, help='folder for the plots (created if missing)')
  args = parser.parse_args(argv)
  os.makedirs(args.out, exist_ok=True)
  plt.rcParams['svg.hashsalt'] = 'jax-structured'  # stable element ids: same JSON, same bytes
  for path in args.reports:
    for written in plot_report(path, args.out):
      print(written)
  return 0


if __name__ == '__main__':
  sys.exit(main())
