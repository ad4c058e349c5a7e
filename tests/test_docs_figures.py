"""The figures of the documentation agree with the files that hold them, and the docs stay in the repository.

Every table of figures on a page sits in a block that `docs/scripts/render_figures.py` renders from a
report JSON (docs/benchmarks/) or a run's metrics JSON; a hand-edited number or a replaced report that was
not re-rendered fails here. Fast: JSON files and Markdown text only.
"""
import importlib.util
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, 'docs')


@pytest.fixture(scope='module')
def render():
  spec = importlib.util.spec_from_file_location(
      'render_figures', os.path.join(DOCS, 'scripts', 'render_figures.py'))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _read(path):
  with open(path, encoding='utf-8') as f:
    return f.read()


def test_every_figure_block_matches_its_source(render):
  stale = render.check()
  assert not stale, 'stale figure blocks (run python docs/scripts/render_figures.py): ' + '; '.join(stale)


def test_the_pages_that_quote_reports_have_their_blocks(render):
  specs = {path: [m.group('spec') for m in render.MARKER.finditer(_read(path))] for path in render.pages()}
  assert specs[os.path.join(ROOT, 'README.md')] == ['speed']
  benchmarks = specs[os.path.join(DOCS, 'benchmarks.md')]
  quoted = {spec.split()[1] for spec in benchmarks if spec.startswith('report ')}
  on_disk = {f'benchmarks/{name}' for name in os.listdir(os.path.join(DOCS, 'benchmarks'))
             if name.endswith('.json')}
  assert quoted == on_disk, 'every report JSON of docs/benchmarks/ has its section on the benchmarks page'


def test_an_edited_figure_is_found(render, tmp_path):
  page = tmp_path / 'page.md'
  text = _read(os.path.join(ROOT, 'README.md'))
  page.write_text(text, encoding='utf-8')
  assert render.check([str(page)]) == []
  # The newest H200 report holding 64x64 gives marginals / naive 1.25 there; a page saying 1.26 is stale.
  edited = text.replace('/ 1.25 (report ec2ec20) /', '/ 1.26 (report ec2ec20) /', 1)
  assert edited != text
  page.write_text(edited, encoding='utf-8')
  assert render.check([str(page)]) == [f'{os.path.relpath(page, ROOT)}: speed']


def test_the_speed_table_takes_the_newest_report_of_each_device(render):
  newest = {}
  for path, report in render.reports():
    newest.setdefault(report['environment']['platform'], path)
  assert newest == {'gpu': 'benchmarks/gpu_h200_abde495_32x200.json', 'cpu': 'benchmarks/cpu_2a25662.json'}
  table = render.render('speed')
  # independent reading of the files: the trees ratio 'ours/naive marg' at 512x32 / 64x64 / 32x200
  def ratios(path):
    report = render.load(path)
    table = next(t for f in report['families'] if f['name'] == 'trees' for t in f['tables']
                 if 'ours/naive marg' in t['columns'])
    return {row['size']: render.report_lib.format_cell(row['ours/naive marg']) for row in table['rows']}
  cpu = ratios('benchmarks/cpu_2a25662.json')
  assert f"| {cpu['512x32']} / {cpu['64x64']} / {cpu['32x200']} |" in table
  # the newest GPU report holds 32x200 only: 512x32 and 64x64 come from the newest report that holds them
  partial, full = ratios('benchmarks/gpu_h200_abde495_32x200.json'), ratios('benchmarks/gpu_h200_ec2ec20.json')
  assert set(partial) == {'32x200'}
  row = (f"| `trees.marginals` / naive | {full['512x32']} (report ec2ec20) / {full['64x64']} (report ec2ec20) / "
         f"{partial['32x200']} |")
  assert row in table, row
  assert 'report f7f076d' in table and 'report d043c47' in table and 'report 919ee90' in table


