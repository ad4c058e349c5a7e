"""`show_boundaries` (Luo & Zhu sec. IV-D): the pure statistics against hand-made cases, the HTML
pictures, and the whole tool (library and command line) on a tiny MHS-RNN trained once here with
configs/luo_zhu/debian.py's tiny option (which also checks that the config trains)."""
import collections
import importlib
import json
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

from jax_structured import analysis
from jax_structured import training
from jax_structured.analysis import boundaries
from jax_structured.data import text as text_lib
from jax_structured.viz import boundaries as viz_boundaries

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_phrase_lengths_follow_the_papers_definition():
  # "the number of words between two consecutive boundaries, the first boundary word excluded and the
  # second included"; the document's last word closes the last phrase.
  z = np.array([[0, 1, 0, 0, 1, 0, 0, 9], [1, 1, 1, 0, 0, 0, 0, 0], [0] * 8, [0] * 8, [0, 0, 0, 1, 0, 0, 0, 0]])
  lengths = np.array([7, 3, 4, 0, 4])  # row 0: entry 7 is padding (ignored)
  got = boundaries.phrase_lengths(z, lengths)
  assert got.tolist() == [2, 3, 2, 1, 1, 1, 4, 4]
  assert got.sum() == lengths.sum()
  stats = boundaries.length_statistics(got)
  assert stats == {'count': 8, 'mean': 18 / 8, 'min': 1, 'max': 4, 'histogram': {1: 3, 2: 2, 3: 1, 4: 2}}
  assert boundaries.length_statistics(np.zeros(0))['mean'] is None
  with pytest.raises(ValueError, match='lengths'):
    boundaries.phrase_lengths(z, np.array([9, 0, 0, 0, 0]))
  with pytest.raises(ValueError, match='match'):
    boundaries.phrase_lengths(z, np.array([1, 2]))


def test_word_classes_and_shares_match_a_direct_count():
  assert [boundaries.word_class(w) for w in ('And', ',', ';', '<unk>', 'cat', 'because', '-LRB-')] == [
      'conjunction', 'comma', 'punctuation', 'unknown', 'other word', 'conjunction', 'punctuation']
  assert boundaries.word_class('p', punctuation_token='p') == 'punctuation (p)'
  docs = [['i', 'ate', ',', 'and', 'then', 'slept', '.'], ['because', 'and', 'so', '<unk>']]
  z = [np.array([0, 1, 1, 1, 0, 0, 1]), np.array([1, 0, 0, 1])]
  p = [np.array([0, 0, 1, 0, 0, 0, 1]), np.array([0, 0, 0, 1])]
  shares = boundaries.boundary_shares(docs, z, p)
  assert shares['tokens'] == 11 and shares['dynamic'] == 6
  c = shares['classes']
  assert c['conjunction'] == {'tokens': 4, 'dynamic': 2, 'dynamic_pct': 50.0, 'share_pct': 100 * 2 / 6,
                              'static': 0}
  assert c['comma']['dynamic'] == 1 and c['punctuation']['static'] == 1 and c['unknown']['dynamic'] == 1
  assert c['other word'] == {'tokens': 4, 'dynamic': 1, 'dynamic_pct': 25.0, 'share_pct': 100 / 6,
                             'static': 0}
  assert shares['conjunctions'] == {'and': {'tokens': 2, 'dynamic': 1, 'dynamic_pct': 50.0},
                                    'so': {'tokens': 1, 'dynamic': 0, 'dynamic_pct': 0.0},
                                    'because': {'tokens': 1, 'dynamic': 1, 'dynamic_pct': 100.0}}
  assert sum(v['share_pct'] for v in c.values()) == pytest.approx(100.0)


def test_document_html_marks_boundaries_like_figure_5():
  words = ['a', '<b>', 'c', 'd']
  out = viz_boundaries.document_html(words, [1, 0, 1, 0], [0, 0, 1, 1], probabilities=[.9, .1, .8, .2],
                                     attention=[.1, .2, .3, .4], caption='doc & co')
  assert out.count('class="dyn"') == 1 and out.count('class="both"') == 1 and out.count('class="sta"') == 1
  assert '&lt;b&gt;' in out and '<b>' not in out and 'doc &amp; co' in out
  assert 'z~=0.900' in out and 'attention=0.400' in out
  with pytest.raises(ValueError, match='no words'):
    viz_boundaries.document_html([], [])
  with pytest.raises(ValueError, match='entries'):
    viz_boundaries.document_html(words, [1, 0])
  with pytest.raises(ValueError, match='non-finite'):
    viz_boundaries.document_html(words, [1, 0, np.nan, 0])
  page = viz_boundaries.boundary_page('t', [out], [('h', viz_boundaries.histogram_html({1: 2, 3: 1}))])
  assert page.startswith('<!DOCTYPE html>') and page.count('class="bar"') == 2


