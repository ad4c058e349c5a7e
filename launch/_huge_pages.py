"""Transparent huge pages for the launchers' large host allocations (glibc's `glibc.malloc.hugetlb`).

Why. XLA on the CPU allocates the temporaries of one call of a compiled program as one block and
frees it when the call returns. glibc serves a block above its mmap threshold (at most 32 MiB) with a
fresh `mmap` and returns it with `munmap`, so every page a call touches is faulted in and zeroed
again, on every call. With 4 KiB pages that is most of the gap between a program and a smaller one:
value + gradient through `trees.marginals` at 32 x 200 (108 MiB of temporaries) took 13k minor faults
a call, a third of its time in the kernel, 1.72-1.78x the same LU without the exact fallback (whose
24 MiB block stays in glibc's heap); a training step of the latent-tree relation network at 32 x 32
(253 MiB) 65k faults. With `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` (glibc >= 2.35) glibc asks the
kernel for transparent huge pages on those mappings (`madvise`), 2 MiB per fault: the same calls took
0.5k faults, 0.68-0.72x the time (1.17-1.19x the LU alone), the relation network's step 0.5k faults
and 0.82-0.84x the time, a BiLSTM-max step (51 MiB) 0.68-0.80x (one core, OPENBLAS_NUM_THREADS=1,
two A/B pairs each, 2026-11-29; where no call passes 32 MiB nothing changed beyond noise).

How. glibc reads the tunable once, when the process starts, so `use_huge_pages()` re-executes the
launcher (`os.execve`: same process id, arguments, standard streams) with `glibc.malloc.hugetlb=1`
added to `GLIBC_TUNABLES`, before any JAX work. Nothing happens when `GLIBC_TUNABLES` already names
`glibc.malloc.hugetlb` (the user's value wins: `GLIBC_TUNABLES=glibc.malloc.hugetlb=0` turns this
off), on a system without glibc >= 2.35 or with transparent huge pages disabled, or when the process
is not a launcher run (`python -m launch.<name>` or `python launch/<name>.py`: the library, notebooks
and the test runner are never re-executed); if `execve` fails, the run goes on without it. Like the
compilation cache (`_compilation_cache.py`), this is a launcher's process setting: importing
`jax_structured` changes nothing (notebook users can start Jupyter with the variable set).
"""
from __future__ import annotations

import os
import pathlib
import platform
import sys
from typing import Sequence

TUNABLE = 'glibc.malloc.hugetlb'
ENVIRONMENT_VARIABLE = 'GLIBC_TUNABLES'
# glibc's first release with the tunable.
_FIRST_GLIBC = (2, 35)
_THP_SETTING = pathlib.Path('/sys/kernel/mm/transparent_hugepage/enabled')


def tunables_with_huge_pages(current: str | None, glibc_version: tuple[int, int] | None,
                             thp_mode: str | None) -> str | None:
  """The `GLIBC_TUNABLES` value to re-execute with, or None to leave the process as it is.

  Args:
    current: the variable's value now (None: unset).
    glibc_version: (major, minor) of the C library, None if it is not glibc.
    thp_mode: the kernel's transparent huge page mode ('always', 'madvise', 'never'), None if unknown.
  """
  if glibc_version is None or glibc_version < _FIRST_GLIBC or thp_mode not in ('always', 'madvise'):
    return None
  entries = [entry for entry in (current or '').split(':') if entry]
  if any(entry.split('=', 1)[0] == TUNABLE for entry in entries):
    return None
  return ':'.join(entries + [f'{TUNABLE}=1'])


def is_launcher_command(orig_argv: Sequence[str]) -> bool:
  """Whether the interpreter's command line runs one of this package's launchers.

  `python [options] -m launch.<name> ...` or `python [options] <dir>/launch/<name>.py ...`; not
  `python -c ...`, `python -m pytest ...`, an interactive session or a notebook kernel.
  """
  args = list(orig_argv[1:])
  while args:
    arg = args.pop(0)
    if arg == '-m':
      return bool(args) and args[0].startswith('launch.')
    if arg.startswith('-m'):
      return arg[2:].startswith('launch.')
    if arg == '-' or arg.startswith('-c'):  # stdin, -c CODE / -cCODE
      return False
    if arg in ('-X', '-W', '--check-hash-based-pycs'):
      args = args[1:]  # the option's value
      continue
    if arg.startswith('-'):
      continue
    path = pathlib.Path(arg)
    return path.suffix == '.py' and path.parent.name == 'launch'
  return False


def _glibc_version() -> tuple[int, int] | None:
  library, version = platform.libc_ver()
  if library != 'glibc':
    return None
  try:
    major, minor = version.split('.')[:2]
    return int(major), int(minor)
  except ValueError:
    return None


def _thp_mode() -> str | None:
  """The bracketed word of /sys/kernel/mm/transparent_hugepage/enabled, e.g. 'madvise'."""
  try:
    text = _THP_SETTING.read_text()
  except OSError:
    return None
  start, end = text.find('['), text.find(']')
  return text[start + 1:end] if 0 <= start < end else None


def use_huge_pages() -> None:
  """Re-executes this launcher with glibc's huge pages for large allocations (module docstring);
  returns only when nothing is to be done or `execve` failed."""
  if sys.platform != 'linux' or not sys.executable or not is_launcher_command(sys.orig_argv):
    return
  value = tunables_with_huge_pages(os.environ.get(ENVIRONMENT_VARIABLE), _glibc_version(), _thp_mode())
  if value is None:
    return
  sys.stdout.flush()
  sys.stderr.flush()
  try:
    os.execve(sys.executable, list(sys.orig_argv), dict(os.environ, **{ENVIRONMENT_VARIABLE: value}))
  except OSError:
    return
