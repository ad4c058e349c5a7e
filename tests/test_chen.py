"""AP-DCNN family (Chen et al. 2017): the encoders under the encoder contract, attention pooling (eqs.
10-11) against numpy, eq. 12's two classifier inputs, SST trees from the loader, and bad input."""
import collections
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_structured import data
from jax_structured.data import batching
from jax_structured.data import loaders
from jax_structured.data.loaders import _common as loaders_common
from jax_structured.data import tree_batching
from jax_structured.models import chen
from jax_structured.models import encoders
from jax_structured.nn import dcnn as dcnn_lib
from jax_structured.nn import tree_lstm as tree_lstm_lib

LINES = ['(3 (2 (2 The) (2 film)) (4 (3 (2 is) (4 great)) (2 .)))', '(1 Bad)',
         '(0 (0 (0 (1 w) (1 x)) (2 y)) (3 z))']
HEADS = [[1, -1, 3, 1, 1], [-1], [1, -1, 1, 2]]
SMALL = {'dcnn': {'features': 4, 'k_top': 3, 'branches': ((3, 2), (2,))},
         'tree_lstm': {'hidden_size': 4},
         'child_sum_tree_lstm': {'hidden_size': 4},
         'ap_dcnn': {'features': 4, 'k_top': 3, 'branches': ((3, 2), (2,))},
         'ap_dcnn_dependency': {'features': 4, 'k_top': 3, 'branches': ((3, 2),),
                                'classifier_input': 'both'}}


def _structure(steps):
  examples = [tree_batching.binary_tree_arrays(line) for line in LINES]
  trees = tree_batching.collate_trees(examples, steps)
  heads = np.full((len(HEADS), steps), -1, np.int32)
  for i, h in enumerate(HEADS):
    heads[i, :len(h)] = h
  return {'tree_children': trees['tree_children'], 'tree_heights': trees['tree_heights'], 'heads': heads}


def _inputs(steps, seed=0):
  lengths = jnp.array([5, 1, 4])
  x = jax.random.normal(jax.random.PRNGKey(seed), (3, steps, 6), jnp.float64)
  return x, lengths


@pytest.mark.parametrize('name', sorted(SMALL))
def test_encoder_contract_and_padding(name):
  assert name in encoders.names()
  cls = encoders.get(name)
  encoder = encoders.build({'name': name, **SMALL[name]})
  x, lengths = _inputs(9)
  struct = {k: v for k, v in _structure(9).items() if k in cls.STRUCTURE_INPUTS}
  variables = jax.jit(lambda k: encoder.init(k, x, lengths, structure=struct))(jax.random.PRNGKey(1))
  apply = jax.jit(lambda v, x, l, s: encoder.apply(v, x, l, structure=s))
  out = apply(variables, x, lengths, struct)
  # Padded longer (garbage words past the lengths): the same real outputs.
  x_long = jnp.concatenate([x, jax.random.normal(jax.random.PRNGKey(7), (3, 6, 6), jnp.float64)], 1)
  long_struct = {k: v for k, v in _structure(15).items() if k in cls.STRUCTURE_INPUTS}
  out_long = apply(variables, x_long, lengths, long_struct)
  np.testing.assert_allclose(out.sentence, out_long.sentence, rtol=0, atol=1e-13)
  np.testing.assert_allclose(out.states, out_long.states[:, :9], rtol=0, atol=1e-13)
  mask = np.arange(15)[None, :] < np.asarray(lengths)[:, None]
  np.testing.assert_array_equal(np.asarray(out_long.states)[~mask], 0.0)
  # Any leading batch shape: [2, 3, T, E] (e.g. the sentences of documents) gives the rows' results.
  stacked = {k: np.stack([v, v]) for k, v in struct.items()}
  out2 = jax.jit(lambda v, x, l, s: encoder.apply(v, x, l, structure=s))(
      variables, jnp.stack([x, x]), jnp.stack([lengths, jnp.zeros_like(lengths)]), stacked)
  np.testing.assert_allclose(out2.sentence[0], out.sentence, rtol=0, atol=1e-13)
  np.testing.assert_array_equal(out2.sentence[1], 0.0)  # length-0 padding rows give zeros
  np.testing.assert_array_equal(out2.states[1], 0.0)


def test_cosine_attention_pooling_matches_numpy():
  rng = np.random.default_rng(0)
  local = rng.standard_normal((2, 4, 3))
  local[1, 2:] = 0.0
  guide = rng.standard_normal((2, 3))
  s, alpha = chen.cosine_attention_pooling(jnp.asarray(local), jnp.array([4, 2]), jnp.asarray(guide))
  for b, n in enumerate([4, 2]):
    c = local[b, :n]
    cos = c @ guide[b] / (np.linalg.norm(c, axis=1) * np.linalg.norm(guide[b]))  # eq. 10's sim
    want_alpha = np.exp(cos) / np.exp(cos).sum()
    np.testing.assert_allclose(alpha[b, :n], want_alpha, rtol=1e-10)
    np.testing.assert_array_equal(alpha[b, n:], 0.0)
    np.testing.assert_allclose(s[b], want_alpha @ c, rtol=1e-10)  # eq. 11: s = sum_i alpha_i c_i


