"""Tests of the biaffine tree-CRF dependency parser (jax_structured/models/parser.py), its sentence
files (jax_structured/data/sentences.py), batched parsing (jax_structured/analysis/parsing.py) and
launch/parse.py."""
import functools
import gzip
import importlib.util
import json
import os
import shutil
import subprocess
import sys

import jax
import ml_collections
import numpy as np
import optax
import pytest

import brute_force
from jax_structured import nn as jsnn
from jax_structured.analysis import parsing
from jax_structured.data import sentences as sentences_lib
from jax_structured.data import text
from jax_structured.models import parser
from jax_structured.training import parse_task

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A tiny CoNLL-U sample (UD English EWT style, incl. a non-projective sentence, a multiword token
# range and an empty node that readers must skip).
TINY_CONLLU = """\
# sent_id = s1
# text = The cat sat .
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tcat\tcat\tNOUN\tNN\t_\t3\tnsubj\t_\t_
3\tsat\tsit\tVERB\tVBD\t_\t0\troot\t_\t_
4\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = s2
# text = A hearing is scheduled on the issue today .
1\tA\ta\tDET\tDT\t_\t2\tdet\t_\t_
2\thearing\thearing\tNOUN\tNN\t_\t4\tnsubj:pass\t_\t_
3\tis\tbe\tAUX\tVBZ\t_\t4\taux:pass\t_\t_
4\tscheduled\tschedule\tVERB\tVBN\t_\t0\troot\t_\t_
5\ton\ton\tADP\tIN\t_\t7\tcase\t_\t_
6\tthe\tthe\tDET\tDT\t_\t7\tdet\t_\t_
7\tissue\tissue\tNOUN\tNN\t_\t2\tnmod\t_\t_
8\ttoday\ttoday\tNOUN\tNN\t_\t4\tobl:tmod\t_\t_
9\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# sent_id = s3
# text = I don't like $ 5 dogs.
1\tI\tI\tPRON\tPRP\t_\t4\tnsubj\t_\t_
2-3\tdon't\t_\t_\t_\t_\t_\t_\t_\t_
2\tdo\tdo\tAUX\tVBP\t_\t4\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tlike\tlike\tVERB\tVB\t_\t0\troot\t_\t_
4.1\tlike\tlike\tVERB\tVB\t_\t_\t_\t_\t_
5\t$\t$\tSYM\t$\t_\t7\tcompound\t_\t_
6\t5\t5\tNUM\tCD\t_\t5\tnummod\t_\t_
7\tdogs\tdog\tNOUN\tNNS\t_\t4\tobj\t_\t_
8\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_
"""


def _random_problem(seed, lengths, n, dtype=np.float64):
  rng = np.random.default_rng(seed)
  b = len(lengths)
  arc = rng.normal(0, 2, (b, n, n)).astype(dtype)
  root = rng.normal(0, 2, (b, n)).astype(dtype)
  heads = np.full((b, n), -1, np.int32)
  for i, length in enumerate(lengths):
    all_trees = brute_force.all_trees(length, True)
    heads[i, :length] = all_trees[rng.integers(len(all_trees))]
  return arc, root, heads, np.asarray(lengths, np.int32)


def _brute_nll(arc, root, heads, length):
  all_trees = brute_force.all_trees(length, True)
  s = brute_force.tree_scores(arc[:length, :length], root[:length], all_trees)
  gold = brute_force.tree_scores(arc[:length, :length], root[:length], heads[None, :length])[0]
  return np.logaddexp.reduce(s) - gold


# ------------------------------------------------------------------------------------- losses


def test_crf_loss_matches_brute_force_under_jit_and_vmap():
  lengths = [1, 2, 3, 4, 5, 5]
  arc, root, heads, lens = _random_problem(0, lengths, 5)
  want = np.array([_brute_nll(arc[i], root[i], heads[i], l) for i, l in enumerate(lengths)])
  got = jax.jit(parser.crf_arc_nll)(arc, root, heads, lens)
  np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
  # vmap over an extra leading axis (two copies, the second with shifted scores).
  stacked = [np.stack([a, a + 0.5 * (a is arc)]) for a in (arc, root)]
  got2 = jax.vmap(parser.crf_arc_nll)(stacked[0], stacked[1], np.stack([heads] * 2),
                                      np.stack([lens] * 2))
  want2 = np.array([_brute_nll(arc[i] + 0.5, root[i], heads[i], l) for i, l in enumerate(lengths)])
  np.testing.assert_allclose(got2[0], want, rtol=1e-9, atol=1e-9)
  np.testing.assert_allclose(got2[1], want2, rtol=1e-9, atol=1e-9)
  assert np.all(np.asarray(got) >= -1e-12)


def test_crf_loss_gradient_is_marginals_minus_gold():
  """d(-log P(gold)) / d arc_scores[h, m] = P(h -> m) - [h -> m in gold] (exponential family)."""
  lengths = [4, 3]
  arc, root, heads, lens = _random_problem(1, lengths, 4)
  g_arc, g_root = jax.jit(jax.grad(lambda a, r: parser.crf_arc_nll(a, r, heads, lens).sum(),
                                   argnums=(0, 1)))(arc, root)
  for i, length in enumerate(lengths):
    _, arc_m, root_m, _, _ = brute_force.reference(arc[i, :length, :length], root[i, :length])
    gold_arc = np.zeros((length, length))
    gold_root = np.zeros(length)
    for m, h in enumerate(heads[i, :length]):
      if h < 0:
        gold_root[m] = 1
      else:
        gold_arc[h, m] = 1
    np.testing.assert_allclose(g_arc[i, :length, :length], arc_m - gold_arc, atol=1e-9)
    np.testing.assert_allclose(g_root[i, :length], root_m - gold_root, atol=1e-9)
    padded = np.asarray(g_arc[i])
    assert np.all(padded[length:, :] == 0) and np.all(padded[:, length:] == 0)


def _numpy_local_nll(arc, root, heads, lengths):
  b, n, _ = arc.shape
  out = np.zeros((b, n))
  for i in range(b):
    length = lengths[i]
    for m in range(length):
      cand = [arc[i, h, m] for h in range(length) if h != m] + [root[i, m]]
      index = [h for h in range(length) if h != m] + [-1]
      log_z = np.logaddexp.reduce(np.asarray(cand))
      out[i, m] = log_z - cand[index.index(heads[i, m])]
  return out


def test_local_loss_matches_numpy_reference():
  lengths = [1, 3, 5]
  arc, root, heads, lens = _random_problem(2, lengths, 5)
  got = jax.jit(parser.local_arc_nll)(arc, root, heads, lens)
  np.testing.assert_allclose(got, _numpy_local_nll(arc, root, heads, lens), rtol=1e-10, atol=1e-12)
  got_v = jax.vmap(parser.local_arc_nll)(arc[:, None], root[:, None], heads[:, None], lens[:, None])
  np.testing.assert_allclose(got_v[:, 0], got, rtol=1e-12)


def test_relation_logits_at_picks_head_rows_with_root_last():
  rng = np.random.default_rng(3)
  logits = rng.normal(size=(2, 4, 3, 5))
  heads = np.array([[-1, 0, 1], [2, -1, 0]])
  got = np.asarray(jax.jit(parser.relation_logits_at)(logits, heads))
  for b in range(2):
    for m in range(3):
      np.testing.assert_array_equal(got[b, m], logits[b, heads[b, m], m])  # -1 -> row 3 = ROOT


# -------------------------------------------------------------------------------------- model


def _tiny_model(**overrides):
  kwargs = dict(vocab_size=30, num_relations=6, num_tags=8, embedding_dim=8, tag_embedding_dim=4,
                hidden_size=8, num_layers=1, tagger_hidden_size=6, arc_mlp_size=10, label_mlp_size=6,
                dropout_rate=0.0)
  kwargs.update(overrides)
  return parser.BiaffineParser(**kwargs)


def _batch(rng, lengths, n, vocab=30, num_tags=8, num_relations=6):
  b = len(lengths)
  lengths = np.asarray(lengths, np.int32)
  mask = np.arange(n)[None] < lengths[:, None]
  heads = np.full((b, n), -1, np.int32)
  for i, length in enumerate(lengths):
    all_trees = brute_force.all_trees(int(length), True)
    heads[i, :length] = all_trees[rng.integers(len(all_trees))]
  return {'tokens': np.where(mask, rng.integers(2, vocab, (b, n)), 0).astype(np.int32),
          'tags': np.where(mask, rng.integers(2, num_tags, (b, n)), 0).astype(np.int32),
          'heads': heads,
          'relations': np.where(mask, rng.integers(2, num_relations, (b, n)), 0).astype(np.int32),
          'lengths': lengths, 'example_mask': np.ones((b,), np.float32)}


def _init(model, batch, seed=0, variables=None):
  """Initialises, then replaces every parameter by random values (biaffine weights start at 0)."""
  if variables is None:
    variables = jax.jit(model.init)(jax.random.PRNGKey(0), batch)
  leaves, treedef = jax.tree.flatten(variables)
  keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
  return jax.tree.unflatten(treedef, [0.3 * jax.random.normal(k, l.shape, l.dtype)
                                      for k, l in zip(keys, leaves)])


@pytest.fixture(scope='module')
def tiny():
  """(model, variables, batch, jitted apply) shared by the model tests (one compilation)."""
  rng = np.random.default_rng(8)
  model = _tiny_model()
  batch = _batch(rng, [2, 5, 4], 5)
  batch['example_mask'] = np.array([1, 1, 0], np.float32)  # a padding example is ignored
  batch['tags'] = np.where(batch['tags'] == 5, 6, batch['tags'])
  batch['tags'][1, 4] = 5  # tag 5 plays PUNCT, on one word only
  variables = _init(model, batch, seed=3)
  return model, variables, batch, jax.jit(model.apply)


def test_biaffine_scores_follow_dozat_manning_equations(tiny):
  """Arc/root scores and relation logits (the two D&M biaffine formulas) recomputed in float64
  numpy from the captured MLP outputs and the parameters."""
  model, variables, batch, _ = tiny
  out, state = jax.jit(functools.partial(model.apply, capture_intermediates=True))(variables, batch)
  inter = state['intermediates']
  p = jax.tree.map(lambda x: np.asarray(x, np.float64), variables['params'])
  arc_head = np.asarray(inter['arc_head_mlp']['__call__'][0], np.float64)  # [B, n + 1, a]
  arc_dep = np.asarray(inter['arc_dep_mlp']['__call__'][0], np.float64)
  lab_head = np.asarray(inter['label_head_mlp']['__call__'][0], np.float64)
  lab_dep = np.asarray(inter['label_dep_mlp']['__call__'][0], np.float64)
  n = 5
  want_arc = np.einsum('bhd,de,bme->bhm', arc_head, p['arc_bilinear'], arc_dep) + (
      arc_head @ p['arc_head_bias'])[..., None]
  np.testing.assert_allclose(out['arc_scores'], want_arc[:, :n], rtol=2e-4, atol=2e-5)
  np.testing.assert_allclose(out['root_scores'], want_arc[:, n], rtol=2e-4, atol=2e-5)
  for b, h, m in [(0, 0, 1), (1, 5, 3), (1, 2, 4)]:  # a few entries written out term by term
    for k in range(6):
      want = (lab_head[b, h] @ p['label_bilinear'][k] @ lab_dep[b, m]
              + lab_head[b, h] @ p['label_head_linear']['kernel'][:, k]
              + p['label_head_linear']['bias'][k]
              + lab_dep[b, m] @ p['label_dep_linear']['kernel'][:, k])
      np.testing.assert_allclose(out['relation_logits'][b, h, m, k], want, rtol=2e-4, atol=2e-5)
  # The ROOT row of the heads axis is the learned root vector through the head MLPs (same for all b).
  np.testing.assert_allclose(arc_head[0, n], arc_head[1, n], rtol=1e-6)
  # The root vector is the parameter 'root' through the arc-head MLP (Dense + leaky ReLU).
  dense = p['arc_head_mlp']['dense_0']
  pre = p['root'] @ dense['kernel'] + dense['bias']
  np.testing.assert_allclose(arc_head[0, n], np.where(pre > 0, pre, 0.1 * pre), rtol=1e-4, atol=1e-6)


def test_padding_never_changes_real_outputs(tiny):
  model, variables, short, apply = tiny
  long = {k: (np.pad(v, [(0, 0), (0, 3)], constant_values=-1 if k == 'heads' else 0)
              if v.ndim == 2 else v) for k, v in short.items()}
  a, b = apply(variables, short), apply(variables, long)
  for i, length in enumerate(short['lengths']):
    np.testing.assert_allclose(a['arc_scores'][i, :length, :length],
                               b['arc_scores'][i, :length, :length], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a['root_scores'][i, :length], b['root_scores'][i, :length],
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a['relation_logits'][i, -1, :length],
                               b['relation_logits'][i, -1, :length], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a['relation_logits'][i, :length, :length],
                               b['relation_logits'][i, :length, :length], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(a['tag_logits'][i, :length], b['tag_logits'][i, :length],
                               rtol=1e-5, atol=1e-6)
  la, _ = parser.loss_and_metrics(a, short, loss='local')
  lb, _ = parser.loss_and_metrics(b, long, loss='local')
  np.testing.assert_allclose(la, lb, rtol=1e-5)


def test_gold_tags_are_used_only_when_asked_and_present():
  rng = np.random.default_rng(6)
  batch = _batch(rng, [4, 4], 4)
  no_tags = {k: v for k, v in batch.items() if k != 'tags'}
  table = rng.normal(size=(30, 8)).astype(np.float32)
  gold = _tiny_model(tag_input='gold', embedding_init=jsnn.pretrained_init(table))
  initial = jax.jit(gold.init)(jax.random.PRNGKey(0), batch)
  np.testing.assert_array_equal(initial['params']['word_embed']['embedding'], table)  # pretrained
  variables = _init(gold, batch, seed=2, variables=initial)
  apply = jax.jit(gold.apply)
  out = apply(variables, batch)
  np.testing.assert_array_equal(out['tags'], batch['tags'])
  out_raw = apply(variables, no_tags)  # no tags at parse time -> the tagger's predictions
  np.testing.assert_array_equal(np.argmax(np.asarray(out_raw['tag_logits'])[..., 2:], -1) + 2,
                                out_raw['tags'])  # never <pad>/<unk>
  assert not np.array_equal(out_raw['tags'], batch['tags'])  # (the random tags differ)
  np.testing.assert_array_equal(out['tag_logits'], out_raw['tag_logits'])  # tagger ignores tags
  # 'predicted' ignores the batch's tags: with them it equals the gold model without them.
  out_p = jax.jit(gold.clone(tag_input='predicted').apply)(variables, batch)
  for key in ('tags', 'arc_scores', 'root_scores', 'relation_logits'):
    np.testing.assert_allclose(out_p[key], out_raw[key], rtol=1e-6)


def test_bad_configuration_errors():
  batch = _batch(np.random.default_rng(0), [2], 2)
  with pytest.raises(ValueError, match='tag_input'):
    _tiny_model(tag_input='oracle').init(jax.random.PRNGKey(0), batch)
  with pytest.raises(ValueError, match='num_tags'):
    _tiny_model(num_tags=0).init(jax.random.PRNGKey(0), batch)
  with pytest.raises(ValueError, match='config.model.num_chars'):
    _tiny_model(char_embedding_dim=4).init(jax.random.PRNGKey(0), batch)
  with pytest.raises(KeyError, match='chars'):
    _tiny_model(char_embedding_dim=4, num_chars=text.NUM_CHAR_IDS).init(jax.random.PRNGKey(0), batch)
  with pytest.raises(ValueError, match='loss'):
    parser.loss_and_metrics({}, batch, loss='hinge')
  cfg = lambda **kw: ml_collections.ConfigDict({'name': 'parser.biaffine', **kw})
  with pytest.raises(KeyError, match='lstm_hiden'):
    parser.build(cfg(lstm_hiden=3), vocab_size=5, num_classes=3)
  with pytest.raises(ValueError, match='num_relations'):
    parser.build(cfg(), vocab_size=5, num_classes=0)
  with pytest.raises(ValueError, match='config.model.loss'):
    parser.build(cfg(loss='hinge'), vocab_size=5, num_classes=3)
  with pytest.raises(ValueError, match='set config.model.num_tags=4'):
    parse_task.check_data_sizes({'num_tags': 19}, tag_vocab=['<pad>', '<unk>', 'NOUN', 'VERB'])
  with pytest.raises(ValueError, match='set config.model.num_relations=3'):
    parse_task.check_data_sizes({'num_relations': 0}, relation_names=['<pad>', '<unk>', 'det'],
                                num_classes=5)
  # The model never predicts ids 0 and 1: the data's tables must reserve them.
  with pytest.raises(ValueError, match="tag names start with \\['a', 'b'\\]"):
    parse_task.check_data_sizes({'num_tags': 4}, tag_vocab=['a', 'b', 'c', 'd'])
  parse_task.check_data_sizes({'num_tags': 4, 'num_relations': 3},
                              tag_vocab=['<pad>', '<unk>', 'c', 'd'],
                              relation_names=['<pad>', '<unk>', 'z'])
  model = parser.build(cfg(num_relations=7, num_layers=1), vocab_size=5, num_classes=0)
  assert (model.num_relations, model.num_layers, model.vocab_size) == (7, 1, 5)
  with pytest.raises(ValueError, match='embedding_dim=8'):
    parser.build(cfg(num_relations=7, embedding_dim=8), vocab_size=3, num_classes=0,
                 embeddings=np.zeros((3, 5), np.float32))
  table = np.arange(24, dtype=np.float32).reshape(3, 8)
  pretrained = parser.build(cfg(num_relations=7, embedding_dim=8, num_tags=8, num_layers=1,
                                hidden_size=4, arc_mlp_size=4, label_mlp_size=4),
                            vocab_size=3, num_classes=0, embeddings=table)
  small = _batch(np.random.default_rng(0), [2], 2, vocab=3, num_relations=7)
  init = jax.jit(pretrained.init)(jax.random.PRNGKey(0), small)
  np.testing.assert_array_equal(init['params']['word_embed']['embedding'], table)


def test_configs_of_the_old_key_names_are_errors_naming_the_renames():
  """A config (or a workdir's config.json) of the keys before the rename fails at build, naming
  each rename and how to retrain (see also the restored workdir in the CLI test)."""
  cfg = ml_collections.ConfigDict({'name': 'parser.biaffine', 'num_relations': 5, 'word_dim': 8,
                                   'lstm_hidden': 4, 'dropout': 0.1})
  with pytest.raises(KeyError, match=r'word_dim -> embedding_dim, lstm_hidden -> hidden_size, '
                                     r'dropout -> dropout_rate.*configs/parser/ewt.py'):
    parser.build(cfg, vocab_size=5, num_classes=0)
  assert set(parser.RENAMED_KEYS.values()) <= set(parser.MODEL_KEYS)
  assert not set(parser.RENAMED_KEYS) & set(parser.MODEL_KEYS)


def test_char_cnn_features():
  ids = text.char_ids(['a', 'héllo'], 6)
  np.testing.assert_array_equal(ids[0], [1, ord('a') + 3, 2, 0, 0, 0])
  assert list(ids[1][:2]) == [1, ord('h') + 3] and ids[1][-1] == 2  # truncated, still closed
  with pytest.raises(ValueError, match='max_chars must be >= 3'):
    text.char_ids(['a'], 2)
  rng = np.random.default_rng(7)
  batch = _batch(rng, [2, 3], 3)
  batch['chars'] = np.stack([np.concatenate([text.char_ids(w, 8),
                                             np.zeros((3 - len(w), 8), np.int32)])
                             for w in (['ab', 'c'], ['de', 'fgh', 'i'])])
  model = _tiny_model(char_embedding_dim=4, char_features=5, num_chars=text.NUM_CHAR_IDS, num_tags=0,
                      tag_input='none')
  variables = jax.jit(model.init)(jax.random.PRNGKey(0), batch)
  assert variables['params']['char_cnn']['conv']['kernel'].shape == (3, 4, 5)
  grads = jax.jit(jax.grad(lambda v: parser.loss_and_metrics(
      model.apply(v, batch), batch, loss='local')[0]))(variables)
  assert np.abs(np.asarray(grads['params']['char_cnn']['conv']['kernel'])).sum() > 0
  # The character features of a word do not depend on its padding width.
  cnn = parser.CharCNN(text.NUM_CHAR_IDS, 4, 5)
  cv = cnn.init(jax.random.PRNGKey(1), batch['chars'])
  wide = np.pad(batch['chars'], [(0, 0), (0, 0), (0, 4)])
  np.testing.assert_allclose(cnn.apply(cv, batch['chars']), cnn.apply(cv, wide), rtol=1e-6)


@pytest.mark.parametrize('loss', ['crf', 'local'])
def test_loss_gradients_finite_and_metrics_match_numpy(tiny, loss):
  model, variables, batch, apply = tiny

  def objective(v):
    return parser.loss_and_metrics(model.apply(v, batch), batch, loss=loss)

  (value, metrics), grads = jax.jit(jax.value_and_grad(objective, has_aux=True))(variables)
  assert np.isfinite(value)
  assert all(np.all(np.isfinite(g)) for g in jax.tree.leaves(grads))
  assert sum(float(np.abs(g).sum()) for g in jax.tree.leaves(grads)) > 0
  out = apply(variables, batch)
  att = jax.jit(functools.partial(parser.attachment_metrics, punct_tag_ids=(5,)))(out, batch)
  arc, root = np.asarray(out['arc_scores'], np.float64), np.asarray(out['root_scores'], np.float64)
  rel = np.asarray(out['relation_logits'], np.float64)
  tag_logits = np.asarray(out['tag_logits'], np.float64)
  words = arc_nll = rel_nll = tag_nll = uas = las = uas_np = las_np = count_np = upos = 0.0
  for i in range(2):  # real examples only
    length = batch['lengths'][i]
    gold = batch['heads'][i, :length]
    if loss == 'crf':
      arc_nll += _brute_nll(arc[i], root[i], batch['heads'][i], length)
    else:
      arc_nll += _numpy_local_nll(arc[i:i + 1], root[i:i + 1], batch['heads'][i:i + 1],
                                  [length]).sum()
    *_, best, _ = brute_force.reference(arc[i, :length, :length], root[i, :length])
    for m in range(length):
      log_p = rel[i, gold[m], m] - np.logaddexp.reduce(rel[i, gold[m], m])
      rel_nll -= log_p[batch['relations'][i, m]]
      tag_nll -= (tag_logits[i, m] - np.logaddexp.reduce(tag_logits[i, m]))[batch['tags'][i, m]]
      upos += np.argmax(tag_logits[i, m, 2:]) + 2 == batch['tags'][i, m]
      head_ok = best[m] == gold[m]
      label_ok = head_ok and np.argmax(rel[i, best[m], m, 2:]) + 2 == batch['relations'][i, m]
      uas += head_ok
      las += label_ok
      if batch['tags'][i, m] != 5:
        uas_np += head_ok
        las_np += label_ok
        count_np += 1
    words += length
  np.testing.assert_allclose(value, (arc_nll + rel_nll + tag_nll) / words, rtol=2e-4)
  np.testing.assert_allclose(metrics['loss'][0] / metrics['loss'][1], value, rtol=1e-6)
  np.testing.assert_allclose(metrics['arc_nll'][0], arc_nll, rtol=2e-4)
  np.testing.assert_allclose(metrics['rel_nll'][0], rel_nll, rtol=2e-4)
  np.testing.assert_allclose(metrics['tag_nll'][0], tag_nll, rtol=2e-4)
  assert att['uas'] == (uas, words) and att['las'] == (las, words)
  assert att['uas_nopunct'] == (uas_np, count_np) and att['las_nopunct'] == (las_np, count_np)
  assert att['upos'] == (upos, words)
  assert count_np == words - 1


def test_decode_gives_valid_trees_and_the_best_tree():
  rng = np.random.default_rng(9)
  lengths = [1, 3, 5, 5]
  arc, root, _, lens = _random_problem(10, lengths, 6, np.float32)
  rel = rng.normal(size=(4, 7, 6, 5)).astype(np.float32)
  heads, relations = jax.jit(parser.decode)(
      {'arc_scores': arc, 'root_scores': root, 'relation_logits': rel}, lens)
  heads, relations = np.asarray(heads), np.asarray(relations)
  for i, length in enumerate(lengths):
    h = heads[i, :length]
    assert np.all(heads[i, length:] == -1) and np.all(relations[i, length:] == 0)
    assert brute_force._is_tree(list(h)) and (h == -1).sum() == 1  # pylint: disable=protected-access
    *_, best_score = brute_force.reference(arc[i, :length, :length], root[i, :length])
    score = brute_force.tree_scores(arc[i, :length, :length], root[i, :length], h[None])[0]
    np.testing.assert_allclose(score, best_score, rtol=1e-5)
    for m in range(length):  # ids 0 and 1 (<pad>, <unk>) are never predicted
      assert relations[i, m] == np.argmax(rel[i, h[m], m, 2:]) + 2


def test_joint_decoding_maximises_tree_plus_relation_log_probabilities():
  """decoding='joint' returns the enumerated argmax over (tree, relations) of arc scores + log P(relation
  | head, modifier) (reserved ids excluded), which the pipeline's tree need not be; bad names are errors."""
  rng = np.random.default_rng(11)
  lengths = [4, 2, 4]
  arc, root, _, lens = _random_problem(12, lengths, 4)
  rel = rng.normal(scale=3.0, size=(3, 5, 4, 4))  # R = 4: ids 2 and 3 can be predicted
  outputs = {'arc_scores': arc, 'root_scores': root, 'relation_logits': rel}
  heads, relations = map(np.asarray, jax.jit(functools.partial(parser.decode, decoding='joint'))(
      outputs, lens))
  differs = 0
  for i, length in enumerate(lengths):
    log_p = rel[i] - np.log(np.exp(rel[i][..., 2:]).sum(-1, keepdims=True))  # over ids 2, 3 only
    trees_ = brute_force.all_trees(length)
    m = np.arange(length)
    best, best_score = None, -np.inf
    for h in trees_:
      rows = np.where(h == -1, 4, h)  # the ROOT row is last
      per_word = np.where(h == -1, root[i, m], arc[i, np.where(h == -1, 0, h), m])
      labels = np.argmax(log_p[rows, m][:, 2:], -1) + 2
      score = per_word.sum() + log_p[rows, m, labels].sum()
      if score > best_score:
        best, best_score = (h, labels), score
    np.testing.assert_array_equal(heads[i, :length], best[0])
    np.testing.assert_array_equal(relations[i, :length], best[1])
    assert np.all(heads[i, length:] == -1) and np.all(relations[i, length:] == 0)
    differs += not np.array_equal(brute_force.reference(arc[i, :length, :length], root[i, :length])[3],
                                  best[0])
  assert differs  # the joint tree is not always the pipeline's: the test tells the two apart
  with pytest.raises(ValueError, match="decoding 'best'"):
    parser.decode(outputs, lens, 'best')
  with pytest.raises(ValueError, match='config.model.decoding'):
    parser.check_config(ml_collections.ConfigDict({'name': 'parser.biaffine', 'decoding': 'best'}))
  with pytest.raises(ValueError, match='config.model.decoding'):
    parse_task.ParseTask(ml_collections.ConfigDict({'model': {'decoding': 'best'}}))
  task = parse_task.ParseTask(ml_collections.ConfigDict({'model': {'decoding': 'joint'}}))
  batch = {'heads': best[0][None], 'relations': best[1][None], 'lengths': np.array([4])}
  metrics = task.eval_metrics({k: v[2:] for k, v in outputs.items()}, batch)
  assert metrics['uas'] == (4, 4) and metrics['las'] == (4, 4)


# ------------------------------------------------------------------------- tiny CoNLL-U training


def _read_conllu(text):
  """Independent minimal reader: (words, upos, heads 0-based (-1 ROOT), deprels) per sentence."""
  sentences, rows = [], []
  for line in text.splitlines() + ['']:
    if not line.strip():
      if rows:
        sentences.append(tuple(list(c) for c in zip(*rows)))
        rows = []
      continue
    if line.startswith('#'):
      continue
    cols = line.split('\t')
    if '-' in cols[0] or '.' in cols[0]:
      continue
    rows.append((cols[1], cols[3], int(cols[6]) - 1, cols[7]))
  return sentences


def _encode(sentences):
  from jax_structured.data import Vocabulary  # pylint: disable=g-import-not-at-top
  vocab = Vocabulary.from_corpus([s[0] for s in sentences])
  tag_vocab = Vocabulary.from_corpus([s[1] for s in sentences])
  relation_names = Vocabulary.from_corpus([s[3] for s in sentences]).tokens  # <pad>, <unk>, ...
  n = max(len(s[0]) for s in sentences)
  b = len(sentences)
  batch = {k: np.zeros((b, n), np.int32) for k in ('tokens', 'tags', 'relations')}
  batch['heads'] = np.full((b, n), -1, np.int32)
  batch['lengths'] = np.array([len(s[0]) for s in sentences], np.int32)
  batch['example_mask'] = np.ones((b,), np.float32)
  for i, (words, upos, heads, rels) in enumerate(sentences):
    batch['tokens'][i, :len(words)] = vocab.encode(words)
    batch['tags'][i, :len(words)] = tag_vocab.encode(upos)
    batch['heads'][i, :len(words)] = heads
    batch['relations'][i, :len(words)] = [relation_names.index(r) for r in rels]  # no <unk> here
  return batch, vocab, tag_vocab, relation_names


@pytest.mark.parametrize('loss', ['crf'])
def test_training_steps_on_tiny_conllu_reduce_the_loss(loss):
  sentences = _read_conllu(TINY_CONLLU)
  assert [len(s[0]) for s in sentences] == [4, 9, 8]
  batch, vocab, tag_vocab, relation_names = _encode(sentences)
  model = parser.BiaffineParser(vocab_size=len(vocab), num_relations=len(relation_names),
                                num_tags=len(tag_vocab), embedding_dim=16, tag_embedding_dim=8,
                                hidden_size=16, num_layers=1, tagger_hidden_size=8, arc_mlp_size=16,
                                label_mlp_size=8, dropout_rate=0.1)
  variables = jax.jit(model.init)(jax.random.PRNGKey(0), batch)
  task = parse_task.ParseTask(ml_collections.ConfigDict({'model': {'loss': loss}}), tag_vocab=tag_vocab)
  assert task.punct_tag_ids == (tag_vocab.id('PUNCT'), tag_vocab.id('SYM'))
  tx = optax.adam(1e-2, b2=0.9)
  opt_state = tx.init(variables)

  @jax.jit
  def step(variables, opt_state, key):
    def objective(v):
      out = model.apply(v, batch, train=True, rngs={'dropout': key})
      return task.loss_and_metrics(out, batch)[0]
    value, grads = jax.value_and_grad(objective)(variables)
    updates, opt_state = tx.update(grads, opt_state, variables)
    return optax.apply_updates(variables, updates), opt_state, value

  eval_loss = jax.jit(lambda v: parser.loss_and_metrics(model.apply(v, batch), batch, loss=loss)[0])
  before = float(eval_loss(variables))
  for i in range(25):
    variables, opt_state, _ = step(variables, opt_state, jax.random.PRNGKey(i))
  after = float(eval_loss(variables))
  assert np.isfinite(after) and after < 0.7 * before, (before, after)


# ------------------------------------------------------------------------------- reading / writing


def test_tokenizer_follows_ud_english_conventions():
  assert sentences_lib.tokenize_ewt("I don't think it's O'Brien's car, Mr. Smith... (e.g. 3.14)") == [
      'I', 'do', "n't", 'think', 'it', "'s", "O'Brien", "'s", 'car', ',', 'Mr.', 'Smith', '...',
      '(', 'e.g.', '3.14', ')']
  assert sentences_lib.tokenize_ewt('The U.S. well-known 1,000 see https://a.org/x?y=1! now') == [
      'The', 'U.S.', 'well', '-', 'known', '1,000', 'see', 'https://a.org/x?y=1', '!', 'now']
  assert sentences_lib.tokenize_ewt("CAN'T  we'll") == ['CA', "N'T", 'we', "'ll"]
  assert sentences_lib.tokenize_ewt('   ') == []


def test_read_sentences_of_every_format(tmp_path):
  def write(name, text, encoding='utf-8'):
    path = tmp_path / name
    path.write_text(text, encoding=encoding)
    return str(path)

  read = sentences_lib.read_sentences
  raw = read(write('raw.txt', "It's fine.\n\nOK\n"), 'raw')
  assert [s['words'] for s in raw] == [['It', "'s", 'fine', '.'], ['OK']]
  assert raw[0]['text'] == "It's fine." and raw[1]['sent_id'] == '3'
  assert read(write('tok.txt', 'a  b c\n'), 'tokenized')[0]['words'] == ['a', 'b', 'c']
  assert read(write('sst.txt', "(3 (2 It) (4 (2 's) (2 good)))\n"), 'sst')[0]['words'] == [
      'It', "'s", 'good']
  trec = read(write('trec.label', 'DESC:manner How did serfdom develop in Russia ?\n'
                                  'HUM:ind Who discovered x-rays ?\n', 'iso-8859-1'), 'trec')
  assert trec[0]['words'][:2] == ['How', 'did']
  # The trec loader's words (a trained model's trees are over those): clean_str drops the hyphen.
  assert trec[1]['words'] == ['Who', 'discovered', 'x', 'rays', '?']
  snli_path = tmp_path / 'snli.jsonl.gz'
  with gzip.open(snli_path, 'wt', encoding='utf-8') as f:
    f.write(json.dumps({
        'pairID': 'p1', 'sentence1': 'A man.', 'sentence1_binary_parse': '( ( A man ) . )',
        'sentence2': 'Nobody sleeps.', 'sentence2_binary_parse': '( Nobody ( sleeps . ) )'}) + '\n')
  snli = read(str(snli_path), 'snli')
  assert [s['words'] for s in snli] == [['A', 'man', '.'], ['Nobody', 'sleeps', '.']]
  assert snli[1]['sent_id'] == 'p1-hypothesis'
  quora = read(write('q.tsv', 'How so ?\tWhy ?\t1\n0\tA b\tC\t7\n'), 'quora')
  assert [s['words'] for s in quora] == [['How', 'so', '?'], ['Why', '?'], ['A', 'b'], ['C']]
  assert read(write('t.en', 'it &apos;s &quot;ok&quot;\n'), 'iwslt')[0]['words'] == [
      'it', "'s", '"ok"']
  conllu = read(write('x.conllu', TINY_CONLLU), 'conllu')
  assert [len(s['words']) for s in conllu] == [4, 9, 8]
  assert conllu[2]['words'][:3] == ['I', 'do', "n't"] and conllu[2]['tags'][4] == 'SYM'
  assert conllu[1]['sent_id'] == 's2'
  # Bad input: errors naming file and line.
  with pytest.raises(ValueError, match=r'q2.tsv:1'):
    read(write('q2.tsv', 'only one column\n'), 'quora')
  with pytest.raises(ValueError, match=r'bad.conllu:2: expected 10'):
    read(write('bad.conllu', '# x\n1\tA\tb\n\n'), 'conllu')
  with pytest.raises(ValueError, match=r'trec2.label:1'):
    read(write('trec2.label', 'nolabel\n'), 'trec')
  with pytest.raises(ValueError, match='format'):
    read(write('y.txt', 'a\n'), 'xml')
  with pytest.raises(FileNotFoundError, match='missing.txt'):
    read(str(tmp_path / 'missing.txt'), 'raw')


def test_conllu_writing_round_trips(tmp_path):
  sentences = _read_conllu(TINY_CONLLU)
  path = tmp_path / 'x.conllu'
  path.write_text(TINY_CONLLU, encoding='utf-8')
  read = sentences_lib.read_sentences(str(path), 'conllu')
  text = ''.join(sentences_lib.to_conllu(r, np.asarray(s[2]), s[3]) for r, s in zip(read, sentences))
  # Gold heads/relations written back give the input again, except DEPS (not predicted: '_')
  # and the empty node (enhanced graph only), which is dropped.
  want = [line for line in TINY_CONLLU.splitlines() if not line.startswith('4.1\t')] + ['']
  assert text.splitlines() == want
  record = sentences_lib.sentence(['Hi', '!'], '7')
  plain = sentences_lib.to_conllu(record, [-1, 0], ['root', 'punct'], ['INTJ', 'PUNCT'])
  assert plain == ('# sent_id = 7\n# text = Hi !\n1\tHi\t_\tINTJ\t_\t_\t0\troot\t_\t_\n'
                   '2\t!\t_\tPUNCT\t_\t_\t1\tpunct\t_\t_\n\n')


def _trained_tiny(tag_input='predicted'):
  """A `training.Trained`-like record of a tiny parser over the TINY_CONLLU vocabularies."""
  from jax_structured.data import Vocabulary  # pylint: disable=g-import-not-at-top
  sentences = _read_conllu(TINY_CONLLU)
  batch, vocab, tag_vocab, relation_names = _encode(sentences)
  model = _tiny_model(vocab_size=len(vocab), num_relations=len(relation_names),
                      num_tags=len(tag_vocab), num_layers=1, tag_input=tag_input)
  variables = _init(model, batch, seed=4)
  record = type('Trained', (), {})()
  record.model, record.variables, record.vocab = model, variables, vocab
  record.config = ml_collections.ConfigDict({'data': {'lowercase': False}})
  record.extras = {'tag_vocab': Vocabulary(tag_vocab.tokens), 'relation_names': relation_names}
  return record, batch


def test_parse_matches_the_model_and_decoder_on_the_whole_batch(tmp_path):
  trained, batch = _trained_tiny()
  path = tmp_path / 'in.conllu'
  path.write_text(TINY_CONLLU, encoding='utf-8')
  sentences = sentences_lib.read_sentences(str(path), 'conllu')
  results, stats = parsing.parse(trained, sentences, batch_size=4)  # one batch padded to [4, 16]
  assert stats['sentences'] == 3 and stats['words'] == 21 and stats['sentences_per_second'] > 0
  out = jax.jit(trained.model.apply)(trained.variables, batch)  # the 3 sentences, padded to 9
  heads, relations = parser.decode(out, batch['lengths'])
  tags = trained.extras['tag_vocab'].tokens
  for i, (h, rel, upos) in enumerate(results):
    length = batch['lengths'][i]
    np.testing.assert_array_equal(h, heads[i, :length])
    names = trained.extras['relation_names']
    assert rel == [names[r] for r in np.asarray(relations[i, :length])]
    assert upos == [tags[t] for t in np.asarray(out['tags'][i, :length])]
    assert (np.asarray(h) == -1).sum() == 1
  joint, _ = parsing.parse(trained, sentences, batch_size=4, decoding='joint')  # config's choice overridden
  heads, relations = parser.decode(out, batch['lengths'], 'joint')
  for i, (h, rel, _) in enumerate(joint):
    np.testing.assert_array_equal(h, heads[i, :batch['lengths'][i]])
    assert rel == [trained.extras['relation_names'][r] for r in np.asarray(relations[i, :len(h)])]
  with pytest.raises(ValueError, match="decoding='both'"):
    parsing.parse(trained, sentences, decoding='both')
  bad = sentences_lib.sentence(['x'], '1', tags=['NOT_A_TAG'])
  trained.model = trained.model.clone(tag_input='gold')
  with pytest.raises(ValueError, match='NOT_A_TAG'):
    parsing.parse(trained, [bad])
  del trained.extras['relation_names']
  with pytest.raises(KeyError, match='relation_names'):
    parsing.parse(trained, sentences)


def _load_config(name, *args):
  spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, 'configs', 'parser', name))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(*args)


