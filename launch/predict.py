r"""Labels, class probabilities and induced trees of a trained classifier on new text, one JSON line each.

    python -m launch.predict --workdir=/tmp/run --input=sentences.txt [--output=predictions.jsonl] \
        [--checkpoint=best|latest|STEP] [--details=marginals,attention,boundaries] [--trees=DIR] \
        [--on_bad_lines=error|skip] [--encoding=utf-8]

Input: one text per line (sentence models), `premise<TAB>hypothesis` (pair models), one document per
line (document models; sentences separated by `<sssss>`, else split as training split them); `-` is
stdin. Tokenised as the run's training data was (tokenizer, vocabulary and truncation from the
workdir). Output (`-`: stdout): per input line, in order, `{"line", "label", "probabilities",
"trees"}` (trees of models that induce structure: CoNLL-U heads, 0 = ROOT), or `{"line", "skipped"}`
for a line left out with --on_bad_lines=skip. `--trees=DIR` also writes the trees as CoNLL-U with
SVG / HTML pictures, as `launch.induce_trees` does. `jax_structured.analysis.predict` does the work.
"""
import sys

from absl import app
from absl import flags

from jax_structured.analysis import predict
from launch import _errors
from launch import _input_flags
from launch import _workdir_flags

_DETAILS = flags.DEFINE_list('details', [], f'Also output the sown values: any of {sorted(predict.DETAILS)}.')
_TREES = flags.DEFINE_string('trees', None, 'Write the induced trees (CoNLL-U, SVG, HTML) to this folder.')
_NUM_PICTURES = flags.DEFINE_integer('num_pictures', 5, 'How many trees --trees draws.')


def main(argv):
  checkpoint = _workdir_flags.start(argv)
  bad = sorted(set(_DETAILS.value) - set(predict.DETAILS))
  if bad:
    raise app.UsageError(f'--details={",".join(bad)}: valid {sorted(predict.DETAILS)}')
  predictor = predict.Predictor(_workdir_flags.WORKDIR.value, checkpoint)
  stream, source = _input_flags.open_input(_input_flags.INPUT.value)
  output = _input_flags.OUTPUT.value or '-'
  out = sys.stdout if output == '-' else open(output, 'w', encoding='utf-8')  # pylint: disable=consider-using-with
  try:
    def write(line):
      out.write(line + '\n')
      out.flush()
    result = predict.predict_file(predictor, stream, write, source=source,
                                  on_bad_lines=_input_flags.ON_BAD_LINES.value,
                                  encoding=_input_flags.ENCODING.value, details=_DETAILS.value,
                                  trees_dir=_TREES.value, num_pictures=_NUM_PICTURES.value)
  finally:
    if out is not sys.stdout:
      out.close()
  line = f'{result["predicted"]} inputs predicted by {_workdir_flags.WORKDIR.value} (step {predictor.trained.step})'
  for key in ('skipped', 'truncated'):
    if result[key]:
      line += f'; {key} ' + ', '.join(f'{k}: {v}' for k, v in sorted(result[key].items()))
  print(line, file=sys.stderr)
  if _TREES.value:
    print(f'trees written to {_TREES.value}' if result['files'] else
          f'no trees written to {_TREES.value}: the model of {_workdir_flags.WORKDIR.value} induces none '
          '(config.model has no structured attention or latent tree)', file=sys.stderr)


if __name__ == '__main__':
  _errors.run(main)
