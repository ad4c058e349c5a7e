"""`--workdir` and `--checkpoint` of the launchers that read a trained workdir, defined once here.

    from launch import _workdir_flags
    def main(argv):
      checkpoint = _workdir_flags.start(argv)  # no stray arguments; compilation cache; --checkpoint
      ... _workdir_flags.WORKDIR.value ...

`--workdir` is required by `start` (launch.parse passes `workdir_required=False`: its annotation mode
needs none); `--checkpoint` takes 'best', 'latest' or a step number. launch.train defines its own
`--workdir` (the folder a run writes, not one it reads). Which settings are flags and which are config
keys: docs/configs.md ("Flags and config keys").
"""
from absl import app
from absl import flags

from launch import _compilation_cache
from launch import _errors

WORKDIR = flags.DEFINE_string('workdir', None, 'The trained workdir to read (launch.parse with --annotate: '
                              "default the config's data.trees).")
CHECKPOINT = flags.DEFINE_string('checkpoint', 'best', "'best', 'latest' or a step number.")


def checkpoint() -> int | str:
  """The --checkpoint value: 'best', 'latest' or a step number (a bad value: a usage error)."""
  return _errors.checkpoint(CHECKPOINT.value)


def start(argv: list[str], *, workdir_required: bool = True) -> int | str:
  """The opening of a workdir launcher's `main`: no arguments besides flags, --workdir given (unless
  not required), the persistent compilation cache enabled; returns the --checkpoint value."""
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  if workdir_required and not WORKDIR.value:
    raise app.UsageError('--workdir must have a value: a training workdir (launch.train wrote it)')
  chosen = checkpoint()
  _compilation_cache.enable()
  return chosen
