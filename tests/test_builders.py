"""TFDS builders over tiny fixtures in each upstream format (tests/fixtures/<dataset>/).

The equivalent of `tfds.testing.DatasetBuilderTestCase` (which needs TensorFlow and dill, absent
here): build from the fixture files into a tmp data_dir via manual_dir, check the split sizes and
the exact content of examples against values written out by hand from the fixture files; plus the
bad-input paths (missing files, malformed lines -> file and line named).
"""
import gzip
import json
import pathlib
import shutil
import sys
import tempfile
import threading
import time

import pytest

from jax_structured.data import builders
from jax_structured.data.builders import (document_classification, quora_qqp, snli, sst, text_classification,
                                         trec, universal_dependencies)


def _load(name, fixtures_dir, tmp_path, split, config=None, sub=None):
  return builders.load_examples(name, split, manual_dir=fixtures_dir / (sub or name),
                                data_dir=tmp_path / 'tfds', config=config)


def _report(name, fixtures_dir, tmp_path, config=None, sub=None):
  return builders.report(name, manual_dir=fixtures_dir / (sub or name), data_dir=tmp_path / 'tfds',
                         config=config)


class _TensorflowImportRecorder:
  """A meta-path finder that records every attempt to import tensorflow.

  Availability probes (`importlib.util.find_spec('tensorflow')`, as etils does) are allowed;
  an actual import is recorded and fails as it would without TensorFlow installed.
  """

  def __init__(self):
    self.attempts = []

  def find_spec(self, fullname, path=None, target=None):
    if fullname.split('.')[0] != 'tensorflow':
      return None
    frame = sys._getframe(1)
    while frame is not None:
      code = frame.f_code
      if code.co_name == 'find_spec' and 'importlib' in code.co_filename and 'util' in code.co_filename:
        return None  # a probe, not an import
      frame = frame.f_back
    self.attempts.append(fullname)
    raise ModuleNotFoundError(f'test: tensorflow must not be imported ({fullname})')


@pytest.fixture
def no_tensorflow():
  recorder = _TensorflowImportRecorder()
  sys.meta_path.insert(0, recorder)
  try:
    yield recorder
  finally:
    sys.meta_path.remove(recorder)
  assert not recorder.attempts, recorder.attempts


# ----------------------------------------------------------------------------------------- SST

def test_sst_fine_build_and_content(fixtures_dir, tmp_path, no_tensorflow):
  rep = _report('sst', fixtures_dir, tmp_path, config='fine')
  assert rep['num_examples'] == {'train': 3, 'validation': 2, 'test': 2}
  assert rep['dropped'] == {'train': {}, 'validation': {}, 'test': {}}
  train = _load('sst', fixtures_dir, tmp_path, 'train', 'fine')
  assert train == [
      {'text': 'The Rock is great .', 'label': 3,
       'tree': '(3 (2 (2 The) (2 Rock)) (4 (3 (2 is) (4 great)) (2 .)))'},
      {'text': 'It is a film', 'label': 2, 'tree': '(2 (2 It) (2 (2 (2 is) (2 a)) (2 film)))'},
      {'text': '8\u00a01\\/2 is awful .', 'label': 1,
       'tree': '(1 (1 (2 8\u00a01\\/2) (1 (2 is) (0 awful))) (2 .))'},
  ]
  dev = _load('sst', fixtures_dir, tmp_path, 'dev', 'fine')  # 'dev' is an alias of 'validation'
  assert [(e['text'], e['label']) for e in dev] == [('A masterpiece .', 4), ('Dreadful .', 0)]


def test_sst_binary_drops_and_counts_neutral_roots(fixtures_dir, tmp_path):
  rep = _report('sst', fixtures_dir, tmp_path, config='binary')
  assert rep['num_examples'] == {'train': 2, 'validation': 2, 'test': 1}
  assert rep['dropped'] == {'train': {'neutral_root': 1}, 'validation': {}, 'test': {'neutral_root': 1}}
  assert [(e['text'], e['label']) for e in _load('sst', fixtures_dir, tmp_path, 'train', 'binary')] == [
      ('The Rock is great .', 1), ('8\u00a01\\/2 is awful .', 0)]
  assert [e['label'] for e in _load('sst', fixtures_dir, tmp_path, 'test', 'binary')] == [1]


@pytest.mark.parametrize('line, message', [
    ('(3 (2 a) (2 b)', 'unclosed'),
    ('(3 (2 a) (2 b)))', 'unbalanced ")"'),
    ('(x (2 a))', "label 'x' is not an integer"),
    ('(7 (2 a))', 'outside 0-4'),
    ('(3 (2 a b))', 'not closed right after its word'),
    ('(3 word (2 a))', 'not closed right after its word'),
    ('(3 (2 a) word)', 'outside a preterminal'),
    ('(3 (2 a)) (2 b)', 'after the end of the tree'),
    ('(3)', 'empty node'),
    ('', 'empty line'),
])
def test_sst_parse_tree_rejects_malformed_trees(line, message):
  with pytest.raises(ValueError, match=message.replace('(', r'\(').replace(')', r'\)')):
    sst.parse_tree(line)


