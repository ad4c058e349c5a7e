"""Relation-network encoders of Yu et al. (2018) against direct float64 numpy transcriptions of the
paper's equations (eqs. 1, 3, 4, sec. 3.1, sec. 3.2), brute-force tree marginals, padding exactness and
bad input."""
import functools
import gzip
import json

import brute_force
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_structured import nn as jsnn
from jax_structured.models import encoders
from jax_structured.nn import relation_networks as rn_lib

E, HID, REL = 5, 3, 4  # embedding, BiLSTM per direction, g/f units
LENGTHS = (4, 3, 1)
T = 5
HEADS = np.array([[1, -1, 1, 2, -1], [-1, 0, 0, -1, -1], [-1, -1, -1, -1, -1]], np.int32)
SNLI_LONGEST = 59  # longest premise or hypothesis of the shared SNLI dev + test (tokens of the binary parse)


def relu(x):
  return np.maximum(x, 0.0)


def np_g(p, o_h, o_m):
  """g_theta([o_h; o_m]) with the first layer as ONE matrix over the concatenated pair (not separable)."""
  w = np.concatenate([p['head']['kernel'], p['modifier']['kernel']], 0)
  z = relu(np.concatenate([o_h, o_m]) @ w + p['head']['bias'])
  k = 1
  while f'dense_{k}' in p:
    z = z + relu(z @ p[f'dense_{k}']['kernel'] + p[f'dense_{k}']['bias'])
    k += 1
  return z


def np_f(p, x):
  for k in range(2):
    y = relu(x @ p[f'dense_{k}']['kernel'] + p[f'dense_{k}']['bias'])
    x = y + x if x.shape == y.shape else y
  return x


def np_lstm(p, c, h, x):
  def gate(name):
    return x @ p['i' + name]['kernel'] + h @ p['h' + name]['kernel'] + p['h' + name]['bias']

  sig = lambda v: 1 / (1 + np.exp(-v))
  i, f, g, o = sig(gate('i')), sig(gate('f')), np.tanh(gate('g')), sig(gate('o'))
  c = f * c + i * g
  return c, o * np.tanh(c)


def np_weights(p, o, root, tree, heads):
  """w [1 + n, n] (row 0 = ROOT) for one unpadded sentence o [n, d]."""
  n = len(o)
  if tree == 'none':
    return np.concatenate([np.zeros((1, n)), np.ones((n, n))])
  if tree == 'supervised':
    w = np.zeros((1 + n, n))
    for m, h in enumerate(heads[:n]):
      w[h + 1, m] = 1.0
    return w
  lt = p['latent_tree']
  potential = lambda a, b: a @ lt['W'] @ b + lt['U'] @ a + lt['V'] @ b + lt['b']  # eq. 4
  arc = np.array([[potential(o[h], o[m]) for m in range(n)] for h in range(n)])
  roots = np.array([potential(root, o[m]) for m in range(n)])
  _, arc_m, root_m, _, _ = brute_force.reference(arc, roots, single_root=True)
  return np.concatenate([root_m[None], arc_m])


def np_aggregate(terms, kind):
  """Sum, or max over the pairs in the tree (weight > 0), of weighted relations (a list of arrays)."""
  terms = [w * r for w, r in terms if w > 0]
  if not terms:
    return None
  return np.sum(terms, 0) if kind == 'sum' else np.max(terms, 0)


def np_rn(p, o, root, tree, kind, heads):
  """s = f(agg_{(h, m) in D(x)} w[h, m] g(o_h, o_m)), eqs. 1 and 3."""
  n = len(o)
  w = np_weights(p, o, root, tree, heads)
  objects = [root] + list(o)
  pooled = np_aggregate([(w[h, m], np_g(p['g'], objects[h], o[m]))
                         for h in range(n + 1) for m in range(n)], kind)
  return np_f(p['f'], pooled)


