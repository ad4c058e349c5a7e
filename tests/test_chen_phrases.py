"""Table 1 baselines' training details (Chen et al. 2017; Kim 2014; Tai et al. 2015): phrase-level
supervision over the binary Tree-LSTM's nodes against a loop over the nodes, and the CNN-multichannel
input (a frozen copy of the word vectors) against a numpy transcription of Kim's two-channel filters."""
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import pytest

from jax_structured import config as config_lib
from jax_structured import models
from jax_structured.data import batching
from jax_structured.data import tree_batching
from jax_structured.training import tasks
from jax_structured.nn import tree_lstm as tree_lstm_lib

LINES = ['(3 (2 (2 The) (2 film)) (4 (3 (2 is) (4 great)) (2 .)))', '(1 Bad)',
         '(0 (0 (0 (1 w) (1 x)) (2 y)) (3 z))']
LABELS = [3, 1, 0]
CLASSES = 5


def _batch(steps, labels_binary=False):
  rng = np.random.default_rng(0)
  examples = []
  for line, label in zip(LINES, LABELS):
    tree = tree_batching.binary_tree_arrays(line, binary_labels=labels_binary)
    n = len(tree['tree_heights']) + 1
    examples.append({'tokens': rng.integers(1, 20, n), 'label': label, **tree})
  batch = batching.collate(examples, 'sentence', (steps,))
  batch['example_mask'] = np.ones(len(examples), np.float32)
  return batch


def _model(phrase_logits=True, encoder=None, static_channel=False, pooling='encoder'):
  config = ml_collections.ConfigDict({
      'name': 'classifier.sentence', 'encoder': encoder or {'name': 'tree_lstm', 'hidden_size': 4},
      'pooling': pooling, 'embedding_dim': 6, 'dropout_rate': 0.0, 'phrase_logits': phrase_logits,
      'static_channel': static_channel})
  return models.build(config, vocab_size=20, num_classes=CLASSES)


def _task(weight, phrase_logits=True):
  return tasks.Classification(config_lib.resolve(ml_collections.ConfigDict(
      {'model': {'phrase_logits': phrase_logits}, 'train': {'phrase_loss_weight': weight}})))


def _log_softmax(z):
  z = z - z.max()
  return z - np.log(np.exp(z).sum())


def test_phrase_loss_is_the_loop_over_labelled_nodes_and_padding_adds_nothing():
  model = _model()
  batch = _batch(6)
  params = jax.jit(lambda b: model.init(jax.random.PRNGKey(0), b))(batch)['params']
  weight = 0.7
  task = _task(weight)
  loss_fn = jax.jit(lambda p, b: task.loss_and_metrics(model.apply({'params': p}, b, train=True), b))
  loss, metrics = loss_fn(params, batch)
  # The loop: every node's h from the Tree-LSTM (leaf k < s, internal node k - s), the shared classifier.
  x = np.asarray(params['embed']['embedding'])[batch['tokens']]
  leaf_h, node_h, root_h = jax.device_get(tree_lstm_lib.binary_tree_lstm(
      params['encoder']['tree_lstm'], x, batch['lengths'], batch['tree_children'], batch['tree_heights']))
  w, b = np.asarray(params['logits']['kernel']), np.asarray(params['logits']['bias'])
  total, node_nll, node_count, node_correct = 0.0, 0.0, 0, 0
  for i, line in enumerate(LINES):
    s = int(batch['lengths'][i])
    labels = tree_batching.binary_tree_arrays(line)['tree_labels']
    sentence = -_log_softmax(root_h[i] @ w + b)[LABELS[i]]
    nodes = []
    for k in range(2 * s - 2):  # every node but the root (id 2s - 2)
      h = leaf_h[i, k] if k < s else node_h[i, k - s]
      logp = _log_softmax(h @ w + b)
      nodes.append(-logp[labels[k]])
      node_correct += int(np.argmax(logp) == labels[k])
    node_nll += sum(nodes)
    node_count += len(nodes)
    total += sentence + weight * (np.mean(nodes) if nodes else 0.0)
  np.testing.assert_allclose(loss, total / len(LINES), rtol=1e-5)  # float32 model
  np.testing.assert_allclose(metrics['phrase_nll'], (node_nll, node_count), rtol=1e-5)
  np.testing.assert_allclose(metrics['phrase_accuracy'], (node_correct, node_count))
  # Padded to more words (padding nodes labelled -1, zero states): the same loss and metrics.
  long_loss, long_metrics = loss_fn(params, _batch(11))
  np.testing.assert_allclose(long_loss, loss, rtol=1e-6)
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6), long_metrics, metrics)
  # A padding example (example_mask 0) contributes nothing either.
  masked = dict(batch, example_mask=np.array([1.0, 1.0, 0.0], np.float32))
  loss2, metrics2 = loss_fn(params, masked)
  assert float(metrics2['loss'][1]) == 2.0 and float(metrics2['phrase_nll'][1]) == 8.0  # 8 + 0 nodes
  # Evaluation is sentence-level: plain logits, no phrase metrics.
  eval_loss, eval_metrics = task.loss_and_metrics(model.apply({'params': params}, batch), batch)
  assert 'phrase_nll' not in eval_metrics and float(eval_loss) < float(loss)