def test_ap_dcnn_classifier_inputs_and_its_parts():
  """Eq. 12: 'paper' gives [s; 0] in training and [s; s~] at test; 'both' gives [s; s~] in both, and s~
  is the binary Tree-LSTM root, s the cosine-attention pooling of the DCNN's local vectors."""
  x, lengths = _inputs(7)
  struct = {k: v for k, v in _structure(7).items() if k in ('tree_children', 'tree_heights')}
  paper = encoders.build({'name': 'ap_dcnn', 'features': 4, 'k_top': 3, 'branches': ((3, 2),)})
  both = encoders.build({'name': 'ap_dcnn', 'features': 4, 'k_top': 3, 'branches': ((3, 2),),
                         'classifier_input': 'both'})
  variables = jax.jit(lambda k: paper.init(k, x, lengths, structure=struct))(jax.random.PRNGKey(0))
  run = {(m, t): jax.jit(lambda v, m=m, t=t: m.apply(v, x, lengths, structure=struct, train=t))
         for m in (paper, both) for t in (False, True)}
  test = run[paper, False](variables).sentence
  train = run[paper, True](variables).sentence
  np.testing.assert_array_equal(train[:, :4], test[:, :4])
  np.testing.assert_array_equal(train[:, 4:], 0.0)
  assert np.abs(np.asarray(test[:, 4:])).min() > 0
  np.testing.assert_array_equal(run[both, True](variables).sentence, test)
  # The parts, recomputed from the submodules' own outputs.
  @jax.jit
  def parts(p):
    local, local_lengths, _ = dcnn_lib.DCNN((3, 2), 4, 3).apply({'params': p['dcnn']['dcnn_0']}, x, lengths)
    _, _, root = tree_lstm_lib.binary_tree_lstm(p['tree_lstm'], x, lengths, struct['tree_children'],
                                                struct['tree_heights'])
    return jnp.concatenate([chen.cosine_attention_pooling(local, local_lengths, root)[0], root], -1)

  np.testing.assert_allclose(test, parts(variables['params']), rtol=1e-12, atol=1e-14)


def test_encoders_name_missing_structure_and_bad_settings():
  x, lengths = _inputs(5)
  with pytest.raises(KeyError, match='config.data.binary_trees=True'):
    encoders.build({'name': 'tree_lstm', 'hidden_size': 2}).init(jax.random.PRNGKey(0), x, lengths)
  with pytest.raises(ValueError, match='classifier_input'):
    encoders.build({'name': 'ap_dcnn', 'classifier_input': 'test_only'}).init(
        jax.random.PRNGKey(0), x, lengths, structure=_structure(5))
  with pytest.raises(ValueError, match='branches'):
    encoders.build({'name': 'dcnn', 'branches': (7, 5)}).init(jax.random.PRNGKey(0), x, lengths)


def _sst_config(manual_dir, tfds_dir, **overrides):
  config = loaders.default_config('sst')
  config.manual_dir = str(manual_dir)
  config.data_dir = str(tfds_dir)
  for key, value in overrides.items():
    setattr(config, key, value)
  return config


def test_sst_loader_trees(fixtures_dir, tmp_path):
  task = data.load(_sst_config(fixtures_dir / 'sst', tmp_path / 'tfds', binary_trees=True))
  train = task.splits['train']
  lines = (fixtures_dir / 'sst' / 'train.txt').read_text().splitlines()
  for example, line in zip(train.examples, lines):
    want = tree_batching.binary_tree_arrays(line)
    for key in tree_batching.TREE_KEYS:
      np.testing.assert_array_equal(example[key], want[key])
    assert len(example['tokens']) == len(want['tree_heights']) + 1
  # A leaf with U+00A0 ('8\xa01\/2') stays one token, as the tree has it.
  assert any('8\xa01\\/2' in task.vocab.decode(e['tokens']) for e in train.examples)
  batch = next(iter(train.batches(2, shuffle=False)))
  steps = batch['tokens'].shape[1]
  assert batch['tree_children'].shape == (2, steps - 1, 2) and batch['tree_labels'].shape == (2, 2 * steps - 1)


def _bracketed_subtrees(line):
  """Every node's own bracket text of a PTB tree line, pre-order (an independent reference: string
  matching, not the node arrays)."""
  out, stack = [], []
  for i, ch in enumerate(line):
    if ch == '(':
      out.append(None)
      stack.append((i, len(out) - 1))  # (start, this node's slot in pre-order)
    elif ch == ')':
      start, slot = stack.pop()
      out[slot] = line[start:i + 1]
  return out


def _as_key(tokens, label, arrays):
  return (tuple(tokens), int(label)) + tuple(tuple(np.asarray(arrays[k]).ravel())
                                             for k in tree_batching.TREE_KEYS)


