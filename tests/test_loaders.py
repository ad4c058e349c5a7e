"""End-to-end tests of the registered loaders over the builders' fixtures and ../shared/data."""
import collections
import gzip
import json
import shutil

import ml_collections
import numpy as np
import pytest

from jax_structured import data
from jax_structured.data import core
from jax_structured.data import builders
from jax_structured.data import loaders
from jax_structured.data import text


@pytest.fixture(scope='module')
def tfds_dir(tmp_path_factory):
  """One TFDS data_dir per module for the fixtures, so every dataset is built once."""
  return tmp_path_factory.mktemp('tfds')


@pytest.fixture(scope='module')
def shared_tfds_dir(tmp_path_factory):
  """A separate data_dir for ../shared/data (same dataset names: no rebuild ping-pong)."""
  return tmp_path_factory.mktemp('tfds_shared')


def _config(name, manual_dir, tfds_dir, **overrides):
  config = loaders.default_config(name)
  config.manual_dir = str(manual_dir)
  config.data_dir = str(tfds_dir)
  for key, value in overrides.items():
    setattr(config, key, value)
  return config


def _all_once(split, batch_size=4):
  """Batches the split and checks every example appears exactly once."""
  seen = collections.Counter()
  for b in split.batches(batch_size, shuffle=True, seed=0, epoch=0):
    seen.update(int(i) for i, m in zip(b['example_index'], b['example_mask']) if m)
  assert sorted(seen) == list(range(len(split))) and set(seen.values()) <= {1}


# --------------------------------------------------------------------------------------------------
# Schema


def test_registered_and_schema_errors(tmp_path):
  for name in loaders.LOADER_DEFAULTS:
    assert name in data.names()
  config = loaders.default_config('sst')
  config.manual_dir = str(tmp_path)
  with pytest.raises(ValueError, match=r'config\.data\.min_cont'):
    data.load(ml_collections.ConfigDict({**config.to_dict(), 'min_cont': 3}))
  bad = loaders.default_config('trec')
  bad.manual_dir = str(tmp_path)
  with pytest.raises(ValueError, match=r'config\.data\.min_count=.*must be of type int'):
    loaders.validate_config({**bad.to_dict(), 'min_count': '6'}, 'trec')
  with pytest.raises(ValueError, match=r'config\.data\.manual_dir is empty'):
    data.load(loaders.default_config('snli'))
  with pytest.raises(ValueError, match='"fine" or "binary"'):
    data.load(_config('sst', tmp_path, tmp_path, config='five'))
  with pytest.raises(KeyError, match='unknown loader'):
    loaders.default_config('nope')
  # Keys of one loader are unknown to another.
  with pytest.raises(ValueError, match=r'config\.data\.num_steps'):
    loaders.validate_config({**bad.to_dict(), 'num_steps': 35}, 'trec')


# --------------------------------------------------------------------------------------------------
# Sentence classification


def _sst_nodes(path):
  with open(path, encoding='utf-8') as f:
    return [text.sst_phrases(line.strip()) for line in f if line.strip()]


def test_sst_fixture(fixtures_dir, tfds_dir):
  task = data.load(_config('sst', fixtures_dir / 'sst', tfds_dir))
  assert task.kind == 'sentence' and task.num_classes == 5
  trees = {s: _sst_nodes(fixtures_dir / 'sst' / f) for s, f in
           [('train', 'train.txt'), ('validation', 'dev.txt'), ('test', 'test.txt')]}
  for split, nodes in trees.items():
    examples = task.splits[split].examples
    assert [e['label'] for e in examples] == [n[0][0] for n in nodes]
    assert [task.vocab.decode(e['tokens']) for e in examples] == [
        [w.lower() if w in task.vocab or w.lower() in task.vocab else '<unk>' for w in n[0][1]]
        for n in nodes]
  # The vocabulary comes from train only.
  train_words = {w.lower() for n in trees['train'] for w in n[0][1]}
  assert set(task.vocab.tokens[2:]) == train_words
  _all_once(task.splits['validation'])
  # Phrases: every labelled node of the training trees.
  phrases = data.load(_config('sst', fixtures_dir / 'sst', tfds_dir, train_phrases=True))
  assert len(phrases.splits['train']) == sum(len(n) for n in trees['train'])
  assert len(phrases.splits['validation']) == len(trees['validation'])


