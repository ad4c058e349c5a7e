"""Translation (Yu et al. 2018, Table 2b): beam search, the attentive seq2seq, BLEU, the iwslt15_en_vi
loader, and the tiny config through launch.train and launch.translate."""
import itertools
import os
import shutil
import subprocess
import sys

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest
import sacrebleu

from jax_structured import data
from jax_structured import errors
from jax_structured import models
from jax_structured import training
from jax_structured.data import builders
from jax_structured.data import loaders
from jax_structured.models import translation
from jax_structured.nn import beam_search as beam_lib
from jax_structured.training import translation_task

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- beam search --------------------------------------------------------------------------------------

def _table_model(tables, vocab):
  """step_fn over hand-set tables: the next token's log-probs depend on the whole prefix.

  The state is the code of the prefix read so far (base vocab + 1); the input token `vocab` is BOS
  (read as nothing). tables[b] maps a prefix code to V log-probs. Like a decoder, a step reads the
  previous output and predicts the next one.
  """
  tables = jnp.asarray(tables)  # [B, num_codes, V]

  def make(beam_size):
    def step(state, tokens):
      code = jnp.where(tokens == vocab, state, state * (vocab + 1) + tokens + 1)
      rows = jnp.arange(code.shape[0]) // beam_size
      return tables[rows, code], code
    return step

  return make


def _random_tables(rng, batch, vocab, num_codes):
  logits = rng.normal(size=(batch, num_codes, vocab)) * 2.0
  return logits - np.log(np.exp(logits).sum(-1, keepdims=True))


def _code(prefix, vocab):
  code = 0
  for t in prefix:
    code = code * (vocab + 1) + t + 1
  return code


def _brute_force_best(table, vocab, max_length, eos, normalization, alpha=0.6):
  best, best_seq = -np.inf, None
  for n in range(1, max_length + 1):
    for words in itertools.product([t for t in range(vocab) if t != eos], repeat=n - 1):
      seq = list(words) + [eos]
      logp = sum(table[_code(seq[:i], vocab), seq[i]] for i in range(n))
      score = logp / float(beam_lib.length_norm(n, normalization, alpha))
      if score > best:
        best, best_seq = score, seq
  return best, best_seq


@pytest.mark.parametrize('normalization', ['average', 'gnmt', 'none'])
def test_beam_search_finds_the_brute_force_best(normalization):
  vocab, max_length, eos, batch = 3, 3, 2, 4
  num_codes = (vocab + 1) ** max_length
  tables = _random_tables(np.random.default_rng(0), batch, vocab, num_codes)
  beam_size = vocab ** (max_length - 1)  # as wide as the prefixes: exhaustive
  make = _table_model(tables, vocab)
  with jax.debug_nans(True):
    out = jax.jit(lambda s: beam_lib.beam_search(
        make(beam_size), s, batch_size=batch, beam_size=beam_size, max_length=max_length, bos_id=vocab,
        eos_id=eos, normalization=normalization))(jnp.zeros((batch * beam_size,), jnp.int32))
  for b in range(batch):
    score, seq = _brute_force_best(tables[b], vocab, max_length, eos, normalization)
    n = int(out.lengths[b])
    assert list(np.asarray(out.tokens[b, :n + 1])) == seq
    assert np.all(np.asarray(out.tokens[b, n + 1:]) == 0)
    np.testing.assert_allclose(float(out.scores[b]), score, rtol=1e-5)


def test_beam_size_one_is_greedy_decoding():
  vocab, max_length, eos, batch = 4, 6, 3, 6
  tables = _random_tables(np.random.default_rng(1), batch, vocab, (vocab + 1) ** max_length)
  tables[:, :, eos] -= 1.5  # longer greedy hypotheses
  limits = np.array([6, 6, 3, 1, 5, 6])
  out = beam_lib.beam_search(_table_model(tables, vocab)(1), jnp.zeros((batch,), jnp.int32),
                             batch_size=batch, beam_size=1, max_length=max_length, bos_id=vocab,
                             eos_id=eos, max_lengths=limits)
  for b in range(batch):
    seq = []
    while True:
      if len(seq) == limits[b] - 1:
        seq.append(eos)  # forced at the example's last position
        break
      seq.append(int(np.argmax(tables[b, _code(seq, vocab)])))
      if seq[-1] == eos:
        break
    n = int(out.lengths[b])
    assert list(np.asarray(out.tokens[b, :n + 1])) == seq, b
    assert len(seq) <= limits[b]


