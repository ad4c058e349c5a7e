"""docs/scripts/plot_benchmarks.py draws the committed report JSON files, and they match the committed plots.

The bytes are compared only under the matplotlib version that drew the committed files (3.11.2): other
versions write other (equally valid) SVG text.
"""
import glob
import importlib.util
import os

import pytest

matplotlib = pytest.importorskip('matplotlib', reason='matplotlib is not installed (pip install -e ".[docs]")')

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script():
  spec = importlib.util.spec_from_file_location(
      'plot_benchmarks', os.path.join(ROOT, 'docs', 'scripts', 'plot_benchmarks.py'))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_plots_of_the_committed_reports_match_the_committed_plots(tmp_path):
  reports = sorted(glob.glob(os.path.join(ROOT, 'docs', 'benchmarks', '*.json')))
  assert reports
  assert _script().main([*reports, f'--out={tmp_path}']) == 0
  drawn = sorted(os.listdir(tmp_path))
  assert 'gpu_h200_d043c47_trees_ratios.svg' in drawn and 'gpu_h200_d043c47_trees_grad.svg' in drawn
  committed = os.path.join(ROOT, 'docs', '_static', 'benchmarks')
  assert drawn == sorted(os.listdir(committed)), 'rerun the script: the committed plots are stale'
  for name in drawn:
    with open(tmp_path / name, encoding='utf-8') as f:
      assert f.read().rstrip().endswith('</svg>'), name
    if matplotlib.__version__ != '3.11.2':
      continue
    with open(tmp_path / name, 'rb') as new, open(os.path.join(committed, name), 'rb') as old:
      assert new.read() == old.read(), f'{name} differs: rerun docs/scripts/plot_benchmarks.py'