@pytest.mark.shared_data
def test_sst_shared_counts(shared_data, shared_tfds_dir):
  fine = data.load(_config('sst', shared_data / 'sst', shared_tfds_dir))
  assert {s: len(v) for s, v in fine.splits.items()} == {'train': 8544, 'validation': 1101, 'test': 2210}
  counts = collections.Counter(e['label'] for e in fine.splits['train'].examples)
  assert [counts[i] for i in range(5)] == [1092, 2218, 1624, 2322, 1288]  # PROVENANCE.md
  binary = data.load(_config('sst', shared_data / 'sst', shared_tfds_dir, config='binary'))
  # The standard binary split (Socher et al. 2013; Tai et al. 2015).
  assert {s: len(v) for s, v in binary.splits.items()} == {'train': 6920, 'validation': 872, 'test': 1821}
  assert binary.skipped == {'train/neutral_root': 1624, 'validation/neutral_root': 229,
                            'test/neutral_root': 389}
  _all_once(binary.splits['test'], batch_size=64)


def test_trec_fixture(fixtures_dir, tmp_path, tfds_dir):
  manual = tmp_path / 'trec'
  manual.mkdir()
  shutil.copy(fixtures_dir / 'trec' / 'train_5500.label', manual)
  (manual / 'TREC_10.label').write_bytes(b'NUM:date When was Elvis born ?\n'
                                         b'HUM:ind Who wrote it ?\n')
  task = data.load(_config('trec', manual, tfds_dir, validation_fraction=0.25))
  assert len(task.splits['train']) == 3 and len(task.splits['validation']) == 1
  assert len(task.splits['test']) == 2
  assert task.label_names == ['DESC', 'ENTY', 'HUM', 'NUM']  # held-out dev labels included
  fine = data.load(_config('trec', manual, tfds_dir, validation_fraction=0.0, config='fine'))
  assert 'validation' not in fine.splits
  # Kim's clean_str keeps the case for TREC; "sister\xf0city" is split at the non-ASCII byte.
  words = [fine.vocab.decode(e['tokens']) for e in fine.splits['train'].examples]
  assert ['What', 'sister', 'city', 'of', 'Tijuana', 'is', 'famous', '?'] in words
  assert fine.label_names == sorted(['DESC:manner', 'ENTY:cremat', 'HUM:ind', 'NUM:date'])
  assert [fine.label_names[e['label']] for e in fine.splits['test'].examples] == ['NUM:date',
                                                                                  'HUM:ind']


def test_trec_unseen_test_label_names_file_and_line(fixtures_dir, tfds_dir):
  # The fixture's test questions are NUM:dist and LOC:city; train has neither label, nor LOC.
  with pytest.raises(ValueError, match=r'TREC_10\.label:1: .*label .NUM:dist. does not occur in '
                                       'train'):
    data.load(_config('trec', fixtures_dir / 'trec', tfds_dir, config='fine',
                      validation_fraction=0.0))
  with pytest.raises(ValueError, match=r'TREC_10\.label:2: .*label .LOC. does not occur in train'):
    data.load(_config('trec', fixtures_dir / 'trec', tfds_dir, validation_fraction=0.0))