def test_a_speed_cell_takes_each_size_from_the_newest_report_that_holds_it(render):
  def report(commit, sizes):
    rows = [{'size': size, 'ours/naive marg': value} for size, value in sizes.items()]
    return (f'benchmarks/{commit}.json',
            {'environment': {'commit': commit},
             'families': [{'name': 'trees', 'tables': [{'columns': ['size', 'ours/naive marg'], 'rows': rows}]}]})
  read = render._trees_ratio('ours/naive marg')
  newest_first = [report('c3', {'32x200': 3.0}), report('c2', {'512x32': 2.0, '64x64': 2.5}),
                  report('c1', {'512x32': 1.0, '64x64': 1.5, '32x200': 1.75})]
  assert render._speed_cell(read, 'trees', newest_first) == '2.00 (report c2) / 2.50 (report c2) / 3.00'
  assert render._speed_cell(read, 'trees', newest_first[1:]) == '2.00 / 2.50 / 1.75 (report c1)'
  assert render._speed_cell(read, 'trees', newest_first[2:]) == '1.00 / 1.50 / 1.75'
  assert render._speed_cell(read, 'trees', newest_first[:1]) == '-'  # 512x32 and 64x64 in no report
  assert render._speed_cell(read, 'liu_lapata', newest_first) == '-'


LINK = re.compile(r'\]\(([^)\s]+)\)')


def test_the_pages_point_nowhere_outside_the_repository(render):
  """No link leaves the repository; `../shared` only names the configs' default data folder (configs.md)."""
  for path in render.pages():
    text = _read(path)
    rel = os.path.relpath(path, ROOT)
    assert '/work/shared' not in text, rel  # the shared folder by its absolute path
    for target in LINK.findall(text):
      if re.match(r'[a-z]+:', target) or target.startswith('#'):
        continue
      resolved = os.path.normpath(os.path.join(os.path.dirname(path), target.split('#')[0]))
      assert resolved.startswith(ROOT + os.sep), f'{rel} links outside the repository: {target}'
    for line in text.splitlines():
      if '../shared' not in line:
        continue
      if rel.startswith(os.path.join('docs', 'decisions')):
        # records keep their commands as they were run, on the default data folder
        assert '../shared/' not in line.replace('../shared/data', ''), f'{rel}: {line}'
      else:
        assert rel == os.path.join('docs', 'configs.md'), f'{rel} points outside the repository: {line}'


def test_the_local_intersphinx_inventories_hold_the_names_the_docs_link():
  """docs/conf.py reads JAX / Flax / Optax inventories from docs/_inventories (the build has no internet)."""
  inventory = pytest.importorskip('sphinx.util.inventory', reason='needs the docs extra')
  for name, wanted in (('jax', ('jax.Array', 'jax.distributed.initialize', 'jax.lax.pmean')),
                       ('flax', ('flax.linen.Module',)), ('optax', ('optax.GradientTransformation',))):
    path = os.path.join(DOCS, '_inventories', f'{name}.inv')
    with open(path, 'rb') as f:
      data = inventory.InventoryFile.load(f, f'https://example.org/{name}/', os.path.join)
    names = {entry for entries in data.values() for entry in entries}
    assert set(wanted) <= names, (name, set(wanted) - names)


def test_the_readme_results_are_in_the_records_they_link():
  """Each 'ours' figure of the README's results table appears in the run record linked on its row."""
  text = _read(os.path.join(ROOT, 'README.md'))
  section = text[text.index('## Results'):text.index('## Speed')]
  rows = [line for line in section.splitlines() if line.startswith('| [')]
  assert len(rows) == 6
  for row in rows:
    cells = [c.strip() for c in row.strip('|').split('|')]
    ours, record = cells[3], LINK.findall(cells[5])[0]
    record_text = _read(os.path.join(ROOT, record))
    for figure in re.findall(r'\d+\.\d+', ours):
      assert re.search(rf'\b{re.escape(figure)}\b', record_text), (figure, record)