def test_banned_tokens_are_never_produced():
  vocab, eos = 4, 3
  tables = _random_tables(np.random.default_rng(2), 2, vocab, (vocab + 1) ** 4)
  tables[:, :, 0] = 0.0  # the most likely token, banned
  out = beam_lib.beam_search(_table_model(tables, vocab)(3), jnp.zeros((6,), jnp.int32), batch_size=2,
                             beam_size=3, max_length=4, bos_id=vocab, eos_id=eos, banned_ids=(0,))
  for b in range(2):
    assert 0 not in np.asarray(out.tokens[b, :int(out.lengths[b]) + 1])


# --- the seq2seq model ----------------------------------------------------------------------------------

def _model(**overrides):
  config = ml_collections.ConfigDict({
      'name': 'translation.seq2seq', 'encoder': {'name': 'bow'}, 'embedding_dim': 5,
      'target_embedding_dim': 4, 'decoder_size': 6, 'decoder_layers': 2, 'attention_size': 3,
      'input_feeding': True, **overrides})
  return models.build(config, vocab_size=9, num_classes=8)


BATCH = {'source': np.array([[4, 5, 6, 0], [7, 8, 0, 0]], np.int32),
         'source_lengths': np.array([3, 2], np.int32),
         'target': np.array([[2, 4, 5, 3, 0], [2, 6, 3, 0, 0]], np.int32),
         'target_lengths': np.array([4, 3], np.int32)}


def _sigmoid(x):
  return 1.0 / (1.0 + np.exp(-x))


def _numpy_nll(p, source, target):
  """-log p(target[1:] | source) of ONE unpadded example, transcribed from the module docstring."""
  h = p['embed']['embedding'][source]  # the 'bow' encoder: annotations are the word vectors
  keys = h @ p['attention_keys']['kernel'] + p['attention_keys']['bias']
  init = np.tanh(h.mean(0) @ p['init_state']['kernel'] + p['init_state']['bias'])
  dec = p['decoder']
  layers = [(np.zeros_like(init), init) for _ in range(2)]
  feed = np.zeros_like(init)
  nll = 0.0
  for t in range(len(target) - 1):
    emb = dec['target_embed']['embedding'][target[t]]
    query = layers[-1][1] @ dec['attention_query']['kernel']
    energies = (np.tanh(keys + query) @ dec['attention_v']['kernel'])[:, 0]
    a = np.exp(energies - energies.max())
    a /= a.sum()
    context = a @ h
    x = np.concatenate([emb, context, feed])
    new = []
    for i, (c, s) in enumerate(layers):
      w = dec[f'lstm_{i}']
      gate = lambda g, x=x, s=s, w=w: x @ w[f'i{g}']['kernel'] + s @ w[f'h{g}']['kernel'] + w[f'h{g}']['bias']
      c = _sigmoid(gate('f')) * c + _sigmoid(gate('i')) * np.tanh(gate('g'))
      s = _sigmoid(gate('o')) * np.tanh(c)
      new.append((c, s))
      x = s
    layers = new
    feed = np.tanh(np.concatenate([x, context]) @ dec['attentional']['kernel'])
    logits = feed @ dec['output']['kernel'] + dec['output']['bias']
    logp = logits - logits.max() - np.log(np.exp(logits - logits.max()).sum())
    nll -= logp[target[t + 1]]
  return nll


def test_loss_matches_a_numpy_transcription_in_float64():
  model = _model()
  variables = model.init({'params': jax.random.PRNGKey(0)}, BATCH)
  params = jax.tree.map(lambda x: np.asarray(x, np.float64), variables['params'])
  task = translation_task.TranslationTask(ml_collections.ConfigDict({'model': {}}))
  outputs = jax.jit(model.apply)({'params': params}, BATCH)
  assert outputs['logits'].dtype == jnp.float64
  _, metrics = task.loss_and_metrics(outputs, BATCH)
  expected = sum(_numpy_nll(params, BATCH['source'][b, :BATCH['source_lengths'][b]],
                            BATCH['target'][b, :BATCH['target_lengths'][b]]) for b in range(2))
  np.testing.assert_allclose(float(metrics['nll'][0]), expected, rtol=1e-10)
  assert float(metrics['nll'][1]) == 3 + 2