def np_intra(p, o, root, tree, kind, heads):
  """s_i = tanh(W_r [r_i; o_i]) with r_i = [p_i; c_i] (latent / none) or f(g(o_head, o_i)), sec. 3.1."""
  n = len(o)
  objects = [root] + list(o)
  out = []
  w = np_weights(p, o, root, tree, heads)
  for i in range(n):
    if tree == 'supervised':
      r = np_f(p['f'], np_g(p['g'], objects[heads[i] + 1], o[i]))
    else:
      parents = np_aggregate([(w[h, i], np_g(p['g'], objects[h], o[i])) for h in range(n + 1)], kind)
      children = np_aggregate([(w[i + 1, m], np_g(p['g'], o[i], o[m])) for m in range(n)], kind)
      zero = np.zeros(REL)
      r = np.concatenate([np_f(p['f'], parents if parents is not None else zero),
                          np_f(p['f'], children if children is not None else zero)])
    out.append(np.tanh(np.concatenate([r, o[i]]) @ p['output']['kernel']))
  return np.array(out)


def np_recurrent(p, o, root, tree, kind, heads, steps=3):
  """h^1 = o; m_i^t from the parent (supervised) or parents and children (latent / none);
  h_i^t = LSTM(h_i^{t-1}, [o_i; m_i^t]), sec. 3.2."""
  n = len(o)
  w = np_weights(p, o, root, tree, heads)
  h, c = o.copy(), np.zeros_like(o)
  zero = np.zeros(REL)
  for _ in range(steps):
    states = [root] + list(h)
    new_h, new_c = [], []
    for i in range(n):
      if tree == 'supervised':
        messages = [np_g(p['g'], states[heads[i] + 1], h[i])]
      else:
        parents = np_aggregate([(w[k, i], np_g(p['g'], states[k], h[i])) for k in range(n + 1)], kind)
        children = np_aggregate([(w[i + 1, m], np_g(p['g'], h[i], h[m])) for m in range(n)], kind)
        messages = [parents if parents is not None else zero,
                    children if children is not None else zero]
      ci, hi = np_lstm(p['f'], c[i], h[i], np.concatenate([o[i]] + messages))
      new_c.append(ci)
      new_h.append(hi)
    h, c = np.array(new_h), np.array(new_c)
  return h


def _build(name, tree, aggregation=None, **kw):
  config = dict(name=name, hidden_size=HID, relation_size=REL, tree=tree, **kw)
  if aggregation:
    config['aggregation'] = aggregation
  return encoders.build(config)


def _inputs(seed=0, lengths=LENGTHS, width=T, dtype=np.float64):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(len(lengths), width, E)).astype(dtype)
  x = np.where(np.arange(width)[None, :, None] < np.asarray(lengths)[:, None, None], x, 0.0)
  return jnp.asarray(x), jnp.asarray(lengths, jnp.int32)


# Compiling trees.marginals dominates the run time: every latent test uses the batch shape [3, T, E]
# (lengths and values vary, not shapes) so that each encoder config compiles once for the whole file.


@functools.lru_cache(maxsize=None)
def _apply(name, tree, aggregation=None):
  """A jitted (params, x, lengths, heads) -> (EncoderOutput, intermediates) of one encoder config."""
  encoder = _build(name, tree, aggregation)

  def apply(params, x, lengths, heads, sow_splits=()):
    return encoder.apply({'params': params}, x, lengths, structure={'heads': heads},
                         sow_splits=sow_splits, mutable=['intermediates'])

  return jax.jit(apply, static_argnames='sow_splits')


@functools.lru_cache(maxsize=None)
def _params(name, tree, aggregation=None, seed=0):
  """Random parameters (normal, scale 0.5, float64) of the right shapes: no initializer choice and no
  compile (shapes from jax.eval_shape)."""
  x, lengths = _inputs()
  shapes = jax.eval_shape(_build(name, tree, aggregation).init, jax.random.key(0), x, lengths,
                          structure={'heads': jnp.asarray(HEADS)})['params']
  rng = np.random.default_rng(seed)
  return jax.tree.map(lambda s: jnp.asarray(0.5 * rng.normal(size=s.shape)), shapes)


