"""Every registered encoder under every head it supports: builds, one train step, finite loss, exact padding.

New encoders are picked up from the registry; an encoder whose STRUCTURE_INPUTS this file cannot make
fails here until `_structure` learns the key (so no encoder escapes the check).
"""
import functools

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from stages import quick_and_slow
from jax_structured import models
from jax_structured.data import tree_batching
from jax_structured.models import encoders
from jax_structured.models import heads
from jax_structured.training import tasks

VOCAB, CLASSES = 11, 3
# Size keys of encoders, shrunk for the test (any other key keeps its default).
SMALL = {'hidden_size': 6, 'semantic_size': 4, 'features': 4, 'projection': 5, 'units': 6,
         'feature_maps': 4, 'mlp_hidden': 6, 'attention_size': 4, 'phrase_size': 6,
         'sentence_size': 6, 'word_size': 6, 'k_top': 2}


def _encoder_config(name):
  config = encoders.default_config(name)
  for key, value in SMALL.items():
    if key in config and isinstance(config[key], int) and not isinstance(config[key], bool):
      config[key] = value
  return config


def _heads_tree(rng, lengths, width):
  """Random projective-or-not dependency trees as heads [B, width] (-1 = ROOT, -1 past the length)."""
  out = np.full((len(lengths), width), -1, np.int32)
  for b, n in enumerate(lengths):
    order = rng.permutation(n)
    for i in range(1, n):  # each word after the first in `order` hangs from an earlier one
      out[b, order[i]] = order[rng.integers(0, i)]
  return out


def _binary_trees(lengths, width):
  """Random binarised trees over each sentence (seeded by the lengths), as batch arrays padded to width."""
  rng = np.random.default_rng(int(np.sum(lengths)))
  lines = []
  for n in lengths:
    nodes = [f'(2 w{i})' for i in range(n)]
    while len(nodes) > 1:
      i = int(rng.integers(0, len(nodes) - 1))
      nodes[i:i + 2] = [f'(2 {nodes[i]} {nodes[i + 1]})']
    lines.append(nodes[0])
  return tree_batching.collate_trees([tree_batching.binary_tree_arrays(t) for t in lines], width)


def _binary_tree_line(rng, words):
  """A random binarised PTB-format tree over `words`."""
  if len(words) == 1:
    return f'(2 {words[0]})'
  split = int(rng.integers(1, len(words)))
  return f'(2 {_binary_tree_line(rng, words[:split])} {_binary_tree_line(rng, words[split:])})'


def _structure(keys, rng, lengths, width, prefix=''):
  out = {}
  if {'tree_children', 'tree_heights'} & set(keys):
    trees = [tree_batching.binary_tree_arrays(_binary_tree_line(rng, [f'w{i}' for i in range(n)]))
             for n in lengths]
    arrays = tree_batching.collate_trees(trees, width)
    out.update({prefix + k: arrays[k] for k in ('tree_children', 'tree_heights') if k in keys})
  for key in keys:
    if key in ('tree_children', 'tree_heights'):
      continue
    if key == 'heads':
      out[prefix + key] = _heads_tree(rng, lengths, width)
    elif key == 'boundaries':
      # Flags that depend on the position only (not on the padded width): every third word.
      out[prefix + key] = (np.arange(width)[None, :] % 3 == 2).repeat(len(lengths), 0).astype(np.float32)
    elif key in tree_batching.TREE_KEYS:  # SST-style binary trees (the same for a batch padded longer)
      out[prefix + key] = _binary_trees(lengths, width)[key]
    else:
      pytest.fail(f'tests/test_encoders.py cannot make structure input {key!r}: teach _structure')
  return out


def _tokens(rng, lengths, width):
  tokens = np.zeros((len(lengths), width), np.int32)
  for b, n in enumerate(lengths):
    tokens[b, :n] = rng.integers(2, VOCAB, n)
  return tokens


