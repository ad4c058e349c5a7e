r"""Translates a text file with a trained translation workdir (beam search), e.g. configs/yu/iwslt15_en_vi.py.

    python -m launch.translate --workdir=/tmp/envi --input=talk.en [--output=talk.vi] [--beam_size=10]
        [--reference=talk.vi.ref] [--checkpoint=best|latest|STEP] [--batch_size=32]

Input: one tokenised sentence a line. Output: one translation a line (target tokens joined by spaces;
stdout without --output). With --reference, prints sacrebleu's corpus BLEU (tokenize='none') too.
The launcher only parses flags; `jax_structured.analysis.translate.translate_file` does the work.
"""
import json
import sys

from absl import app
from absl import flags

from launch import _errors
from launch import _workdir_flags

_INPUT = flags.DEFINE_string('input', None, 'Source text file, one tokenised sentence a line.')
_OUTPUT = flags.DEFINE_string('output', None, 'Where to write the translations (default: stdout).')
_BEAM_SIZE = flags.DEFINE_integer('beam_size', 10, 'Beam width (1 = greedy decoding).')
_BATCH_SIZE = flags.DEFINE_integer('batch_size', 32, 'Sentences per device call.')
_REFERENCE = flags.DEFINE_string('reference', None, 'Optional reference translations: report BLEU.')
flags.mark_flags_as_required(['input'])


def main(argv):
  checkpoint = _workdir_flags.start(argv)
  if _BEAM_SIZE.value < 1 or _BATCH_SIZE.value < 1:
    raise app.UsageError('--beam_size and --batch_size must be >= 1')
  from jax_structured.analysis import translate  # pylint: disable=g-import-not-at-top
  result = translate.translate_file(_workdir_flags.WORKDIR.value, _INPUT.value, _OUTPUT.value,
                                    beam_size=_BEAM_SIZE.value, batch_size=_BATCH_SIZE.value,
                                    checkpoint=checkpoint, reference_path=_REFERENCE.value)
  translations = result.pop('translations')
  if not _OUTPUT.value:
    sys.stdout.write(''.join(t + '\n' for t in translations))
  print(json.dumps(result, sort_keys=True), file=sys.stderr if not _OUTPUT.value else sys.stdout)


if __name__ == '__main__':
  _errors.run(main)
