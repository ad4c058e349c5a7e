"""One place where the launchers turn the user's mistakes into one message and exit status 2.

    from launch import _errors
    if __name__ == '__main__':
      _errors.run(main)                  # instead of absl's app.run(main)

Errors the user causes end in `error: <message>` on stderr and exit status 2, without a traceback
(`--verbosity=1` prints it too). They are:
- flags: an unknown flag, a bad flag value, a missing required flag, unexpected arguments;
- config files and keys: a config file that does not exist, fails to import (a syntax error, a
  missing module: named by file:line) or whose `get_config()` fails, whatever flags come with it,
  `--config.<key>=...` for a key the config does not have (named with the closest valid keys and the
  valid keys of its section), a value of the wrong type;
- `jax_structured.errors.UserError` and its subclasses (`ConfigError`, the data `FormatError`),
  `training.CheckpointError` (a damaged checkpoint, a workdir of another config, a failed save),
  `training.DeviceMemoryError` (out of accelerator memory: it names the batch shapes and the keys
  bounding them);
- missing files and workdirs (`FileNotFoundError`, `NotADirectoryError`, `IsADirectoryError`,
  `PermissionError`); a read-only file system, a full disk or an exceeded quota (`errors.disk_error`:
  the path and what to do); a workdir another run holds or a file given as one (`WorkdirError`);
- a ValueError / KeyError / TypeError whose message names a `config.<key>` (config validation of
  every layer names the key it rejects), and a KeyError / AttributeError raised inside ml_collections
  (a key the running code needs and the config lacks).
Anything else is a bug: absl prints its traceback and the exit status is 1.

Interruptions are not errors: training stopped by SIGINT / SIGTERM (`training.interrupts.Interrupted`)
prints its one line (where it saved, the command that resumes) and exits 128 + the signal (130 for
SIGINT, 143 for SIGTERM); a Ctrl-C anywhere else (`KeyboardInterrupt`: flag parsing, loading data,
the first compile, the final evaluation) prints `interrupted (SIGINT)` and exits 130, and so does a
SIGTERM there (`interrupted (SIGTERM)`, exit 143): `run` makes SIGTERM raise `Terminated` from the
moment the launcher starts.

Nothing here imports JAX: a mistake on the command line is reported before any heavy import.
"""
from __future__ import annotations

import difflib
import functools
import glob
import os
import re
import signal
import sys
import threading
import traceback
from typing import Callable, Sequence

from absl import app
from absl import flags
from ml_collections.config_flags import config_flags

from jax_structured import errors
from launch import _huge_pages

EXIT_USER_ERROR = 2
EXIT_SIGINT = 130  # 128 + SIGINT, what a shell reports for a process Ctrl-C ended
EXIT_SIGTERM = 143  # 128 + SIGTERM (a scheduler preempting the job, `kill`)

# Library errors that are the user's to act on but are not `UserError`s (module, class): looked up
# in sys.modules only, so that nothing heavy is imported here (when one is raised, its module is loaded).
_LIBRARY_USER_ERRORS = (('jax_structured.training.checkpoints', 'CheckpointError'),
                        ('jax_structured.training.assembly', 'DeviceMemoryError'))
# Training stopped on a signal, with its step saved (looked up like the errors above).
_INTERRUPTED = ('jax_structured.training.interrupts', 'Interrupted')
# File errors a user causes by naming a path (a missing workdir, config, data folder, input file).
_FILE_ERRORS = (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)
# A message that names a config key, e.g. "config.optimizer.name='rmsprop' is not one of ...".
_NAMES_CONFIG_KEY = re.compile(r'(?<![\w.])config\.[A-Za-z_]\w*')