@pytest.mark.shared_data
def test_trec_shared(shared_data, shared_tfds_dir):
  task = data.load(_config('trec', shared_data / 'trec', shared_tfds_dir))
  assert len(task.splits['train']) + len(task.splits['validation']) == 5452
  assert len(task.splits['validation']) == 545 and len(task.splits['test']) == 500
  counts = collections.Counter(task.label_names[e['label']] for s in ('train', 'validation')
                               for e in task.splits[s].examples)
  assert counts == {'ABBR': 86, 'DESC': 1162, 'ENTY': 1250, 'HUM': 1223, 'LOC': 835, 'NUM': 896}
  test_counts = collections.Counter(task.label_names[e['label']]
                                    for e in task.splits['test'].examples)
  assert test_counts == {'ABBR': 9, 'DESC': 138, 'ENTY': 94, 'HUM': 65, 'LOC': 81, 'NUM': 113}
  again = data.load(_config('trec', shared_data / 'trec', shared_tfds_dir))
  assert all(np.array_equal(a['tokens'], b['tokens'])
             for a, b in zip(task.splits['validation'].examples, again.splits['validation'].examples))
  other_seed = data.load(_config('trec', shared_data / 'trec', shared_tfds_dir, seed=1))
  assert [len(e['tokens']) for e in other_seed.splits['validation'].examples] != [
      len(e['tokens']) for e in task.splits['validation'].examples]


# --------------------------------------------------------------------------------------------------
# Pairs


def test_snli(fixtures_dir, tmp_path, tfds_dir):
  manual = tmp_path / 'snli'
  manual.mkdir()
  shutil.copy(fixtures_dir / 'snli' / 'snli_1.0_dev.jsonl', manual)
  records = [('entailment', '( ( A dog ) ( runs . ) )', '( An animal ( moves . ) )'),
             ('contradiction', '( ( A dog ) ( sleeps . ) )', '( ( A dog ) ( runs . ) )'),
             ('-', '( Nobody . )', '( Agreed . )')]
  with gzip.open(manual / 'snli_1.0_train.jsonl.gz', 'wt', encoding='utf-8') as f:
    for i, (label, p, h) in enumerate(records):
      f.write(json.dumps({'gold_label': label, 'sentence1': '', 'sentence2': '', 'pairID': str(i),
                          'sentence1_binary_parse': p, 'sentence2_binary_parse': h}) + '\n')
  task = data.load(_config('snli', manual, tfds_dir))
  assert task.kind == 'pair' and task.label_names == ['entailment', 'neutral', 'contradiction']
  train = task.splits['train'].examples
  assert [e['label'] for e in train] == [0, 2]
  assert task.vocab.decode(train[0]['premise']) == ['A', 'dog', 'runs', '.']
  assert task.vocab.decode(train[0]['hypothesis']) == ['An', 'animal', 'moves', '.']
  assert task.skipped['train/no_gold_label'] == 1
  assert task.skipped.get('validation/no_gold_label', 0) >= 1
  b = next(task.splits['train'].batches(2, shuffle=False))
  assert set(b) >= {'premise', 'premise_lengths', 'hypothesis', 'hypothesis_lengths', 'label'}


def test_quora(fixtures_dir, tfds_dir):
  task = data.load(_config('quora_qqp', fixtures_dir / 'quora_qqp', tfds_dir))
  assert task.label_names == ['not_duplicate', 'duplicate']
  with open(fixtures_dir / 'quora_qqp' / 'train.tsv', encoding='utf-8') as f:
    rows = [line.rstrip('\n').split('\t') for line in f]  # BiMPM layout: label, q1, q2, id
  train = task.splits['train'].examples
  assert [e['label'] for e in train] == [int(r[0]) for r in rows]
  assert [task.vocab.decode(e['premise']) for e in train] == [r[1].split() for r in rows]
  assert [task.vocab.decode(e['hypothesis']) for e in train] == [r[2].split() for r in rows]
  assert len(task.splits['validation']) == 2 and len(task.splits['test']) == 1


# --------------------------------------------------------------------------------------------------
# Language modelling