def _batch(head, cls, rng, pad):
  """A batch for `head` (lengths include 1; `pad` extra padded positions on every text axis)."""
  lengths = np.array([5, 1, 3], np.int32)
  keys = cls.STRUCTURE_INPUTS
  if head == 'classifier.sentence':
    width = 5 + pad
    return {'tokens': _tokens(rng, lengths, width), 'lengths': lengths,
            **_structure(keys, rng, lengths, width), 'label': np.array([0, 1, 2], np.int32)}
  if head == 'classifier.pair':
    hyp = np.array([2, 4, 1], np.int32)
    return {'premise': _tokens(rng, lengths, 5 + pad), 'premise_lengths': lengths,
            'hypothesis': _tokens(rng, hyp, 4 + pad), 'hypothesis_lengths': hyp,
            **_structure(keys, rng, lengths, 5 + pad, 'premise_'),
            **_structure(keys, rng, hyp, 4 + pad, 'hypothesis_'), 'label': np.array([0, 1, 2], np.int32)}
  if head == 'classifier.document':
    sentence_lengths = np.array([[3, 2], [1, 0], [4, 1]], np.int32)
    tokens = np.stack([_tokens(rng, row, 4 + pad) for row in sentence_lengths])
    tokens = np.pad(tokens, ((0, 0), (0, pad), (0, 0)))
    sentence_lengths = np.pad(sentence_lengths, ((0, 0), (0, pad)))
    return {'tokens': tokens, 'sentence_lengths': sentence_lengths,
            'num_sentences': np.array([2, 1, 2], np.int32), 'label': np.array([0, 1, 2], np.int32)}
  tokens = _tokens(rng, np.full(3, 6), 6)
  return {'inputs': tokens[:, :-1], 'targets': tokens[:, 1:], 'mask': np.ones((3, 5), np.float32)}


def _cases():
  out = []
  for name in encoders.names():
    cls = encoders.get(name)
    supported = ['classifier.sentence', 'classifier.pair']
    if not cls.STRUCTURE_INPUTS:
      supported.append('classifier.document')
    if cls.CAUSAL:
      supported.append('language_model')
    out += [(name, head) for head in supported]
  # The quick suite: every head over the first encoder that supports it; the other pairs in the slow
  # stage (a head's code is the same for every encoder, and every encoder's padding and outputs are
  # tested quick in its own module: test_chen, test_luo_zhu, test_relation_networks, test_lstmn, ...).
  first = [next(case for case in out if case[1] == head) for head in dict.fromkeys(h for _, h in out)]
  return quick_and_slow(first, [case for case in out if case not in first])


def _model(name, head):
  config = ml_collections.ConfigDict({'name': head, 'embedding_dim': 7, 'mlp_hidden': 5,
                                      'encoder': _encoder_config(name)})
  if head == 'classifier.document':
    config.document_encoder = {'name': 'bilstm', 'hidden_size': 3}
  if head == 'language_model':
    del config['mlp_hidden']
  return models.build(config, vocab_size=VOCAB, num_classes=CLASSES)


def _pad_outputs(head, logits, pad):
  del pad
  return logits if head != 'language_model' else logits[:, :5]


@pytest.mark.parametrize('name,head', _cases())
def test_encoder_under_head(name, head):
  model = _model(name, head)
  batch = _batch(head, encoders.get(name), np.random.default_rng(0), pad=0)
  key = jax.random.PRNGKey(0)
  # Jitted: eager init dispatches the exact matrix-tree fallback op by op (~4x the compile time).
  variables = jax.jit(functools.partial(model.init, train=False))({'params': key, 'dropout': key}, batch)
  task = tasks.get('lm' if head == 'language_model' else 'sentence')(None)

  def loss_fn(params):
    logits = model.apply({**variables, 'params': params}, batch, train=True, rngs={'dropout': key})
    return task.loss_and_metrics(logits, batch)[0]

  optimizer = optax.adam(1e-2)
  params = variables['params']
  state = optimizer.init(params)
  value_and_grad = jax.jit(jax.value_and_grad(loss_fn))
  loss, grads = value_and_grad(params)
  assert np.isfinite(float(loss)), f'{name} under {head}: loss {loss}'
  assert all(np.isfinite(np.asarray(g)).all() for g in jax.tree_util.tree_leaves(grads))
  updates, state = optimizer.update(grads, state, params)
  params = optax.apply_updates(params, updates)
  assert np.isfinite(float(value_and_grad(params)[0]))  # the compiled step again, after an update

  # Padding is exact: the same texts padded 3 positions (and sentence slots) longer give the same logits.
  if head == 'language_model':
    return  # stream batches have no padding
  padded = _batch(head, encoders.get(name), np.random.default_rng(0), pad=3)
  apply = jax.jit(lambda b: model.apply({**variables, 'params': params}, b, train=False))
  np.testing.assert_allclose(np.asarray(apply(padded)), np.asarray(apply(batch)), rtol=1e-5, atol=1e-5,
                             err_msg=f'{name} under {head}: padding changed the logits')