def test_sst_parse_tree_leaves_and_root():
  assert sst.parse_tree('(4 (3 (2 so) (4 good)) (2 !))') == (4, ['so', 'good', '!'])
  assert sst.parse_tree('(0 bad)') == (0, ['bad'])


def test_sst_malformed_line_names_file_and_line(tmp_path):
  manual = tmp_path / 'manual'
  manual.mkdir()
  (manual / 'train.txt').write_text('(3 (2 fine) (3 tree))\n(2 (2 broken)\n(1 ok)\n(x bad)\n')
  with pytest.raises(ValueError, match=r'train\.txt:2: unbalanced.*; 2 lines are malformed \(lines 2, 4\);'):
    builders.load_examples('sst', 'train', manual_dir=manual, data_dir=tmp_path / 'tfds')
  # The failed build leaves nothing half-written behind: fixing the file is enough.
  (manual / 'train.txt').write_text('(3 (2 fine) (3 tree))\n(2 (2 mended))\n')
  assert [e['text'] for e in builders.load_examples('sst', 'train', manual_dir=manual,
                                                    data_dir=tmp_path / 'tfds')] == ['fine tree', 'mended']


def test_missing_files_name_the_expected_paths(tmp_path):
  (tmp_path / 'empty').mkdir()
  with pytest.raises(FileNotFoundError) as err:
    builders.load_examples('sst', 'train', manual_dir=tmp_path / 'empty', data_dir=tmp_path / 'tfds')
  for name in ('train.txt', 'dev.txt', 'test.txt'):
    assert str(tmp_path / 'empty' / name) in str(err.value)
  assert 'trainDevTestTrees_PTB.zip' in str(err.value)  # how to get them
  with pytest.raises(FileNotFoundError, match='ptb.valid.txt'):
    builders.available_splits('ptb_lm', manual_dir=tmp_path / 'nowhere')


def test_absent_split_is_not_offered(fixtures_dir, tmp_path):
  assert builders.available_splits('trec', manual_dir=fixtures_dir / 'trec') == ['train', 'test']
  with pytest.raises(KeyError, match="split 'validation' not available"):
    _load('trec', fixtures_dir, tmp_path, 'validation')


def test_unknown_dataset_and_config(fixtures_dir, tmp_path):
  with pytest.raises(KeyError, match='unknown dataset'):
    builders.load_examples('nope', 'train', manual_dir=tmp_path, data_dir=tmp_path)
  with pytest.raises(ValueError, match="unknown config 'tiny'"):
    _load('sst', fixtures_dir, tmp_path, 'train', 'tiny')
  with pytest.raises(ValueError, match='has no configs'):
    _load('trec', fixtures_dir, tmp_path, 'train', 'fine')


def test_rebuilds_when_source_files_change(tmp_path):
  manual = tmp_path / 'manual'
  manual.mkdir()
  (manual / 'ptb.train.txt').write_text(' a b \n')
  first = builders.load_examples('ptb_lm', 'train', manual_dir=manual, data_dir=tmp_path / 'tfds')
  (manual / 'ptb.train.txt').write_text(' a b \n c \n')
  second = builders.load_examples('ptb_lm', 'train', manual_dir=manual, data_dir=tmp_path / 'tfds')
  assert first == [{'text': ' a b '}]
  assert second == [{'text': ' a b '}, {'text': ' c '}]
  # Without manual_dir the prepared data is read as is.
  assert builders.load_examples('ptb_lm', 'train', manual_dir=None, data_dir=tmp_path / 'tfds') == second



def test_building_leaves_no_temporary_directories(tmp_path, monkeypatch):
  # TFDS makes a mkdtemp('tfds') directory whenever an unprepared builder is constructed and
  # leaves it behind when the data set is not on gs://tfds-data (ours never are).
  scratch = tmp_path / 'scratch'
  scratch.mkdir()
  monkeypatch.setattr(tempfile, 'tempdir', str(scratch))
  manual = tmp_path / 'manual'
  manual.mkdir()
  (manual / 'ptb.train.txt').write_text(' a b \n')
  assert builders.load_examples('ptb_lm', 'train', manual_dir=manual,
                                data_dir=tmp_path / 'tfds') == [{'text': ' a b '}]
  assert sorted(p.name for p in scratch.iterdir()) == []


