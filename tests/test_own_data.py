"""A user's own folder, first try: held-out splits said out loud, bad lines skipped and counted,
control characters in the text."""
import importlib.util
import json
import pathlib
import shutil
import sys
import unicodedata

import pytest

from jax_structured import data
from jax_structured import errors
from jax_structured.data import builders
from jax_structured.data import loaders
from jax_structured.data import text
from jax_structured.data.loaders import _common

FIXTURES = pathlib.Path(__file__).parent / 'fixtures' / 'text_classification'
BAD = FIXTURES / 'bad_lines'  # train.tsv only: an empty text (line 4), no label (8), not UTF-8 (12)
ROOT = pathlib.Path(__file__).parent.parent


@pytest.fixture(scope='module')
def tfds_dir(tmp_path_factory):
  return tmp_path_factory.mktemp('tfds')


def _config(manual_dir, tfds_dir, **overrides):
  config = loaders.default_config('text_classification')
  config.manual_dir = str(manual_dir)
  config.data_dir = str(tfds_dir)
  config.min_count = 1
  for key, value in overrides.items():
    setattr(config, key, value)
  return config


def test_bad_lines_are_errors_by_default_naming_the_line_and_the_option(tfds_dir):
  with pytest.raises(builders.FormatError, match=r'bad_lines/train\.tsv:\d+: .*3 lines are malformed'
                     r'.*--config\.data\.on_bad_lines=skip'):
    data.load(_config(BAD, tfds_dir))
  assert not (tfds_dir / 'text_classification' / 'bad_lines').exists() or not any(
      (tfds_dir / 'text_classification' / 'bad_lines').iterdir())


def test_skip_counts_bad_lines_per_reason_and_holds_out_dev_and_test(tfds_dir, capsys):
  task = data.load(_config(BAD, tfds_dir, on_bad_lines='skip'))
  out = capsys.readouterr().out
  expected = {'train/empty_text': 1, 'train/no_label': 1, 'train/undecodable': 1}
  assert task.skipped == expected and task.extras['skipped'] == expected
  assert {s: len(v) for s, v in task.splits.items()} == {'train': 16, 'validation': 2, 'test': 2}
  assert 'skipped train/empty_text: 1, train/no_label: 1, train/undecodable: 1' in out
  assert 'train.tsv:4: empty text' in out and 'train.tsv:8: empty label' in out
  assert 'train.tsv:12: not valid utf-8' in out
  assert ('no dev or test file in ' in out and 'held out 2 as dev (config.data.validation_fraction=0.1) '
          'and 2 as test (config.data.test_fraction=0.1) of the 20 examples of train.tsv' in out)
  # Control characters split words, zero-width ones vanish: no token holds one.
  assert all(t.isprintable() for t in task.vocab.tokens) and len(task.vocab) > 20


def test_carved_dev_does_not_depend_on_the_test_fraction():
  examples = list(range(50))
  only_dev = _common.carve(examples, {'validation': 0.2}, seed=3)
  both = _common.carve(examples, {'validation': 0.2, 'test': 0.1}, seed=3)
  assert only_dev['validation'] == both['validation'] and len(both['test']) == 5
  assert sorted(both['train'] + both['validation'] + both['test']) == examples
  assert _common.hold_out(examples, 0.2, 3) == (only_dev['train'], only_dev['validation'])
  with pytest.raises(errors.ConfigError, match=r'config\.data\.test_fraction=0\.01 of 50'):
    _common.carve(examples, {'validation': 0.2, 'test': 0.01}, seed=3)


def test_train_and_dev_has_no_test_and_says_so(tmp_path, tfds_dir, capsys):
  folder = tmp_path / 'mine'
  folder.mkdir()
  (folder / 'train.tsv').write_text('pos\tgood film\nneg\tbad film\npos\tfine\nneg\tdull\n')
  (folder / 'dev.tsv').write_text('pos\tgood\nneg\tbad\n')
  task = data.load(_config(folder, tfds_dir))
  out = capsys.readouterr().out
  assert sorted(task.splits) == ['train', 'validation']
  assert 'no test file in' in out and 'this run has no test split' in out
  assert 'held out' not in out


def test_jsonl_bad_lines_are_skipped_too(tmp_path, tfds_dir):
  folder = tmp_path / 'jsonl'
  folder.mkdir()
  lines = ['{"text": "good film", "label": "pos"}', '{"text": "bad', '{"text": "", "label": "neg"}',
           '{"text": "dull", "label": "neg"}', '{"text": "fine"}']
  (folder / 'train.jsonl').write_text('\n'.join(lines) + '\n')
  (folder / 'dev.jsonl').write_text(lines[0] + '\n' + lines[3] + '\n')
  task = data.load(_config(folder, tfds_dir, on_bad_lines='skip'))
  assert task.skipped == {'train/invalid_json': 1, 'train/empty_text': 1, 'train/no_label': 1}
  assert len(task.splits['train']) == 2