@pytest.mark.parametrize('labels', ['fine', 'binary'])
def test_sst_phrases_with_trees_are_subtrees(fixtures_dir, tmp_path, labels):
  """`train_phrases` + `binary_trees`: every labelled phrase of train is an example whose arrays are those
  of its own bracket text; dev / test stay whole sentences."""
  config = _sst_config(fixtures_dir / 'sst', tmp_path / 'tfds', binary_trees=True, train_phrases=True,
                       config=labels)
  task = data.load(config)
  got = collections.Counter(_as_key(task.vocab.decode(e['tokens']), e['label'], e)
                            for e in task.splits['train'].examples)
  want = collections.Counter()
  for line in (fixtures_dir / 'sst' / 'train.txt').read_text().splitlines():
    root_label = tree_batching.binary_tree_arrays(line, binary_labels=labels == 'binary')['tree_labels'][-1]
    if root_label < 0:
      continue  # the builder drops neutral sentences from binary SST
    for text in _bracketed_subtrees(line):
      arrays = tree_batching.binary_tree_arrays(text, binary_labels=labels == 'binary')
      label = arrays['tree_labels'][-1]
      if label < 0:  # binary: neutral phrases are not examples
        continue
      words = re.findall(r'\(\d+ ([^()]+?)\)', text)  # the preterminals' words
      want[_as_key([w.lower() if config.lowercase else w for w in words], label, arrays)] += 1
  assert got == want
  whole = data.load(_sst_config(fixtures_dir / 'sst', tmp_path / 'tfds2', binary_trees=True, config=labels))
  assert sum(want.values()) > 2 * len(whole.splits['train'])  # phrases, not only sentences
  for split in ('validation', 'test'):
    assert len(task.splits[split]) == len(whole.splits[split])
  # The first example of each sentence is the sentence itself (root first).
  first, sentence = task.splits['train'].examples[0], whole.splits['train'].examples[0]
  assert _as_key(task.vocab.decode(first['tokens']), first['label'], first) == _as_key(
      whole.vocab.decode(sentence['tokens']), sentence['label'], sentence)


@pytest.mark.parametrize('binary_trees', [True, False])
def test_sst_phrases_train_word2vec_on_the_sentences(fixtures_dir, tmp_path, monkeypatch, binary_trees):
  """Under `train_phrases` the embedding corpus is train's and dev's whole sentences, not every phrase."""
  corpora = []
  real = loaders_common.initial_embeddings

  def recording(cfg, vocab, corpus):
    corpora.append(corpus())
    return real(cfg, vocab, corpus)

  monkeypatch.setattr(loaders_common, 'initial_embeddings', recording)
  for phrases in (False, True):
    data.load(_sst_config(fixtures_dir / 'sst', tmp_path / f'tfds{phrases}', binary_trees=binary_trees,
                          train_phrases=phrases))
  sentences, with_phrases = corpora
  assert with_phrases == sentences and len(sentences) == 3 + 2  # the fixture's train and dev lines


def test_subtree_arrays_reject_a_node_outside_the_tree():
  tree = tree_batching.binary_tree_arrays('(3 (2 Good) (3 film))')
  assert tree_batching.subtree_arrays(tree, 2)[:2] == (0, 2)
  assert tree_batching.subtree_arrays(tree, 1)[:2] == (1, 2)
  with pytest.raises(ValueError, match='node id 3 outside the tree of 2 words'):
    tree_batching.subtree_arrays(tree, 3)


def test_sst_loader_names_file_and_line_of_a_non_binary_tree(fixtures_dir, tmp_path):
  manual = tmp_path / 'sst'
  manual.mkdir()
  for name in ('dev.txt', 'test.txt'):
    (manual / name).write_text((fixtures_dir / 'sst' / name).read_text())
  (manual / 'train.txt').write_text('(3 (2 Good) (3 film))\n(2 (2 a) (2 flat) (2 node))\n')
  with pytest.raises(tree_batching.TreeError, match=r'train\.txt:2: .*has 3 children'):
    data.load(_sst_config(manual, tmp_path / 'tfds', binary_trees=True))


def test_one_word_sentences_through_every_encoder():
  """A one-word sentence: no internal tree node (the root is the leaf), DCNN windows of zeros around it."""
  examples = [{'tokens': np.array([3]), 'label': 1, **tree_batching.binary_tree_arrays('(1 Bad)')}]
  batch = batching.collate(examples, 'sentence', (1,))
  assert batch['tree_children'].shape == (1, 0, 2)
  x = jax.random.normal(jax.random.PRNGKey(0), (1, 1, 6), jnp.float64)
  heads = np.array([[-1]])
  for name, config in SMALL.items():
    encoder = encoders.build({'name': name, **config})
    struct = {'tree_children': batch['tree_children'], 'tree_heights': batch['tree_heights'], 'heads': heads}
    struct = {k: v for k, v in struct.items() if k in encoder.STRUCTURE_INPUTS}
    out, _ = jax.jit(lambda k: encoder.init_with_output(k, x, batch['lengths'], structure=struct))(
        jax.random.PRNGKey(1))
    assert np.isfinite(np.asarray(out.sentence)).all() and np.abs(np.asarray(out.sentence)).sum() > 0, name