def run(main: Callable[[list[str]], object], *, argv: Sequence[str] | None = None,
        argv_filter: Callable[[list[str]], list[str]] | None = None) -> None:
  """`absl.app.run(main)` with the user's mistakes reported as one message and exit status 2.

  Args:
    main: the launcher's `main(argv)`.
    argv: the command line (default `sys.argv`).
    argv_filter: `argv -> argv` applied before the flags are parsed (a launcher that takes some
      arguments out of absl's hands, e.g. `launch.train`'s data overrides under
      `--text_classification_dir`); its `UserError`s are reported like any other.

  A launcher run (`python -m launch.<name>`) first re-executes itself with glibc's transparent huge
  pages for large allocations where that applies (`launch/_huge_pages.py`).
  """
  previous = _stop_on_sigterm()  # from the start: loading data or compiling, one line on SIGTERM
  try:
    # Before any JAX work: a launcher run may re-execute itself once with glibc's huge pages.
    _huge_pages.use_huge_pages()
    argv = list(sys.argv if argv is None else argv)
    app.run(_guarded(main), argv=argv, flags_parser=functools.partial(_parse_flags, argv_filter))
  except KeyboardInterrupt as e:  # a signal while the flags were parsed
    _stop_interrupted(e)
  finally:  # a caller that goes on (a test) gets its handler back
    if previous is not None:
      signal.signal(signal.SIGTERM, previous)


class Terminated(KeyboardInterrupt):
  """SIGTERM outside the training loop (which saves its step on SIGTERM: `training.interrupts`).

  A KeyboardInterrupt, as SIGINT raises there: code that cleans up after a Ctrl-C does after a
  SIGTERM too, and `except Exception` does not catch it.
  """


def _raise_terminated(signum, frame):
  del signum, frame
  raise Terminated()