def test_ptb_lm_fixture(fixtures_dir, tfds_dir):
  task = data.load(_config('ptb_lm', fixtures_dir / 'ptb_lm', tfds_dir, num_steps=3))
  (train,) = task.splits['train'].examples
  with open(fixtures_dir / 'ptb_lm' / 'ptb.train.txt', encoding='utf-8') as f:
    words = [w for line in f for w in line.split() + ['<eos>']]
  assert task.vocab.decode(train['tokens']) == words  # '<unk>' in the data is our UNK
  assert task.vocab.id('<unk>') == core.UNK_ID
  batches = list(task.splits['train'].batches(2, shuffle=True, seed=0, epoch=0))
  assert all(b['inputs'].shape == (2, 3) for b in batches)
  assert sum(b['mask'].sum() for b in batches) == len(words) - 2
  per_sentence = data.load(_config('ptb_lm', fixtures_dir / 'ptb_lm', tfds_dir, num_steps=0))
  assert len(per_sentence.splits['train']) == 2 and per_sentence.splits['train'].num_steps is None


@pytest.mark.shared_data
def test_ptb_lm_shared_sizes(shared_data, shared_tfds_dir):
  task = data.load(_config('ptb_lm', shared_data / 'ptb_lm', shared_tfds_dir))
  # Mikolov's PTB: 10k word types including <eos> and <unk>, plus our <pad>.
  assert len(task.vocab) == 10001
  # 887,521 words + 42,068 <eos> = the well-known 929k training tokens (PROVENANCE.md).
  assert len(task.splits['train'].examples[0]['tokens']) == 887521 + 42068
  assert len(task.splits['validation'].examples[0]['tokens']) == 70390 + 3370
  assert len(task.splits['test'].examples[0]['tokens']) == 78669 + 3761


# --------------------------------------------------------------------------------------------------
# Parsing


def _conllu_rows(path):
  with open(path, encoding='utf-8') as f:
    return [line.rstrip('\n').split('\t') for line in f
            if line.strip() and not line.startswith('#') and line.split('\t')[0].isdigit()]


def test_universal_dependencies(fixtures_dir, tfds_dir):
  manual = fixtures_dir / 'universal_dependencies'
  task = data.load(_config('universal_dependencies', manual, tfds_dir))
  assert task.kind == 'parse'
  rows = _conllu_rows(manual / 'xx_test-ud-train.conllu')
  train = task.splits['train'].examples
  heads = np.concatenate([e['heads'] for e in train])
  np.testing.assert_array_equal(heads, [int(r[6]) - 1 for r in rows])
  assert task.extras['relation_names'][:2] == ['<pad>', '<unk>']
  relations = [task.extras['relation_names'][i] for e in train for i in e['relations']]
  assert relations == [r[7] for r in rows]
  tags = [t for e in train for t in task.extras['tag_vocab'].decode(e['tags'])]
  assert tags == [r[3] for r in rows]
  b = next(task.splits['train'].batches(4, shuffle=False))
  assert set(b) >= {'tokens', 'tags', 'heads', 'relations', 'lengths', 'example_mask'}
  stripped = data.load(_config('universal_dependencies', manual, tfds_dir,
                               strip_relation_subtypes=True))
  assert all(':' not in r for r in stripped.extras['relation_names'])
  assert 'chars' not in train[0] and 'chars' not in b
  # max_chars: byte ids of the words as written (lowercase applies to the word ids only).
  chars = data.load(_config('universal_dependencies', manual, tfds_dir, max_chars=5, lowercase=True))
  words = [r[1] for r in rows]
  got = np.concatenate([e['chars'] for e in chars.splits['train'].examples])
  np.testing.assert_array_equal(got, text.char_ids(words, 5))
  assert next(chars.splits['train'].batches(4, shuffle=False))['chars'].shape[2] == 5
  with pytest.raises(ValueError, match='config.data.max_chars=2'):
    data.load(_config('universal_dependencies', manual, tfds_dir, max_chars=2))


