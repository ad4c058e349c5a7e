"""`python -m launch.benchmark report`: the --quick run of every family, the budget, families that
are missing or fail, the files written while it runs, the trees ratios, the parser's baselines."""
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from launch import benchmark
from launch import benchmarks
from launch.benchmarks import parser as parser_benchmark
from launch.benchmarks import report


def _numbers(report_dict):
  for family in report_dict['families']:
    for table in family['tables']:
      for row in table['rows']:
        for column, value in row.items():
          yield family['name'], column, value


def test_quick_report_has_every_family_with_finite_numbers(tmp_path):
  """The real --quick run: every registered family is in both files; the ones whose module exists ran
  with finite numbers, the others are 'not available'."""
  out = report.run_report(str(tmp_path), quick=True, budget_s=3600, dtype='float32')
  on_disk = json.loads((tmp_path / 'report.json').read_text())
  assert on_disk == json.loads(json.dumps(out)) and on_disk['complete']
  assert [f['name'] for f in on_disk['families']] == [f.name for f in report.FAMILIES]
  for family in on_disk['families']:
    try:
      report.load_family(report.Family(family['name'], ''))
      exists = True
    except report.FamilyUnavailable:
      exists = family['name'] == 'trees'  # its entry lives in report.py
    assert family['status'] == ('ok' if exists else 'not available'), family
    assert bool(family['tables']) == exists
  for name in ('trees', 'liu_lapata', 'lstmn', 'parser'):
    assert next(f for f in on_disk['families'] if f['name'] == name)['status'] == 'ok'
  numbers = [(f, c, v) for f, c, v in _numbers(on_disk) if isinstance(v, (int, float))]
  assert len(numbers) > 50
  assert all(math.isfinite(v) for _, _, v in numbers)
  assert not [x for x in _numbers(on_disk) if x[2] in ('nan', 'inf', '-inf')]
  env = on_disk['environment']
  assert env['jax'] == jax.__version__ and env['platform'] == 'cpu' and env['jaxlib']
  text = (tmp_path / 'report.md').read_text()
  for family in report.FAMILIES:
    assert f'## {family.name}: ' in text
  assert f'jax {jax.__version__}' in text and 'dtype float32' in text and env['device'] in text
  assert 'parse sent/s' in text and 'LSTMN-1/LSTM-1' in text and 'ours/naive marg' in text


def _table(name, value):
  return benchmarks.Table(f'{name} table', [{'size': 'a', 'ms': value}], [f'{name} note'])


def fake_two_units(report_run):
  """Two units: the clock passes the budget during the first, so the second is skipped."""
  if report_run.unit('fake first unit'):
    _CLOCK[0] += 100.0
    yield _table('first', 1.5)
  if report_run.unit('fake second unit'):
    yield _table('second', 2.5)


def fake_fails(report_run):
  del report_run
  yield _table('before the failure', 3.0)
  raise RuntimeError('out of device memory at 32x200')


def fake_checks_partial_files(report_run):
  yield _table('one', 1.0)
  on_disk = json.loads((_OUT[0] / 'report.json').read_text())
  assert not on_disk['complete']
  entry = next(f for f in on_disk['families'] if f['name'] == 'partial')
  assert entry['status'] == 'running' and entry['tables'][0]['rows'] == [{'size': 'a', 'ms': 1.0}]
  assert 'INCOMPLETE' in (_OUT[0] / 'report.md').read_text()
  _CLOCK[0] += 1.0
  yield _table('two', float('nan'))  # written as the string 'nan' (strict JSON)
  del report_run


_CLOCK = [0.0]
_OUT = [None]


def test_budget_missing_and_failing_families(tmp_path):
  _CLOCK[0], _OUT[0] = 0.0, tmp_path
  here = __name__
  families = [report.Family('partial', 'checks the files', entry=f'{here}:fake_checks_partial_files'),
              report.Family('broken', 'fails', entry=f'{here}:fake_fails'),
              report.Family('future', 'not written yet', entry='launch.benchmarks.no_such_family:report_tables'),
              report.Family('no_entry', 'module without report_tables', entry=f'{here}:no_such_function'),
              report.Family('two_units', 'runs out of budget', entry=f'{here}:fake_two_units'),
              report.Family('late', 'never reached', entry=f'{here}:fake_two_units')]
  out = report.run_report(str(tmp_path), budget_s=50.0, families=families, clock=lambda: _CLOCK[0])
  status = {f['name']: (f['status'], f['reason'], len(f['tables'])) for f in out['families']}
  assert status == {
      'partial': ('ok', '', 2),
      'broken': ('failed', 'RuntimeError: out of device memory at 32x200', 1),
      'future': ('not available', 'launch/benchmarks/no_such_family.py does not exist yet', 0),
      'no_entry': ('not available', f'{here.replace(".", "/")}.py has no no_such_function(run) yet', 0),
      'two_units': ('partial (budget)', '', 1),
      'late': ('skipped (budget)', '', 0)}
  assert out['skipped'] == ['fake second unit', 'late'] and out['complete']
  assert out['families'][0]['tables'][1]['rows'] == [{'size': 'a', 'ms': 'nan'}]
  assert json.loads((tmp_path / 'report.json').read_text()) == json.loads(json.dumps(out))
  text = (tmp_path / 'report.md').read_text()
  assert '## Skipped for the budget\n\n- fake second unit\n- late' in text
  assert '| broken | failed: RuntimeError: out of device memory at 32x200 |' in text
  assert '| size | ms |\n|---|---:|\n| a | 1.50 |' in text and '- first note' in text
  assert 'INCOMPLETE' not in text


