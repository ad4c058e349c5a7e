r"""Renders the figures of the documentation pages from the files that hold them, or checks them.

    python docs/scripts/render_figures.py           # rewrites every figure block of README.md and docs/
    python docs/scripts/render_figures.py --check   # lists the blocks that differ from their source; exit 1

A figure block is the text between a marker line and `<!-- /figures -->` on a Markdown page:

    <!-- figures: report benchmarks/gpu_h200_f7f076d.json trees 1 -->
    (generated: the source line, the table, its notes)
    <!-- /figures -->

Markers (paths are relative to `docs/`):
  report FILE FAMILY INDEX [notes]
                               table INDEX of FAMILY in the report JSON FILE (`python -m launch.benchmark
                               report`'s `report.json`), headed by the file, device, commit, date and the
                               command; with `notes`, followed by the table's notes (goal lines)
  comparison FILE              test accuracy / UAS of each variant of a run (`<workdir>/comparison.json`
                               copied under docs/results/)
  reports                      the list of docs/benchmarks/*.json, newest first
  source FILE                  the source line of a report alone (device, commit, date, command)
  speed                        the README's speed table: each cell from the reports of one device
                               (`environment.platform`), each part of it (a size of the trees rows) from
                               the newest report (`environment.date`) that holds it; a part from an older
                               report than the device's newest names its commit
  metrics FILE [SPLIT ...] [keys=A,B]
                               the final metrics of a training run (`<workdir>/metrics.json` copied under
                               docs/results/), one row per split (default: validation, test)

Tables are formatted by `launch.benchmarks.report` (`markdown_table`, `format_cell`), as the report command
formats its own `report.md`. `tests/test_docs_figures.py` runs `check()`, so a hand-edited figure, or a
report replaced without re-rendering, fails the tests.
"""
import argparse
import json
import os
import re
import subprocess
import sys
from typing import Any, Callable, Iterator

DOCS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(DOCS)
if ROOT not in sys.path:
  sys.path.insert(0, ROOT)

from launch.benchmarks import report as report_lib  # noqa: E402  (after the path is set)

MARKER = re.compile(r'^<!-- figures: (?P<spec>.+?) -->\n(?P<body>.*?)^<!-- /figures -->$', re.S | re.M)
SIZES = ('512x32', '64x64', '32x200')


def pages() -> list[str]:
  """README.md and every Markdown page under docs/ (build output and notebooks' folders excluded)."""
  found = [os.path.join(ROOT, 'README.md')]
  for folder, dirs, files in os.walk(DOCS):
    dirs[:] = sorted(d for d in dirs if d not in ('_build', 'examples', '_static'))
    found += [os.path.join(folder, f) for f in sorted(files) if f.endswith('.md')]
  return found


def load(path: str) -> dict[str, Any]:
  """A JSON file named relative to docs/."""
  with open(os.path.join(DOCS, path), encoding='utf-8') as f:
    return json.load(f)


def command_of(report: dict[str, Any]) -> str:
  """The command(s) that wrote a report: recorded in `settings.commands`, else rebuilt from settings."""
  settings = report['settings']
  if settings.get('commands'):
    return '`, then `'.join(settings['commands'])
  parts = ['python -m launch.benchmark report --out=OUT', f'--budget_s={settings["budget_s"]:g}']
  if settings.get('families'):
    parts.append('--families=' + ','.join(settings['families']))
  if settings.get('quick'):
    parts.append('--quick')
  return ' '.join(parts)


def source_line(path: str, report: dict[str, Any]) -> str:
  env = report['environment']
  device = f'CPU, {env["cpu_count"]} cores' if env['platform'] == 'cpu' else env['device']
  return (f'`docs/{path}` ({device}, commit {env["commit"]}, {env["date"]}), written by '
          f'`{command_of(report)}`.')


def family_tables(report: dict[str, Any], family: str) -> list[dict[str, Any]]:
  for entry in report['families']:
    if entry['name'] == family:
      return entry['tables']
  return []


def render_report(path: str, family: str, index: str, *options: str) -> str:
  if set(options) - {'notes'}:
    raise ValueError(f'report {path}: unknown options {options} (known: notes)')
  report = load(path)
  tables = family_tables(report, family)
  if int(index) >= len(tables):
    raise ValueError(f'{path} has no table {index} in family {family!r} ({len(tables)} tables)')
  table = tables[int(index)]
  lines = ['Source: ' + source_line(path, report), '', table['title'], '', report_lib.markdown_table(table)]
  if table['notes'] and 'notes' in options:
    lines += [''] + [f'- {note}' for note in table['notes']]
  return '\n'.join(lines)


def render_source(path: str) -> str:
  return 'Source: ' + source_line(path, load(path))


