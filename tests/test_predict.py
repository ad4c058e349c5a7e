"""launch.predict / launch.encode / analysis.predict.Predictor: a trained classifier on new text.

Tiny runs are trained once per module: a sentence model (structured attention), a pair model
(structured attention, Quora fixture) and a document model (MHS-RNN). Agreement: the predictions on the
raw text of the test split give exactly the accuracy `training.evaluate` reports; the trees equal
`analysis.induce_trees`'s; then the bad-input cases and encode's rows and JSON.
"""
import gzip
import json
import os
import pathlib
import random
import subprocess
import sys

import jax
import numpy as np
import pytest

from stages import quick_and_slow
from configs.encoders import compare
from configs.luo_zhu import document_config
from jax_structured import training
from jax_structured import trees
from jax_structured.analysis import induce
from jax_structured.analysis import predict
from jax_structured.analysis import raw_text
from jax_structured.data import loaders
from jax_structured.data.loaders import pairs

ROOT = pathlib.Path(__file__).parent.parent
_POS, _NEG = 'good fine great lovely superb nice'.split(), 'bad dull awful poor boring weak'.split()
_FILLER = 'the film was a story plot and it very'.split()


def _texts(n, rng, sentences=1):
  rows = []
  for _ in range(n):
    y = rng.choice(['pos', 'neg'])
    parts = []
    for _ in range(rng.randint(1, sentences)):
      words = rng.sample(_FILLER, rng.randint(2, 5)) + [rng.choice(_POS if y == 'pos' else _NEG)]
      rng.shuffle(words)
      parts.append(' '.join(words).capitalize() + rng.choice(['.', '!', ', truly.']))
    rows.append((y, ' '.join(parts)))
  return rows


def _folder(path, sentences):
  rng = random.Random(0)
  path.mkdir()
  for split, n in (('train', 48), ('dev', 8), ('test', 20)):
    (path / f'{split}.tsv').write_text(''.join(f'{y}\t{t}\n' for y, t in _texts(n, rng, sentences)))
  return path


def _train(config, workdir, data_dir):
  config.data.data_dir = str(data_dir)
  config.data.min_count = 1
  config.train.linear_baseline = False
  config.train.num_steps = 6
  config.train.num_epochs = 0
  training.train_and_evaluate(config, str(workdir))
  return str(workdir)


class _Runs(dict):
  """{kind: (workdir, test split raw lines, gold label names)}, each run trained on first use."""

  def __init__(self, tmp):
    super().__init__()
    self.tmp = tmp

  def __missing__(self, kind):
    tmp = self.tmp
    if kind == 'sentence':
      folder = _folder(tmp / 'sentences', 1)
      config = loaders.with_text_classification_data(compare.get_config('structured_attention,tiny'),
                                                     str(folder))
      config.data.bucket_boundaries = ()  # one batch shape: one compile per program (a default test)
      raw = _raw(folder / 'test.tsv')
    elif kind == 'pair':
      config = compare.get_config('structured_attention,tiny,snli')
      config.data = loaders.default_config('quora_qqp')
      folder = _quora_folder(tmp / 'quora')
      config.data.manual_dir, config.data.batch_size = str(folder), 8
      raw = _raw_quora(folder / 'test.tsv')
    else:
      folder = _folder(tmp / 'documents', 3)
      config = document_config('text_classification', {'manual_dir': str(folder), 'split_sentences': True,
                                                        'embeddings': ''}, variant='mhs_rnn', tiny=True)
      raw = _raw(folder / 'test.tsv')
    self[kind] = (_train(config, tmp / kind, tmp / 'tfds'), *raw)
    return self[kind]


@pytest.fixture(scope='module')
def runs(tmp_path_factory):
  """The tiny runs of the module (`_Runs`): the sentence run by the default tests, the pair and document
  runs by the slow ones."""
  return _Runs(tmp_path_factory.mktemp('predict'))


def _raw(path):
  rows = [line.rstrip('\n').split('\t', 1) for line in open(path, encoding='utf-8')]
  return [t for _, t in rows], [y for y, _ in rows]