@pytest.mark.shared_data
def test_universal_dependencies_shared_ewt(shared_data, shared_tfds_dir):
  task = data.load(_config('universal_dependencies', shared_data / 'ud_english_ewt',
                           shared_tfds_dir))
  # The standard EWT sizes (PROVENANCE.md): sentences and basic tokens per split.
  assert {s: len(v) for s, v in task.splits.items()} == {'train': 12544, 'validation': 2001, 'test': 2077}
  assert {s: sum(len(e['tokens']) for e in v.examples) for s, v in task.splits.items()} == {
      'train': 204577, 'validation': 25147, 'test': 25094}
  assert task.extras['tag_vocab'].tokens[2:] == sorted(
      'ADJ ADP ADV AUX CCONJ DET INTJ NOUN NUM PART PRON PROPN PUNCT SCONJ SYM VERB X'.split())
  root = task.extras['relation_vocab'].id('root')
  for e in task.splits['train'].examples:  # one word hangs from ROOT, with relation 'root'
    assert np.count_nonzero(e['heads'] == -1) == 1
    assert e['relations'][e['heads'] == -1][0] == root


# --------------------------------------------------------------------------------------------------
# Translation


def test_iwslt15_en_vi(fixtures_dir, tmp_path, tfds_dir):
  manual = tmp_path / 'iwslt'
  shutil.copytree(fixtures_dir / 'iwslt15_en_vi', manual)
  (manual / 'train.en').write_text('Hello world .\nThank you .\n' + 'long ' * 60 + '\n',
                                   encoding='utf-8')
  (manual / 'train.vi').write_text('Xin chào thế giới .\nCảm ơn .\nx\n', encoding='utf-8')
  task = data.load(_config('iwslt15_en_vi', manual, tfds_dir))
  assert task.kind == 'translation'
  assert task.skipped == {'train/too_long': 1}
  target_vocab = task.extras['target_vocab']
  first = task.splits['train'].examples[0]
  assert task.vocab.decode(first['source']) == ['Hello', 'world', '.']
  assert target_vocab.decode(first['target']) == ['<s>', 'Xin', 'chào', 'thế', 'giới', '.', '</s>']
  assert first['target'][0] == task.extras['bos_id'] == 2
  assert first['target'][-1] == task.extras['eos_id'] == 3
  assert task.label_names == target_vocab.tokens and task.num_classes == len(target_vocab)
  assert len(task.splits['validation']) == 2 and len(task.splits['test']) == 1
  # Train on tst2012 (the builder's 'validation'), half of it held out, test on tst2013.
  swapped = data.load(_config('iwslt15_en_vi', manual, tfds_dir, train_split='validation',
                              validation_split='', validation_fraction=0.5))
  assert [len(swapped.splits[s]) for s in ('train', 'validation', 'test')] == [1, 1, 1]
  _all_once(task.splits['validation'], batch_size=2)


# --------------------------------------------------------------------------------------------------
# Documents


def test_document_classification_unseen_labels(fixtures_dir, tfds_dir):
  with pytest.raises(ValueError, match=r'yelp-2013-seg-20-20\.dev\.ss:1: .*label .3. does not occur'):
    data.load(_config('document_classification', fixtures_dir / 'document_classification' / 'yelp13',
                      tfds_dir, config='yelp13', min_count=1))
  with pytest.raises(ValueError, match=r'yahoo/test\.csv:1: .*label .2. does not occur'):
    data.load(_config('document_classification', fixtures_dir / 'document_classification' / 'yahoo',
                      tfds_dir, config='yahoo', min_count=1, validation_fraction=0.0))


@pytest.mark.parametrize('config', ['convote', 'csfd'])
def test_document_classification(fixtures_dir, tfds_dir, config):
  task = data.load(_config('document_classification',
                           fixtures_dir / 'document_classification' / config, tfds_dir,
                           config=config, min_count=1, validation_fraction=0.0,
                           max_sentences=2, max_sentence_length=3))
  assert task.kind == 'document'
  for split in task.splits.values():
    for e in split.examples:
      assert 1 <= len(e['sentences']) <= 2 and all(1 <= len(s) <= 3 for s in e['sentences'])
    _all_once(split, batch_size=2)
  assert sum(task.extras['truncated'].values()) > 0  # counted apart: truncated documents are kept
  assert not any('truncated' in k for k in task.skipped)