@jax.jit
def _objects(bilstm_params, x, lengths):
  return jsnn.BiLSTM(HID).apply({'params': bilstm_params}, x, lengths)


def _run(name, tree, aggregation=None, seed=0, heads=HEADS, sow_splits=()):
  x, lengths = _inputs(seed)
  params = _params(name, tree, aggregation)
  out, state = _apply(name, tree, aggregation)(params, x, lengths, jnp.asarray(heads),
                                                sow_splits=sow_splits)
  objects = np.asarray(_objects(params['bilstm'], x, lengths))
  return out, state, objects, np.asarray(params['root']), jax.tree.map(np.asarray, params)


# The latent tree is checked with the aggregation the paper uses for each model (sum for the RN, max for
# the others); both aggregations with no tree and a given tree.
RN_CASES = [('none', 'sum'), ('none', 'max'), ('supervised', 'sum'), ('supervised', 'max'),
            ('latent', 'sum')]
ATTN_CASES = [('none', 'sum'), ('none', 'max'), ('supervised', 'max'), ('latent', 'max')]
RECURRENT_CASES = [('none', 'sum'), ('supervised', 'max'), ('latent', 'max')]


@pytest.mark.parametrize('tree,kind', RN_CASES)
def test_rn_matches_numpy_transcription(tree, kind):
  out, _, objects, root, params = _run('rn', tree, kind)
  for b, n in enumerate(LENGTHS):
    want = np_rn(params, objects[b, :n], root, tree, kind, HEADS[b])
    np.testing.assert_allclose(np.asarray(out.sentence[b]), want, rtol=1e-9, atol=1e-10)
  np.testing.assert_allclose(np.asarray(out.states), objects, rtol=1e-12, atol=1e-12)  # states are o


@pytest.mark.parametrize('tree,kind', ATTN_CASES)
def test_intra_attention_matches_numpy_transcription(tree, kind):
  """(and the latent tree's sown marginals, split per stacked text as the pair head asks)"""
  splits = (('premise_', 2), ('hypothesis_', 1))
  out, state, objects, root, params = _run('rn_intra_attn', tree, kind, sow_splits=splits)
  assert out.sentence is None
  if tree == 'latent':
    found = jsnn.find_intermediates(state)
    assert found['premise_arc_marginals'].shape == (2, T, T)
    assert found['hypothesis_root_marginals'].shape == (1, T)
    total = found['premise_arc_marginals'].sum(-2) + found['premise_root_marginals']
    np.testing.assert_allclose(total[0, :4], 1.0, rtol=1e-9)
    np.testing.assert_array_equal(np.asarray(total[0, 4:]), 0.0)
  for b, n in enumerate(LENGTHS):
    want = np_intra(params, objects[b, :n], root, tree, kind, HEADS[b])
    np.testing.assert_allclose(np.asarray(out.states[b, :n]), want, rtol=1e-9, atol=1e-10)
    np.testing.assert_array_equal(np.asarray(out.states[b, n:]), 0.0)


@pytest.mark.parametrize('tree,kind', RECURRENT_CASES)
def test_recurrent_rn_matches_numpy_transcription(tree, kind):
  out, _, objects, root, params = _run('recurrent_rn', tree, kind)
  for b, n in enumerate(LENGTHS):
    want = np_recurrent(params, objects[b, :n], root, tree, kind, HEADS[b])
    np.testing.assert_allclose(np.asarray(out.states[b, :n]), want, rtol=1e-9, atol=1e-10)
    np.testing.assert_array_equal(np.asarray(out.states[b, n:]), 0.0)