def test_padding_is_exact_and_padding_examples_weigh_nothing():
  model = _model(encoder={'name': 'bilstm', 'hidden_size': 3}, input_feeding=False)
  variables = model.init({'params': jax.random.PRNGKey(1)}, BATCH)
  task = translation_task.TranslationTask(ml_collections.ConfigDict({'model': {}}))
  apply = jax.jit(model.apply, static_argnames='beam_size')
  _, base = task.loss_and_metrics(apply(variables, BATCH), BATCH)
  padded = {'source': np.pad(BATCH['source'], ((0, 1), (0, 5))),
            'source_lengths': np.array([3, 2, 1], np.int32),
            'target': np.pad(BATCH['target'], ((0, 1), (0, 4))),
            'target_lengths': np.array([4, 3, 2], np.int32),
            'example_mask': np.array([1.0, 1.0, 0.0], np.float32)}
  padded['source'][2, 0], padded['target'][2, :2] = 4, [2, 3]
  _, longer = task.loss_and_metrics(apply(variables, padded), padded)
  np.testing.assert_allclose(float(longer['nll'][0]), float(base['nll'][0]), rtol=1e-6)
  assert float(longer['nll'][1]) == float(base['nll'][1]) == 5
  # Beam search too: the translations of the real rows do not see the padding.
  a = apply(variables, BATCH, beam_size=2)
  b = apply(variables, padded, beam_size=2)
  for r in range(2):
    n = int(a['hypothesis_lengths'][r])
    assert int(b['hypothesis_lengths'][r]) == n
    np.testing.assert_array_equal(a['hypotheses'][r, :n + 1], b['hypotheses'][r, :n + 1])


def test_translate_method_needs_no_target_and_stops_at_the_length_bound():
  model = _model(max_decode_ratio=1.0, max_decode_extra=1)
  variables = model.init({'params': jax.random.PRNGKey(2)}, BATCH)
  source = {k: BATCH[k] for k in ('source', 'source_lengths')}
  out = model.apply(variables, source, 3, method='translate')
  assert out['hypotheses'].shape == (2, 4 + 1)
  assert np.all(np.asarray(out['hypothesis_lengths']) < BATCH['source_lengths'] + 1)
  assert not set(np.asarray(out['hypotheses']).ravel().tolist()) & {2}  # <s> is never produced


def test_a_loader_without_target_vocabulary_labels_is_refused():
  config = ml_collections.ConfigDict({'name': 'translation.seq2seq', 'encoder': {'name': 'bow'}})
  model = models.build(config, vocab_size=9, num_classes=0)
  with pytest.raises(ValueError, match="iwslt15_en_vi"):
    model.init({'params': jax.random.PRNGKey(0)}, BATCH)


# --- BLEU -----------------------------------------------------------------------------------------------

def test_bleu_statistics_equal_sacrebleu_on_the_joined_tokens():
  rng = np.random.default_rng(3)
  words = [f'w{i}' for i in range(6)]  # ids 4.. (0 pad, 1 unk, 2 <s>, 3 </s>)
  batch, width = 12, 14
  hyp = np.zeros((batch, width), np.int32)
  ref = np.zeros((batch, width), np.int32)
  hyp_len = rng.integers(0, width, batch)
  ref_len = rng.integers(1, width, batch)
  hyp_text, ref_text = [], []
  for b in range(batch):
    h = rng.integers(1, 10, hyp_len[b])  # 1 = <unk> printed as '<unk>'
    r = rng.integers(1, 10, ref_len[b])  # 1 = a word outside the vocabulary: 'oov<b><i>'
    hyp[b, :hyp_len[b]], ref[b, :ref_len[b]] = h, r
    hyp_text.append(' '.join('<unk>' if t == 1 else words[t - 4] if t >= 4 else f'x{t}' for t in h))
    ref_text.append(' '.join(f'oov{b}_{i}' if t == 1 else words[t - 4] if t >= 4 else f'x{t}'
                             for i, t in enumerate(r)))
  stats = translation.bleu_statistics(hyp, hyp_len, ref, ref_len)
  sums = {f'bleu_{k}': (float(np.sum(v)), batch) for k, v in stats.items()}
  expected = sacrebleu.corpus_bleu(hyp_text, [ref_text], tokenize='none')
  assert sums['bleu_sys_len'][0] == expected.sys_len and sums['bleu_ref_len'][0] == expected.ref_len
  assert [sums[f'bleu_correct_{n}'][0] for n in range(1, 5)] == list(expected.counts)
  assert [sums[f'bleu_total_{n}'][0] for n in range(1, 5)] == list(expected.totals)
  assert translation_task.corpus_bleu(sums) == pytest.approx(expected.score, abs=1e-9)