def test_text_classification_fixture_unseen_dev_label(fixtures_dir, tfds_dir):
  # The fixture's dev example is labelled 'net'; train has only 'utils' and 'games'.
  with pytest.raises(ValueError, match=r'tsv_data/dev\.tsv:1: .*label .net. does not occur'):
    data.load(_config('text_classification', fixtures_dir / 'text_classification' / 'tsv_data',
                      tfds_dir, min_count=1))


def test_text_classification(tmp_path, tfds_dir):
  manual = tmp_path / 'mine'
  manual.mkdir()
  (manual / 'train.tsv').write_text('pos\tGood film. I liked it, e.g. the end.\nneg\tBad film.\n'
                                    '10\tOdd label.\n', encoding='utf-8')
  (manual / 'dev.tsv').write_text('pos\tFine.\nneg\tAwful film!\n', encoding='utf-8')
  (manual / 'test.tsv').write_text('pos\tNice.\nmeh\tSo so.\n', encoding='utf-8')
  with pytest.raises(ValueError, match=r'test\.tsv:2: .*label .meh. does not occur in train'):
    data.load(_config('text_classification', manual, tfds_dir))
  (manual / 'test.tsv').write_text('pos\tNice.\n', encoding='utf-8')
  task = data.load(_config('text_classification', manual, tfds_dir, min_count=1))
  assert task.kind == 'sentence' and task.label_names == ['10', 'neg', 'pos']
  assert task.vocab.decode(task.splits['train'].examples[0]['tokens']) == [
      'good', 'film', '.', 'i', 'liked', 'it', ',', 'e.g.', 'the', 'end', '.']
  docs = data.load(_config('text_classification', manual, tfds_dir, min_count=1,
                           split_sentences=True))
  assert docs.kind == 'document'
  assert [docs.vocab.decode(s) for s in docs.splits['train'].examples[0]['sentences']] == [
      ['good', 'film', '.'], ['i', 'liked', 'it', ',', 'e.g.', 'the', 'end', '.']]
  assert [docs.label_names[e['label']] for e in docs.splits['validation'].examples] == ['pos', 'neg']
  _all_once(docs.splits['train'], batch_size=2)


def test_text_classification_bom_encoding_blank_lines_and_summary(tmp_path, tfds_dir, capsys):
  # A UTF-8 BOM made a third label '\ufeffpos' on a binary set; cp1252 text had no encoding option;
  # the summary listed truncated (kept) documents under "skipped".
  manual = tmp_path / 'reviews'
  manual.mkdir()
  (manual / 'train.tsv').write_bytes(b'pos\tA \x93great\x94 film. Loved it. Truly.\n'
                                     b'neg\tBad.\npos\tGood.\n\n')
  (manual / 'dev.tsv').write_bytes(b'\xef\xbb\xbfneg\tAwful.\npos\tNice.\n')
  (manual / 'test.tsv').write_bytes('neg\tPoor.\npos\tFine.\n'.encode('utf-16'))
  with pytest.raises(builders.FormatError, match=r'train\.tsv:1: not valid utf-8 .*config\.data\.encoding'):
    data.load(_config('text_classification', manual, tfds_dir))
  task = data.load(_config('text_classification', manual, tfds_dir, min_count=1, encoding='cp1252',
                           split_sentences=True, max_sentences=2))
  assert task.label_names == ['neg', 'pos']  # the BOM'd dev and UTF-16 test labels are known ones
  for split in ('validation', 'test'):
    assert [task.label_names[e['label']] for e in task.splits[split].examples] == ['neg', 'pos']
  assert [task.vocab.decode(s) for s in task.splits['train'].examples[0]['sentences']] == [
      ['a', '\u201c', 'great', '\u201d', 'film', '.'], ['loved', 'it', '.']]
  assert task.skipped == {'train/blank_line': 1}
  assert task.extras['truncated'] == {'train/truncated_document': 1}
  printed = capsys.readouterr().out
  assert 'skipped train/blank_line: 1; truncated (kept) train/truncated_document: 1' in printed
  with pytest.raises(ValueError, match=r"config\.data\.encoding='utf-99' is not a text encoding"):
    data.load(_config('text_classification', manual, tfds_dir, encoding='utf-99'))