def test_budget_and_family_selection_errors():
  with pytest.raises(ValueError, match='--budget_s must be > 0'):
    benchmarks.Budget(0)
  assert [f.name for f in report.select_families('lstmn, trees')] == ['trees', 'lstmn']
  with pytest.raises(ValueError, match=r"unknown \['treez'\]; known families: trees, liu_lapata"):
    report.select_families('trees,treez')
  assert 'report' in benchmark.known_benchmarks() and 'parser' in benchmark.known_benchmarks()
  assert [report.format_cell(v) for v in (1234.5, 12.345, 0.012345, 7, 'a|b', None)] == [
      '1,234', '12.35', '0.0123', '7', 'a\\|b', '-']


def test_trees_ratios_and_goals(monkeypatch):
  """The trees family's ratio table and goal verdicts from known timings (ms)."""
  from launch.benchmarks import trees as trees_benchmark  # pylint: disable=g-import-not-at-top
  timings = {'ours marg': 1.0, 'inv-AD marg': 0.8, 'naive marg': 3.0, 'ours +grad': 2.0,
             'inv-AD +grad': 2.0, 'naive +grad': 3.0, 'mst': 3.0, 'sample': 4.0, 'marg 1 sharp': 1.5,
             'sample 1 sharp': 12.0, 'proj marg': 12.0}
  monkeypatch.setattr(trees_benchmark, 'run', lambda sizes, repeats, dtype: [
      dict(size=f'{b}x{n}', **timings, **{k: v.get((b, n), '-') for k, v in trees_benchmark.REFERENCE.items()})
      for b, n in sizes])
  monkeypatch.setattr(report, 'package_version', lambda name: 'not installed')
  budget = benchmarks.Budget(100.0)
  tables = list(report.trees_tables(benchmarks.ReportRun(False, 1, 'float32', budget)))
  absolute, ratios = tables
  assert [r['size'] for r in absolute.rows] == ['512x32', '64x64', '32x200']
  assert not any(c.startswith('ref ') for c in absolute.columns())
  assert 'torch-struct: not installed (its columns are absent)' in absolute.notes
  first = ratios.rows[0]
  assert first['ours/naive marg'] == pytest.approx(1 / 3) and first['ours/naive +grad'] == pytest.approx(2 / 3)
  assert first['ours/inv-AD marg'] == pytest.approx(1.25) and first['ours/ts marg'] == 'not installed'
  assert first['mst/TurboParser'] == pytest.approx(3.0 / 38.6)
  assert first['sample 1 sharp/sample'] == pytest.approx(3.0) and first['proj marg ms'] == 12.0
  notes = '\n'.join(ratios.notes)
  assert 'ours marg >= 2x faster than naive (512x32): 3.00x, met on cpu (the goal is for a GPU)' in notes
  assert 'ours +grad >= 2x faster than naive (512x32): 1.50x, missed' in notes
  assert 'mst >= 10x faster than TurboParser CLE on the CPU (38.6 ms, 512x32): 12.87x, met' in notes
  assert 'mst >= 10x faster than TurboParser CLE on the CPU (19.2 ms, 64x64): 6.40x, missed' in notes
  assert 'projective marginals < 10 ms (512x32): 12.00 ms, missed' in notes
  assert notes.count('projective') == 1


def _is_single_root_tree(heads):
  """Every word reaches ROOT (-1) without a cycle, and exactly one word hangs from ROOT."""
  for m in range(len(heads)):
    seen, node = set(), m
    while node != -1:
      if node in seen:
        return False
      seen.add(node)
      node = heads[node]
  return int(np.sum(heads == -1)) == 1


def test_parser_batch_and_greedy_baseline():
  batch = parser_benchmark.parse_batch(np.random.default_rng(0), 6, 8, vocab_size=20, num_tags=5,
                                       num_relations=7)
  lengths = batch['lengths']
  assert np.all((lengths > 4) & (lengths <= 8))
  for b in range(6):
    n = lengths[b]
    assert _is_single_root_tree(batch['heads'][b, :n]) and np.all(batch['heads'][b, n:] == -1)
    for key, high in (('tokens', 20), ('relations', 7), ('tags', 5)):
      assert np.all((batch[key][b, :n] >= 2) & (batch[key][b, :n] < high)) and np.all(batch[key][b, n:] == 0)
  with pytest.raises(ValueError, match='>= 3'):
    parser_benchmark.parse_batch(np.random.default_rng(0), 1, 4, vocab_size=2, num_tags=5, num_relations=7)
  # greedy_decode against a direct numpy transcription: best of the other real words and ROOT.
  rng = np.random.default_rng(1)
  arc, root = rng.normal(size=(6, 8, 8)), rng.normal(size=(6, 8))
  rel = rng.normal(size=(6, 9, 8, 7))
  heads, relations = jax.jit(parser_benchmark.greedy_decode)(
      {'arc_scores': jnp.asarray(arc), 'root_scores': jnp.asarray(root), 'relation_logits': jnp.asarray(rel)},
      jnp.asarray(lengths))
  for b in range(6):
    n = lengths[b]
    for m in range(8):
      if m >= n:
        assert heads[b, m] == -1 and relations[b, m] == 0
        continue
      candidates = {h: arc[b, h, m] for h in range(n) if h != m}
      candidates[-1] = root[b, m]
      best = max(candidates, key=candidates.get)
      assert heads[b, m] == best
      assert relations[b, m] == 2 + np.argmax(rel[b, best if best >= 0 else 8, m, 2:])
