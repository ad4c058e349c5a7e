"""The notebooks of examples/ execute without errors and show what they promise.

Each notebook runs in a fresh Jupyter kernel (nbclient), with a temporary folder as its working directory
(the docs build runs them from docs/), exactly as stored: without outputs. They need nbclient, nbformat
and ipykernel (the `docs` extra); without them these tests are skipped. Marked `slow` (end-to-end,
like the command-line training tests): `python -m pytest -m slow tests/test_examples.py`.

Measured (`OPENBLAS_NUM_THREADS=1 nice -n 19 jupyter execute examples/<notebook>`, the shared 2-core
box with both cores busy at a load average of ~9): trees_tour 51 s wall (16 s CPU), train_and_inspect
48 s wall (19 s CPU).
"""
import json
import os
import re
import time

import pytest

nbformat = pytest.importorskip('nbformat', reason='nbformat is not installed (pip install -e ".[test]")')
nbclient = pytest.importorskip('nbclient', reason='nbclient is not installed (pip install -e ".[test]")')
pytest.importorskip('ipykernel', reason='ipykernel is not installed (pip install -e ".[test]")')

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), 'examples')

pytestmark = pytest.mark.slow


def _execute(name: str, cwd: str):
  """The executed notebook (nbclient raises CellExecutionError on the first failing cell)."""
  notebook = nbformat.read(os.path.join(EXAMPLES, name), as_version=4)
  assert not any(cell.get('outputs') for cell in notebook.cells if cell.cell_type == 'code'), (
      f'examples/{name} is stored with outputs: clear them (they are produced by the docs build)')
  start = time.monotonic()
  nbclient.NotebookClient(notebook, timeout=600, kernel_name='python3',
                          resources={'metadata': {'path': cwd}}).execute()
  print(f'examples/{name}: executed in {time.monotonic() - start:.1f} s')
  return notebook


def _outputs(notebook, kind: str) -> list[str]:
  """Every output of the executed notebook of MIME type `kind` ('text' = streams and text/plain)."""
  found = []
  for cell in notebook.cells:
    for output in cell.get('outputs', []):
      assert output.output_type != 'error', f'{output.ename}: {output.evalue}'
      if kind == 'text' and output.output_type == 'stream':
        found.append(output.text)
      elif kind in output.get('data', {}):
        found.append(output.data[kind])
  return found


def test_trees_tour(tmp_path):
  notebook = _execute('trees_tour.ipynb', str(tmp_path))
  text = ''.join(_outputs(notebook, 'text'))
  match = re.search(r'gradient check passed: max \|finite difference - marginal\| = (\S+)', text)
  assert match and float(match.group(1)) < 2e-3, text
  assert 'all samples are trees: True' in text
  assert 'vmap == leading batch shape: True' in text
  pictures = _outputs(notebook, 'image/svg+xml')
  assert pictures and 'data-panel="induced"' in pictures[0] and 'data-panel="reference"' in pictures[0]
  assert pictures[0].count('class="arc') == 12  # 6 words: the sample's arcs over the MST's
  assert _outputs(notebook, 'image/png')  # the matplotlib heat map of the marginals
  assert 'column maxima == best tree score: True' in text and 'best of the 5 == mst: True' in text
  assert 'sentence 2 (2 words): [[-1, 0], [1, -1], [-1, -1], [-1, -1], [-1, -1]]' in text
  assert 'labeled marginals == grad of labeled log Z: True' in text
  match = re.search(r'labeled samples: max \|frequency - marginal\| = (\S+)', text)
  assert match and float(match.group(1)) < 0.05, text  # 2000 samples: one standard error <= 0.012


def test_train_and_inspect(tmp_path):
  notebook = _execute('train_and_inspect.ipynb', str(tmp_path))
  text = ''.join(_outputs(notebook, 'text'))
  results = json.loads(re.search(r'^\{\n "validation".*?^\}$', text, re.S | re.M).group(0))
  assert results['test']['accuracy'] > 0.7, results  # chance is 0.5: the tree carries the label
  match = re.search(r'(\d+) trees, UAS against the planted trees ([\d.]+)%', text)
  assert match and int(match.group(1)) == 200 and 0 <= float(match.group(2)) <= 100, text
  assert 'step 1000 |' in text  # restored from the checkpoint of the last step
  pictures = _outputs(notebook, 'image/svg+xml')
  assert len(pictures) == 2
  assert all('data-panel="induced"' in p and 'data-panel="reference"' in p for p in pictures)


def test_predict_new_text(tmp_path):
  notebook = _execute('predict_new_text.ipynb', str(tmp_path))
  text = ''.join(_outputs(notebook, 'text'))
  assert re.search(r'test accuracy [\d.]+', text), text
  records = re.findall(r'^(pos|neg) \{.*\}  (.+)$', text, re.M)
  assert [t for _, t in records] == ['A superb film and a lovely story.', 'The plot was dull, quite boring.',
                                     'It was a poor film.'], text
  assert '(3, ' in text and 'float32' in text  # three vectors
  pictures = _outputs(notebook, 'image/svg+xml')
  assert len(pictures) == 3 and all('class="arc' in p for p in pictures)
