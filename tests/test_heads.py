"""The shared pieces of `models.heads` other models are configurations of: the document head's 'flat'
reading (the 'luo_zhu.document_classifier' preset), the one source embedding and structure inputs of
'translation.seq2seq', and the one leading-shape flatten helper (`nn.flatten`)."""
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jax_structured import models
from jax_structured.models import encoders
from jax_structured.models import heads
from jax_structured.nn import flatten

DOC_BATCH = {'tokens': jnp.asarray(np.arange(24).reshape(2, 3, 4) % 7 + 2, jnp.int32),
             'sentence_lengths': jnp.array([[4, 2, 3], [1, 0, 0]]), 'num_sentences': jnp.array([3, 1]),
             'punctuation': jnp.asarray(np.arange(24).reshape(2, 3, 4) % 3 == 0, jnp.int32)}
LUO_ZHU = {'name': 'luo_zhu.document_classifier', 'embedding_dim': 4, 'mlp_hidden': 5,
           'pooling': 'attention', 'static_boundaries': 'punctuation',
           'encoder': {'name': 'mhs_rnn', 'hidden_size': 3, 'attention': False}}
# The variables of 'luo_zhu.document_classifier' as its own module (before it became the head's 'flat'
# reading) wrote them: trained workdirs restore into exactly this tree.
LUO_ZHU_PATHS = [
    'embed/embedding', 'encoder/mhs_rnn/detector_b', 'encoder/mhs_rnn/detector_u',
    'encoder/mhs_rnn/detector_w', 'encoder/mhs_rnn/phrase_b', 'encoder/mhs_rnn/phrase_w_h',
    'encoder/mhs_rnn/phrase_w_x', 'encoder/mhs_rnn/sentence_b', 'encoder/mhs_rnn/sentence_w_h',
    'encoder/mhs_rnn/sentence_w_x', 'encoder/mhs_rnn/word_b', 'encoder/mhs_rnn/word_w_h',
    'encoder/mhs_rnn/word_w_x', 'hidden/bias', 'hidden/kernel', 'logits/bias', 'logits/kernel',
    'pooling/attention/projection/bias', 'pooling/attention/projection/kernel', 'pooling/attention/query']


def _paths(params):
  return sorted('/'.join(k.key for k in path) for path, _ in jax.tree_util.tree_flatten_with_path(params)[0])


def _random_variables(model, batch):
  shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), batch))
  rng = np.random.default_rng(1)
  return jax.tree.map(lambda a: jnp.asarray(rng.normal(0, 0.3, a.shape), a.dtype), shapes)


def test_luo_zhu_preset_keeps_its_parameter_paths_and_is_the_flat_reading():
  """Old 'luo_zhu.document_classifier' workdirs restore (same variables tree), and the preset is the
  'classifier.document' head with reading='flat': the same logits for the same variables."""
  preset = models.build(ml_collections.ConfigDict(LUO_ZHU), vocab_size=9, num_classes=3)
  assert isinstance(preset, heads.DocumentClassifier) and preset.reading == 'flat'
  variables = _random_variables(preset, DOC_BATCH)
  assert _paths(variables['params']) == LUO_ZHU_PATHS
  generic = models.build(ml_collections.ConfigDict({**LUO_ZHU, 'name': 'classifier.document',
                                                    'reading': 'flat'}), vocab_size=9, num_classes=3)
  np.testing.assert_array_equal(np.asarray(preset.apply(variables, DOC_BATCH)),
                                np.asarray(generic.apply(variables, DOC_BATCH)))
  # The preset's defaults where the head's differ: 100-d words, the encoder's own document vector.
  default = models.build(ml_collections.ConfigDict({'name': 'luo_zhu.document_classifier',
                                                    'encoder': {'name': 'han'}}), vocab_size=9, num_classes=3)
  assert (default.embedding_dim, default.pooling) == (100, 'encoder')


def test_flat_reading_equals_the_flattened_batch():
  """A document batch and the flat batch `flatten_documents` makes of it give the same logits."""
  model = models.build(ml_collections.ConfigDict({**LUO_ZHU, 'static_boundaries': 'sentences'}),
                       vocab_size=9, num_classes=3)
  variables = _random_variables(model, DOC_BATCH)
  flat = heads.flatten_documents(DOC_BATCH['tokens'], DOC_BATCH['sentence_lengths'],
                                 DOC_BATCH['num_sentences'])
  flat_batch = {'tokens': flat.tokens, 'lengths': flat.lengths, 'boundaries': flat.sentence_ends}
  np.testing.assert_array_equal(np.asarray(model.apply(variables, DOC_BATCH)),
                                np.asarray(model.apply(variables, flat_batch)))