def test_separable_first_layer_and_given_tree_paths_agree():
  """g over all pairs (separable first layer) restricted by one-hot weights == g on each word and its
  gathered head (the path supervised trees take), for both aggregations."""
  rng = np.random.default_rng(3)
  objects = jnp.asarray(rng.normal(size=(3, T, 6)))
  lengths = jnp.asarray(LENGTHS)
  root = jnp.asarray(rng.normal(size=6))
  g = rn_lib.PairRelation(REL)
  params = g.init(jax.random.key(0), objects, objects)
  every = g.apply(params, rn_lib.with_root(objects, root), objects)  # [3, 1 + T, T, REL]
  weights = rn_lib.tree_weights('supervised', lengths, T, heads=jnp.asarray(HEADS))
  aligned = g.apply(params, rn_lib.parent_objects(objects, jnp.asarray(HEADS), root), objects,
                    method='aligned')
  mask = (np.arange(T)[None] < np.asarray(LENGTHS)[:, None]).astype(np.float64)
  assert float(jnp.min(every)) >= 0.0  # what lets weights combine with max
  for kind in rn_lib.AGGREGATIONS:
    np.testing.assert_allclose(rn_lib.aggregate(every, weights, -3, kind),
                               aligned * mask[..., None], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        rn_lib.aggregate(every, weights, (-3, -2), kind),
        rn_lib.aggregate(aligned[:, None], jnp.asarray(mask)[:, None], (-3, -2), kind),
        rtol=1e-12, atol=1e-12)


PADDING_CASES = [('rn', 'none', 'sum'), ('rn', 'supervised', 'max'),
                 ('rn_intra_attn', 'supervised', 'max'), ('rn_intra_attn', 'none', 'max'),
                 ('recurrent_rn', 'latent', 'max')]


