r"""Parses text with a trained biaffine tree-CRF parser and writes CoNLL-U.

python -m launch.parse --workdir=/tmp/parser_ewt/crf --input=sentences.txt --output=parsed.conllu \
    [--format=raw|tokenized|conllu|sst|trec|snli|quora|iwslt] [--checkpoint=best] [--batch_size=32]

HEAD is 1-based with 0 = ROOT, DEPREL the predicted relation, UPOS the jointly trained tagger's
prediction (or the input's for a model trained with `model.tag_input='gold'` on CoNLL-U input that
has UPOS). Formats: see `jax_structured.models.parser.read_sentences`. Prints sentences/s.
"""
from absl import app
from absl import flags

from jax_structured.models import parser

from launch import _errors

_WORKDIR = flags.DEFINE_string('workdir', None, 'Training workdir of a parser.biaffine model.',
                               required=True)
_INPUT = flags.DEFINE_string('input', None, 'File to parse.', required=True)
_OUTPUT = flags.DEFINE_string('output', None, 'CoNLL-U file to write.', required=True)
_FORMAT = flags.DEFINE_enum('format', 'raw', parser.INPUT_FORMATS, 'Input format.')
_CHECKPOINT = flags.DEFINE_string('checkpoint', 'best', "'best', 'latest' or a step number.")
_BATCH_SIZE = flags.DEFINE_integer('batch_size', 32, 'Sentences per batch.')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  checkpoint = _errors.checkpoint(_CHECKPOINT.value)
  stats = parser.parse_file(_WORKDIR.value, _INPUT.value, _OUTPUT.value, fmt=_FORMAT.value,
                            checkpoint=checkpoint, batch_size=_BATCH_SIZE.value)
  print(f'parsed {stats["sentences"]} sentences ({stats["words"]} words) in {stats["seconds"]:.2f} s: '
        f'{stats["sentences_per_second"]:.1f} sentences/s overall, '
        f'{stats["sentences_per_second_compiled"]:.1f} sentences/s once compiled (the first batch of '
        f'each padded length, compilation included, took {stats["seconds_first_batches"]:.2f} s) '
        f'-> {_OUTPUT.value}')


if __name__ == '__main__':
  _errors.run(main)