def test_document_head_keys_per_reading_are_checked():
  flat = {**LUO_ZHU, 'name': 'classifier.document', 'reading': 'flat'}
  with pytest.raises(KeyError, match='document_encoder'):  # the flat reading has one encoder
    models.build(ml_collections.ConfigDict({**flat, 'document_encoder': {'name': 'bilstm'}}),
                 vocab_size=9, num_classes=3)
  for key, value in (('reading', 'flat'), ('document_pooling', 'max')):  # fixed by the preset
    with pytest.raises(KeyError, match=key):
      models.build(ml_collections.ConfigDict({**LUO_ZHU, key: value}), vocab_size=9, num_classes=3)
  bad = models.build(ml_collections.ConfigDict(flat), vocab_size=9, num_classes=3).clone(reading='words')
  with pytest.raises(ValueError, match='reading'):
    jax.eval_shape(lambda: bad.init(jax.random.PRNGKey(0), DOC_BATCH))


def test_translation_uses_the_heads_embedding_and_structure_inputs():
  config = {'name': 'translation.seq2seq', 'encoder': {'name': 'bow'}, 'embedding_dim': 5,
            'target_embedding_dim': 4, 'decoder_size': 6, 'decoder_layers': 1, 'attention_size': 3}
  batch = {'source': jnp.array([[4, 5, 0]]), 'source_lengths': jnp.array([2]),
           'target': jnp.array([[2, 4, 3]]), 'target_lengths': jnp.array([3])}
  model = models.build(ml_collections.ConfigDict({**config, 'static_channel': True}), vocab_size=9,
                       num_classes=8)
  params = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), batch))['params']
  assert sorted(params['embed']) == ['embedding', 'static_embedding']  # heads.embedder's layer
  parsed = models.build(ml_collections.ConfigDict({**config, 'encoder': {'name': 'child_sum_tree_lstm'}}),
                        vocab_size=9, num_classes=8)
  with pytest.raises(KeyError, match='source_heads'):
    jax.eval_shape(lambda: parsed.init(jax.random.PRNGKey(0), batch))


def test_flatten_leading_round_trips_any_leading_shape():
  x = jnp.arange(2 * 3 * 4 * 5, dtype=jnp.float32).reshape(2, 3, 4, 5)
  lengths = jnp.array([[4, 1, 0], [2, 3, 4]])
  heads_ = jnp.arange(2 * 3 * 4).reshape(2, 3, 4)
  flat_x, flat_lengths, structure, lead = flatten.flatten_leading(x, lengths, {'heads': heads_})
  assert (flat_x.shape, flat_lengths.dtype, structure['heads'].shape, lead) == (
      (6, 4, 5), jnp.int32, (6, 4), (2, 3))
  np.testing.assert_array_equal(flat_x[4], x[1, 1])
  back_x, back_heads, none = flatten.unflatten_leading(lead, flat_x, structure['heads'], None)
  np.testing.assert_array_equal(back_x, x)
  np.testing.assert_array_equal(back_heads, heads_)
  assert none is None
  assert flatten.flatten_leading(x[0, 0], lengths[0, 0])[2:] == (None, ())


@pytest.mark.parametrize('name', ['lstm', 'cnn', 'bilstm'])
def test_encoders_read_any_leading_shape(name):
  """[2, 3, T, E] inputs give the rows of the [6, T, E] call (the shared flatten helper)."""
  encoder = encoders.build({'name': name, 'hidden_size': 3} if name != 'cnn' else
                           {'name': name, 'widths': (2,), 'features': 3})
  x = jnp.asarray(np.random.default_rng(0).normal(size=(2, 3, 4, 5)), jnp.float32)
  lengths = jnp.array([[4, 1, 0], [2, 3, 4]])
  variables = encoder.init(jax.random.PRNGKey(0), x, lengths)
  nested = encoder.apply(variables, x, lengths)
  rows = encoder.apply(variables, x.reshape(6, 4, 5), lengths.reshape(6))
  np.testing.assert_array_equal(np.asarray(nested.states).reshape(6, 4, -1), np.asarray(rows.states))