def _stop_on_sigterm():
  """Makes SIGTERM raise `Terminated` (as SIGINT raises KeyboardInterrupt), in the main thread, unless
  the process was told to ignore it (or handles it itself); returns the handler it replaced, or None."""
  if (threading.current_thread() is threading.main_thread()
      and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
    return signal.signal(signal.SIGTERM, _raise_terminated)
  return None


def _stop_interrupted(error: KeyboardInterrupt):
  """One line for a SIGINT / SIGTERM that came outside the training loop; exit 130 / 143."""
  if isinstance(error, Terminated):
    _stop('interrupted (SIGTERM)', EXIT_SIGTERM)
  _stop('interrupted (SIGINT)', EXIT_SIGINT)


def fail(message: str, error: BaseException | None = None, argv: Sequence[str] | None = None):
  """Prints `error: message` on stderr (after the traceback of `error` under --verbosity >= 1), exits 2."""
  if error is not None and _verbosity(argv) >= 1:
    traceback.print_exception(error)
  sys.stdout.flush()
  print(f'error: {message}', file=sys.stderr, flush=True)
  sys.exit(EXIT_USER_ERROR)


def user_message(error: BaseException) -> str | None:
  """The message to print for a user's mistake, or None when `error` is a bug (keep its traceback)."""
  if isinstance(error, errors.UserError):
    return str(error)
  for module, name in _LIBRARY_USER_ERRORS:
    cls = getattr(sys.modules.get(module), name, None)
    if cls is not None and isinstance(error, cls):
      return str(error)
  if isinstance(error, app.UsageError):
    return f'{error} (--helpshort lists the flags)'
  disk = errors.disk_error(error)
  if disk is not None:
    return str(disk)
  if isinstance(error, _FILE_ERRORS):
    if error.filename is not None and error.strerror:
      return f'{error.filename}: {error.strerror}'
    return str(error)
  text = _text(error)
  if isinstance(error, (ValueError, KeyError, TypeError)) and _NAMES_CONFIG_KEY.search(text):
    return text
  if isinstance(error, (KeyError, AttributeError)) and _raised_in_ml_collections(error):
    key = text.strip('\'" ')
    return (f'the config has no key {key!r} that {_caller(error)} reads: add it to the config file '
            '(its loader or model lists the valid keys), or use a config written for this model')
  return None


def checkpoint(value: str) -> int | str:
  """The `--checkpoint` flag of the launchers that restore a workdir: 'best', 'latest' or a step."""
  if value.isdigit():
    return int(value)
  if value in ('best', 'latest'):
    return value
  raise errors.UserError(f"--checkpoint={value}: expected 'best', 'latest' or a step number")


def _text(error: BaseException) -> str:
  """`str(error)`, without KeyError's quotes around a single message."""
  if isinstance(error, KeyError) and len(error.args) == 1 and isinstance(error.args[0], str):
    return error.args[0]
  return str(error)


def _frames(error: BaseException):
  return traceback.extract_tb(error.__traceback__)


def _raised_in_ml_collections(error: BaseException) -> bool:
  frames = _frames(error)
  return bool(frames) and f'{os.sep}ml_collections{os.sep}' in frames[-1].filename


def _caller(error: BaseException) -> str:
  """`file:line` of the innermost frame outside ml_collections (the code that read the key)."""
  for frame in reversed(_frames(error)):
    if f'{os.sep}ml_collections{os.sep}' not in frame.filename:
      return f'{os.path.relpath(frame.filename)}:{frame.lineno}'
  return 'the launcher'


def _guarded(main):
  @functools.wraps(main)
  def wrapped(argv):
    try:
      return main(argv)
    except KeyboardInterrupt as e:
      _stop_interrupted(e)
    except Exception as e:  # pylint: disable=broad-except  (bugs are re-raised below)
      interrupted = getattr(sys.modules.get(_INTERRUPTED[0]), _INTERRUPTED[1], None)
      if interrupted is not None and isinstance(e, interrupted):
        _stop(str(e), e.exit_status)
      message = user_message(e)
      if message is None:
        raise
      fail(message, e)
  return wrapped


def _stop(line: str, status: int):
  """Prints `line` on stderr and exits with `status` (an interruption: no `error:`, no traceback)."""
  sys.stdout.flush()
  print(line, file=sys.stderr, flush=True)
  sys.exit(status)


# --------------------------------------------------------------------------------------------------
# Flags and config files

def _parse_flags(argv_filter, argv: list[str]) -> list[str]:
  """absl's flag parsing, with its errors and config_flags' errors as one message each."""
  argv = list(argv)
  try:
    if argv_filter is not None:
      argv = argv_filter(argv)
      sys.argv = argv  # config_flags reads the overrides from sys.argv
    rest = flags.FLAGS(argv)
  except Exception as e:  # pylint: disable=broad-except  (bugs are re-raised below)
    message = _flag_error_message(e, argv)
    if message is None:
      raise
    fail(message, e, argv)
  for name in _config_flag_names():
    problem = _config_file_problem(name, argv)
    if problem is not None:
      fail(*problem, argv)
  return rest


def _config_flag_names() -> list[str]:
  return [name for name in flags.FLAGS if config_flags.is_config_flag(flags.FLAGS[name])]


def _flag_error_message(error: Exception, argv: Sequence[str]) -> str | None:
  """The message for an error raised while parsing the command line, or None for a bug."""
  if isinstance(error, errors.UserError):  # e.g. from a launcher's argv_filter
    return str(error)
  for name in _config_flag_names():  # a config file that is missing or fails, whatever comes with it
    problem = _config_file_problem(name, argv, error)
    if problem is not None:
      return problem[0]
  for name in _config_flag_names():
    unknown = _unknown_override(name, argv)
    if unknown is not None:
      return str(unknown)
  if isinstance(error, flags.Error):
    return f'{error} (--helpshort lists the flags)'
  return user_message(error)


def _flag_value(name: str, argv: Sequence[str]) -> str | None:
  """The last value of `--name=V` / `--name V` / `-name=V` in argv."""
  value = None
  for i, arg in enumerate(argv):
    match = re.fullmatch(rf'--?{re.escape(name)}(?:=(.*))?', arg, re.S)
    if match:
      value = match.group(1) if match.group(1) is not None else (argv[i + 1] if i + 1 < len(argv)
                                                                 else None)
  return value


def _overrides(name: str, argv: Sequence[str]) -> list[str]:
  """The dotted keys of `--name.<key>[=V]` / `--noname.<key>` in argv, in order."""
  keys = []
  for arg in argv:
    match = re.match(rf'--?(?:no)?{re.escape(name)}\.([^=\s]+)', arg)
    if match and match.group(1) not in keys:
      keys.append(match.group(1))
  return keys


def _unknown_override(name: str, argv: Sequence[str]) -> errors.ConfigKeyError | None:
  """The error for the first `--name.<key>` override whose key the config file does not have."""
  keys = _overrides(name, argv)
  path = _flag_value(name, argv)
  if not keys or not path:
    return None
  try:
    config = flags.FLAGS[name].parser.parse(path)
    for key in keys:
      error = errors.unknown_key(config, key, where=name)
      if error is not None:
        return error
  except Exception:  # pylint: disable=broad-except  (the config itself fails: reported elsewhere)
    return None
  return None


def _config_file_problem(name: str, argv: Sequence[str], error: BaseException | None = None):
  """(message, error) when `--name` names a config file that is missing or fails to load, else None.

  Args:
    name: a config flag (`config`).
    argv: the command line.
    error: what parsing the command line raised, or None when it succeeded (then a config file that
      could not be read left an `_ErrorConfig` as the flag's value, which raises on any access).
      A missing file is reported whatever was raised: with `--config.<key>=...` overrides, absl
      raises while applying them to the config that could not be loaded.

  Loading fails when the file does not exist, when importing it raises (a syntax error, a missing
  import: named by its file:line), or when its `get_config()` raises.
  """
  given = _flag_value(name, argv)
  if not given:
    return None
  path = given.split(':', 1)[0]
  if error is None:
    value = flags.FLAGS[name].value
    if value is None or type(value).__name__ != '_ErrorConfig':
      return None
    try:
      value.keys()  # an _ErrorConfig raises its load error on any access
    except OSError as e:
      error = e
    else:
      return None
  if not os.path.isfile(path):
    return _missing_config_message(name, path), error
  cause = _config_load_failure(error, path)
  if cause is None:
    return None
  return f'--{name}={given}: {cause}', error


def _config_load_failure(error: BaseException, path: str) -> str | None:
  """What failed when `error` was raised loading the config file `path` (its import, or its
  `get_config()`), with the file:line where it was raised; None when `error` is something else."""
  for e in _chain(error):
    text = str(e)
    if 'Error whilst parsing config file' in text:  # get_config() raised a TypeError / ValueError
      lines = [line.strip() for line in text.splitlines() if line.strip()]
      where = [f'{path}:{m.group(1)}' for m in re.finditer(
          rf'File "{re.escape(os.path.abspath(path))}", line (\d+)', text)]
      return 'get_config() failed' + (f' at {where[-1]}' if where else '') + f': {lines[-1]}'
    if isinstance(e, OSError) and 'Failed loading config file' in text:  # ml_collections' own
      return f'could not be loaded: {[l for l in text.splitlines() if l.strip()][-1].strip()}'
    if any(f.name == 'parse' and f.filename.endswith(os.path.join('config_flags', 'config_flags.py'))
           for f in _frames(e)):  # raised importing the file or in its get_config()
      where = [f'{path}:{f.lineno}' for f in _frames(e) if _same_file(f.filename, path)]
      if isinstance(e, SyntaxError) and _same_file(e.filename or '', path):
        where, text = [f'{path}:{e.lineno}'], e.msg
      text = text.strip().splitlines()[0] if text.strip() else ''
      return ('the config file failed' + (f' at {where[-1]}' if where else '')
              + f': {type(e).__name__}: {text}')
  return None


def _chain(error: BaseException):
  """`error`, then its causes and contexts (each once)."""
  seen = []
  while error is not None and error not in seen:
    seen.append(error)
    yield error
    error = error.__cause__ or error.__context__


def _same_file(a: str, b: str) -> bool:
  try:
    return os.path.samefile(a, b)
  except OSError:
    return False


def _missing_config_message(name: str, path: str) -> str:
  candidates = sorted(p for p in glob.glob('configs/**/*.py', recursive=True)
                      if not os.path.basename(p).startswith('_'))
  close = difflib.get_close_matches(path, candidates, n=3, cutoff=0.5)
  message = f'--{name}={path}: no such config file (paths are relative to {os.getcwd()})'
  if close:
    message += f'; did you mean {" or ".join(close)}?'
  elif candidates:
    message += f'; the configs here are {", ".join(candidates)}'
  return message


def _verbosity(argv: Sequence[str] | None) -> int:
  """--verbosity (absl's flag) once parsed, else read from argv (0 when absent or unreadable)."""
  try:
    if flags.FLAGS.is_parsed():
      return int(flags.FLAGS.verbosity)
  except Exception:  # pylint: disable=broad-except
    pass
  value = None
  for name in ('verbosity', 'v'):
    value = _flag_value(name, argv or sys.argv) or value
  try:
    return int(value) if value is not None else 0
  except ValueError:
    return 0