def _quora_folder(path):
  """Quora files (Wang et al.'s `label<TAB>q1<TAB>q2<TAB>id`): duplicates share their sentiment."""
  rng = random.Random(1)
  path.mkdir()
  for split, name, n in (('train', 'train.tsv', 48), ('dev', 'dev.txt', 8), ('test', 'test.tsv', 20)):
    a, b = _texts(n, rng), _texts(n, rng)
    (path / name).write_text(''.join(f'{int(x[0] == y[0])}\t{x[1]}\t{y[1]}\t{i}\n'
                                     for i, (x, y) in enumerate(zip(a, b))))
  return path


def _raw_quora(path):
  rows = [line.rstrip('\n').split('\t') for line in open(path, encoding='utf-8')]
  return [f'{q1}\t{q2}' for _, q1, q2, _ in rows], [pairs.QUORA_LABELS[int(y)] for y, _, _, _ in rows]


@pytest.mark.parametrize('kind', quick_and_slow(['sentence'], ['pair', 'document']))
def test_predictions_on_the_raw_test_text_give_the_evaluated_accuracy(runs, kind):
  workdir, texts, gold = runs[kind]
  predictor = predict.Predictor(workdir)
  assert predictor.kind == kind
  predicted = predictor.predict(texts)
  # Tokenised exactly as training did: the same token ids as the loader's test examples.
  split = training.load_split(predictor.trained.config, predictor.trained.vocab, 'test')
  assert len(split.examples) == len(predictor.last.examples) == len(texts)
  for ours, theirs in zip(predictor.last.examples, split.examples):
    for key in set(theirs) - {'label'}:
      rows = (ours[key], theirs[key]) if isinstance(theirs[key], list) else ([ours[key]], [theirs[key]])
      assert len(rows[0]) == len(rows[1]), key  # documents: one array per sentence
      for mine, loaders_row in zip(*rows):
        np.testing.assert_array_equal(np.asarray(mine), np.asarray(loaders_row), err_msg=key)
  accuracy = float(np.mean([p['label'] == g for p, g in zip(predicted, gold)]))
  assert accuracy == pytest.approx(training.evaluate(workdir, 'test')['accuracy'], abs=1e-9)
  for p in predicted:
    assert sum(p['probabilities'].values()) == pytest.approx(1.0, abs=1e-5)
    assert p['label'] == max(p['probabilities'], key=p['probabilities'].get)


@pytest.mark.parametrize('kind', quick_and_slow(['sentence'], ['pair']))
def test_trees_equal_those_of_induce_trees(runs, kind, tmp_path):
  workdir, texts, _ = runs[kind]
  induced = induce.induce_trees(workdir, 'test', num_pictures=0, output_dir=str(tmp_path))
  ours = predict.Predictor(workdir).trees(texts)
  for level in induced['levels']:
    theirs = induce.read_conllu(str(tmp_path / f'{level}_trees.conllu'))
    mine = [t for record in ours for t in record[level]]
    assert len(mine) == len(theirs) > 0
    for tree, (words, heads) in zip(mine, theirs):
      assert len(tree['words']) == len(words)
      np.testing.assert_array_equal(trees.heads_from_conllu(np.asarray(tree['heads'])), heads)


@pytest.mark.slow
def test_document_trees_and_boundaries_on_request(runs):
  workdir, texts, _ = runs['document']
  p = predict.Predictor(workdir).predict(texts[:2], details=['boundaries'])
  assert 'document_boundaries' in p[0]['details'] and 'document_boundary_probs' in p[0]['details']


