r"""Parses text with a trained biaffine tree-CRF parser: a file to CoNLL-U, or a whole dataset to the
heads cache of `config.data.trees`.

File mode:
  python -m launch.parse --workdir=/tmp/parser_ewt/crf --input=sentences.txt --output=parsed.conllu \
      [--format=raw|tokenized|conllu|sst|trec|snli|quora|iwslt] [--checkpoint=best] [--batch_size=32]

HEAD is 1-based with 0 = ROOT, DEPREL the predicted relation, UPOS the jointly trained tagger's
prediction (or the input's for a model trained with `model.tag_input='gold'` on CoNLL-U input that
has UPOS). Formats: see `jax_structured.data.sentences.read_sentences`. Prints sentences/s.

Annotation mode (Yu et al. 2018's supervised-tree rows; `jax_structured.data.parsed_trees`):
  python -m launch.parse --workdir=PARSER --annotate=configs/yu/trec.py
  python -m launch.parse --annotate=configs/yu/snli.py:trees=PARSER        # --workdir from data.trees
  python -m launch.parse --workdir=PARSER --annotate=configs/yu/trec.py --text_classification_dir=DIR
  python -m launch.parse --workdir=PARSER --annotate=trec --data='{"manual_dir": "../shared/data/trec"}'

`--annotate` names a launch config file (with its `:options`) or a loader (trec, sst, snli, quora_qqp,
text_classification); `--data` (a JSON object) sets data keys on top; `--text_classification_dir`
swaps the data source as `launch.train` does. Every split is tokenised exactly as the loader does,
every distinct sentence (SNLI premises and hypotheses, both Quora questions) parsed, and the heads
written beside the built dataset (`<data_dir>/parsed_trees/...`, printed). Training with
`config.data.trees=PARSER` (configs/yu/*.py: the option `trees=PARSER`) then attaches them; when the
cache is missing or stale, that error prints the command to run here.
"""
import importlib.util
import json
import os

from absl import app
from absl import flags

from jax_structured import errors
from jax_structured.data import sentences

from launch import _errors
from launch import _workdir_flags

_INPUT = flags.DEFINE_string('input', None, 'File to parse (file mode).')
_OUTPUT = flags.DEFINE_string('output', None, 'CoNLL-U file to write (file mode).')
_FORMAT = flags.DEFINE_enum('format', 'raw', sentences.INPUT_FORMATS, 'Input format (file mode).')
_BATCH_SIZE = flags.DEFINE_integer('batch_size', 32, 'Sentences per batch.')
_ANNOTATE = flags.DEFINE_string(
    'annotate', None, 'Annotation mode: a launch config file (path[:options]) or a loader name whose '
    'dataset is parsed into the heads cache of config.data.trees.')
_DATA = flags.DEFINE_string('data', None, 'Annotation mode: a JSON object of config.data keys to set.')
_TEXT_CLASSIFICATION_DIR = flags.DEFINE_string(
    'text_classification_dir', None, 'Annotation mode: your own train/dev/test .tsv or .jsonl folder '
    '(the data source becomes the text_classification loader, as in launch.train).')


def _config_file(spec: str):
  """`get_config(options)` of a config file 'path[:options]'."""
  path, _, options = spec.partition(':')
  if not os.path.isfile(path):
    raise FileNotFoundError(f'--annotate={spec}: no config file {path}')
  module_spec = importlib.util.spec_from_file_location('_annotate_config', path)
  module = importlib.util.module_from_spec(module_spec)
  module_spec.loader.exec_module(module)
  return module.get_config(options) if options else module.get_config()


def data_section(spec: str, data_json: str | None, text_classification_dir: str | None):
  """The data section to annotate: from a config file or a loader name, then the overrides."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  from jax_structured.data import loaders  # pylint: disable=g-import-not-at-top
  try:
    overrides = json.loads(data_json) if data_json else {}
  except json.JSONDecodeError as e:
    raise errors.UserError(f'--data={data_json!r} is not a JSON object ({e})') from None
  if not isinstance(overrides, dict):
    raise errors.UserError(f'--data={data_json!r} must be a JSON object of config.data keys')
  if spec.split(':')[0].endswith('.py'):
    config = _config_file(spec)
    name = config.data.get('name', '')
    data = ml_collections.ConfigDict(config.data.to_dict())
  else:
    if spec not in loaders.LOADER_DEFAULTS:
      raise errors.UserError(f'--annotate={spec!r} is neither a config file (.py) nor a loader; '
                             f'loaders: {sorted(loaders.LOADER_DEFAULTS)}')
    name, config = spec, None
    data = loaders.default_config(spec)
  for key, value in loaders.parse_overrides(name, overrides, where='--data').items():
    data[key] = value
  if text_classification_dir:
    holder = ml_collections.ConfigDict({'data': data})
    data = loaders.with_text_classification_data(holder, text_classification_dir).data
  return data


def main(argv):
  checkpoint = _workdir_flags.start(argv, workdir_required=False)  # annotation mode: data.trees
  from jax_structured.analysis import parsing  # pylint: disable=g-import-not-at-top
  if _ANNOTATE.value:
    if _INPUT.value or _OUTPUT.value:
      raise app.UsageError('--annotate parses a dataset: leave out --input / --output')
    data = data_section(_ANNOTATE.value, _DATA.value, _TEXT_CLASSIFICATION_DIR.value)
    workdir = _workdir_flags.WORKDIR.value or data.get('trees', '')
    if not workdir:
      raise app.UsageError('--annotate needs the parser: --workdir=PARSER (or data.trees in the config)')
    stats = parsing.annotate(workdir, data, checkpoint=checkpoint, batch_size=_BATCH_SIZE.value)
    sizes = ', '.join(f'{s} {n}' for s, n in stats['examples'].items())
    print(f'parsed {stats["sentences"]} distinct sentences ({stats["words"]} words) of {sizes} '
          f'examples in {stats["seconds"]:.2f} s ({stats["sentences_per_second"]:.1f} sentences/s, '
          f'checkpoint step {stats["checkpoint_step"]}) -> {stats["directory"]}\n'
          f'train with config.data.trees={workdir}')
    return
  if _DATA.value or _TEXT_CLASSIFICATION_DIR.value:
    raise app.UsageError('--data and --text_classification_dir go with --annotate')
  if not _workdir_flags.WORKDIR.value or not _INPUT.value or not _OUTPUT.value:
    raise app.UsageError('file mode needs --workdir, --input and --output (or use --annotate)')
  stats = parsing.parse_file(_workdir_flags.WORKDIR.value, _INPUT.value, _OUTPUT.value, fmt=_FORMAT.value,
                             checkpoint=checkpoint, batch_size=_BATCH_SIZE.value)
  print(f'parsed {stats["sentences"]} sentences ({stats["words"]} words) in {stats["seconds"]:.2f} s: '
        f'{stats["sentences_per_second"]:.1f} sentences/s overall, '
        f'{stats["sentences_per_second_compiled"]:.1f} sentences/s once compiled (the first batch of '
        f'each padded length, compilation included, took {stats["seconds_first_batches"]:.2f} s) '
        f'-> {_OUTPUT.value}')


if __name__ == '__main__':
  _errors.run(main)