def test_configs_build_with_the_training_schemas():
  """Both configs pass the training/data schemas and build a model; the variants apply."""
  from jax_structured.data import loaders  # pylint: disable=g-import-not-at-top
  from jax_structured import config as config_lib  # pylint: disable=g-import-not-at-top
  assert _load_config('ewt_tiny.py').to_dict() == _load_config('ewt.py', 'tiny').to_dict()
  for config in (_load_config('ewt.py'), _load_config('ewt_tiny.py')):
    config_lib.resolve(config)
    loaders.validate_config(config.data, 'universal_dependencies')
    assert config.task == 'parse' and os.path.isabs(config.data.manual_dir)
    for name, overrides in config.variants.items():
      variant = config_lib.with_overrides(config, config_lib.flatten(overrides.to_dict()))
      assert variant.model.loss == name
      model = parser.build(variant.model, vocab_size=10, num_classes=0)
      assert model.num_tags == 19 and model.num_relations == 53
  full = _load_config('ewt.py')
  assert (full.model.embedding_dim, full.model.tag_embedding_dim, full.model.num_layers,
          full.model.hidden_size, full.model.arc_mlp_size, full.model.label_mlp_size,
          full.model.dropout_rate) == (100, 100, 3, 400, 500, 100, 0.33)
  assert (full.optimizer.learning_rate, full.optimizer.b2) == (2e-3, 0.9)
  with pytest.raises(ValueError, match="configs/parser/ewt.py: unknown or repeated option 'huge'"):
    _load_config('ewt.py', 'huge')
  for options in ('chars', 'tiny,chars'):
    chars = _load_config('ewt.py', options)
    loaders.validate_config(chars.data, 'universal_dependencies')
    parse_task.ParseTask(chars)  # character ids are configured for the character CNN
    model = parser.build(chars.model, vocab_size=10, num_classes=0)
    assert chars.data.max_chars >= 3 and model.char_embedding_dim and model.num_chars == text.NUM_CHAR_IDS