def test_sharp_trees_take_the_exact_program_and_match_it(runs, monkeypatch):
  """Arc scores made sharp enough for the LU estimate to flag trees: those examples are recomputed by
  the exact program (never NaN), and every output equals the model run wholly under 'in_program'."""
  workdir, texts, _ = runs['sentence']
  predictor = predict.Predictor(workdir)
  variables = jax.tree_util.tree_map(np.asarray, predictor.trained.variables)
  attention = variables['params']['encoder']['attention']
  attention['bilinear'] = attention['bilinear'] * 1e4
  predictor._variables = variables  # pylint: disable=protected-access
  recomputed = []
  select_rows = training.parallel.select_rows
  monkeypatch.setattr(training.parallel, 'select_rows',
                      lambda batch, rows, size: recomputed.append(len(rows)) or select_rows(batch, rows, size))
  lines = predictor.read(texts)
  outputs = predictor.run(lines.examples)
  assert sum(recomputed) > 0  # some trees were flagged
  logits = np.stack([o['logits'] for o in outputs])
  assert np.isfinite(logits).all()
  with trees.exact_mode('in_program'):
    batch = next(iter(__import__('jax_structured').data.Split(
        'x', 'sentence', lines.examples, bucket_boundaries=()).batches(len(texts), shuffle=False)))
    reference = jax.jit(lambda v, b: predictor.trained.model.apply(v, b, train=False))(
        variables, {k: v for k, v in batch.items() if k != 'example_index'})
  np.testing.assert_allclose(logits, np.asarray(reference)[np.argsort(batch['example_index'])], atol=1e-4)
  for o in outputs:
    assert np.isfinite(o['levels']['']['weights']).all()
    assert trees.is_tree(o['levels']['']['heads'][None], o['levels']['']['lengths'][None]).all()


def test_encode_rows_are_the_classifier_input(runs):
  workdir, texts, _ = runs['sentence']
  predictor = predict.Predictor(workdir)
  vectors = predictor.encode(texts[:5])
  assert vectors.dtype == np.float32 and vectors.shape[0] == 5
  # The classifier layer applied to the rows gives the predicted logits.
  params = predictor.trained.variables['params']
  first = 'hidden' if 'hidden' in params else 'logits'
  assert vectors.shape[1] == params[first]['kernel'].shape[0]
  x = vectors.astype(np.float64)
  if first == 'hidden':
    x = np.maximum(x @ params['hidden']['kernel'] + params['hidden']['bias'], 0)
  logits = x @ params['logits']['kernel'] + params['logits']['bias']
  outputs = predictor.run(predictor.last.examples)
  np.testing.assert_allclose(logits, np.stack([o['logits'] for o in outputs]), atol=1e-4)
  # One row per input in input order, whatever the batching.
  single = np.stack([predictor.encode([t])[0] for t in texts[:3]])
  np.testing.assert_allclose(single, vectors[:3], atol=1e-5)


def test_bad_lines_name_the_line_and_keep_the_good_output(runs):
  predictor = predict.Predictor(runs['sentence'][0])
  lines = [b'A good film.\n', b'\n', b'Dull.\n']
  written = []
  with pytest.raises(raw_text.BadLine, match=r'in\.txt:2: empty line.*--on_bad_lines=skip'):
    predict.predict_file(predictor, lines, written.append, source='in.txt')
  assert [json.loads(w)['line'] for w in written] == [1]
  written = []
  result = predict.predict_file(predictor, lines + [b'\xff\xfe x\n'], written.append, source='in.txt',
                                on_bad_lines='skip')
  rows = [json.loads(w) for w in written]
  assert [r['line'] for r in rows] == [1, 2, 3, 4] and rows[1] == {'line': 2, 'skipped': 'empty'}
  assert rows[3] == {'line': 4, 'skipped': 'undecodable'} and result['skipped'] == {'empty': 1,
                                                                                       'undecodable': 1}
  error = predictor.read([b'\xff\xfe x'], source='in.txt').error
  assert isinstance(error, raw_text.BadLine) and str(error).startswith('in.txt:1: not valid utf-8')
  assert '--encoding' in str(error)


@pytest.mark.slow
def test_a_pair_line_needs_its_tab(runs):
  predictor = predict.Predictor(runs['pair'][0])
  with pytest.raises(raw_text.BadLine, match=r'<input>:2: a pair line needs premise<TAB>hypothesis'):
    predictor.predict(['how do i learn\thow can i learn', 'no tab here'])
  assert len(predictor.predict([('how do i learn', 'how can i learn')])) == 1


@pytest.mark.slow
def test_documents_are_truncated_as_training_did_and_counted(runs):
  predictor = predict.Predictor(runs['document'][0])
  limit = predictor.trained.config.data.max_sentences
  predictor.predict([' '.join(['Good film.'] * (limit + 2))])
  assert predictor.last.truncated == {f'documents cut to config.data.max_sentences={limit}': 1}


