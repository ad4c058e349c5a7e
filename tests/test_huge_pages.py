"""launch/_huge_pages.py: when a launcher re-executes itself with glibc's huge pages, and that it does
so once, in the same process, keeping the user's other tunables and never overriding their choice."""
import os
import subprocess
import sys
import textwrap

import pytest

from launch import _errors
from launch import _huge_pages

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize('current, glibc, thp, expected', [
    (None, (2, 36), 'madvise', 'glibc.malloc.hugetlb=1'),
    ('', (2, 35), 'always', 'glibc.malloc.hugetlb=1'),
    ('glibc.malloc.arena_max=2', (2, 36), 'madvise', 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1'),
    ('glibc.malloc.hugetlb=0', (2, 36), 'madvise', None),  # the user's choice wins
    ('glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1', (2, 36), 'madvise', None),
    (None, (2, 34), 'madvise', None),  # no such tunable before glibc 2.35
    (None, None, 'madvise', None),  # not glibc (musl, macOS)
    (None, (2, 36), 'never', None),
    (None, (2, 36), None, None),  # no transparent huge pages in this kernel
])
def test_tunables_with_huge_pages(current, glibc, thp, expected):
  assert _huge_pages.tunables_with_huge_pages(current, glibc, thp) == expected


@pytest.mark.parametrize('argv, expected', [
    (['python', '-m', 'launch.train', '--workdir=w'], True),
    (['/usr/bin/python3', '-u', '-X', 'importtime', '-m', 'launch.benchmark', 'trees'], True),
    (['python', '-mlaunch.evaluate'], True),
    (['python', 'launch/train.py', '--config=c.py'], True),
    (['python', '/home/u/jax-structured/launch/parse.py'], True),
    (['python', '-m', 'pytest', '-q'], False),
    (['python', '-c', 'import launch.train'], False),
    (['python'], False),
    (['python', 'train.py'], False),
    (['python', '-m', 'launcher.train'], False),
    (['python', '-W', 'ignore', 'notebook.py'], False),
])
def test_is_launcher_command(argv, expected):
  assert _huge_pages.is_launcher_command(argv) is expected


def test_errors_run_sets_up_the_process_first(monkeypatch):
  """Every launcher's entry point (`_errors.run`) asks for huge pages before parsing anything."""
  class Called(Exception):
    pass

  def record():
    raise Called

  monkeypatch.setattr(_huge_pages, 'use_huge_pages', record)
  with pytest.raises(Called):
    _errors.run(lambda argv: None, argv=['prog'])


# A stand-in launcher (`<dir>/launch/probe.py`) that reports its process id and variable twice.
_PROBE = textwrap.dedent(f"""
    import os, sys
    sys.path.insert(0, {REPO!r})
    from launch import _huge_pages
    print('before', os.getpid(), os.environ.get('GLIBC_TUNABLES'), flush=True)
    _huge_pages.use_huge_pages()
    print('after', os.getpid(), os.environ.get('GLIBC_TUNABLES'), flush=True)
""")


def _run_probe(tmp_path, tunables):
  probe = tmp_path / 'launch' / 'probe.py'
  probe.parent.mkdir(exist_ok=True)
  probe.write_text(_PROBE)
  env = {k: v for k, v in os.environ.items() if k != 'GLIBC_TUNABLES'}
  if tunables is not None:
    env['GLIBC_TUNABLES'] = tunables
  out = subprocess.run([sys.executable, str(probe)], env=env, capture_output=True, text=True,
                       timeout=60, check=True).stdout
  return [line.split(' ', 2) for line in out.splitlines()]


def _supported():
  return _huge_pages.tunables_with_huge_pages(
      None, _huge_pages._glibc_version(), _huge_pages._thp_mode()) is not None  # pylint: disable=protected-access


@pytest.mark.skipif(sys.platform != 'linux' or not _supported(),
                    reason='needs Linux with glibc >= 2.35 and transparent huge pages not "never"')
def test_launcher_reexecutes_once_in_the_same_process(tmp_path):
  lines = _run_probe(tmp_path, 'glibc.malloc.arena_max=4')
  pid = lines[0][1]
  assert lines == [['before', pid, 'glibc.malloc.arena_max=4'],
                   ['before', pid, 'glibc.malloc.arena_max=4:glibc.malloc.hugetlb=1'],
                   ['after', pid, 'glibc.malloc.arena_max=4:glibc.malloc.hugetlb=1']]


def test_users_choice_is_never_reexecuted(tmp_path):
  lines = _run_probe(tmp_path, 'glibc.malloc.hugetlb=0')
  assert [line[0] for line in lines] == ['before', 'after']
  assert lines[1][2] == 'glibc.malloc.hugetlb=0'
