"""Liu & Lapata (2018) sentence / document / pair models: registry, variants, padding invariance."""
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from stages import quick_and_slow
from jax_structured import models
from jax_structured import nn as jsnn
from jax_structured.models import encoders
from jax_structured.models import heads
from configs import liu_lapata as liu_lapata_configs
from jax_structured.models import liu_lapata
from jax_structured.models import registry

TINY = dict(embedding_dim=6, hidden_size=4, semantic_size=3, mlp_hidden=5, dropout_rate=0.1)
VOCAB, CLASSES = 13, 3


def _config(name, **overrides):
  config = dict(TINY, name=f'liu_lapata.{name}')
  if name == 'document_classifier':
    config.pop('mlp_hidden')
  config.update(overrides)
  return ml_collections.ConfigDict(config)


def sentence_batch(rng, lengths, width):
  tokens = np.where(np.arange(width)[None] < np.asarray(lengths)[:, None],
                    rng.integers(2, VOCAB, (len(lengths), width)), 0).astype(np.int32)
  return {'tokens': tokens, 'lengths': np.asarray(lengths, np.int32),
          'label': np.zeros(len(lengths), np.int32), 'example_mask': np.ones(len(lengths), np.float32)}


def document_batch(rng, sentence_lengths, sentences, width):
  """sentence_lengths: list (per document) of lists of sentence lengths."""
  b = len(sentence_lengths)
  lengths = np.zeros((b, sentences), np.int32)
  for i, doc in enumerate(sentence_lengths):
    lengths[i, :len(doc)] = doc
  tokens = np.where(np.arange(width) < lengths[..., None], rng.integers(2, VOCAB, (b, sentences, width)),
                    0).astype(np.int32)
  return {'tokens': tokens, 'sentence_lengths': lengths,
          'num_sentences': np.array([len(d) for d in sentence_lengths], np.int32),
          'label': np.zeros(b, np.int32), 'example_mask': np.ones(b, np.float32)}


def pair_batch(rng, premise_lengths, hypothesis_lengths, n, m):
  p = sentence_batch(rng, premise_lengths, n)
  h = sentence_batch(rng, hypothesis_lengths, m)
  return {'premise': p['tokens'], 'premise_lengths': p['lengths'], 'hypothesis': h['tokens'],
          'hypothesis_lengths': h['lengths'], 'label': p['label'], 'example_mask': p['example_mask']}


_PARAMS = {}


def _init(model, batch):
  """Variables of `model`, shared between models whose parameters have the same structure.

  The attention variants 'simple', 'structured' and 'inside_outside' (and dropout rates) differ only
  in computation, so one initialisation serves them all (it saves compile time).
  """
  fields = {k: getattr(model, k) for k in registry.config_fields(type(model))}
  for key in ('dropout_rate', 'attention', 'sentence_attention', 'document_attention'):
    if key in fields and key != 'dropout_rate':
      fields[key] = 'none' if fields[key] == 'none' else 'attention'
    fields.pop('dropout_rate', None)
  key = (type(model).__name__, tuple(sorted((k, repr(v)) for k, v in fields.items())),
         model.embedding_init is None)
  if key not in _PARAMS or model.embedding_init is not None:
    _PARAMS[key] = jax.jit(model.init)(jax.random.key(0), batch)
  return _PARAMS[key]


def _forward_and_grad(model, batch):
  """(logits, grads, sown intermediates) of a training step, in one jitted program."""
  variables = _init(model, batch)
  assert set(variables) == {'params'}

  def loss(params):
    logits, state = model.apply({'params': params}, batch, train=True,
                                rngs={'dropout': jax.random.key(1)}, mutable=['intermediates'])
    return jnp.sum(jax.nn.log_softmax(logits)[:, 0] * batch['example_mask']), (logits, state)

  (_, (logits, state)), grads = jax.jit(jax.value_and_grad(loss, has_aux=True))(variables['params'])
  return logits, grads, jsnn.find_intermediates(state)


