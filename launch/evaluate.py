r"""Evaluates a trained workdir's checkpoint on one split; prints and writes <workdir>/eval_<split>.json.

    python -m launch.evaluate --workdir=/tmp/run --split=test [--checkpoint=best|latest|STEP]

Needs only the workdir (config, vocabulary, labels and checkpoints saved by training) and the data of
the evaluated split. The launcher only parses flags; `jax_structured.training.evaluate` does the work.
A workdir it cannot write to (read-only, full) still gets its metrics printed, then one error line
naming the file it could not save, and exit status 2.
"""
import json

from absl import flags

from jax_structured import errors
from launch import _errors
from launch import _workdir_flags

_SPLIT = flags.DEFINE_string('split', 'test', 'Split to evaluate (validation, test, ...).')


def main(argv):
  checkpoint = _workdir_flags.start(argv)
  from jax_structured import training  # pylint: disable=g-import-not-at-top
  try:
    result = training.evaluate(_workdir_flags.WORKDIR.value, _SPLIT.value, checkpoint=checkpoint)
  except errors.NotSavedError as e:
    print(json.dumps(e.result, indent=2, sort_keys=True))
    raise  # its one line: the file not saved, and why
  print(json.dumps(result, indent=2, sort_keys=True))


if __name__ == '__main__':
  _errors.run(main)