def test_unknown_encoder_and_keys_are_errors():
  with pytest.raises(KeyError, match="registered: .*'bilstm'"):
    encoders.build({'name': 'bilstn'})
  with pytest.raises(KeyError, match=r"config.model.encoder.hidden_sise.*valid: \[.*'hidden_size'"):
    encoders.build({'name': 'bilstm', 'hidden_sise': 3})
  with pytest.raises(KeyError, match='config.model.encoder is missing'):
    models.build(ml_collections.ConfigDict({'name': 'classifier.sentence'}), vocab_size=4, num_classes=2)
  with pytest.raises(KeyError, match=r"unknown config.model key\(s\) \['poolling'\]"):
    models.build(ml_collections.ConfigDict({'name': 'classifier.sentence', 'poolling': 'max',
                                            'encoder': {'name': 'bow'}}), vocab_size=4, num_classes=2)


def test_pooling_encoder_needs_a_sentence_vector():
  model = models.build(ml_collections.ConfigDict({'name': 'classifier.sentence', 'pooling': 'encoder',
                                                  'encoder': {'name': 'bow'}}),
                       vocab_size=VOCAB, num_classes=CLASSES)
  batch = _batch('classifier.sentence', encoders.BagOfWords, np.random.default_rng(0), 0)
  with pytest.raises(ValueError, match="pooling='encoder' but this encoder defines no sentence vector"):
    model.init({'params': jax.random.PRNGKey(0)}, batch)


def test_language_model_rejects_a_bidirectional_encoder():
  model = _model('bilstm', 'language_model')
  batch = _batch('language_model', encoders.BiLSTMEncoder, np.random.default_rng(0), 0)
  with pytest.raises(ValueError, match='cannot be a language model'):
    model.init({'params': jax.random.PRNGKey(0)}, batch)


def test_bag_of_words_is_the_mean_embedding():
  """BoW under mean pooling and a linear classifier: logits = W mean_t(E[tokens]) + b, in numpy."""
  model = models.build(ml_collections.ConfigDict({'name': 'classifier.sentence', 'pooling': 'mean',
                                                  'embedding_dim': 4, 'encoder': {'name': 'bow'}}),
                       vocab_size=VOCAB, num_classes=CLASSES)
  batch = _batch('classifier.sentence', encoders.BagOfWords, np.random.default_rng(1), 2)
  variables = model.init({'params': jax.random.PRNGKey(0)}, batch)
  p = jax.tree_util.tree_map(np.asarray, variables['params'])
  table = p['embed']['embedding']
  expected = np.stack([table[t[:n]].mean(0) for t, n in zip(batch['tokens'], batch['lengths'])])
  expected = expected @ p['logits']['kernel'] + p['logits']['bias']
  np.testing.assert_allclose(np.asarray(model.apply(variables, batch)), expected, rtol=1e-5, atol=1e-6)