def _check_finite(logits, grads):
  assert logits.shape[-1] == CLASSES and bool(jnp.all(jnp.isfinite(logits)))
  leaves = jax.tree.leaves(grads)
  assert all(bool(jnp.all(jnp.isfinite(g))) for g in leaves)
  assert sum(float(jnp.abs(g).sum()) > 0 for g in leaves) > len(leaves) // 2


@pytest.mark.parametrize('attention', quick_and_slow(['simple', 'structured'], ['none']))
def test_sentence_classifier_variants(attention):
  model = models.build(_config('sentence_classifier', attention=attention), vocab_size=VOCAB,
                       num_classes=CLASSES)
  batch = sentence_batch(np.random.default_rng(0), [5, 1, 3], 5)
  logits, grads, sown = _forward_and_grad(model, batch)
  _check_finite(logits, grads)
  assert bool(sown) == (attention != 'none')
  if attention == 'simple':  # dropout (rate 0.1) acts in training only
    eval_logits = jax.jit(lambda b: model.apply(_init(model, b), b))(batch)
    assert not np.allclose(eval_logits, logits, atol=1e-4)
    np.testing.assert_array_equal(_forward_and_grad(model, batch)[0], logits)  # same key, same mask
  if attention != 'none':
    assert sown['arc_scores'].shape == (3, 5, 5) and sown['root_scores'].shape == (3, 5)
    np.testing.assert_array_equal(sown['lengths'], batch['lengths'])


@pytest.mark.parametrize('sentence_attention,document_attention', quick_and_slow(
    [('structured', 'structured')], [('none', 'none'), ('simple', 'simple')]))
def test_document_classifier_variants(sentence_attention, document_attention):
  model = models.build(_config('document_classifier', sentence_attention=sentence_attention,
                               document_attention=document_attention, pooling='mean'),
                       vocab_size=VOCAB, num_classes=CLASSES)
  # An empty sentence inside a real document, and a padding document with 0 sentences.
  batch = document_batch(np.random.default_rng(1), [[3, 4, 1], [2, 0], []], 3, 4)
  batch['example_mask'][2] = 0
  with jax.debug_nans(True):
    logits, grads, sown = _forward_and_grad(model, batch)
  _check_finite(logits, grads)
  if sentence_attention == 'structured':
    assert sown['sentence_arc_scores'].shape == (3, 3, 4, 4)
    assert sown['document_arc_scores'].shape == (3, 3, 3)
    np.testing.assert_array_equal(sown['document_lengths'], [3, 2, 0])
    np.testing.assert_array_equal(sown['sentence_lengths'], batch['sentence_lengths'])
    real = np.arange(3)[None] < np.array([3, 2, 0])[:, None]
    totals = sown['document_arc_marginals'].sum(-2) + sown['document_root_marginals']
    np.testing.assert_allclose(np.asarray(totals)[real], 1.0, atol=1e-5)


@pytest.mark.parametrize('attention', quick_and_slow(['inside_outside', 'structured'], ['none', 'simple']))
def test_pair_classifier_variants(attention):
  model = models.build(_config('pair_classifier', attention=attention), vocab_size=VOCAB,
                       num_classes=CLASSES)
  batch = pair_batch(np.random.default_rng(2), [4, 2], [3, 1], 4, 3)
  logits, grads, sown = _forward_and_grad(model, batch)
  _check_finite(logits, grads)
  if attention != 'none':
    # Premises and hypotheses are encoded in one pass, padded to the longer of the two.
    assert sown['premise_arc_scores'].shape == (2, 4, 4)
    assert sown['hypothesis_root_scores'].shape == (2, 4)
    np.testing.assert_array_equal(sown['hypothesis_lengths'], batch['hypothesis_lengths'])
    np.testing.assert_array_equal(sown['premise_lengths'], batch['premise_lengths'])


def _pad_to(array, shape, value=0):
  out = np.full(shape, value, array.dtype)
  out[tuple(slice(0, s) for s in array.shape)] = array
  return out


