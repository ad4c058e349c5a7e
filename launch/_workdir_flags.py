"""Flags of the launchers that run a trained workdir on input files, defined once here.

    from launch import _workdir_flags
    workdir, checkpoint = _workdir_flags.WORKDIR.value, _workdir_flags.checkpoint()

Importing the module defines `--workdir` (required), `--checkpoint` ('best', 'latest' or a step),
`--input` (required) and `--output`, and the input-reading flags `--on_bad_lines` and `--encoding`
(launch.predict, launch.encode: one process may import both).
"""
import sys

from absl import flags

from launch import _errors

WORKDIR = flags.DEFINE_string('workdir', None, 'A training workdir.', required=True)
CHECKPOINT = flags.DEFINE_string('checkpoint', 'best', "'best', 'latest' or a step number.")
ON_BAD_LINES = flags.DEFINE_enum('on_bad_lines', 'error', ['error', 'skip'],
                                 "'error': stop at the first bad input line (empty, unparseable, a pair "
                                 "line without its tab, undecodable), after writing the output of the lines "
                                 "before it; 'skip': leave such lines out, counted.")
ENCODING = flags.DEFINE_string('encoding', 'utf-8', 'Text encoding of the input file.')
INPUT = flags.DEFINE_string('input', None, "Input text file ('-': stdin).", required=True)
OUTPUT = flags.DEFINE_string('output', None, "Output file (launch.predict: JSON lines, default '-' = "
                             'stdout; launch.encode: a .npy file, required).')


def checkpoint() -> int | str:
  """The --checkpoint value: 'best', 'latest' or a step number (a bad value: a usage error)."""
  return _errors.checkpoint(CHECKPOINT.value)


def open_input(path: str):
  """The input's byte lines and its name in messages: '-' is stdin."""
  if path == '-':
    return sys.stdin.buffer, '<stdin>'
  return open(path, 'rb'), path  # pylint: disable=consider-using-with