def _tiny_treebank(root):
  root.mkdir()
  for split in ('train', 'dev', 'test'):
    (root / f'xx_tiny-ud-{split}.conllu').write_text(TINY_CONLLU, encoding='utf-8')
  return root


@pytest.mark.slow  # end to end from the command line: runs after the suite (.ci/run)
def test_parse_cli_round_trip_with_a_trained_checkpoint(tmp_path):
  """Train (with the character CNN: loader -> batches -> model) -> checkpoint -> parse raw text."""
  from jax_structured import training  # pylint: disable=g-import-not-at-top
  config = _load_config('ewt_tiny.py')
  del config['variants']
  config.model.char_embedding_dim = 4
  config.model.char_features = 6
  with pytest.raises(ValueError, match=r'config.model.char_embedding_dim=4 needs .* config.data.max_chars'):
    parse_task.ParseTask(config)
  config.data.max_chars = 10
  config.model.num_chars = 7
  with pytest.raises(ValueError, match=f'set config.model.num_chars={text.NUM_CHAR_IDS}'):
    parse_task.ParseTask(config)
  config.model.num_chars = text.NUM_CHAR_IDS
  config.data.manual_dir = str(_tiny_treebank(tmp_path / 'ud'))
  config.data.data_dir = str(tmp_path / 'tfds')
  config.data.config = ''
  config.data.min_count = 1
  config.data.bucket_boundaries = (16,)  # one padded shape: one compilation of each step
  sentences = _read_conllu(TINY_CONLLU)
  config.model.num_tags = 2 + len({t for s in sentences for t in s[1]})  # + <pad>, <unk>
  config.model.num_relations = 2 + len({r for s in sentences for r in s[3]})
  config.train.num_steps = 3
  config.train.eval_every_steps = 3
  workdir = tmp_path / 'run'
  metrics = training.train_and_evaluate(config, str(workdir))
  assert 0 <= metrics['validation']['las'] <= metrics['validation']['uas'] <= 1
  restored = training.load_trained(str(workdir))
  assert restored.variables['params']['char_cnn']['conv']['kernel'].shape == (3, 4, 6)
  # A workdir trained before the parser's keys were renamed: restoring it is an error naming the
  # renames and the config to retrain with.
  old = tmp_path / 'old_run'
  shutil.copytree(workdir, old)
  saved = json.loads((old / 'config.json').read_text())
  renamed_back = {new: old_key for old_key, new in parser.RENAMED_KEYS.items()}
  saved['model'] = {renamed_back.get(k, k): v for k, v in saved['model'].items()}
  (old / 'config.json').write_text(json.dumps(saved))
  with pytest.raises(KeyError, match=r'word_dim -> embedding_dim.*retrain the workdir with '
                                     r'configs/parser/ewt.py'):
    training.load_trained(str(old))
  # The workdir keeps what rebuilds the model (vocabularies, relation names), not the treebank.
  assert set(json.loads((workdir / 'extras.json').read_text())) == {
      'tag_vocab', 'relation_vocab', 'relation_names'}
  raw = tmp_path / 'in.txt'
  raw.write_text("The cat sat.\nA hearing is scheduled on the issue today.\nI don't like dogs.\n",
                 encoding='utf-8')
  out = tmp_path / 'out.conllu'
  proc = subprocess.run([sys.executable, '-m', 'launch.parse', f'--workdir={workdir}',
                         f'--input={raw}', f'--output={out}', '--format=raw'],
                        cwd=REPO, capture_output=True, text=True, timeout=300, check=False,
                        # the same x64 mode as the training above (tests/conftest.py)
                        env={**os.environ, 'JAX_ENABLE_X64': str(jax.config.jax_enable_x64).lower()})
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'sentences/s' in proc.stdout
  parsed = _read_conllu(out.read_text(encoding='utf-8'))
  assert [s[0] for s in parsed] == [['The', 'cat', 'sat', '.'],
                                    ['A', 'hearing', 'is', 'scheduled', 'on', 'the', 'issue',
                                     'today', '.'],
                                    ['I', 'do', "n't", 'like', 'dogs', '.']]
  relation_names = set(_encode(_read_conllu(TINY_CONLLU))[3]) - {'<pad>', '<unk>'}
  for words, upos, heads, rels in parsed:
    assert brute_force._is_tree(heads) and heads.count(-1) == 1  # pylint: disable=protected-access
    assert set(rels) <= relation_names and all(t not in ('<pad>', '<unk>', '_') for t in upos)


def test_biaffine_mlp_drops_its_output_after_the_leaky_relu():
  """D&M's MLP (`nn.MLP`, dropout_position='output'): every output is 0 or the activation / keep."""
  mlp = parser.biaffine_mlp(16, 0.5, 'mlp')
  x = np.random.default_rng(0).normal(size=(3, 5)).astype(np.float32)
  variables = mlp.init(jax.random.PRNGKey(0), x)
  dense = variables['params']['dense_0']
  pre = x @ np.asarray(dense['kernel']) + np.asarray(dense['bias'])
  act = np.where(pre > 0, pre, 0.1 * pre)
  np.testing.assert_allclose(mlp.apply(variables, x), act, rtol=1e-5, atol=1e-6)
  dropped = np.asarray(mlp.apply(variables, x, deterministic=False,
                                 rngs={'dropout': jax.random.PRNGKey(1)}))
  kept = dropped != 0
  assert 0 < kept.mean() < 1
  np.testing.assert_allclose(dropped[kept], 2 * act[kept], rtol=1e-5, atol=1e-6)