def test_sentence_padding_invariance():
  model = models.build(_config('sentence_classifier', pooling='attention'), vocab_size=VOCAB,
                       num_classes=CLASSES)
  batch = sentence_batch(np.random.default_rng(3), [4, 2, 1], 4)
  variables = _init(model, batch)
  apply = jax.jit(lambda b: model.apply(variables, b))
  logits = apply(batch)
  # Wider padding (filled with a real token id, which must be ignored) and an extra padding example.
  wide = dict(batch, tokens=_pad_to(batch['tokens'], (4, 7), 5), lengths=_pad_to(batch['lengths'], (4,)),
              example_mask=_pad_to(batch['example_mask'], (4,)))
  wide_logits = apply(wide)
  np.testing.assert_allclose(wide_logits[:3], logits, atol=1e-5)
  assert bool(jnp.all(jnp.isfinite(wide_logits)))
  # Each example alone (no batch padding at all) gives the same logits.
  # An example alone (no batch padding at all) gives the same logits.
  alone = dict(tokens=batch['tokens'][1:2, :2], lengths=batch['lengths'][1:2])
  np.testing.assert_allclose(apply(alone)[0], logits[1], atol=1e-5)


def test_document_padding_invariance():
  model = models.build(_config('document_classifier', sentence_attention='structured',
                               document_attention='simple'), vocab_size=VOCAB, num_classes=CLASSES)
  batch = document_batch(np.random.default_rng(4), [[3, 2], [1, 3, 2]], 3, 3)
  variables = _init(model, batch)
  apply = jax.jit(lambda b: model.apply(variables, b))
  logits = apply(batch)
  wide = dict(batch, tokens=_pad_to(batch['tokens'], (3, 5, 6), 7),
              sentence_lengths=_pad_to(batch['sentence_lengths'], (3, 5)),
              num_sentences=_pad_to(batch['num_sentences'], (3,)),
              example_mask=_pad_to(batch['example_mask'], (3,)))
  # Stray lengths in slots past num_sentences are ignored by the model (validate_batch rejects them).
  wide['sentence_lengths'][0, 4] = 3
  wide_logits = apply(wide)
  np.testing.assert_allclose(wide_logits[:2], logits, atol=1e-5)
  assert bool(jnp.all(jnp.isfinite(wide_logits)))


def test_pair_padding_invariance():
  model = models.build(_config('pair_classifier'), vocab_size=VOCAB, num_classes=CLASSES)
  batch = pair_batch(np.random.default_rng(5), [4, 2], [3, 1], 4, 3)
  variables = _init(model, batch)
  apply = jax.jit(lambda b: model.apply(variables, b))
  logits = apply(batch)
  wide = dict(premise=_pad_to(batch['premise'], (3, 6), 4), hypothesis=_pad_to(batch['hypothesis'], (3, 5), 4),
              premise_lengths=_pad_to(batch['premise_lengths'], (3,)),
              hypothesis_lengths=_pad_to(batch['hypothesis_lengths'], (3,)))
  wide_logits = apply(wide)
  np.testing.assert_allclose(wide_logits[:2], logits, atol=1e-5)
  assert bool(jnp.all(jnp.isfinite(wide_logits)))


def test_registry_errors_and_pretrained_embeddings():
  with pytest.raises(KeyError, match=r"unknown model.*'liu_lapata.pair_classifier'"):
    models.build(ml_collections.ConfigDict({'name': 'liu_lapata.tree_lstm'}), vocab_size=3,
                 num_classes=2)
  with pytest.raises(KeyError, match=r"\['hiden_size'\].*valid: .*'hidden_size'"):
    models.build(_config('sentence_classifier', hiden_size=3), vocab_size=VOCAB, num_classes=2)
  with pytest.raises(ValueError, match='attention.*valid'):
    model = models.build(_config('sentence_classifier', attention='tree'), vocab_size=VOCAB,
                         num_classes=2)
    model.init(jax.random.key(0), sentence_batch(np.random.default_rng(0), [2], 2))
  table = np.random.default_rng(0).normal(size=(VOCAB, 6)).astype(np.float32)
  with pytest.raises(ValueError, match='embedding_dim=6'):
    models.build(_config('sentence_classifier'), vocab_size=VOCAB, num_classes=2,
                 embeddings=table[:, :5])
  model = models.build(_config('sentence_classifier', freeze_embeddings=True), vocab_size=VOCAB,
                       num_classes=2, embeddings=table)
  variables = _init(model, sentence_batch(np.random.default_rng(0), [2], 2))
  np.testing.assert_array_equal(variables['params']['embed']['embedding'], table)
  assert 'liu_lapata.document_classifier' in models.names()

  @models.register('test.custom')
  def build_custom(config, *, vocab_size, num_classes, embeddings=None):
    del config, embeddings
    return heads.SentenceClassifier(encoder=encoders.BagOfWords(), vocab_size=vocab_size,
                                    num_classes=num_classes)

  assert isinstance(models.build(ml_collections.ConfigDict({'name': 'test.custom'}), vocab_size=4,
                                 num_classes=2), heads.SentenceClassifier)
  with pytest.raises(ValueError, match='registered twice'):
    models.register('test.custom')(liu_lapata.pair_classifier)


