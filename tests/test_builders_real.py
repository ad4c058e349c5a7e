"""The builders over the real copies in ../shared/data, against the figures of its PROVENANCE.md
(the published split sizes and label distributions). Each dataset is built once per session.
"""
import collections

import pytest

from jax_structured.data import builders


@pytest.fixture(scope='module')
def tfds_dir(tmp_path_factory):
  return tmp_path_factory.mktemp('tfds_real')


def _build(shared_data, tfds_dir, name, sub, config=None):
  rep = builders.report(name, manual_dir=shared_data / sub, data_dir=tfds_dir, config=config)
  load = lambda split: builders.load_examples(name, split, manual_dir=shared_data / sub, data_dir=tfds_dir,
                                              config=config)
  return rep, load


def test_sst_counts_and_root_labels(shared_data, tfds_dir):
  rep, load = _build(shared_data, tfds_dir, 'sst', 'sst', 'fine')
  assert rep['num_examples'] == {'train': 8544, 'validation': 1101, 'test': 2210}
  expected = {'train': [1092, 2218, 1624, 2322, 1288], 'validation': [139, 289, 229, 279, 165],
              'test': [279, 633, 389, 510, 399]}
  for split, counts in expected.items():
    examples = load(split)
    assert [collections.Counter(e['label'] for e in examples)[k] for k in range(5)] == counts
  first = load('train')[0]
  assert first['text'].startswith("The Rock is destined to be the 21st Century 's new `` Conan ''")
  assert first['tree'].startswith('(3 (2 (2 The) (2 Rock)) (4 (3 (2 is)')
  # Binary task: neutral roots dropped and counted (Socher et al. 2013: 6920/872/1821).
  rep, _ = _build(shared_data, tfds_dir, 'sst', 'sst', 'binary')
  assert rep['num_examples'] == {'train': 6920, 'validation': 872, 'test': 1821}
  assert rep['dropped'] == {'train': {'neutral_root': 1624}, 'validation': {'neutral_root': 229},
                            'test': {'neutral_root': 389}}


def test_trec_counts(shared_data, tfds_dir):
  rep, load = _build(shared_data, tfds_dir, 'trec', 'trec')
  assert rep['num_examples'] == {'train': 5452, 'test': 500}
  train, test = load('train'), load('test')
  assert collections.Counter(e['label_coarse'] for e in train) == {
      'ABBR': 86, 'DESC': 1162, 'ENTY': 1250, 'HUM': 1223, 'LOC': 835, 'NUM': 896}
  assert collections.Counter(e['label_coarse'] for e in test) == {
      'ABBR': 9, 'DESC': 138, 'ENTY': 94, 'HUM': 65, 'LOC': 81, 'NUM': 113}
  assert len({e['label_fine'] for e in train}) == 50
  assert train[0] == {'text': 'How did serfdom develop in and then leave Russia ?', 'label_coarse': 'DESC',
                      'label_fine': 'DESC:manner'}
  assert 'sister\u00f0city' in train[65]['text']  # the one ISO-8859-1 byte, line 66


def test_ptb_lm_lines_and_tokens(shared_data, tfds_dir):
  rep, load = _build(shared_data, tfds_dir, 'ptb_lm', 'ptb_lm')
  assert rep['num_examples'] == {'train': 42068, 'validation': 3370, 'test': 3761}
  tokens = {split: sum(len(e['text'].split()) for e in load(split)) for split in rep['num_examples']}
  assert tokens == {'train': 887521, 'validation': 70390, 'test': 78669}


def test_snli_labelled_and_dropped(shared_data, tfds_dir):
  rep, load = _build(shared_data, tfds_dir, 'snli', 'snli_1.0')
  assert rep['num_examples'] == {'validation': 9842, 'test': 9824}
  assert rep['dropped'] == {'validation': {'no_gold_label': 158}, 'test': {'no_gold_label': 176}}
  assert collections.Counter(e['label'] for e in load('validation')) == {
      'entailment': 3329, 'contradiction': 3278, 'neutral': 3235}
  assert collections.Counter(e['label'] for e in load('test')) == {
      'entailment': 3368, 'contradiction': 3237, 'neutral': 3219}


def test_quora_balanced_partition(shared_data, tfds_dir):
  rep, load = _build(shared_data, tfds_dir, 'quora_qqp', 'quora_qqp_wang2017_partition')
  assert rep['num_examples'] == {'validation': 10000, 'test': 10000}
  dev = load('validation')
  assert sum(e['label'] for e in dev) == 5000 and sum(e['label'] for e in load('test')) == 5000
  assert dev[0] == {'question1': 'How do I get funding for my web based startup idea ?',
                    'question2': 'How do I get seed funding pre product ?', 'label': 1}


def test_ud_english_ewt(shared_data, tfds_dir):
  rep, load = _build(shared_data, tfds_dir, 'universal_dependencies', 'ud_english_ewt')
  assert rep['config'] == 'en_ewt'
  assert rep['num_examples'] == {'train': 12544, 'validation': 2001, 'test': 2077}
  tokens = {}
  for split in rep['num_examples']:
    examples = load(split)
    tokens[split] = sum(len(e['tokens']) for e in examples)
    for e in examples:  # every sentence is a tree: one root, heads in 0..n
      n = len(e['tokens'])
      assert e['heads'].count(0) == 1 and all(0 <= h <= n for h in e['heads'])
      assert len(e['lemmas']) == len(e['upos']) == len(e['xpos']) == len(e['deprels']) == n
  assert tokens == {'train': 204577, 'validation': 25147, 'test': 25094}


def test_iwslt_test_sets(shared_data, tfds_dir):
  rep, load = _build(shared_data, tfds_dir, 'iwslt15_en_vi', 'iwslt15_en_vi')
  assert rep['num_examples'] == {'validation': 1553, 'test': 1268}
  assert load('validation')[1]['en'] == 'This is not a finished story .'


def test_debian_descriptions(shared_data, tfds_dir):
  rep, load = _build(shared_data, tfds_dir, 'text_classification', 'debian_descriptions')
  assert rep['config'] == 'debian_descriptions'
  assert rep['num_examples'] == {'train': 9761, 'validation': 1220, 'test': 1220}
  labels = collections.Counter(e['label'] for e in load('train'))
  assert set(labels) == {'utils', 'net', 'science', 'admin', 'x11', 'text', 'games', 'sound', 'graphics', 'web',
                         'math', 'mail', 'editors', 'database', 'video', 'electronics'}
  test = load('test')
  majority = collections.Counter(e['label'] for e in test).most_common(1)[0][1] / len(test)
  assert round(100 * majority, 1) == 17.9  # PROVENANCE.md: majority class 17.9% on test
