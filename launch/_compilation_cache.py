"""The launchers' persistent XLA compilation cache: a resumed or repeated run loads its programs.

    from launch import _compilation_cache      # defines --compilation_cache_dir
    def main(argv):
      _compilation_cache.enable()              # before the first JAX operation

Every padded batch shape compiles its own train and eval programs, and on a CPU a model with a latent
tree compiles each in minutes (Yu et al.'s pair models: ~25 shapes, 9-40 min before the first 50
steps). JAX's persistent cache (`jax_compilation_cache_dir`) writes each compiled program to disk and
loads it when the same program is compiled again: after a resume, by `launch.evaluate` on the same
workdir's shapes, by the next run of the same config. The cache key is the program and the compile
options (XLA flags, backend, JAX version), so a stale entry is never used.

Directory: `--compilation_cache_dir`, else `$JAX_COMPILATION_CACHE_DIR` (JAX's own variable), else
`$XDG_CACHE_HOME/jax_structured/xla` (`~/.cache/jax_structured/xla`). `--compilation_cache_dir=`
(empty) turns it off. Programs that compile in under a second are not written (JAX's
`jax_persistent_cache_min_compile_time_secs`); the default folder is capped at `MAX_SIZE_BYTES`,
least recently used entries removed first (a folder the user names follows their JAX settings:
JAX leaves it uncapped unless `JAX_COMPILATION_CACHE_MAX_SIZE` says otherwise, and a capped writer
cannot share a folder with uncapped ones). `launch.benchmark` never uses it (its compile columns are
compiles).
"""
from __future__ import annotations

import importlib.util
import os
import pathlib

from absl import flags
from absl import logging

from jax_structured import errors

ENVIRONMENT_VARIABLE = 'JAX_COMPILATION_CACHE_DIR'
MAX_SIZE_BYTES = 4 * 1024 ** 3

COMPILATION_CACHE_DIR = flags.DEFINE_string(
    'compilation_cache_dir', None,
    'Persistent XLA compilation cache (compiled programs are loaded, not recompiled, when a run '
    f'resumes or repeats); default ${ENVIRONMENT_VARIABLE}, else ~/.cache/jax_structured/xla; empty '
    'turns it off.')


def _chosen_directory() -> tuple[str, str | None]:
  """(directory, where the user named it: the flag or the JAX variable; None for our default folder
  `$XDG_CACHE_HOME/jax_structured/xla`, ~/.cache by default)."""
  if COMPILATION_CACHE_DIR.value is not None:
    return COMPILATION_CACHE_DIR.value, '--compilation_cache_dir'
  if os.environ.get(ENVIRONMENT_VARIABLE):
    return os.environ[ENVIRONMENT_VARIABLE], f'${ENVIRONMENT_VARIABLE}'
  cache_home = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
  return os.path.join(cache_home, 'jax_structured', 'xla'), None


def enable() -> str | None:
  """Points JAX's persistent compilation cache at the chosen directory (see the module docstring).

  Call at the start of a launcher's `main`, before the first JAX operation (JAX fixes its cache when it
  first compiles).

  Returns:
    the directory in use, or None when the cache is off (an empty flag, or the default directory
    cannot be created: a warning then, and the run compiles as without a cache).

  Raises:
    errors.UserError: a directory given by the flag or by $JAX_COMPILATION_CACHE_DIR cannot be
      created or written (named, with what to do).
  """
  import jax  # pylint: disable=g-import-not-at-top
  if COMPILATION_CACHE_DIR.value == '':  # pylint: disable=g-explicit-bool-comparison
    jax.config.update('jax_enable_compilation_cache', False)
    return None
  name, source = _chosen_directory()
  directory = pathlib.Path(name).expanduser()
  try:
    directory.mkdir(parents=True, exist_ok=True)
    if not os.access(directory, os.W_OK | os.X_OK):
      raise PermissionError(f'{directory} is not writable')
  except OSError as e:
    if source is not None:
      raise errors.UserError(
          f'{source}={str(directory)!r}: cannot use it as the compilation cache ({e}); name a '
          'writable directory, or pass --compilation_cache_dir= to compile without a cache') from e
    logging.warning('no compilation cache (%s: %s); pass --compilation_cache_dir=DIR to keep '
                    'compiled programs between runs', directory, e)
    jax.config.update('jax_enable_compilation_cache', False)
    return None
  jax.config.update('jax_enable_compilation_cache', True)
  jax.config.update('jax_compilation_cache_dir', str(directory))
  if source is None:
    # Only our own folder is capped: JAX's capped cache needs an access-time file beside every entry
    # and fails every write (a warning each) in a folder that an uncapped writer, JAX's default, has
    # filled; a folder the user names keeps their JAX settings (JAX_COMPILATION_CACHE_MAX_SIZE).
    if importlib.util.find_spec('filelock') is not None:  # JAX locks a capped cache with it
      jax.config.update('jax_compilation_cache_max_size', MAX_SIZE_BYTES)
    else:
      logging.warning('the compilation cache in %s is not size-capped: the filelock package is '
                      'missing (pip install filelock)', directory)
  return str(directory)