def test_a_workdir_without_boundaries_is_a_clear_error(monkeypatch):
  import ml_collections  # pylint: disable=g-import-not-at-top
  config = ml_collections.ConfigDict({'model': {'name': 'luo_zhu.document_classifier',
                                                'encoder': {'name': 'han'}}})
  monkeypatch.setattr(training, 'load_trained', lambda *a, **k: training.Trained(
      config=config, model=None, variables=None, vocab=None, label_names=[], extras={}))
  with pytest.raises(boundaries.BoundaryError, match="encoder 'han'.*'mhs_rnn' or 'hm_rnn'"):
    analysis.show_boundaries('/nowhere', 'test')
  with pytest.raises(boundaries.BoundaryError, match='num_documents'):
    analysis.show_boundaries('/nowhere', 'test', num_documents=-1)


def test_hm_rnn_layers_and_sentence_ends():
  import ml_collections  # pylint: disable=g-import-not-at-top
  from jax_structured import data  # pylint: disable=g-import-not-at-top
  from jax_structured import models  # pylint: disable=g-import-not-at-top
  vocab = data.Vocabulary(['<pad>', '<unk>', 'a', 'b', 'c', ',', '.'])
  model = models.build(ml_collections.ConfigDict({
      'name': 'luo_zhu.document_classifier', 'embedding_dim': 4,
      'encoder': {'name': 'hm_rnn', 'hidden_size': 3, 'num_layers': 2}}), vocab_size=len(vocab),
      num_classes=2)
  docs = [[['a', 'b', ',', 'c', '.'], ['b', 'a']], [['c', 'c', 'a']], [['a', '.'], ['b', '.'], ['c']]]
  examples = [{'sentences': [np.asarray(vocab.encode(s), np.int32) for s in d], 'label': i % 2}
              for i, d in enumerate(docs)]
  split = data.Split('test', 'document', examples, bucket_boundaries=((4,), (8,)))
  batch = next(iter(split.batches(4, shuffle=False)))
  rng = np.random.default_rng(0)
  shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), {k: v for k, v in batch.items()
                                                                      if k != 'example_index'}))
  variables = jax.tree.map(lambda a: rng.normal(0, 1.0, a.shape).astype(a.dtype), shapes)
  with pytest.raises(boundaries.BoundaryError, match='layer=2.*2 boundary layers'):
    boundaries.collect_documents(model, variables, split, vocab, ['x', 'y'], batch_size=4, layer=2)
  records = boundaries.collect_documents(model, variables, split, vocab, ['x', 'y'], batch_size=4, layer=1)
  assert [r['example'] for r in records] == [0, 1, 2]
  for r, d in zip(records, docs):
    assert r['words'] == [w for s in d for w in s]
    ends = set(np.cumsum([len(s) for s in d]) - 1)
    assert r['p'] == [int(t in ends) for t in range(len(r['words']))]  # HM-RNN: the sentence ends
    assert all(q > 0.5 for q, z in zip(r['z_prob'], r['z']) if z)  # z = z_below * 1[z~ > 0.5]
    assert r['attention'] is None and r['gold'] == ['x', 'y'][r['example'] % 2]
  stats = boundaries.document_statistics(records)
  assert stats['documents'] == 3 and stats['phrases']['count'] >= 6  # at least the 6 sentences
  assert sum(k * v for k, v in stats['phrases']['histogram'].items()) == 7 + 3 + 5


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
  """configs/luo_zhu/debian.py:tiny,mhs_rnn_attention on the first 60 / 20 / 20 Debian descriptions,
  4 steps, one batch shape for every split (one compile of each step)."""
  shared = ROOT.parent / 'shared' / 'data' / 'debian_descriptions'
  if not shared.is_dir():
    pytest.skip(f'real datasets not present: {shared} is missing')
  tmp = tmp_path_factory.mktemp('debian')
  manual = tmp / 'debian'
  manual.mkdir()
  labels = None
  for split, n in (('train', 60), ('dev', 20), ('test', 20)):
    lines = (shared / f'{split}.tsv').read_text(encoding='utf-8').splitlines()
    if labels is None:
      lines = lines[:n]
      labels = {line.split('\t', 1)[0] for line in lines}
    else:  # only labels seen in the train part (an unseen label is an error naming file:line)
      lines = [line for line in lines if line.split('\t', 1)[0] in labels][:n]
    (manual / f'{split}.tsv').write_text('\n'.join(lines) + '\n', encoding='utf-8')
  sys.path.insert(0, str(ROOT))
  config = importlib.import_module('configs.luo_zhu.debian').get_config('tiny,mhs_rnn_attention')
  config.data.update({'manual_dir': str(manual), 'data_dir': str(tmp / 'tfds'), 'min_count': 2,
                      'max_sentences': 6, 'max_sentence_length': 24,
                      'bucket_boundaries': ((6,), (24,))})
  config.parallel = 'none'
  config.train.update({'num_steps': 4, 'eval_every_steps': 4, 'log_every_steps': 4,
                       'eval_batch_size': config.data.batch_size})
  workdir = str(tmp / 'workdir')
  results = training.train_and_evaluate(config, workdir)
  return config, workdir, results