# The README's speed table: (label, family, how to read the value from that family's tables). A reader
# returns {part: value} (the trees rows: a part per size of SIZES; the others: one part, ''), or None.
def _trees_ratio(column: str) -> Callable[[list[dict[str, Any]]], Any]:
  def read(tables):
    table = next((t for t in tables if column in t['columns']), None)
    if table is None:
      return None
    return {row['size']: report_lib.format_cell(row[column]) for row in table['rows']
            if row['size'] in SIZES and isinstance(row.get(column), (int, float))} or None
  return read


def _snli_train_ratio(tables):
  for table in tables:
    for row in table['rows']:
      if row.get('model') == 'matrix inversion' and 'train x simple' in row:
        return {'': report_lib.format_cell(row['train x simple'])}
  return None


def _lstmn_ratio(tables):
  for table in tables:
    for row in table['rows']:
      if 'LSTMN-1/LSTM-1' in row:
        return {'': report_lib.format_cell(row['LSTMN-1/LSTM-1'])}
  return None


def _tree_lstm_speedup(tables):
  """Training time of one tree at a time over the batched Tree-LSTM's (the report's `batched/loop train`)."""
  for table in tables:
    for row in table['rows']:
      if 'batched/loop train' in row:
        return {'': report_lib.format_cell(row['batched/loop train']) + 'x'}
    rows = {str(next(iter(row.values()))): row for row in table['rows']}
    batched, loop = rows.get('batched Tree-LSTM (level by level)'), rows.get('one tree at a time, same cell')
    if batched and loop and 'train ms' in batched:
      return {'': report_lib.format_cell(loop['train ms'] / batched['train ms']) + 'x'}
  return None


SPEED_ROWS = (
    ('`trees.marginals` / naive', 'trees', _trees_ratio('ours/naive marg')),
    ('`trees.marginals` +grad / naive +grad', 'trees', _trees_ratio('ours/naive +grad')),
    ('`trees.marginals` / torch-struct', 'trees', _trees_ratio('ours/ts marg')),
    ('`trees.marginals` +grad / torch-struct +grad', 'trees', _trees_ratio('ours/ts +grad')),
    ("`trees.mst` / TurboParser's C++ CPU figure (38.6 / 19.2 / 96.6 ms)", 'trees',
     _trees_ratio('mst/TurboParser')),
    ('structured (matrix inversion) / simple attention, SNLI training step (32x16x8)', 'liu_lapata',
     _snli_train_ratio),
    ('LSTMN-1 / LSTM-1, PTB training step (40x35, hidden 300)', 'lstmn', _lstmn_ratio),
    ('batched Tree-LSTM, training speed-up over one tree at a time (50x32, hidden 150)', 'tree_lstm',
     _tree_lstm_speedup),
)
DEVICES = (('gpu', 'GPU'), ('cpu', 'CPU'))


def reports() -> list[tuple[str, dict[str, Any]]]:
  """Every report JSON of docs/benchmarks/, newest first (by `environment.date`, then commit time)."""
  folder = os.path.join(DOCS, 'benchmarks')
  found = [(f'benchmarks/{name}', load(f'benchmarks/{name}')) for name in sorted(os.listdir(folder))
           if name.endswith('.json')]
  return sorted(found, key=lambda item: (item[1]['environment']['date'][:10],
                                         commit_time(item[1]['environment']['commit']), item[0]),
                reverse=True)


def commit_time(commit: str) -> int:
  """Commit time of a report's commit (orders two reports of one day); 0 outside a git checkout."""
  try:
    out = subprocess.run(['git', 'log', '-1', '--format=%ct', commit], cwd=ROOT, capture_output=True,
                         text=True, check=False, timeout=10).stdout.strip()
  except (OSError, subprocess.SubprocessError):
    return 0
  return int(out) if out.isdigit() else 0


def _speed_cell(read, family: str, reports_of_device: list[tuple[str, dict[str, Any]]]) -> str:
  """One cell: each part (size) from the newest report that holds it; a part from an older report than the
  device's newest names that report's commit (once for the cell when every part comes from it)."""
  newest = reports_of_device[0][1]['environment']['commit']
  parts = {}
  for _, report in reports_of_device:
    for part, value in (read(family_tables(report, family)) or {}).items():
      parts.setdefault(part, (value, report['environment']['commit']))
  order = SIZES if set(parts) <= set(SIZES) else ('',)
  found = [parts[part] for part in order if part in parts]
  if not found or len(found) < len(order):
    return '-'
  commits = {commit for _, commit in found}
  if commits == {newest}:
    return ' / '.join(value for value, _ in found)
  if len(commits) == 1:
    return ' / '.join(value for value, _ in found) + f' (report {commits.pop()})'
  return ' / '.join(value if commit == newest else f'{value} (report {commit})' for value, commit in found)