def test_concurrent_launches_build_once(tmp_path, monkeypatch):
  # Two launches that find the dataset unbuilt: the second waits for the first's build and reads it,
  # instead of building it again and failing to rename its copy onto the finished one.
  manual = tmp_path / 'manual'
  manual.mkdir()
  (manual / 'ptb.train.txt').write_text(' a b \n c \n')
  cls = builders.BUILDERS['ptb_lm']
  original, builds, start = cls.download_and_prepare, [], threading.Barrier(2)

  def slow_build(self, *args, **kwargs):
    builds.append(1)
    time.sleep(0.5)  # hold the build open while the other launch arrives
    return original(self, *args, **kwargs)

  monkeypatch.setattr(cls, 'download_and_prepare', slow_build)
  results, errors = [], []

  def launch():
    start.wait()
    try:
      results.append(builders.load_examples('ptb_lm', 'train', manual_dir=manual, data_dir=tmp_path / 'tfds'))
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  threads = [threading.Thread(target=launch) for _ in range(2)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert errors == []
  assert len(builds) == 1
  assert results == [[{'text': ' a b '}, {'text': ' c '}]] * 2


# ---------------------------------------------------------------------------------------- TREC

def test_trec_latin1_and_labels(fixtures_dir, tmp_path, no_tensorflow):
  rep = _report('trec', fixtures_dir, tmp_path)
  assert rep['num_examples'] == {'train': 4, 'test': 2}
  train = _load('trec', fixtures_dir, tmp_path, 'train')
  assert train[0] == {'text': 'How did serfdom develop in and then leave Russia ?',
                      'label_coarse': 'DESC', 'label_fine': 'DESC:manner'}
  assert train[2]['text'] == 'What sister\u00f0city of Tijuana is famous ?'  # byte 0xF0 in ISO-8859-1
  assert [e['label_coarse'] for e in train] == ['DESC', 'ENTY', 'HUM', 'NUM']
  assert [e['label_fine'] for e in _load('trec', fixtures_dir, tmp_path, 'test')] == ['NUM:dist', 'LOC:city']


@pytest.mark.parametrize('line, message', [
    ('DESCmanner How ?', 'COARSE:fine'),
    ('FOO:bar What ?', "unknown coarse label 'FOO'"),
    ('NUM:date', 'without a question'),
])
def test_trec_rejects_malformed_lines(line, message):
  with pytest.raises(ValueError, match=message):
    trec.parse_line(line)


def test_trec_malformed_line_names_file_and_line(tmp_path):
  manual = tmp_path / 'manual'
  manual.mkdir()
  (manual / 'TREC_10.label').write_bytes(b'NUM:dist How far ?\nLOC:city Where ?\nbroken line\n')
  with pytest.raises(ValueError, match=r'TREC_10\.label:3: expected "COARSE:fine'):
    builders.load_examples('trec', 'test', manual_dir=manual, data_dir=tmp_path / 'tfds')


# -------------------------------------------------------------------------------------- PTB LM

def test_ptb_lm_lines_as_is(fixtures_dir, tmp_path, no_tensorflow):
  rep = _report('ptb_lm', fixtures_dir, tmp_path)
  assert rep['num_examples'] == {'train': 2, 'validation': 1, 'test': 2}
  assert _load('ptb_lm', fixtures_dir, tmp_path, 'train') == [
      {'text': " no it was n't black monday "},
      {'text': " but while the new york stock exchange did n't fall apart "}]
  assert _load('ptb_lm', fixtures_dir, tmp_path, 'test') == [{'text': ' the <unk> of N years '},
                                                             {'text': ' the end '}]


# ---------------------------------------------------------------------------------------- SNLI

def test_snli_jsonl_and_gz_drop_no_gold_label(fixtures_dir, tmp_path, no_tensorflow):
  rep = _report('snli', fixtures_dir, tmp_path)
  assert rep['num_examples'] == {'validation': 2, 'test': 1}
  assert rep['dropped'] == {'validation': {'no_gold_label': 1}, 'test': {'no_gold_label': 1}}
  dev = _load('snli', fixtures_dir, tmp_path, 'validation')
  assert dev[0] == {
      'premise': 'Two women are embracing.', 'hypothesis': 'The sisters are hugging.',
      'label': 'neutral', 'premise_binary_parse': '( Two women are embracing . )',
      'hypothesis_binary_parse': '( The sisters are hugging . )', 'pair_id': '4705552913.jpg#2r1n'}
  assert [e['label'] for e in dev] == ['neutral', 'entailment']
  test = _load('snli', fixtures_dir, tmp_path, 'test')  # from snli_1.0_test.jsonl.gz
  assert [(e['premise'], e['label']) for e in test] == [('A cat sleeps.', 'contradiction')]


@pytest.mark.parametrize('record, message', [
    ('{"gold_label": "neutral"', 'invalid JSON'),
    ('[1, 2]', 'expected a JSON object'),
    ('{"gold_label": "neutral", "sentence1": "a"}', "field 'sentence2'"),
])
def test_snli_rejects_malformed_records(record, message):
  with pytest.raises(ValueError, match=message):
    snli.parse_line(record)


def test_snli_unknown_label_names_file_and_line(tmp_path):
  manual = tmp_path / 'manual'
  manual.mkdir()
  good = {'gold_label': 'entailment', 'sentence1': 'a', 'sentence2': 'b', 'sentence1_binary_parse': 'a',
          'sentence2_binary_parse': 'b', 'pairID': '1'}
  with gzip.open(manual / 'snli_1.0_dev.jsonl.gz', 'wt') as f:
    f.write(json.dumps(good) + '\n' + json.dumps(dict(good, gold_label='maybe')) + '\n')
  with pytest.raises(ValueError, match=r"snli_1\.0_dev\.jsonl\.gz:2: unknown gold_label 'maybe'"):
    builders.load_examples('snli', 'validation', manual_dir=manual, data_dir=tmp_path / 'tfds')


def test_snli_plain_and_gzipped_copies_are_ambiguous(fixtures_dir, tmp_path):
  manual = tmp_path / 'manual'
  shutil.copytree(fixtures_dir / 'snli', manual)
  shutil.copy(manual / 'snli_1.0_dev.jsonl', manual / 'snli_1.0_test.jsonl')
  with pytest.raises(ValueError, match='ambiguous'):
    builders.available_splits('snli', manual_dir=manual)


# ----------------------------------------------------------------------------------- Quora QQP

def test_quora_both_layouts(fixtures_dir, tmp_path, no_tensorflow):
  rep = _report('quora_qqp', fixtures_dir, tmp_path)
  assert rep['num_examples'] == {'train': 3, 'validation': 2, 'test': 1}
  train = _load('quora_qqp', fixtures_dir, tmp_path, 'train')  # BiMPM: label, q1, q2, id
  assert train[0] == {'question1': 'How do I get funding for my startup ?',
                      'question2': 'How do I get seed funding ?', 'label': 1}
  assert [e['label'] for e in train] == [1, 0, 1]
  dev = _load('quora_qqp', fixtures_dir, tmp_path, 'validation')  # reformatted: q1, q2, label
  assert dev == [{'question1': 'How do I learn Python ?',
                  'question2': 'What is the best way to learn Python ?', 'label': 1},
                 {'question1': 'Who are you ?', 'question2': 'Where is Paris ?', 'label': 0}]


def test_quora_layout_detection():
  assert quora_qqp.detect_layout('1\ta\tb\t7') == 'bimpm'
  assert quora_qqp.detect_layout('a\tb\t0') == 'reformatted'
  with pytest.raises(ValueError, match='neither'):
    quora_qqp.detect_layout('a\tb')
  with pytest.raises(ValueError, match="label '2'"):
    quora_qqp.parse_line('a\tb\t2', 'reformatted')


def test_quora_line_breaking_the_detected_layout(tmp_path):
  manual = tmp_path / 'manual'
  manual.mkdir()
  (manual / 'test.tsv').write_text('1\ta\tb\t1\n0\tc\td\t2\nx\ty\t1\n1\tok\tok\t3\n\n')
  with pytest.raises(ValueError, match=r'test\.tsv:3: expected 4 tab-separated fields .*layout bimpm\); '
                     r'2 lines are malformed \(lines 3, 5\); to leave bad lines out'):
    builders.load_examples('quora_qqp', 'test', manual_dir=manual, data_dir=tmp_path / 'tfds')
  (manual / 'test.tsv').write_text('only one field\n')
  with pytest.raises(ValueError, match=r'test\.tsv:1: neither'):
    builders.load_examples('quora_qqp', 'test', manual_dir=manual, data_dir=tmp_path / 'tfds')


# ------------------------------------------------------------------------ Universal Dependencies

def test_ud_conllu_skips_ranges_and_empty_nodes(fixtures_dir, tmp_path, no_tensorflow):
  rep = _report('universal_dependencies', fixtures_dir, tmp_path)  # treebank found: xx_test
  assert rep['config'] == 'xx_test'
  assert rep['num_examples'] == {'train': 2, 'test': 1}
  train = _load('universal_dependencies', fixtures_dir, tmp_path, 'train', config='xx_test')
  assert train[0] == {
      'sent_id': 'doc1-0001', 'text': "I don't know.",
      'tokens': ['I', 'do', "n't", 'know', '.'], 'lemmas': ['I', 'do', 'not', 'know', '.'],
      'upos': ['PRON', 'AUX', 'PART', 'VERB', 'PUNCT'], 'xpos': ['PRP', 'VBP', 'RB', 'VB', '.'],
      'heads': [4, 4, 4, 0, 4], 'deprels': ['nsubj', 'aux', 'advmod', 'root', 'punct']}
  assert train[1]['tokens'] == ['Sue', 'left', 'and', 'Bob', 'too']  # 4.1 (empty node) skipped
  assert train[1]['heads'] == [2, 0, 4, 2, 4]
  test = _load('universal_dependencies', fixtures_dir, tmp_path, 'test')  # no blank line at EOF
  assert [(e['sent_id'], e['tokens'], e['heads']) for e in test] == [('t-1', ['Hello', '!'], [0, 1])]


def _conllu(*rows):
  return [(i + 1, row) for i, row in enumerate(rows)]


@pytest.mark.parametrize('rows, message', [
    (['1\ta\ta\tX\tX\t_\t0\troot\t_'], r'f\.conllu:1: expected 10 tab-separated columns, got 9'),
    (['1\ta\ta\tX\tX\t_\t0\troot\t_\t_', '2\tb\tb\tX\tX\t_\tone\tdep\t_\t_'],
     r"f\.conllu:2: HEAD 'one' of token 2"),
    (['1\ta\ta\tX\tX\t_\t0\troot\t_\t_', '3\tb\tb\tX\tX\t_\t1\tdep\t_\t_'], r'f\.conllu:2: ID 3 out of sequence'),
    (['1\ta\ta\tX\tX\t_\t0\troot\t_\t_', '2\tb\tb\tX\tX\t_\t5\tdep\t_\t_'], r'f\.conllu:2: HEAD 5 outside'),
    (['x\ta\ta\tX\tX\t_\t0\troot\t_\t_'], r"f\.conllu:1: ID 'x'"),
    (['# sent_id = s', '1-2\tab\t_\t_\t_\t_\t_\t_\t_\t_'], r'f\.conllu:1: sentence without tokens'),
])
def test_ud_rejects_malformed_rows(rows, message):
  with pytest.raises(ValueError, match=message):
    list(universal_dependencies.parse_conllu(_conllu(*rows), 'f.conllu'))


def test_ud_fallback_sent_id_and_text():
  (sentence,) = universal_dependencies.parse_conllu(
      _conllu('', '1\ta\ta\tX\tX\t_\t0\troot\t_\t_', '2\tb\tb\tX\tX\t_\t1\tdep\t_\t_'), 'dir/f.conllu')
  assert sentence['sent_id'] == 'f.conllu:2' and sentence['text'] == 'a b'


def test_ud_several_treebanks_need_a_config(fixtures_dir, tmp_path):
  manual = tmp_path / 'manual'
  shutil.copytree(fixtures_dir / 'universal_dependencies', manual)
  shutil.copy(manual / 'xx_test-ud-test.conllu', manual / 'yy_other-ud-test.conllu')
  with pytest.raises(ValueError, match=r"several treebanks .*\['xx_test', 'yy_other'\]; pass config="):
    builders.available_splits('universal_dependencies', manual_dir=manual)
  assert builders.available_splits('universal_dependencies', manual_dir=manual, config='yy_other') == ['test']


# ------------------------------------------------------------------------------------- IWSLT15

def test_iwslt_aligned_pairs(fixtures_dir, tmp_path, no_tensorflow):
  rep = _report('iwslt15_en_vi', fixtures_dir, tmp_path)
  assert rep['num_examples'] == {'validation': 2, 'test': 1}
  assert _load('iwslt15_en_vi', fixtures_dir, tmp_path, 'test') == [{'en': 'I&apos;m here .', 'vi': 'Tôi ở đây .'}]
  dev = _load('iwslt15_en_vi', fixtures_dir, tmp_path, 'validation')
  assert dev[1] == {'en': 'This is not a finished story .', 'vi': 'Đây không phải là một câu chuyện kết thúc .'}


def test_iwslt_mismatched_line_counts_name_both_files(fixtures_dir, tmp_path):
  manual = tmp_path / 'manual'
  shutil.copytree(fixtures_dir / 'iwslt15_en_vi', manual)
  with open(manual / 'tst2013.vi', 'a', encoding='utf-8') as f:
    f.write('Thêm một dòng .\n')
  with pytest.raises(ValueError) as err:
    builders.load_examples('iwslt15_en_vi', 'test', manual_dir=manual, data_dir=tmp_path / 'tfds')
  assert 'tst2013.en has 1 lines' in str(err.value) and 'tst2013.vi has 2' in str(err.value)
  assert str(err.value).startswith(f'{manual / "tst2013.vi"}:2: line-count mismatch')
  (manual / 'tst2012.vi').unlink()
  with pytest.raises(FileNotFoundError, match=r'tst2012\.en has no counterpart: .*tst2012\.vi is missing'):
    builders.available_splits('iwslt15_en_vi', manual_dir=manual)


def test_iwslt_empty_lines_name_file_and_line(tmp_path):
  manual = tmp_path / 'manual'
  manual.mkdir()
  (manual / 'tst2013.en').write_text('a\nb\nc\nd\n', encoding='utf-8')
  (manual / 'tst2013.vi').write_text('x\n  \ny\n\n', encoding='utf-8')
  with pytest.raises(builders.FormatError, match=r'tst2013\.vi:2: empty line: .*2 lines are empty '
                     r'\(lines 2, 4\)'):
    builders.load_examples('iwslt15_en_vi', 'test', manual_dir=manual, data_dir=tmp_path / 'tfds')


def test_undecodable_bytes_name_file_and_line(tmp_path):
  manual = tmp_path / 'manual'
  manual.mkdir()
  (manual / 'tst2013.en').write_bytes(b'ok\nbad \xff byte\n')
  (manual / 'tst2013.vi').write_text('a\nb\n')
  with pytest.raises(ValueError, match=r'tst2013\.en:2: not valid utf-8'):
    builders.load_examples('iwslt15_en_vi', 'test', manual_dir=manual, data_dir=tmp_path / 'tfds')


def test_names_lists_every_builder():
  assert builders.names() == sorted(['sst', 'trec', 'ptb_lm', 'snli', 'quora_qqp', 'universal_dependencies',
                                     'iwslt15_en_vi', 'document_classification', 'text_classification'])
  assert all(pathlib.Path(builders.BUILDERS[n].code_path).is_file() for n in builders.names())


# ----------------------------------------------------------------------- Document classification

@pytest.mark.parametrize('config, splits, first', [
    ('yelp13', {'train': 2, 'validation': 1, 'test': 1},
     {'sentences': ['great food .', 'friendly staff !'], 'label': '4'}),
    ('yelp14', {'train': 1}, {'sentences': ['slow service .', 'cold fries .'], 'label': '2'}),
    ('imdb', {'train': 2, 'test': 1}, {'sentences': ['a masterpiece .', 'watch it .'], 'label': '10'}),
    ('yahoo', {'train': 2, 'test': 1},
     {'sentences': ['Why is the sky blue?\nI wonder\nwhy it is blue.\nRayleigh scattering\nof sunlight.'],
      'label': '5'}),
    ('amazon', {'train': 2, 'test': 1},
     {'sentences': ['Okay product\nIt works, mostly.\nBattery is weak.'], 'label': '3'}),
    ('convote', {'train': 2, 'validation': 1, 'test': 1},
     {'sentences': ['mr. speaker , i rise in support of this bill . it is a good bill .'], 'label': 'N'}),
])
def test_document_classification_formats(config, splits, first, fixtures_dir, tmp_path, no_tensorflow):
  sub = f'document_classification/{config}'
  rep = _report('document_classification', fixtures_dir, tmp_path, config=config, sub=sub)
  assert rep['num_examples'] == splits
  first_split = next(iter(splits))
  examples = _load('document_classification', fixtures_dir, tmp_path, first_split, config=config, sub=sub)
  assert examples[0] == first


def test_document_classification_details(fixtures_dir, tmp_path):
  sub = 'document_classification/'
  yahoo = _load('document_classification', fixtures_dir, tmp_path, 'train', 'yahoo', sub + 'yahoo')
  assert yahoo[1] == {'sentences': ['Best team?\nDepends, "really" on you.'], 'label': '9'}  # "" unquoted
  convote = _load('document_classification', fixtures_dir, tmp_path, 'train', 'convote', sub + 'convote')
  assert [e['label'] for e in convote] == ['N', 'Y']  # ..._DON.txt, ..._RMY.txt
  rep = _report('document_classification', fixtures_dir, tmp_path, 'csfd', sub + 'csfd')
  assert rep['num_examples'] == {'train': 4} and rep['dropped'] == {'train': {'empty_line': 1}}
  csfd = _load('document_classification', fixtures_dir, tmp_path, 'train', 'csfd', sub + 'csfd')
  assert [(e['label'], e['sentences']) for e in csfd] == [
      ('negative', ['Nuda a ztráta času.']), ('neutral', ['Dá se na to dívat.']),
      ('positive', ['Skvělý film, doporučuji.']), ('positive', ['Nejlepší role Tom Hankse.'])]
  # yelp15 test file only; convote found from convote_v1.1/ as well as from data_stage_one/.
  assert builders.available_splits('document_classification', manual_dir=fixtures_dir / sub / 'yelp15',
                                   config='yelp15') == ['test']
  assert builders.available_splits(
      'document_classification', config='convote',
      manual_dir=fixtures_dir / sub / 'convote' / 'convote_v1.1' / 'data_stage_one') == ['train', 'validation', 'test']


def test_document_classification_needs_a_config(fixtures_dir, tmp_path):
  with pytest.raises(ValueError, match="needs a config, one of .*'yelp13'"):
    _load('document_classification', fixtures_dir, tmp_path, 'train', sub='document_classification/yelp13')


@pytest.mark.parametrize('line, message', [
    ('u\t\tp\t\t4', 'expected 4 fields'),
    ('u\t\tp\t\t6\t\ttext .', "rating '6' is not an integer in 1..5"),
    ('u\t\tp\t\tfour\t\ttext .', "rating 'four'"),
    ('u\t\tp\t\t4\t\t <sssss> ', 'document without text'),
])
def test_tang_rejects_malformed_lines(line, message):
  with pytest.raises(ValueError, match=message):
    document_classification.parse_tang_line(line, 5)


def test_document_malformed_inputs_name_file_and_line(tmp_path):
  manual = tmp_path / 'imdb'
  manual.mkdir()
  (manual / 'imdb.dev.txt.ss').write_text('u\t\tp\t\t3\t\tfine .\nu\t\tp\t\t11\t\ttoo high .\n')
  with pytest.raises(ValueError, match=r"imdb\.dev\.txt\.ss:2: rating '11' is not an integer in 1\.\.10"):
    builders.load_examples('document_classification', 'dev', manual_dir=manual, data_dir=tmp_path / 'tfds',
                           config='imdb')
  manual = tmp_path / 'amazon'
  manual.mkdir()
  # Row 2 spans lines 2-3 (a quoted newline); row 3 starts on line 4 and has 2 columns.
  (manual / 'test.csv').write_text('"1","a","b"\n"2","c","multi\nline"\n"3","only two"\n')
  with pytest.raises(ValueError, match=r'test\.csv:4: expected 3 comma-separated columns, got 2'):
    builders.load_examples('document_classification', 'test', manual_dir=manual, data_dir=tmp_path / 'tfds',
                           config='amazon')
  manual = tmp_path / 'convote' / 'data_stage_one' / 'test_set'
  manual.mkdir(parents=True)
  (manual / 'speech_one.txt').write_text('text\n')
  with pytest.raises(ValueError, match=r"speech_one\.txt: convote file name 'speech_one\.txt' does not match"):
    builders.available_splits('document_classification', manual_dir=tmp_path / 'convote', config='convote')
  manual = tmp_path / 'csfd'
  manual.mkdir()
  (manual / 'positive.txt').write_text('good\n')
  with pytest.raises(FileNotFoundError, match='negative.txt.*all three classes are needed'):
    builders.available_splits('document_classification', manual_dir=manual, config='csfd')


# --------------------------------------------------------------------------- Text classification

def test_text_classification_tsv_and_jsonl(fixtures_dir, tmp_path, no_tensorflow):
  rep = _report('text_classification', fixtures_dir, tmp_path, sub='text_classification/tsv_data')
  assert rep['config'] == 'tsv_data'  # named after the folder
  assert rep['num_examples'] == {'train': 2, 'validation': 1, 'test': 1}
  assert _load('text_classification', fixtures_dir, tmp_path, 'train', sub='text_classification/tsv_data') == [
      {'text': 'Korean input system. It supports many methods.', 'label': 'utils'},
      {'text': 'A puzzle game.\tWith a tab inside.', 'label': 'games'}]
  rep = _report('text_classification', fixtures_dir, tmp_path, sub='text_classification/jsonl_data')
  assert rep['num_examples'] == {'train': 2, 'validation': 1}
  assert _load('text_classification', fixtures_dir, tmp_path, 'train', sub='text_classification/jsonl_data') == [
      {'text': 'I loved it.', 'label': 'pos'}, {'text': 'Awful.', 'label': '0'}]


@pytest.mark.parametrize('parse, line, message', [
    (text_classification.parse_tsv_line, 'no tab here', 'found no tab'),
    (text_classification.parse_tsv_line, '\tsome text', 'empty label'),
    (text_classification.parse_tsv_line, 'pos\t  ', 'empty text'),
    (text_classification.parse_jsonl_line, '{"text": "a"}', '"label" must be'),
    (text_classification.parse_jsonl_line, '{"text": "a", "label": true}', '"label" must be'),
    (text_classification.parse_jsonl_line, '{"label": "x"}', '"text"'),
    (text_classification.parse_jsonl_line, 'text\tlabel', 'invalid JSON'),
])
def test_text_classification_rejects_malformed_lines(parse, line, message):
  with pytest.raises(ValueError, match=message):
    parse(line)


def test_text_classification_errors_name_file_and_line(tmp_path):
  manual = tmp_path / 'mine'
  manual.mkdir()
  (manual / 'train.tsv').write_text('a\tone\nno tab\nb\ttwo\n')
  with pytest.raises(ValueError, match=r'train\.tsv:2: expected "label<TAB>text"'):
    builders.load_examples('text_classification', 'train', manual_dir=manual, data_dir=tmp_path / 'tfds')
  (manual / 'train.jsonl').write_text('{"text": "a", "label": "b"}\n')
  with pytest.raises(ValueError, match=r"ambiguous.*\['train\.tsv', 'train\.jsonl'\]"):
    builders.available_splits('text_classification', manual_dir=manual)


@pytest.mark.parametrize('suffix', ['.tsv', '.jsonl'])
def test_text_classification_skips_and_counts_blank_lines(tmp_path, suffix):
  # A trailing blank line was an error ('found no tab'); now skipped and counted.
  manual = tmp_path / 'mine'
  manual.mkdir()
  rows = (['pos\tgood', '', 'neg\tbad', '  ', ''] if suffix == '.tsv' else
          ['{"text": "good", "label": "pos"}', '', '{"text": "bad", "label": "neg"}', '  ', ''])
  (manual / f'train{suffix}').write_text('\n'.join(rows) + '\n')
  rep = builders.report('text_classification', manual_dir=manual, data_dir=tmp_path / 'tfds')
  assert rep['num_examples'] == {'train': 2} and rep['dropped'] == {'train': {'blank_line': 3}}
  # Called directly, the line parsers say the line is blank.
  with pytest.raises(ValueError, match='blank line'):
    text_classification.parse_tsv_line('  ')
  with pytest.raises(ValueError, match='blank line'):
    text_classification.parse_jsonl_line('')


_BOM_FILES = {'utf-8': lambda t: b'\xef\xbb\xbf' + t.encode('utf-8'),
              'utf-16-le': lambda t: b'\xff\xfe' + t.encode('utf-16-le'),
              'utf-16-be': lambda t: b'\xfe\xff' + t.encode('utf-16-be'),
              'utf-16 (Python)': lambda t: t.replace('\n', '\r\n').encode('utf-16')}


@pytest.mark.parametrize('kind', sorted(_BOM_FILES))
def test_byte_order_marks_are_removed(tmp_path, kind):
  # A UTF-8 BOM made a third label '\ufeffpos' on a binary set.
  manual = tmp_path / 'mine'
  manual.mkdir()
  (manual / 'train.tsv').write_bytes(_BOM_FILES[kind]('pos\tgood f\u00eete\nneg\tbad\n'))
  assert builders.load_examples('text_classification', 'train', manual_dir=manual,
                                data_dir=tmp_path / 'tfds') == [
                                    {'text': 'good f\u00eete', 'label': 'pos'},
                                    {'text': 'bad', 'label': 'neg'}]


def test_every_text_reader_removes_a_byte_order_mark(tmp_path):
  # The shared readers, and the CSV reader of the Zhang et al. files (its own csv module loop).
  path = tmp_path / 'lines.txt'
  for encode in _BOM_FILES.values():
    path.write_bytes(encode('\u00e9a\tb\nc\n'))
    assert list(builders._base.read_lines(path)) == [(1, '\u00e9a\tb'), (2, 'c')]
  gz = tmp_path / 'lines.txt.gz'
  gz.write_bytes(gzip.compress(b'\xef\xbb\xbfa\nb\n'))
  assert list(builders._base.read_lines(gz)) == [(1, 'a'), (2, 'b')]
  manual = tmp_path / 'yahoo'
  manual.mkdir()
  (manual / 'train.csv').write_bytes(b'\xef\xbb\xbf"3","What?","Why?","Because."\n')
  examples = builders.load_examples('document_classification', 'train', manual_dir=manual,
                                    data_dir=tmp_path / 'tfds', config='yahoo')
  assert [e['label'] for e in examples] == ['3']


def test_undecodable_files_count_their_bad_lines_and_leave_nothing_behind(tmp_path):
  # cp1252 movie reviews: the error named only the first of 160 bad lines, offered no encoding and
  # left an empty dataset folder behind.
  manual = tmp_path / 'reviews'
  manual.mkdir()
  lines = [f'pos\tline {i}' + (' \x93quoted\x94' if i in (3, 5, 8, 9, 12, 13, 20) else '')
           for i in range(1, 22)]
  (manual / 'train.tsv').write_bytes('\n'.join(lines).encode('latin-1') + b'\n')
  data_dir = tmp_path / 'tfds'
  data_dir.mkdir()
  (data_dir / 'keep.txt').write_text('not ours')
  with pytest.raises(builders.FormatError,
                     match=r'train\.tsv:3: not valid utf-8 text \(invalid start byte at byte 11\); 7 lines '
                           r'are not valid utf-8 \(lines 3, 5, 8, 9, 12, \.\.\.\); .*config\.data\.encoding'):
    builders.load_examples('text_classification', 'train', manual_dir=manual, data_dir=data_dir)
  left = sorted(str(p.relative_to(data_dir)) for p in data_dir.rglob('*') if not p.name.startswith('.'))
  assert left == ['keep.txt']
  examples = builders.load_examples('text_classification', 'train', manual_dir=manual,
                                    data_dir=data_dir, encoding='cp1252')
  assert examples[2] == {'text': 'line 3 \u201cquoted\u201d', 'label': 'pos'} and len(examples) == 21
  # The encoding is part of the data set: reading it as latin-1 rebuilds it (no stale cp1252 text).
  examples = builders.load_examples('text_classification', 'train', manual_dir=manual,
                                    data_dir=data_dir, encoding='latin-1')
  assert examples[2]['text'] == 'line 3 \x93quoted\x94'
  with pytest.raises(ValueError, match=r'sst: the upstream format fixes the text encoding'):
    builders.load_examples('sst', 'train', manual_dir=manual, data_dir=data_dir, encoding='cp1252')
  with pytest.raises(ValueError, match=r"unknown text encoding 'klingon'"):
    builders.load_examples('text_classification', 'train', manual_dir=manual, data_dir=data_dir,
                           encoding='klingon')


def test_document_classification_takes_an_encoding(tmp_path):
  manual = tmp_path / 'yelp'
  manual.mkdir()
  (manual / 'yelp-2013-seg-20-20.train.ss').write_bytes(
      'u1\t\tp1\t\t4\t\tcaf\u00e9 \u2013 great . <sssss> ok\n'.encode('cp1252'))
  with pytest.raises(builders.FormatError, match=r'train\.ss:1: not valid utf-8 .*config\.data\.encoding'):
    builders.load_examples('document_classification', 'train', manual_dir=manual,
                           data_dir=tmp_path / 'tfds', config='yelp13')
  assert builders.load_examples('document_classification', 'train', manual_dir=manual,
                                data_dir=tmp_path / 'tfds', config='yelp13', encoding='cp1252') == [
                                    {'sentences': ['caf\u00e9 \u2013 great .', 'ok'], 'label': '4'}]


def test_malformed_lines_are_counted_with_the_first_few(tmp_path):
  manual = tmp_path / 'mine'
  manual.mkdir()
  (manual / 'train.tsv').write_text('a\tone\nno tab\nb\ttwo\nnone here\n\t x\n')
  with pytest.raises(builders.FormatError, match=r'train\.tsv:2: expected "label<TAB>text", found no '
                     r'tab; 3 lines are malformed \(lines 2, 4, 5\); .*on_bad_lines=skip$'):
    builders.load_examples('text_classification', 'train', manual_dir=manual, data_dir=tmp_path / 'tfds')
  assert not (tmp_path / 'tfds' / 'text_classification').exists()
  # One bad line: the message is as before, without a count.
  (manual / 'train.tsv').write_text('a\tone\nno tab\n')
  with pytest.raises(builders.FormatError, match=r'train\.tsv:2: expected "label<TAB>text", found no tab; to leave bad lines out and count them, set '
                     r'--config\.data\.on_bad_lines=skip$'):
    builders.load_examples('text_classification', 'train', manual_dir=manual, data_dir=tmp_path / 'tfds')