def test_workdirs_that_are_not_classifiers_point_to_their_command(runs, monkeypatch, tmp_path):
  trained = training.load_trained(runs['sentence'][0])
  trained.kind = 'parse'
  monkeypatch.setattr(training, 'load_trained', lambda *a, **k: trained)
  with pytest.raises(predict.WrongWorkdirError, match='launch.parse'):
    predict.Predictor('w')
  monkeypatch.undo()
  with pytest.raises(FileNotFoundError, match=str(tmp_path)):
    predict.Predictor(str(tmp_path))


@pytest.mark.slow
def test_launchers_write_good_lines_then_one_error_line(runs, tmp_path):
  workdir = runs['sentence'][0]
  (tmp_path / 'in.txt').write_bytes(b'A good film.\nDull.\n\xff\xfe\n')
  # The suite trains under jax_enable_x64 (conftest): the child restores as the workdir was written.
  env = {**os.environ, 'PYTHONPATH': str(ROOT), 'JAX_ENABLE_X64': '1'}
  run = subprocess.run([sys.executable, '-m', 'launch.predict', f'--workdir={workdir}',
                        f'--input={tmp_path / "in.txt"}'], capture_output=True, text=True, cwd=ROOT,
                       env=env, check=False)
  assert run.returncode == 2, run.stderr
  assert [json.loads(line)['line'] for line in run.stdout.splitlines()] == [1, 2], run.stderr
  assert run.stderr.strip().splitlines()[-1].startswith(f'error: {tmp_path / "in.txt"}:3: not valid utf-8')
  out = tmp_path / 'v.npy'
  run = subprocess.run([sys.executable, '-m', 'launch.encode', f'--workdir={workdir}',
                        f'--input={tmp_path / "in.txt"}', f'--output={out}', '--on_bad_lines=skip'],
                       capture_output=True, text=True, cwd=ROOT, env=env, check=False)
  assert run.returncode == 0, run.stderr
  vectors, meta = np.load(out), json.loads((tmp_path / 'v.json').read_text())
  assert vectors.shape == (2, meta['dimension']) and vectors.dtype == np.float32
  assert meta['lines'] == [1, 2] and meta['skipped'] == {'undecodable': 1}
  assert meta['step'] == training.load_trained(workdir).step and meta['kind'] == 'sentence'
  np.testing.assert_allclose(vectors, predict.Predictor(workdir).encode(['A good film.', 'Dull.']),
                             atol=1e-6)


def test_snli_text_gets_the_tokens_of_its_parses(shared_data):
  """SNLI was trained on the tokens of its binary parses; raw sentences tokenised for a SNLI run give
  the same tokens for all but 17 of dev's 20,000 (abbreviations the parses keep whole)."""
  tokenize = raw_text.tokenizer({'name': 'snli', 'lowercase': False})
  same = total = 0
  with gzip.open(shared_data / 'snli_1.0' / 'snli_1.0_dev.jsonl.gz', 'rt', encoding='utf-8') as f:
    for line in f:
      record = json.loads(line)
      for side in ('sentence1', 'sentence2'):
        parse = [t for t in record[side + '_binary_parse'].split() if t not in ('(', ')')]
        same += tokenize(record[side]) == parse
        total += 1
  assert total == 20000 and same >= 19983


def test_marginals_are_cut_to_each_trees_length():
  """Per-sentence rows of a document (lengths [S]) and one sentence (a scalar length)."""
  arcs = np.arange(2 * 3 * 3, dtype=float).reshape(2, 3, 3)
  levels = {'sentence_': {'lengths': np.array([2, 3])}, '': {'lengths': np.array(1)}}
  cut = predict._trimmed('sentence_arc_marginals', arcs, levels)  # pylint: disable=protected-access
  assert cut == [arcs[0, :2, :2].tolist(), arcs[1].tolist()]
  assert predict._trimmed('root_marginals', np.array([0.5, 0.2, 0.3]), levels) == [0.5]  # pylint: disable=protected-access
  assert predict._trimmed('boundaries', np.ones((2, 3)), levels) == np.ones((2, 3)).tolist()  # pylint: disable=protected-access