def test_trec_skips_a_malformed_question(tmp_path, tfds_dir):
  folder = tmp_path / 'trec'
  shutil.copytree(ROOT / 'tests' / 'fixtures' / 'trec', folder)
  with open(folder / 'train_5500.label', 'ab') as f:
    f.write(b'NOLABEL\n')
  where = dict(manual_dir=folder, data_dir=tfds_dir / 'trec_bad')
  with pytest.raises(builders.FormatError, match=r'train_5500\.label:5: .*on_bad_lines=skip'):
    builders.report('trec', **where)
  report = builders.report('trec', on_bad_lines='skip', **where)
  assert report['dropped']['train'] == {'malformed': 1}
  assert report['bad_lines']['train'][0].startswith('train_5500.label:5: expected "COARSE:fine')


def test_options_check_the_new_keys():
  for name in ('text_classification', 'document_classification', 'trec', 'snli', 'quora_qqp', 'sst'):
    assert loaders.loader_defaults(name)['on_bad_lines'] == 'error', name
  assert loaders.parse_overrides('text_classification', {'on_bad_lines': 'skip',
                                                          'test_fraction': '0.2'}) == {
                                                              'on_bad_lines': 'skip', 'test_fraction': 0.2}
  config = loaders.default_config('text_classification')
  config.manual_dir = '/tmp'
  config.on_bad_lines = 'drop'
  with pytest.raises(errors.ConfigError, match=r"config\.data\.on_bad_lines='drop' must be one of"):
    loaders.validate_config(config, 'text_classification')
  config.on_bad_lines, config.validation_fraction, config.test_fraction = 'skip', 0.6, 0.5
  with pytest.raises(errors.ConfigError, match=r'validation_fraction=0\.6 \+ config\.data\.test_fraction'):
    loaders.validate_config(config, 'text_classification')


def _compare_config():
  """configs/encoders/compare.py as a module."""
  spec = importlib.util.spec_from_file_location('compare_config', ROOT / 'configs/encoders/compare.py')
  module = importlib.util.module_from_spec(spec)
  sys.path.insert(0, str(ROOT))
  try:
    spec.loader.exec_module(module)
  finally:
    sys.path.remove(str(ROOT))
  return module


def test_compare_sst2_is_binary_sst_with_the_tree_rows():
  compare = _compare_config()
  config = compare.get_config('sst2')
  assert (config.data.name, config.data.config, config.data.binary_trees) == ('sst', 'binary', True)
  assert set(config.variants) == set(compare.ENCODERS) | set(compare.TREE_ENCODERS)
  assert compare.get_config('sst').data.config == 'fine'
  assert compare.get_config('tree_lstm,sst2').model.encoder.name == 'tree_lstm'
  with pytest.raises(ValueError, match='needs SST trees; add the option sst or sst2'):
    compare.get_config('tree_lstm')


def test_text_classification_dir_does_not_take_trecs_fraction(tmp_path):
  config = _compare_config().get_config('bow')
  assert config.data.validation_fraction == pytest.approx(500 / 5452)
  swapped = loaders.with_text_classification_data(config, str(tmp_path)).data
  assert (swapped.validation_fraction, swapped.test_fraction) == (0.1, 0.1)
  swapped = loaders.with_text_classification_data(config, str(tmp_path),
                                                  {'validation_fraction': '0.2'}).data
  assert swapped.validation_fraction == 0.2


# --- control characters ------------------------------------------------------------------------------

def test_tokenizers_split_at_control_characters_and_drop_format_characters():
  raw = 'back\x08space bell\x07 nul\x00l tab\there zero\u200bwidth soft\u00adhyphen \ufeffbom'
  expected = ['back', 'space', 'bell', 'nul', 'l', 'tab', 'here', 'zerowidth', 'softhyphen', 'bom']
  assert text.tokenize(raw) == expected
  assert text.whitespace_tokenize(raw) == expected
  assert text.clean_str(raw, lowercase=False).split() == expected
  assert text.tokenize('\x08\x07\u200b') == [] and text.remove_invisible('plain') == 'plain'


def test_format_ranges_are_unicode_category_cf():
  cf = {c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == 'Cf'}
  ours = {c for a, b in text._FORMAT_RANGES for c in range(a, b + 1)}  # pylint: disable=protected-access
  assert ours == cf


def test_printable_escapes_what_does_not_print():
  assert text.printable('word') == 'word'
  assert text.printable('a\x08b\x07\t\u200bc d') == 'a\\x08b\\x07\\t\\u200bc d'
  assert json.loads(json.dumps(text.printable('\x00'))) == '\\x00'