# --- the iwslt15_en_vi loader (through the TFDS builder) ------------------------------------------------

def _write(folder, stem, en, vi):
  folder.mkdir(exist_ok=True)
  (folder / f'{stem}.en').write_text(en, encoding='utf-8')
  (folder / f'{stem}.vi').write_text(vi, encoding='utf-8')


def _data_config(folder, **overrides):
  config = loaders.default_config('iwslt15_en_vi')
  config.update({'manual_dir': str(folder), 'data_dir': str(folder.parent / 'tfds'), **overrides})
  return config


def test_loader_layout(tmp_path):
  manual = tmp_path / 'manual'
  _write(manual, 'train', 'a b .\nb c\n' + 'long ' * 9 + '\n', 'x y .\nz y\nq\n')
  _write(manual, 'tst2012', 'a d\n', 'y w\n')
  task = data.load(_data_config(manual, max_length=8, test_split=''))
  assert task.kind == 'translation' and task.skipped == {'train/too_long': 1}
  assert sorted(task.splits) == ['train', 'validation']
  assert task.label_names[:4] == ['<pad>', '<unk>', '<s>', '</s>'] and task.num_classes == 8
  assert task.label_names == task.extras['target_vocab'].tokens
  assert task.extras['bos_id'] == loaders.BOS_ID == 2
  assert task.extras['eos_id'] == loaders.EOS_ID == 3
  first = task.splits['train'].examples[0]
  assert task.vocab.decode(first['source']) == ['a', 'b', '.']
  assert [task.label_names[i] for i in first['target']] == ['<s>', 'x', 'y', '.', '</s>']
  dev = task.splits['validation'].examples[0]
  assert task.vocab.decode(dev['source']) == ['a', '<unk>']
  assert [task.label_names[i] for i in dev['target']] == ['<s>', 'y', '<unk>', '</s>']


def test_loader_trains_on_one_built_split_and_tests_on_another(tmp_path):
  manual = tmp_path / 'manual'  # no train.*: only the two test sets, as in ../shared/data
  _write(manual, 'tst2012', ''.join(f'e{i} .\n' for i in range(10)), ''.join(f'v{i} .\n' for i in range(10)))
  _write(manual, 'tst2013', 'e1 e99 .\n', 'v1 v99 .\n')
  with pytest.raises(FileNotFoundError, match=r"train_split='train': .*train\.en / .*train\.vi are not"):
    data.load(_data_config(manual))
  task = data.load(_data_config(manual, train_split='validation', validation_split='',
                                validation_fraction=0.2, max_examples=8))
  assert [len(task.splits[s]) for s in ('train', 'validation', 'test')] == [6, 2, 1]
  assert 'v99' not in task.label_names and task.vocab.decode(task.splits['test'].examples[0]['source']) == [
      'e1', '<unk>', '.']
  assert 'v9' not in task.label_names and 'v8' not in task.label_names  # cut by max_examples