@pytest.mark.parametrize('classifier_input', ['paper', 'both'])
def test_ap_dcnn_phrases_are_the_tree_lstm_nodes_through_the_s_tilde_block(classifier_input):
  """AP-DCNN's node logits: node k's Tree-LSTM state h_k through the s~ rows of the one output layer,
  W[F:] h_k + b (a loop over the nodes); under eq. 12 as written ('paper') that block gets gradient in
  training from the phrases alone."""
  encoder = {'name': 'ap_dcnn', 'branches': ((3, 2),), 'features': 4, 'k_top': 2,
             'classifier_input': classifier_input}
  model = _model(encoder=encoder)
  batch = _batch(6)
  params = jax.jit(lambda b: model.init(jax.random.PRNGKey(0), b))(batch)['params']
  outputs = jax.jit(lambda p: model.apply({'params': p}, batch, train=True))(params)
  x = np.asarray(params['embed']['embedding'])[batch['tokens']]
  leaf_h, node_h, _ = jax.device_get(tree_lstm_lib.binary_tree_lstm(
      params['encoder']['tree_lstm'], x, batch['lengths'], batch['tree_children'], batch['tree_heights']))
  w, b = np.asarray(params['logits']['kernel']), np.asarray(params['logits']['bias'])
  assert w.shape == (8, CLASSES)  # [s; s~]: 4 DCNN features + 4 Tree-LSTM units
  node_logits = np.asarray(outputs['node_logits'])
  for i in range(len(LINES)):
    s = int(batch['lengths'][i])
    for k in range(2 * s - 1):
      h = leaf_h[i, k] if k < s else node_h[i, k - s]
      np.testing.assert_allclose(node_logits[i, k], h @ w[4:] + b, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(node_logits[i, 2 * s - 1:], np.broadcast_to(b, node_logits[i, 2 * s - 1:].shape),
                               rtol=1e-6)  # padding nodes: zero states
  def s_tilde_block_grad(weight):
    task = _task(weight)
    grads = jax.jit(jax.grad(lambda p: task.loss_and_metrics(model.apply({'params': p}, batch, train=True),
                                                            batch)[0]))(params)
    return np.abs(np.asarray(grads['logits']['kernel'])[4:]).sum()
  if classifier_input == 'paper':
    assert s_tilde_block_grad(0.0) == 0.0 and s_tilde_block_grad(1.0) > 0.0
  else:
    assert s_tilde_block_grad(0.0) > 0.0


def test_weight_zero_is_exactly_the_old_loss():
  batch = _batch(7)
  with_nodes, plain = _model(phrase_logits=True), _model(phrase_logits=False)
  params = jax.jit(lambda b: plain.init(jax.random.PRNGKey(3), b))(batch)['params']
  outputs = jax.jit(lambda p: with_nodes.apply({'params': p}, batch, train=True))(params)
  assert outputs['node_logits'].shape == (3, 13, CLASSES)
  new, new_metrics = _task(0.0).loss_and_metrics(outputs, batch)
  old, old_metrics = tasks.Classification(None).loss_and_metrics(
      jax.jit(lambda p: plain.apply({'params': p}, batch, train=True))(params), batch)
  assert float(new) == float(old)
  assert new_metrics.keys() == old_metrics.keys()


def test_binary_node_labels_drop_neutral_phrases():
  arrays = tree_batching.binary_tree_arrays(LINES[0], binary_labels=True)
  np.testing.assert_array_equal(arrays['tree_labels'], [-1, -1, -1, 1, -1, -1, 1, 1, 1])
  np.testing.assert_array_equal(tree_batching.binary_sentiment([0, 1, 2, 3, 4]), [0, 0, -1, 1, 1])
  batch = _batch(6, labels_binary=True)
  node_logits = jnp.zeros((3, 11, 2))
  _, count, _ = tasks.phrase_terms(node_logits, batch['tree_labels'], batch['lengths'])
  # Sentence 0: labelled non-root nodes 3 (great), 6 (is great), 7 ((is great) .); sentence 1: none;
  # sentence 2: w, x, (w x), ((w x) y) negative, y neutral, z positive.
  np.testing.assert_array_equal(count, [3, 0, 5])


def test_phrase_supervision_bad_settings_are_named():
  with pytest.raises(ValueError, match='config.model.phrase_logits=True'):
    _task(1.0, phrase_logits=False)
  batch = _batch(5)
  cnn = _model(encoder={'name': 'cnn', 'widths': (2,), 'features': 3})
  with pytest.raises(ValueError, match="defines no tree node states.*'tree_lstm' or 'ap_dcnn'"):
    cnn.init(jax.random.PRNGKey(0), batch, train=True)
  model = _model()
  params = model.init(jax.random.PRNGKey(0), batch)['params']
  outputs = model.apply({'params': params}, batch, train=True)
  with pytest.raises(KeyError, match='config.data.binary_trees=True'):
    _task(1.0).loss_and_metrics(outputs, {k: v for k, v in batch.items() if k != 'tree_labels'})
  with pytest.raises(ValueError, match='phrase_loss_weight must be >= 0'):
    _task(-1.0)


def test_multichannel_cnn_is_kims_two_channel_filters_and_the_static_channel_never_moves():
  """Kim (2014) sec. 2: each filter applied to both channels (static, non-static) and the results added,
  c_i = relu(w . x_static[i:i+h] + w . x_tuned[i:i+h] + b), max over time, then the softmax layer."""
  encoder = {'name': 'cnn', 'widths': (2, 3), 'features': 3}
  model = _model(phrase_logits=False, encoder=encoder, static_channel=True)
  batch = _batch(6)
  params = jax.jit(lambda b: model.init(jax.random.PRNGKey(0), b))(batch)['params']
  np.testing.assert_array_equal(params['embed']['static_embedding'], params['embed']['embedding'])
  # Move the tuned channel away from the static one, as training does.
  params = jax.tree.map(lambda a: a, params)
  params['embed']['embedding'] = params['embed']['embedding'] + 0.3
  logits = np.asarray(jax.jit(lambda p: model.apply({'params': p}, batch))(params))
  channels = [np.asarray(params['embed'][k])[batch['tokens']] for k in ('static_embedding', 'embedding')]
  w_out, b_out = np.asarray(params['logits']['kernel']), np.asarray(params['logits']['bias'])
  for i in range(len(LINES)):
    s = int(batch['lengths'][i])
    features = []
    for h in (2, 3):
      kernel = np.asarray(params['encoder'][f'conv_{h}']['kernel'])  # [h, E, F]
      bias = np.asarray(params['encoder'][f'conv_{h}']['bias'])
      padded = [np.concatenate([c[i, :s], np.zeros((h - 1, c.shape[-1]))]) for c in channels]
      maps = [np.maximum(sum(np.einsum('ke,kef->f', x[t:t + h], kernel) for x in padded) + bias, 0.0)
              for t in range(max(s - h + 1, 1))]
      features.append(np.max(maps, axis=0))
    np.testing.assert_allclose(logits[i], np.concatenate(features) @ w_out + b_out, rtol=1e-5,
                               atol=1e-6)
  # The static channel gets no gradient, the tuned one does.
  task = tasks.Classification(None)
  grads = jax.grad(lambda p: task.loss_and_metrics(model.apply({'params': p}, batch), batch)[0])(params)
  np.testing.assert_array_equal(grads['embed']['static_embedding'], 0.0)
  assert np.abs(np.asarray(grads['embed']['embedding'])).sum() > 0