@pytest.mark.parametrize('name,tree,kind', PADDING_CASES)
def test_padding_is_exact_and_any_batch_shape(name, tree, kind):
  x, lengths = _inputs(4)
  heads = jnp.asarray(HEADS)
  params = _params(name, tree, kind)
  apply = _apply(name, tree, kind)
  short, _ = apply(params, x, lengths, heads)
  longer_x = jnp.pad(x, ((0, 0), (0, 3), (0, 0)))
  longer_heads = jnp.pad(heads, ((0, 0), (0, 3)), constant_values=-1)
  long, _ = apply(params, longer_x, lengths, longer_heads)
  np.testing.assert_allclose(long.states[:, :T], short.states, rtol=1e-12, atol=1e-12)
  np.testing.assert_array_equal(np.asarray(long.states[:, T:]), 0.0)
  if name == 'rn':
    np.testing.assert_allclose(long.sentence, short.sentence, rtol=1e-12, atol=1e-12)
  if tree != 'latent':  # leading batch shape [2, 3]: the same as each [3] batch alone
    stacked, _ = apply(params, jnp.stack([x, x[::-1]]), jnp.stack([lengths, lengths[::-1]]),
                       jnp.stack([heads, heads[::-1]]))
    np.testing.assert_allclose(stacked.states[0], short.states, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(stacked.states[1], short.states[::-1], rtol=1e-12, atol=1e-12)


def test_recurrent_steps_keep_one_steps_pair_tensors():
  """The backward pass recomputes each recurrent step's pair tensors (`nn.remat`) instead of holding
  all T steps' (what ran the latent recurrent RN out of memory on Quora's 128-word bucket): in the
  compiled gradient, going from T = 1 to T = 3 steps adds less than one [B, 1 + n, n, relation] tensor
  to the temporaries (without rematerialisation each step keeps ~6 of them)."""
  batch, n, relation = 4, 32, 64
  pair_bytes = batch * (1 + n) * n * relation * 4
  x, lengths = _inputs(0, lengths=(n,) * batch, width=n, dtype=np.float32)
  temporaries = {}
  for steps in (1, 3):
    encoder = encoders.build(dict(name='recurrent_rn', hidden_size=relation // 2,
                                  relation_size=relation, tree='none', num_steps=steps))
    params = jax.eval_shape(encoder.init, jax.random.key(0), x, lengths)['params']

    def loss(params, x, encoder=encoder):
      return jnp.sum(encoder.apply({'params': params}, x, lengths).states)

    compiled = jax.jit(jax.grad(loss)).lower(params, x).compile()
    temporaries[steps] = compiled.memory_analysis().temp_size_in_bytes
  assert temporaries[1] > 2 * pair_bytes  # the pair tensors are what the step holds
  assert temporaries[3] - temporaries[1] < pair_bytes, (temporaries, pair_bytes)


def test_structure_inputs_follow_the_tree():
  assert _build('rn', 'supervised').STRUCTURE_INPUTS == ('heads',)
  assert _build('recurrent_rn', 'latent').STRUCTURE_INPUTS == ()
  assert encoders.get('rn_intra_attn').STRUCTURE_INPUTS == ()


# --- Bad input -----------------------------------------------------------------------------------


@pytest.mark.parametrize('name,tree,kind', [('rn', 'none', 'sum'), ('rn', 'supervised', 'max'),
                                            ('rn_intra_attn', 'none', 'max'),
                                            ('recurrent_rn', 'supervised', 'max')])
def test_sentences_of_length_zero_and_one(name, tree, kind):
  """Length 0: zero states and sentence vector and no gradient reaching its words, all finite (debug
  NaNs on). (The latent tree: `test_longest_snli_sentence_empty_and_single_word_latent`.)"""
  x, lengths = _inputs(6, lengths=(0, 1, 2))
  heads = jnp.asarray([[-1] * T, [-1] * T, [1, -1] + [-1] * (T - 2)], jnp.int32)
  params = _params(name, tree, kind)
  apply = _apply(name, tree, kind)

  def loss(params, x):
    out, _ = apply(params, x, lengths, heads)
    total = jnp.sum(out.states ** 2)
    return total + (0.0 if out.sentence is None else jnp.sum(out.sentence ** 2))

  with jax.debug_nans(True):
    out, _ = apply(params, x, lengths, heads)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(params, x)
  np.testing.assert_array_equal(np.asarray(out.states[0]), 0.0)
  if out.sentence is not None:
    np.testing.assert_array_equal(np.asarray(out.sentence[0]), 0.0)
    assert np.all(np.isfinite(out.sentence))
  assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
  np.testing.assert_array_equal(np.asarray(grads[1][0]), 0.0)
  assert np.any(np.asarray(grads[1][1]) != 0.0)


@pytest.mark.parametrize('heads', [[1, 0, -1], [0, -1, 1], [-1, 5, 0], [1, 2, 3], [-2, -1, 1]],
                         ids=['cycle', 'self loop', 'out of range', 'past the end', 'negative'])
def test_heads_that_are_not_a_tree_are_an_error(heads):
  x, lengths = _inputs(7, lengths=(3,), width=4)
  bad = jnp.asarray([heads + [-1]], jnp.int32)
  with pytest.raises(ValueError, match=r'example 0 has heads .* do not form a dependency tree'):
    _build('rn', 'supervised').apply({}, x, lengths, structure={'heads': bad})
  with pytest.raises(ValueError, match=r'premise_heads: example 0 has heads'):
    rn_lib.check_heads(np.asarray(bad), np.asarray([3]), where='premise_heads')
  rn_lib.check_heads(np.asarray([[1, -1, 1, -1]]), np.asarray([3]))  # a tree passes


def test_missing_or_misshapen_heads_and_bad_names_are_errors():
  x, lengths = _inputs(8)
  with pytest.raises(ValueError, match=r"tree='supervised' needs structure\['heads'\].*config.data.trees"):
    _build('recurrent_rn', 'supervised').apply({}, x, lengths)
  with pytest.raises(ValueError, match=r'structure\["heads"\] has shape \(3, 4\); expected \(3, 5\)'):
    _build('rn_intra_attn', 'supervised').apply({}, x, lengths,
                                                structure={'heads': jnp.asarray(HEADS[:, :4])})
  with pytest.raises(ValueError, match=r"config.model.encoder.tree='parsed'"):
    _build('rn', 'parsed').apply({}, x, lengths)
  with pytest.raises(ValueError, match=r"config.model.encoder.aggregation='mean'"):
    _build('rn', 'none', 'mean').apply({}, x, lengths)
  with pytest.raises(ValueError, match='num_steps=0 must be >= 1'):
    _build('recurrent_rn', 'none', num_steps=0).apply({}, x, lengths)
  with pytest.raises(KeyError, match='unknown key'):
    encoders.build({'name': 'rn', 'num_steps': 3})


def test_longest_snli_sentence_empty_and_single_word_latent():
  """One batch of the longest SNLI sentence we hold, an empty sentence and a single word through the
  latent recurrent RN in float32 (the training dtype) under jit, debug NaNs on: finite marginals,
  states and gradients; the empty sentence gets zero states and gradients, the single word hangs from
  ROOT with probability 1."""
  encoder = _build('recurrent_rn', 'latent')
  x, lengths = _inputs(9, lengths=(SNLI_LONGEST, 0, 1), width=SNLI_LONGEST, dtype=np.float32)
  shapes = jax.eval_shape(encoder.init, jax.random.key(0), x, lengths)['params']
  rng = np.random.default_rng(0)
  params = jax.tree.map(lambda s: jnp.asarray(0.3 * rng.normal(size=s.shape), jnp.float32), shapes)

  @jax.jit
  def loss(params, x):
    out, state = encoder.apply({'params': params}, x, lengths, mutable=['intermediates'])
    return jnp.sum(jnp.max(out.states, -2)), (out, state)

  with jax.debug_nans(True):
    (value, (out, state)), grads = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(params, x)
  found = jsnn.find_intermediates(state)
  total = found['arc_marginals'].sum(-2) + found['root_marginals']
  np.testing.assert_allclose(total[0], 1.0, rtol=1e-4)
  np.testing.assert_allclose(found['root_marginals'][2, 0], 1.0, rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(out.states[1]), 0.0)
  np.testing.assert_array_equal(np.asarray(grads[1][1]), 0.0)
  assert np.isfinite(value) and all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))


