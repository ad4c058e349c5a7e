"""`--input`, `--output` and the input-reading flags of launch.predict and launch.encode, defined once.

Importing the module defines `--input` (required; '-' is stdin), `--output`, `--on_bad_lines` and
`--encoding` (one process may import both launchers). `open_input` opens the input.
"""
import sys

from absl import flags

INPUT = flags.DEFINE_string('input', None, "Input text file ('-': stdin).", required=True)
OUTPUT = flags.DEFINE_string('output', None, "Output file (launch.predict: JSON lines, default '-' = "
                             'stdout; launch.encode: a .npy file, required).')
ON_BAD_LINES = flags.DEFINE_enum('on_bad_lines', 'error', ['error', 'skip'],
                                 "'error': stop at the first bad input line (empty, unparseable, a pair "
                                 "line without its tab, undecodable), after writing the output of the lines "
                                 "before it; 'skip': leave such lines out, counted.")
ENCODING = flags.DEFINE_string('encoding', 'utf-8', 'Text encoding of the input file.')


def open_input(path: str):
  """The input's byte lines and its name in messages: '-' is stdin."""
  if path == '-':
    return sys.stdin.buffer, '<stdin>'
  return open(path, 'rb'), path  # pylint: disable=consider-using-with
