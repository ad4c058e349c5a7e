"""LSTMN models (Cheng et al. 2016) built through the registry: shapes, masking, context windows."""
import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
import pytest

from jax_structured import models


def _build(name, **kw):
  return models.build(ml_collections.ConfigDict(dict(name=name, **kw)), vocab_size=12, num_classes=3)


@pytest.mark.parametrize('cell,layers', [('lstmn', 1), ('lstmn', 2), ('lstm', 2)])
def test_sentence_classifier_ignores_padding(cell, layers):
  model = _build('lstmn.sentence_classifier', cell=cell, num_layers=layers, embedding_dim=5,
                 hidden_size=6, mlp_size=4)
  tokens = jnp.array([[3, 4, 5, 0, 0]])
  short = {'tokens': tokens[:, :3], 'lengths': jnp.array([3])}
  padded = {'tokens': tokens.at[0, 3:].set(7), 'lengths': jnp.array([3])}
  variables = model.init(jax.random.PRNGKey(0), padded)
  np.testing.assert_allclose(model.apply(variables, short), model.apply(variables, padded), rtol=1e-10)


@pytest.mark.parametrize('fusion', ['none', 'shallow', 'deep'])
def test_pair_classifier_fusions(fusion):
  model = _build('lstmn.pair_classifier', fusion=fusion, embedding_dim=5, hidden_size=6, mlp_size=4)
  batch = {'premise': jnp.array([[1, 2, 3, 0], [4, 5, 0, 0]]), 'premise_lengths': jnp.array([3, 2]),
           'hypothesis': jnp.array([[6, 7, 0], [8, 9, 10]]), 'hypothesis_lengths': jnp.array([2, 3])}
  variables = model.init(jax.random.PRNGKey(0), batch)
  logits = model.apply(variables, batch)
  assert logits.shape == (2, 3) and bool(jnp.all(jnp.isfinite(logits)))
  # Changing premise padding never changes the logits.
  noisy = dict(batch, premise=batch['premise'].at[1, 2:].set(11))
  np.testing.assert_allclose(model.apply(variables, noisy), logits, rtol=1e-10)
  # Fusion really reads the premise: changing a real premise word changes the hypothesis side.
  if fusion != 'none':
    other = dict(batch, premise=batch['premise'].at[0, 0].set(9))
    assert not np.allclose(model.apply(variables, other), logits)


def test_language_model_context_is_read_but_not_scored():
  model = _build('lstmn.language_model', embedding_dim=5, hidden_size=6)
  inputs = jnp.array([[1, 2, 3, 4]])
  variables = model.init(jax.random.PRNGKey(0), {'inputs': inputs})
  plain = model.apply(variables, {'inputs': inputs})
  with_context = model.apply(variables, {'inputs': inputs, 'context': jnp.array([[5, 6, 7]])})
  assert plain.shape == with_context.shape == (1, 4, 12)
  assert not np.allclose(plain, with_context)  # the memory tape reaches back into the context


def test_language_model_learns_a_deterministic_sequence():
  """A few Adam steps on a periodic stream must drive the per-token NLL far below log(V)."""
  model = _build('lstmn.language_model', embedding_dim=8, hidden_size=16)
  stream = jnp.tile(jnp.array([2, 5, 7, 3, 9]), 6)
  batch = {'inputs': stream[None, :-1], 'targets': stream[None, 1:]}
  variables = model.init(jax.random.PRNGKey(0), batch)
  tx = optax.adam(3e-2)
  opt = tx.init(variables)

  def loss_fn(v):
    logits = model.apply(v, batch)
    return optax.softmax_cross_entropy_with_integer_labels(logits, batch['targets']).mean()

  @jax.jit
  def step(v, o):
    loss, g = jax.value_and_grad(loss_fn)(v)
    u, o = tx.update(g, o)
    return optax.apply_updates(v, u), o, loss

  first = float(loss_fn(variables))
  for _ in range(60):
    variables, opt, loss = step(variables, opt)
  assert first > 2.0 and float(loss) < 0.3, (first, float(loss))


def test_unknown_key_is_an_error():
  with pytest.raises(KeyError, match='hiden_size'):
    _build('lstmn.sentence_classifier', hiden_size=3)
