"""Errors a user causes (a config key or value, a file, a data format), as opposed to our bugs.

Every layer may raise these (this module imports nothing of the package, so `data` and `viz` can use
it too). The launchers (`launch/_errors.py`) print a `UserError` as one line on stderr and exit with
status 2; any other exception is a bug and keeps its traceback. A message is one line that says what
is wrong, where (file:line, `config.<key>`) and what to do. The classes::

  UserError          base class
  ConfigError        a config key or value (also a ValueError, as config validation always raised)
  ConfigTypeError    a config value of the wrong type (also a TypeError)
  ConfigKeyError     a dotted key the config does not have (also a KeyError); `unknown_key` builds it
                     with the closest valid keys (difflib) and the valid keys of the parent section
  WorkdirError       a path a run must write cannot be written (a read-only or full disk, a file
                     where a folder must be, a workdir another run holds); `disk_error` builds it
                     from the OSError of a read-only file system, a full disk or an exceeded quota
  NotSavedError      a result was computed but could not be saved (`.result` holds it)
"""
from __future__ import annotations

import difflib
import errno
import os
import re
from typing import Any, Iterable, Mapping


class UserError(Exception):
  """An error in what the user gave us (config, flags, files), with a message saying what to do."""


class ConfigError(UserError, ValueError):
  """A config key or value is wrong (the message names `config.<key>`)."""


class ConfigTypeError(ConfigError, TypeError):
  """A config value has the wrong type (also a TypeError)."""


class ConfigKeyError(ConfigError, KeyError):
  """A config key does not exist.

  A KeyError (what `ConfigDict` lookups raise) and a ValueError (what config validation raises);
  `str()` is the message itself, not KeyError's quoted repr.
  """

  def __str__(self) -> str:
    return str(self.args[0]) if self.args else ''


class WorkdirError(UserError):
  """A path the run must write cannot be written; the message names it and what to do."""


class NotSavedError(WorkdirError):
  """A result was computed but could not be written; `result` holds it (the launcher prints it)."""

  def __init__(self, message: str, result: Any):
    super().__init__(message)
    self.result = result


# errno -> what to do, for the file-system faults a user fixes outside the program.
_DISK_FAULTS = {
    errno.EROFS: 'the file system is read-only: use a folder on a writable disk (or remount it '
                 'read-write)',
    errno.ENOSPC: 'the disk is full: free space there (e.g. old runs) or use a folder on another disk',
    errno.EDQUOT: 'the disk quota is exceeded: free space there or use a folder on another disk',
}


def disk_error(error: BaseException, path: str | None = None) -> WorkdirError | None:
  """The `WorkdirError` for an OSError of a read-only file system, a full disk or an exceeded quota.

  Args:
    error: any exception; an OSError whose errno is EROFS, ENOSPC or EDQUOT is a disk fault, and so
      is the error of a checkpoint write that says so (tensorstore's `[os_error_code='28']`, naming
      the checkpoint folder).
    path: the path to name when the error names none (e.g. the workdir).

  Returns:
    `WorkdirError('<path>: cannot write (<reason>): <what to do>')`, or None for any other error.
  """
  number, where = getattr(error, 'errno', None), getattr(error, 'filename', None)
  if not isinstance(error, OSError):
    code = re.search(r"os_error_code='(\d+)'", str(error))
    number = int(code.group(1)) if code else None
    file = re.search(r'local file "([^"]+)"', str(error))
    where = file and os.path.dirname(file.group(1).split('.orbax-checkpoint-tmp')[0])
  if number not in _DISK_FAULTS:
    return None
  return WorkdirError(f'{where or path or "a file"}: cannot write ({os.strerror(number)}): '
                      f'{_DISK_FAULTS[number]}')


def _keys(node: Any) -> list[str] | None:
  """The keys of a mapping-like config node (ConfigDict, dict), or None for a leaf."""
  if isinstance(node, Mapping):
    return [str(k) for k in node.keys()]
  keys = getattr(node, 'keys', None)
  if callable(keys) and hasattr(node, '__getitem__'):
    try:
      return [str(k) for k in keys()]
    except Exception:  # pylint: disable=broad-except  (a lazy or locked node: no keys to offer)
      return None
  return None


def _dotted_keys(node: Any, prefix: str = '') -> Iterable[str]:
  keys = _keys(node)
  for key in keys or ():
    name = f'{prefix}{key}'
    yield name
    yield from _dotted_keys(node[key], name + '.')


def unknown_key(config: Any, dotted: str, *, where: str = 'config',
                note: str = '') -> ConfigKeyError | None:
  """The error for a dotted key that `config` lacks, or None when the key exists.

  Args:
    config: a ConfigDict or nested dict.
    dotted: a key such as `train.nope` (relative to `config`).
    where: how the user wrote the root (`config`, `config.data`, `--config`): the message names
      `{where}.{dotted}`.
    note: said right after the key (e.g. `(the sst loader has no such key)`).

  Returns:
    A `ConfigKeyError` whose one-line message names the key, the closest existing dotted keys
    (difflib) and the valid keys of the deepest section that exists; None when `dotted` exists.
  """
  node, parts = config, dotted.split('.')
  for i, part in enumerate(parts):
    keys = _keys(node)
    if keys is None or part not in keys:
      section = '.'.join([where] + parts[:i])
      message = f'unknown config key {where}.{dotted}' + (f' {note}' if note else '')
      if keys is None:
        message += f' ({section} is a value, not a section)'
      close = _closest(config, parts, i, keys) if keys is not None else []
      if close:
        message += '; did you mean ' + ' or '.join(f'{where}.{c}' for c in close) + '?'
      if keys:
        message += f'; valid keys of {section}: {", ".join(sorted(keys))}'
      return ConfigKeyError(message)
    node = node[part]
  return None


def _closest(config: Any, parts: list[str], i: int, keys: list[str]) -> list[str]:
  """Existing dotted keys closest to `parts` (wrong from `parts[i]` on): a sibling spelt alike
  (`trian.num_steps` -> `train.num_steps`), else any key spelt alike, never an ancestor of it."""
  everything = set(_dotted_keys(config))
  close = []
  for sibling in difflib.get_close_matches(parts[i], keys, n=3, cutoff=0.6):
    fixed = '.'.join(parts[:i] + [sibling] + parts[i + 1:])
    close.append(fixed if fixed in everything else '.'.join(parts[:i] + [sibling]))
  if close:
    return close
  dotted = '.'.join(parts)
  candidates = [k for k in everything if not dotted.startswith(k + '.')]
  return difflib.get_close_matches(dotted, candidates, n=3, cutoff=0.6)