def test_loader_errors_name_file_key_and_line(tmp_path):
  manual = tmp_path / 'manual'
  _write(manual, 'train', 'a b\nc\nd\n', 'x\ny\n')
  _write(manual, 'tst2012', 'a\n', 'x\n')
  with pytest.raises(builders.FormatError, match=r'train\.en:3: line-count mismatch'):
    data.load(_data_config(manual))
  _write(manual, 'train', 'a b\nc\nd\n', 'x\n  \nz\n')
  with pytest.raises(builders.FormatError, match=r'train\.vi:2: empty line'):
    data.load(_data_config(manual))
  _write(manual, 'train', 'a b\nc\n', 'x\ny\n')
  with pytest.raises(FileNotFoundError, match=r'test_split=.test.: .*tst2013\.en'):
    data.load(_data_config(manual))
  for overrides, key in ((dict(validation_split=''), 'validation_fraction'),
                         (dict(validation_fraction=0.5), 'validation_fraction'),
                         (dict(test_split='train'), 'test_split'),
                         (dict(train_split='tst2012'), 'train_split'),
                         (dict(target_max_vocab_size=4), 'target_max_vocab_size'),
                         (dict(vocab_size=3), 'vocab_size')):
    with pytest.raises(errors.ConfigError, match=rf'config\.data\.{key}'):
      data.load(_data_config(manual, **{'test_split': '', **overrides}))


def test_shipped_iwslt_files_load(shared_data, tmp_path):
  config = _data_config(shared_data / 'iwslt15_en_vi', data_dir=str(tmp_path / 'tfds'),
                        train_split='validation', validation_split='', validation_fraction=0.1,
                        max_examples=50)
  task = data.load(config)
  assert len(task.splits['test']) == 50 and len(task.splits['validation']) == 5


# --- command line: the tiny config trains, launch.translate translates ------------------------------------

SENTENCES = [('i like tea .', 'tôi thích trà .'), ('you like tea .', 'bạn thích trà .'),
             ('i like rice .', 'tôi thích cơm .'), ('you eat rice .', 'bạn ăn cơm .'),
             ('i eat .', 'tôi ăn .'), ('you drink tea .', 'bạn uống trà .')]


@pytest.mark.slow  # end to end from the command line: runs after the suite (.ci/run)
def test_tiny_config_trains_and_translates_from_the_command_line(tmp_path):
  folder = tmp_path / 'data'
  folder.mkdir()
  for stem, reps in (('train', 4), ('tst2012', 1), ('tst2013', 1)):
    _write(folder, stem, ''.join(e + '\n' for e, _ in SENTENCES * reps),
           ''.join(v + '\n' for _, v in SENTENCES * reps))
  env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS='cpu', OPENBLAS_NUM_THREADS='1')
  workdir = tmp_path / 'run'

  def launch(*args):
    return subprocess.run([sys.executable, '-m', *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300, check=False)

  train = launch('launch.train', '--config=configs/yu/iwslt15_en_vi.py:tiny,standard_attention',
                 f'--workdir={workdir}', f'--config.data.manual_dir={folder}',
                 f'--config.data.data_dir={tmp_path / "tfds"}', '--config.data.train_split=train',
                 '--config.data.validation_split=validation', '--config.data.validation_fraction=0.0',
                 "--config.data.bucket_boundaries=(8,)",
                 '--config.data.batch_size=8', '--config.train.num_epochs=2')
  assert train.returncode == 0, train.stderr[-3000:]
  assert '"bleu"' in train.stdout and '"perplexity"' in train.stdout
  source = tmp_path / 'input.en'
  source.write_text('i like tea .\n\nyou eat rice .\n', encoding='utf-8')
  output = tmp_path / 'output.vi'
  run = launch('launch.translate', f'--workdir={workdir}', f'--input={source}', f'--output={output}',
               '--beam_size=2', f'--reference={source}')
  assert run.returncode == 0, run.stderr[-3000:]
  lines = output.read_text(encoding='utf-8').split('\n')
  assert len(lines) == 4 and lines[1] == '' and lines[3] == ''
  assert '"bleu"' in run.stdout
  # The launcher's user errors (exit status 2 through launch/_errors.py) come from translate_file.
  from jax_structured.analysis import translate  # pylint: disable=g-import-not-at-top
  empty = tmp_path / 'empty.en'
  empty.write_text('\n', encoding='utf-8')
  with pytest.raises(FileNotFoundError, match='does not exist'):
    translate.translate_file(str(tmp_path / 'none'), str(source))
  with pytest.raises(errors.UserError, match='input file is empty'):
    translate.translate_file(str(workdir), str(empty))
  damaged = tmp_path / 'damaged'
  shutil.copytree(workdir, damaged)
  (damaged / 'config.json').write_text('{not json', encoding='utf-8')
  with pytest.raises(training.CheckpointError, match='corrupted'):
    translate.translate_file(str(damaged), str(source))