def test_debian_tiny_trains(trained):
  config, _, results = trained
  assert config.data.punctuation == 'p' and config.model.static_boundaries == 'punctuation'
  assert results['steps'] == 4
  assert 0.0 <= results['test']['accuracy'] <= 1.0 and np.isfinite(results['test']['loss'])


def test_show_boundaries_on_a_trained_workdir(trained, tmp_path):
  config, workdir, _ = trained
  result = analysis.show_boundaries(workdir, 'test', num_documents=3, output_dir=str(tmp_path / 'out'))
  docs = [json.loads(line) for line in (tmp_path / 'out' / 'documents.jsonl').read_text().splitlines()]
  # every test document, in split order, with the words the loader gave it
  trained_model = training.load_trained(workdir)
  split = training.load_split(config, trained_model.vocab, 'test')
  assert result['documents'] == len(docs) == len(split.examples)
  for doc, example in zip(docs, split.examples):
    sentences = [trained_model.vocab.decode(s) for s in example['sentences']]
    assert doc['words'] == [w for s in sentences for w in s]
    ends = np.cumsum([len(s) for s in sentences]) - 1
    # p_t: every punctuation token (mapped to 'p') and every sentence end (Luo & Zhu eq. 2)
    expect = [int(w == 'p' or t in ends) for t, w in enumerate(doc['words'])]
    assert doc['p'] == expect
    assert set(doc['z']) <= {0, 1} and all(0.0 <= q <= 1.0 for q in doc['z_prob'])
    assert all((q > 0.5) == bool(z) for q, z in zip(doc['z_prob'], doc['z']))
    # eq. 9's word-phrase attention sums to 1 within every segment closed by p_t
    start = 0
    for t, flag in enumerate(doc['p']):
      if flag:
        assert sum(doc['attention'][start:t + 1]) == pytest.approx(1.0, abs=1e-4)
        start = t + 1
    assert start == len(doc['words'])
  assert any(w == 'p' for d in docs for w in d['words'])
  # the statistics from documents.jsonl by a direct count
  lengths = []
  for d in docs:
    run = 0
    for z, p in zip(d['z'], d['p']):
      run += 1
      if z or p:
        lengths.append(run)
        run = 0
    if run:
      lengths.append(run)
  assert result['phrases']['count'] == len(lengths) and result['phrases']['max'] == max(lengths)
  assert result['phrases']['mean'] == pytest.approx(np.mean(lengths))
  assert result['phrases']['histogram'] == dict(sorted(collections.Counter(lengths).items()))
  fired = collections.Counter(boundaries.word_class(w, punctuation_token='p')
                              for d in docs for w, z in zip(d['words'], d['z']) if z)
  assert {c: v['dynamic'] for c, v in result['shares']['classes'].items() if v['dynamic']} == dict(fired)
  page = (tmp_path / 'out' / 'index.html').read_text(encoding='utf-8')
  assert page.count('class="doc"') == 3 and 'Table II' in page and 'mean 4.72' in page
  marks = sum(int(z and not p) for d in docs[:3] for z, p in zip(d['z'], d['p']))
  assert page.count('<span class="dyn">') == marks + 1  # and one in the legend
  saved = json.loads((tmp_path / 'out' / 'boundaries.json').read_text())
  assert saved['phrases'] == json.loads(json.dumps(result['phrases']))

  # The command line: the same numbers printed, exit 0 (a subprocess: every launcher defines absl flags
  # named 'workdir' at import).
  out = tmp_path / 'cli'
  proc = subprocess.run([sys.executable, '-m', 'launch.show_boundaries', f'--workdir={workdir}',
                         '--split=test', '--num_documents=1', f'--output_dir={out}'],
                        cwd=ROOT, capture_output=True, text=True, timeout=300, check=False,
                        env={**os.environ, 'JAX_ENABLE_X64': str(jax.config.jax_enable_x64).lower()})
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert f'mean {result["phrases"]["mean"]:.2f}, min {result["phrases"]["min"]}' in proc.stdout
  assert 'paper (Yahoo Answers): mean 4.72, min 1, max 15' in proc.stdout
  assert (out / 'index.html').read_text(encoding='utf-8').count('class="doc"') == 1
  # A quiet console: no INFO chatter of Orbax's restore (load_trained quiets the libraries).
  assert 'checkpoint_manager.py' not in proc.stderr and 'Restoring checkpoint' not in proc.stderr


def test_is_punctuation():
  assert all(text_lib.is_punctuation(t) for t in (',', '.', '...', '--', '(', '``', "''", '-LRB-', '“', '?!'))
  assert not any(text_lib.is_punctuation(t) for t in ('', 'e.g.', '3.14', "n't", '$', 'p', 'a,b'))