def test_snli_longest_constant(shared_data):
  longest = 0
  for split in ('dev', 'test'):
    with gzip.open(shared_data / 'snli_1.0' / f'snli_1.0_{split}.jsonl.gz', 'rt') as f:
      for line in f:
        record = json.loads(line)
        for key in ('sentence1_binary_parse', 'sentence2_binary_parse'):
          longest = max(longest, sum(t not in '()' for t in record[key].split()))
  assert longest == SNLI_LONGEST


# --- the relation_networks benchmark -------------------------------------------------------------


def test_benchmark_sizes_and_ratios(monkeypatch):
  from launch.benchmarks import relation_networks as bench
  monkeypatch.setattr(bench, 'BASELINE', 'bow')  # one BiLSTM to compile instead of two
  assert bench.parse_sizes('32x16, 8x64x100') == [(32, 16, 300), (8, 64, 100)]
  with pytest.raises(ValueError, match=r"--sizes item '8x' is not BATCHxN"):
    bench.parse_sizes('8x')
  rows = bench.run([(2, 4, 4)], repeats=1, rows=('bow', 'rn_none'))
  assert [r['model'] for r in rows] == ['bow', 'rn_none']
  assert rows[0]['train x bilstm'] == 1.0 and rows[1]['train x bilstm'] > 0
  assert all(r['peak MiB'] > 0 for r in rows)
  assert 'rn_none' in bench.format_table(rows)