def test_validate_batch():
  rng = np.random.default_rng(7)
  good = document_batch(rng, [[2, 1], []], 2, 2)
  good['example_mask'][1] = 0  # a padding example may be empty
  liu_lapata.validate_batch(good, 'document')
  bad = document_batch(rng, [[2, 1], []], 2, 2)
  with pytest.raises(ValueError, match=r"num_sentences'\]\[1\] = 0: example 1 has no sentences"):
    liu_lapata.validate_batch(bad, 'document')
  bad = document_batch(rng, [[2], [1]], 2, 2)
  bad['sentence_lengths'][0, 1] = 2
  with pytest.raises(ValueError, match=r"sentence_lengths'\]\[0, 1\] = 2 but"):
    liu_lapata.validate_batch(bad, 'document')
  bad = sentence_batch(rng, [2, 0], 3)
  with pytest.raises(ValueError, match=r"lengths'\]\[1\] = 0"):
    liu_lapata.validate_batch(bad, 'sentence')
  del bad['example_mask']  # without a mask every example is real
  with pytest.raises(ValueError, match=r"lengths'\]\[1\] = 0"):
    liu_lapata.validate_batch(bad, 'sentence')
  bad['lengths'][1] = 1
  liu_lapata.validate_batch(bad, 'sentence')
  bad = pair_batch(rng, [2], [5], 2, 3)
  with pytest.raises(ValueError, match=r"hypothesis_lengths'\]\[0\] = 5 does not fit"):
    liu_lapata.validate_batch(bad, 'pair')


CONFIGS = ('yelp13', 'imdb', 'czech_movies', 'debates', 'debian', 'sst_binary', 'sst_fine', 'snli')


@pytest.mark.parametrize('file', CONFIGS)
def test_configs_validate_and_build_every_variant(file, tmp_path, monkeypatch):
  import importlib  # pylint: disable=g-import-not-at-top
  from jax_structured.data import loaders  # pylint: disable=g-import-not-at-top
  from jax_structured import config as training_config  # pylint: disable=g-import-not-at-top
  monkeypatch.setenv('JAX_STRUCTURED_CACHE', str(tmp_path))
  module = importlib.import_module(f'configs.liu_lapata.{file}')
  for options in ('', 'tiny'):
    config = module.get_config(options)
    training_config.resolve(config)
    loaders.validate_config(config.data, config.data.name)
    assert config.data.embedding_dim == config.model.embedding_dim or options == 'tiny'
    assert len(config.variants) >= 4
    for name, overrides in config.variants.items():
      variant = training_config.with_overrides(config, training_config.flatten(overrides.to_dict()))
      model = models.build(variant.model, vocab_size=VOCAB, num_classes=CLASSES)
      assert model.__class__.__name__.lower().startswith(variant.model.name.split('.')[1].split('_')[0])
  config = module.get_config('tiny')
  assert config.model.hidden_size < 20 and 0 < config.train.num_steps <= 50
  single = module.get_config(sorted(module.get_config('').variants)[0])
  assert not single.variants
  with pytest.raises(ValueError, match='unknown or repeated option'):
    module.get_config('bogus')


def test_document_config_rejects_an_unknown_data_key():
  with pytest.raises((KeyError, ValueError), match='no_such_key'):
    liu_lapata_configs.document_config('text_classification', {'no_such_key': 1})