def render_speed() -> str:
  """The speed table: a column per device, each part of a cell (a size) from the newest report of that
  device that holds it."""
  by_device = {platform: [(p, r) for p, r in reports() if r['environment']['platform'] == platform]
               for platform, _ in DEVICES}
  header = ['measurement'] + [label if p == 'cpu' else by_device[p][0][1]['environment']['device']
                              for p, label in DEVICES if by_device[p]]
  lines = ['| ' + ' | '.join(header) + ' |', '|---' + '|---' * (len(header) - 1) + '|']
  for label, family, read in SPEED_ROWS:
    cells = [_speed_cell(read, family, by_device[platform]) for platform, _ in DEVICES if by_device[platform]]
    lines.append('| ' + ' | '.join([label] + cells) + ' |')
  lines.append('')
  for platform, label in DEVICES:
    if by_device[platform]:
      path, report = by_device[platform][0]
      lines.append(f'- {label}: {source_line(path, report)}')
  return '\n'.join(lines)


def render_metrics(path: str, *args: str) -> str:
  """A run's final metrics (its workdir's `metrics.json`: `{split: {metric: value}, ...}`), a row per split.

  `args`: the splits (default `validation test`), and optionally `keys=a,b,c` to choose the columns.
  """
  metrics = load(path)
  keys = [a.split('=', 1)[1].split(',') for a in args if a.startswith('keys=')]
  splits = [a for a in args if not a.startswith('keys=')] or ['validation', 'test']
  columns = keys[0] if keys else sorted({key for split in splits for key in metrics[split]})
  table = {'columns': ['split'] + columns,
           'rows': [{'split': split, **{c: metrics[split].get(c) for c in columns}} for split in splits]}
  return (f'Source: `docs/{path}` (the run\'s `metrics.json`: best step {metrics.get("best_step", "-")} '
          f'by dev {metrics.get("dev_metric", "-")}).\n\n' + report_lib.markdown_table(table))


def render_comparison(path: str) -> str:
  """A variants run's test figures (its workdir's `comparison.json`: `{variant: {split: {metric: v}}}`)."""
  runs = load(path)
  table = {'columns': ['variant', 'test accuracy', 'test UAS', 'parameters'], 'rows': []}
  for variant, run in runs.items():
    test = run.get('test', {})
    table['rows'].append({'variant': f'`{variant}`', 'test accuracy': test.get('accuracy'),
                          'test UAS': test.get('uas'), 'parameters': run.get('num_parameters')})
  return f'Source: `docs/{path}` (the run\'s `comparison.json`).\n\n' + report_lib.markdown_table(table)


def render_reports() -> str:
  """The list of the report JSON files of docs/benchmarks/, newest first."""
  table = {'columns': ['file', 'device', 'commit', 'date', 'families'], 'rows': []}
  for path, report in reports():
    env = report['environment']
    families = ', '.join(f['name'] + ('' if f['status'] == 'ok' else f' [{f["status"]}]')
                         for f in report['families'] if f['tables'])
    table['rows'].append({'file': f'`docs/{path}`',
                          'device': 'CPU' if env['platform'] == 'cpu' else env['device'], 'commit': env['commit'],
                          'date': env['date'], 'families': families})
  return report_lib.markdown_table(table)


RENDERERS = {'comparison': render_comparison, 'reports': render_reports, 'report': render_report, 'source': render_source, 'speed': render_speed,
             'metrics': render_metrics}


def render(spec: str) -> str:
  """The text of the block of one marker (`spec`: the words after `figures:`)."""
  kind, *args = spec.split()
  if kind not in RENDERERS:
    raise ValueError(f'unknown figure block {kind!r} (known: {", ".join(RENDERERS)})')
  return RENDERERS[kind](*args)


def blocks(text: str) -> Iterator[tuple[re.Match, str]]:
  """Each marker of a page with the text it should hold."""
  for match in MARKER.finditer(text):
    yield match, render(match.group('spec'))


def rewrite(text: str) -> str:
  return MARKER.sub(lambda m: f'<!-- figures: {m.group("spec")} -->\n{render(m.group("spec"))}\n'
                              '<!-- /figures -->', text)


def check(paths=None) -> list[str]:
  """`page: spec` of every block whose text differs from its rendering (empty: all current)."""
  stale = []
  for path in paths or pages():
    with open(path, encoding='utf-8') as f:
      text = f.read()
    for match, expected in blocks(text):
      if match.group('body').rstrip('\n') != expected:
        stale.append(f'{os.path.relpath(path, ROOT)}: {match.group("spec")}')
  return stale


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--check', action='store_true', help='only list stale blocks (exit 1 if any)')
  args = parser.parse_args(argv)
  if args.check:
    stale = check()
    for line in stale:
      print(f'stale: {line} (run python docs/scripts/render_figures.py)')
    return 1 if stale else 0
  for path in pages():
    with open(path, encoding='utf-8') as f:
      text = f.read()
    new = rewrite(text)
    if new != text:
      with open(path, 'w', encoding='utf-8') as f:
        f.write(new)
      print(f'rewrote {os.path.relpath(path, ROOT)}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
