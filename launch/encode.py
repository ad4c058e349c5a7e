r"""Sentence (pair, document) vectors of a trained classifier: one float32 row per input line.

    python -m launch.encode --workdir=/tmp/run --input=sentences.txt --output=vectors.npy \
        [--checkpoint=best|latest|STEP] [--on_bad_lines=error|skip] [--encoding=utf-8]

Each row is the vector the task's classifier layer reads (the pooled sentence vector; for pairs the
interaction features, for documents the pooled document vector), in input order; `<output>.json`
beside it says what the rows are (model, encoder, checkpoint step, dimension, pooling, the input line
of each row, skipped and truncated counts). Inputs are read as `launch.predict` reads them.
"""
import json
import sys

from absl import app
import numpy as np

from jax_structured.analysis import predict
from jax_structured.analysis import raw_text
from launch import _errors
from launch import _input_flags
from launch import _workdir_flags


def _save(vectors: np.ndarray, description: dict) -> None:
  np.save(_input_flags.OUTPUT.value, vectors.astype(np.float32))
  path = (_input_flags.OUTPUT.value[:-4] if _input_flags.OUTPUT.value.endswith('.npy') else _input_flags.OUTPUT.value) + '.json'
  description = {**description, 'vectors': _input_flags.OUTPUT.value if _input_flags.OUTPUT.value.endswith('.npy')
                 else _input_flags.OUTPUT.value + '.npy'}
  with open(path, 'w', encoding='utf-8') as f:
    json.dump(description, f, indent=2)
  print(f'{description["rows"]} x {description["dimension"]} float32 vectors written to '
        f'{description["vectors"]} (described in {path})', file=sys.stderr)


def main(argv):
  checkpoint = _workdir_flags.start(argv)
  if not _input_flags.OUTPUT.value or _input_flags.OUTPUT.value == '-':
    raise app.UsageError('--output=FILE.npy is required (the vectors file; its description goes beside it '
                         'as FILE.json)')
  predictor = predict.Predictor(_workdir_flags.WORKDIR.value, checkpoint)
  stream, source = _input_flags.open_input(_input_flags.INPUT.value)
  try:
    vectors, description = predict.encode_file(predictor, stream, source=source,
                                               on_bad_lines=_input_flags.ON_BAD_LINES.value,
                                               encoding=_input_flags.ENCODING.value)
  except raw_text.BadLine as e:
    _save(e.vectors, e.description)  # the rows of the lines before the bad one are not lost
    raise
  _save(vectors, description)
  if description['skipped'] or description['truncated']:
    print('; '.join(f'{key} ' + ', '.join(f'{k}: {v}' for k, v in sorted(description[key].items()))
                    for key in ('skipped', 'truncated') if description[key]), file=sys.stderr)


if __name__ == '__main__':
  _errors.run(main)
