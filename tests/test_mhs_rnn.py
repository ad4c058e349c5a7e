"""MHS-RNN cell (Luo & Zhu sec. III-B) against a direct float64 numpy transcription of its six scenarios,
and the HAN segment functions against per-sentence numpy loops."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jax_structured.nn import han
from jax_structured.nn import mhs_rnn


E, H = 3, 4


def _params(seed=0):
  rng = np.random.default_rng(seed)
  lstm = lambda d: mhs_rnn.LSTMWeights(rng.normal(0, .5, (H, 4 * H)), rng.normal(0, .5, (d, 4 * H)),
                                       rng.normal(0, .5, (4 * H,)))
  return mhs_rnn.MHSParams(lstm(E), lstm(H), lstm(H), rng.normal(0, 1, (H,)), rng.normal(0, 1, (E,)),
                           np.float64(rng.normal()))


def _sig(v):
  return 1 / (1 + np.exp(-v))


def _lstm_np(W, U, b, h_rec, inp, c_prev):
  """Eq. 4 / 5 / 6: gates from W h_rec + U inp + b; c_prev None is eq. 8 (no f * c_{t-1})."""
  a = h_rec @ W + inp @ U + b
  i, f, g, o = np.split(a, 4)
  c = _sig(i) * np.tanh(g) + (0 if c_prev is None else _sig(f) * c_prev)
  return c, _sig(o) * np.tanh(c)


def _reference(params, x, p, z_forced, slope=1.0):
  """Luo & Zhu sec. III-B, scenario by scenario, one document (float64)."""
  h1 = c1 = h2 = c2 = h3 = c3 = np.zeros(H)
  z_prev, p_prev = 1.0, 0.0  # a document starts a phrase
  rows = []
  hs = lambda v: max(0.0, min(1.0, (slope * v + 1) / 2))
  w, ph, se = params.word, params.phrase, params.sentence
  for t in range(len(x)):
    prev = z_prev == 1 or p_prev == 1
    if not prev:  # eq. 3
      z_prob = hs(params.detector_w @ h1 + params.detector_u @ x[t] + params.detector_b)
    else:  # eq. 7
      z_prob = hs(params.detector_w @ h2 + params.detector_u @ x[t] + params.detector_b)
    z = z_forced[t] if z_forced is not None else float(z_prob > 0.5)
    if not prev and p[t] == 1:
      scenario = 1
      c1, h1 = _lstm_np(w.w_h, w.w_x, w.b, h1, x[t], c1)  # eq. 4
      c2, h2 = _lstm_np(ph.w_h, ph.w_x, ph.b, h2, h1, c2)  # eq. 5
      c3, h3 = _lstm_np(se.w_h, se.w_x, se.b, h3, h2, c3)  # eq. 6
    elif prev and p[t] == 0 and z == 0:
      scenario = 2
      c1, h1 = _lstm_np(w.w_h, w.w_x, w.b, h2, x[t], None)  # eq. 8; phrase, sentence copied
    elif not prev and p[t] == 0 and z == 0:
      scenario = 3
      c1, h1 = _lstm_np(w.w_h, w.w_x, w.b, h1, x[t], c1)
    elif not prev and p[t] == 0 and z == 1:
      scenario = 4
      c1, h1 = _lstm_np(w.w_h, w.w_x, w.b, h1, x[t], c1)
      c2, h2 = _lstm_np(ph.w_h, ph.w_x, ph.b, h2, h1, c2)
    elif prev and p[t] == 0 and z == 1:
      scenario = 5
      c1, h1 = _lstm_np(w.w_h, w.w_x, w.b, h2, x[t], None)
      c2, h2 = _lstm_np(ph.w_h, ph.w_x, ph.b, h2, h1, c2)
    else:
      scenario = 6
      c1, h1 = _lstm_np(w.w_h, w.w_x, w.b, h2, x[t], None)
      c2, h2 = _lstm_np(ph.w_h, ph.w_x, ph.b, h2, h1, c2)
      c3, h3 = _lstm_np(se.w_h, se.w_x, se.b, h3, h2, c3)
    rows.append((h1, c1, h2, c2, h3, c3, z, z_prob, scenario))
    z_prev, p_prev = z, p[t]
  return [np.array(r) for r in zip(*rows)]


@jax.jit
def _scan(params, x, p, lengths, z, slope):
  return mhs_rnn.mhs_rnn_scan(params, x, p, lengths, slope=slope, dynamic_boundaries=z)


@jax.jit
def _scan_learned(params, x, p, lengths, slope):
  return mhs_rnn.mhs_rnn_scan(params, x, p, lengths, slope=slope)


def _run(params, x, p, z, lengths=None, slope=1.0):
  x = np.asarray(x)
  lengths = np.full(x.shape[0], x.shape[1]) if lengths is None else lengths
  args = (jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), params), jnp.asarray(x, jnp.float32),
          jnp.asarray(p, jnp.float32), jnp.asarray(lengths))
  if z is None:
    return _scan_learned(*args, jnp.float32(slope))
  return _scan(*args, jnp.asarray(z, jnp.float32), jnp.float32(slope))


# Hand-made (p, z) sequences; the scenario named is checked to occur at step `at`.
SCENARIOS = {
    1: ([0, 0, 0, 1, 0], [0, 0, 0, 0, 0], 3),  # z_{t-1} = p_{t-1} = 0, p_t = 1
    2: ([0, 0, 0, 0, 0], [0, 1, 0, 0, 0], 2),  # after a dynamic boundary, none now: restart word layer
    3: ([0, 0, 0, 0, 0], [0, 0, 0, 0, 0], 2),  # nothing anywhere
    4: ([0, 0, 0, 0, 0], [0, 0, 0, 1, 0], 3),  # a dynamic boundary after none
    5: ([1, 0, 0, 0, 0], [0, 1, 0, 0, 0], 1),  # a dynamic boundary right after a static one
    6: ([0, 0, 1, 0, 0], [0, 1, 0, 0, 0], 2),  # punctuation right after a dynamic boundary
}


@pytest.mark.parametrize('scenario', sorted(SCENARIOS))
def test_each_scenario_matches_numpy_transcription(scenario):
  p, z, at = SCENARIOS[scenario]
  params = _params(scenario)
  x = np.random.default_rng(10 + scenario).normal(size=(1, len(p), E))
  ref = _reference(params, x[0], p, z)
  assert ref[8][at] == scenario, ref[8]
  got = _run(params, x, [p], [z])
  np.testing.assert_array_equal(np.asarray(got.scenario[0]), ref[8])
  for name, r in zip(('h1', 'c1', 'h2', 'c2', 'h3', 'c3', 'z', 'z_prob'), ref[:8]):
    np.testing.assert_allclose(np.asarray(getattr(got, name)[0]), r, atol=2e-5, err_msg=name)


def test_learned_detector_matches_numpy_and_slope_only_scales_probabilities():
  params = _params(7)
  rng = np.random.default_rng(3)
  x = rng.normal(size=(2, 9, E)) * 2
  p = np.array([[0, 0, 1, 0, 0, 0, 1, 0, 0], [0, 1, 0, 0, 0, 0, 0, 0, 1]])
  for slope in (1.0, 3.0):
    got = _run(params, x, p, None, slope=slope)
    for b in range(2):
      ref = _reference(params, x[b], p[b], None, slope=slope)
      np.testing.assert_allclose(np.asarray(got.h2[b]), ref[2], atol=2e-5)
      np.testing.assert_array_equal(np.asarray(got.z[b]), ref[6])
      np.testing.assert_allclose(np.asarray(got.z_prob[b]), ref[7], atol=2e-5)
  scen = set(np.asarray(_run(params, x, p, None).scenario).ravel()) - {0}
  assert len(scen) >= 3, scen  # the random detector exercises several scenarios


def test_padding_is_exact_and_zero():
  params = _params(1)
  rng = np.random.default_rng(0)
  x = rng.normal(size=(2, 6, E))
  p = rng.integers(0, 2, size=(2, 6))
  short = _run(params, x, p, None, lengths=np.array([6, 4]))
  longer = _run(params, np.pad(x, ((0, 0), (0, 3), (0, 0)), constant_values=9.0),
                np.pad(p, ((0, 0), (0, 3)), constant_values=1), None, lengths=np.array([6, 4]))
  for a, b in zip(short, longer):
    np.testing.assert_allclose(np.asarray(b)[:, :6], np.asarray(a), atol=1e-6)
    assert not np.asarray(b)[:, 6:].any()
  assert not np.asarray(short.h1)[1, 4:].any()


def test_straight_through_gradient_reaches_the_detector():
  params = jax.tree.map(lambda a: jnp.asarray(a, jnp.float32), _params(2))
  x = jnp.asarray(np.random.default_rng(1).normal(size=(1, 6, E)), jnp.float32)
  p = jnp.zeros((1, 6))

  def loss(u):
    out = mhs_rnn.mhs_rnn_scan(params._replace(detector_u=u), x, p, jnp.array([6]), slope=0.05)
    return jnp.sum(out.h2) + jnp.sum(out.h1)

  g = jax.jit(jax.grad(loss))(params.detector_u)
  assert np.all(np.isfinite(g)) and np.abs(g).sum() > 0
  assert mhs_rnn.straight_through_step(jnp.array(0.7)) == 1.0
  assert jax.grad(lambda v: mhs_rnn.straight_through_step(v))(0.7) == 1.0


# --- HAN segments -------------------------------------------------------------------------------------


def test_sentence_ids_close_the_last_sentence():
  ids, closed, num = jax.jit(han.sentence_ids)(jnp.array([[0, 1, 0, 0, 0], [0, 0, 0, 0, 0], [1, 1, 1, 0, 0]]),
                                               jnp.array([4, 0, 3]))
  np.testing.assert_array_equal(ids, [[0, 0, 1, 1, 2], [0, 0, 0, 0, 0], [0, 1, 2, 3, 3]])
  np.testing.assert_array_equal(closed, [[0, 1, 0, 1, 0], [0] * 5, [1, 1, 1, 0, 0]])
  np.testing.assert_array_equal(num, [2, 0, 3])


def test_segment_softmax_and_sum_match_per_sentence_numpy():
  rng = np.random.default_rng(0)
  scores = rng.normal(size=(2, 7))
  values = rng.normal(size=(2, 7, 3))
  bounds = np.array([[0, 0, 1, 0, 1, 0, 0], [1, 0, 0, 0, 0, 0, 0]])
  lengths = np.array([6, 4])
  mask = np.arange(7)[None] < lengths[:, None]

  @jax.jit
  def segments(scores, values, bounds, lengths, mask):
    ids, _, num = han.sentence_ids(bounds, lengths)
    w = han.segment_softmax(scores, ids, mask)
    return ids, num, w, han.segment_sum(values, w, ids)

  ids, num, w, s = segments(jnp.asarray(scores, jnp.float32), jnp.asarray(values, jnp.float32),
                            jnp.asarray(bounds), jnp.asarray(lengths), jnp.asarray(mask))
  w, s = np.asarray(w), np.asarray(s)
  for b in range(2):
    ids_b = np.asarray(ids[b])
    for k in range(7):
      sel = mask[b] & (ids_b == k)
      if k >= num[b]:
        assert not sel.any() and not s[b, k].any()
        continue
      e = np.exp(scores[b, sel] - scores[b, sel].max())
      np.testing.assert_allclose(w[b, sel], e / e.sum(), rtol=1e-5)
      np.testing.assert_allclose(s[b, k], (e / e.sum()) @ values[b, sel], rtol=1e-4, atol=1e-6)
    assert not w[b, ~mask[b]].any()


def test_reset_gru_equals_a_gru_run_on_each_sentence():
  rng = np.random.default_rng(4)
  params = han.GRUParams(*(jnp.asarray(a, jnp.float32) for a in (
      rng.normal(0, .5, (E, 3 * H)), rng.normal(0, .5, (H, 3 * H)), rng.normal(0, .5, (3 * H,)))))
  x = rng.normal(size=(1, 7, E))
  segments = ((0, 3), (3, 5), (5, 6))
  # Row 0: the document with sentence flags at 2 and 4 (length 6); rows 1-3: each sentence alone,
  # left-aligned, without flags (one shape, so one compile per direction).
  rows = np.zeros((4, 7, E))
  rows[0] = x[0]
  for k, (a, b) in enumerate(segments):
    rows[k + 1, :b - a] = x[0, a:b]
  flags = np.zeros((4, 7))
  flags[0, [2, 4]] = 1
  lengths = jnp.array([6] + [b - a for a, b in segments])

  @functools.partial(jax.jit, static_argnames='reverse')
  def run(x, flags, lengths, reverse):
    _, closed, _ = han.sentence_ids(flags, lengths)
    return han.gru_scan(params, x, lengths, han.segment_starts(closed, reverse=reverse), reverse=reverse)

  for reverse in (False, True):
    got = np.asarray(run(jnp.asarray(rows, jnp.float32), jnp.asarray(flags, jnp.float32), lengths,
                         reverse=reverse))
    for k, (a, b) in enumerate(segments):
      np.testing.assert_allclose(got[0, a:b], got[k + 1, :b - a], atol=1e-6)
    assert not got[0, 6:].any()