def test_kim_cnn_against_numpy():
  """Kim (2014): per width w, c_t = relu(W . x_{t:t+w-1} + b) over windows of the real words; max over t."""
  enc = encoders.KimCNN(widths=(2, 3), features=3)
  rng = np.random.default_rng(2)
  x = rng.normal(size=(2, 6, 4)).astype(np.float32)
  lengths = np.array([5, 2], np.int32)
  variables = enc.init(jax.random.PRNGKey(0), x, lengths)
  out = enc.apply(variables, x, lengths)
  p = jax.tree_util.tree_map(np.asarray, variables['params'])
  for b, n in enumerate(lengths):
    parts = []
    for w in (2, 3):
      kernel, bias = p[f'conv_{w}']['kernel'], p[f'conv_{w}']['bias']  # [w, E, F]
      words = np.concatenate([x[b, :n], np.zeros((w, 4), np.float32)])
      windows = max(n - w + 1, 1)
      maps = [np.maximum(np.einsum('we,wef->f', words[t:t + w], kernel) + bias, 0) for t in range(windows)]
      parts.append(np.max(maps, 0))
    np.testing.assert_allclose(np.asarray(out.sentence[b]), np.concatenate(parts), rtol=1e-5, atol=1e-6)


def test_heads_hold_any_encoder_without_knowing_it():
  """The head classes never name an encoder class except for LSTMN fusion (the pair encoder it is)."""
  import inspect  # pylint: disable=g-import-not-at-top
  source = inspect.getsource(heads)
  named = {n for n in dir(encoders) if isinstance(getattr(encoders, n), type)
           and issubclass(getattr(encoders, n), encoders.Encoder) and n != 'Encoder'}
  assert {n for n in named if f'encoders_lib.{n}' in source} == {'LSTMNEncoder'}


def test_a_variant_that_renames_the_encoder_replaces_its_section():
  from jax_structured import config as config_lib  # pylint: disable=g-import-not-at-top
  base = ml_collections.ConfigDict({'model': {'name': 'classifier.sentence',
                                              'encoder': {'name': 'bilstm', 'hidden_size': 300}}})
  cnn = config_lib.with_overrides(base, {'model.encoder.name': 'cnn', 'model.encoder.features': 5})
  assert cnn.model.encoder.to_dict() == {'name': 'cnn', 'features': 5}
  same = config_lib.with_overrides(base, {'model.encoder.name': 'bilstm', 'model.encoder.hidden_size': 7})
  assert same.model.encoder.to_dict() == {'name': 'bilstm', 'hidden_size': 7}
  with pytest.raises(KeyError, match='hidden_sise'):
    config_lib.with_overrides(base, {'model.encoder.hidden_sise': 7})
  # Another model (the default job's 'parser' variant) replaces the model section too; the same
  # model name merges, and a misspelt key of the kept model is still an error.
  parser = config_lib.with_overrides(base, {'model.name': 'parser.biaffine', 'model.hidden_size': 8})
  assert parser.model.to_dict() == {'name': 'parser.biaffine', 'hidden_size': 8}
  kept = config_lib.with_overrides(base, {'model.name': 'classifier.sentence'})
  assert kept.model.encoder.hidden_size == 300
  with pytest.raises(KeyError, match='lstm_hidden'):
    config_lib.with_overrides(base, {'model.lstm_hidden': 8})


def test_compare_config_rows_build():
  """Every row of configs/encoders/compare.py builds under its head (tiny sizes), TREC and SNLI."""
  import importlib.util  # pylint: disable=g-import-not-at-top
  import os  # pylint: disable=g-import-not-at-top
  from jax_structured import config as config_lib  # pylint: disable=g-import-not-at-top
  path = os.path.join(os.path.dirname(__file__), '..', 'configs', 'encoders', 'compare.py')
  spec = importlib.util.spec_from_file_location('compare_config', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  for options in ('tiny', 'tiny,snli'):
    config = module.get_config(options)
    assert sorted(config.variants) == sorted(module.ENCODERS)
    for name, overrides in config.variants.items():
      child = config_lib.with_overrides(config, config_lib.flatten(overrides.to_dict()))
      model = models.build(child.model, vocab_size=VOCAB, num_classes=CLASSES)
      assert type(model).__name__ == ('PairClassifier' if 'snli' in options else 'SentenceClassifier'), name
  with pytest.raises(ValueError, match="unknown or repeated option 'trek'"):
    module.get_config('trek')