@pytest.mark.shared_data
def test_text_classification_debian(shared_data, shared_tfds_dir):
  task = data.load(_config('text_classification', shared_data / 'debian_descriptions',
                           shared_tfds_dir, split_sentences=True))
  assert task.kind == 'document'
  assert {s: len(v) for s, v in task.splits.items()} == {'train': 9761, 'validation': 1220, 'test': 1220}
  assert task.label_names == sorted(['utils', 'net', 'science', 'admin', 'x11', 'text', 'games',
                                     'sound', 'graphics', 'web', 'math', 'mail', 'editors',
                                     'database', 'video', 'electronics'])
  # min_count=6: every kept word occurs >= 6 times in train.
  counts = collections.Counter(int(t) for e in task.splits['train'].examples
                               for s in e['sentences'] for t in s)
  assert all(counts[i] >= 6 for i in range(2, len(task.vocab)))
  num_sentences = [len(e['sentences']) for e in task.splits['train'].examples]
  assert np.mean(num_sentences) > 2  # several sentences per description
  shapes = {b['tokens'].shape for b in task.splits['validation'].batches(32, shuffle=True, seed=0)}
  assert len(shapes) <= 25  # bucketed by sentence count and length


def test_embeddings_through_loader(fixtures_dir, tfds_dir, tmp_path):
  glove = tmp_path / 'glove.txt'
  glove.write_text('rock 1 2\nFILM 3 4\nunrelated 5 6\n', encoding='utf-8')
  task = data.load(_config('sst', fixtures_dir / 'sst', tfds_dir, embeddings=str(glove),
                           embedding_dim=2))
  assert task.embeddings.shape == (len(task.vocab), 2)
  np.testing.assert_array_equal(task.embeddings[task.vocab.id('rock')], [1, 2])
  assert task.extras['embedding_coverage'].found == 1  # 'FILM' does not match the word 'film'
  np.testing.assert_array_equal(task.embeddings[core.PAD_ID], [0, 0])
  w2v = data.load(_config('sst', fixtures_dir / 'sst', tfds_dir, embeddings='word2vec',
                          embedding_dim=4, word2vec_epochs=1))
  assert w2v.embeddings.shape == (len(w2v.vocab), 4)
  assert w2v.extras['embedding_coverage'].found == len(w2v.vocab) - 2


def test_save_and_load_vocabularies(fixtures_dir, tfds_dir, tmp_path):
  task = data.load(_config('universal_dependencies', fixtures_dir / 'universal_dependencies',
                           tfds_dir))
  loaders.save_vocabularies(task, str(tmp_path / 'vocab'))
  back = loaders.load_vocabularies(str(tmp_path / 'vocab'))
  assert back['vocab'].tokens == task.vocab.tokens
  assert back['tag_vocab'].tokens == task.extras['tag_vocab'].tokens
  assert back['relation_vocab'].tokens == task.extras['relation_vocab'].tokens


@pytest.mark.shared_data
def test_missing_train_split_is_a_clear_error(shared_data, shared_tfds_dir):
  # ../shared/data has SNLI dev/test only: the vocabulary cannot be built.
  with pytest.raises(FileNotFoundError, match=r'snli: no training split .*snli_1\.0.*validation'):
    data.load(_config('snli', shared_data / 'snli_1.0', shared_tfds_dir))
