"""Tests of tree induction from trained models (`jax_structured.analysis.induce`, `launch.induce_trees`)."""
import json
import os
import xml.etree.ElementTree as ET

import brute_force
import jax
import numpy as np
import pytest

from jax_structured.analysis import induce

# Hand-made trees: (heads, height, projective, depths).
HAND = [
    ([-1, 0, 1], 3, True, [1, 2, 3]),             # a chain
    ([1, -1, 1, 2], 3, True, [2, 1, 2, 3]),
    ([2, 3, -1, 2], 3, False, [2, 3, 1, 2]),       # arcs 2->0 and 3->1 cross
]


def _padded(rows, width=4):
  out = np.full((len(rows), width), -1, np.int32)
  for i, r in enumerate(rows):
    out[i, :len(r)] = r
  return out, np.array([len(r) for r in rows], np.int32)


def test_tree_statistics_match_hand_computed_values():
  heads, lengths = _padded([h for h, *_ in HAND])
  stats = induce.tree_statistics(heads, lengths)
  depths = np.concatenate([d for *_, d in HAND])
  assert stats['num_trees'] == 3 and stats['num_nodes'] == len(depths) == 11
  assert stats['projective'] == pytest.approx(100 * 2 / 3)
  assert stats['height'] == pytest.approx(np.mean([h for _, h, _, _ in HAND]))
  assert stats['depth_distribution'] == pytest.approx(
      {d: 100 * np.mean(depths == d) for d in (1, 2, 3)})
  # Against a reference: UAS over all words, same edges over induced word -> word edges.
  reference, _ = _padded([[-1, 0, 0], [1, -1, 1, 1], [2, 3, -1, 2]])
  stats = induce.tree_statistics(heads, lengths, reference)
  assert stats['uas'] == pytest.approx(100 * 9 / 11)
  assert stats['same_edges'] == pytest.approx(100 * 6 / 8)
  # Empty trees are ignored; non-trees are an error naming the tree.
  heads2, lengths2 = _padded([[-1, 0], []])
  assert induce.tree_statistics(heads2, lengths2)['num_trees'] == 1
  with pytest.raises(ValueError, match='tree 0 is not a tree'):
    induce.tree_statistics(*_padded([[1, 0]]))


def test_decode_levels_matches_brute_force_under_jit():
  rng = np.random.default_rng(0)
  n, batch = 4, 3
  arc_scores = rng.normal(size=(batch, n, n))
  root_scores = rng.normal(size=(batch, n))
  lengths = np.array([4, 3, 2], np.int32)
  found = {'sentence_arc_scores': arc_scores, 'sentence_root_scores': root_scores,
           'sentence_lengths': lengths, 'document_arc_scores': arc_scores[:1],
           'document_root_scores': root_scores[:1], 'document_lengths': lengths[:1]}
  decoded = jax.jit(induce.decode_levels)(found)
  assert set(decoded) == {'sentence_', 'document_'}
  for b in range(batch):
    k = int(lengths[b])
    _, arc_m, root_m, best, _ = brute_force.reference(arc_scores[b, :k, :k], root_scores[b, :k])
    heads = np.asarray(decoded['sentence_']['heads'][b])
    np.testing.assert_array_equal(heads[:k], best)
    assert np.all(heads[k:] == -1)
    expected = np.where(best < 0, root_m, arc_m[np.maximum(best, 0), np.arange(k)])
    np.testing.assert_allclose(np.asarray(decoded['sentence_']['weights'][b, :k]), expected,
                               rtol=1e-5, atol=1e-6)
    assert np.all(np.asarray(decoded['sentence_']['weights'][b, k:]) == 0)
  np.testing.assert_array_equal(decoded['document_']['heads'], decoded['sentence_']['heads'][:1])


def test_conllu_round_trip_and_errors(tmp_path):
  sentences = [['red', 'cat', 'sees'], ['a', 'b']]
  heads = [np.array([1, 2, -1]), np.array([-1, 0])]
  path = str(tmp_path / 'trees.conllu')
  induce.write_conllu(path, sentences, heads, weights=[[0.5, 0.25, 1.0], [1.0, 0.75]],
                      comments=[{'caption': 'x'}, {'caption': 'y'}])
  text = open(path, encoding='utf-8').read()
  assert '1\tred\t_\t_\t_\t_\t2\tdep\t_\tWeight=0.5000' in text and '# caption = y' in text
  back = induce.read_conllu(path)
  assert [w for w, _ in back] == sentences
  for (_, h), want in zip(back, heads):
    np.testing.assert_array_equal(h, want)
  bad = tmp_path / 'bad.conllu'
  bad.write_text('1\tx\t_\t_\t_\t_\t0\troot\t_\t_\n2\ty\t_\t_\t_\t_\t9\tdep\t_\t_\n\n')
  with pytest.raises(ValueError, match='bad.conllu:1'):
    induce.read_conllu(str(bad))
  bad.write_text('1\tx\t_\t_\t0\troot\n')
  with pytest.raises(ValueError, match='bad.conllu:1: expected 10'):
    induce.read_conllu(str(bad))


@pytest.fixture(scope='module')
def trained_run(tmp_path_factory):
  """A real (tiny) structured-attention run on the synthetic data with the default config's pieces."""
  from jax_structured import training  # pylint: disable=g-import-not-at-top
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.spec_from_file_location(
      'default_config', os.path.join(os.path.dirname(__file__), '..', 'configs', 'default.py'))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config()
  del config['variants']
  config.data.num_train, config.data.num_dev, config.data.num_test = 64, 16, 24
  config.data.batch_size = 16
  config.model.embedding_dim = config.model.encoder.hidden_size = 8
  config.model.encoder.semantic_size = 4
  config.model.mlp_hidden = 8
  config.train.num_steps = 4
  config.train.eval_every_steps = 4
  config.train.render_trees = 2
  workdir = str(tmp_path_factory.mktemp('run'))
  results = training.train_and_evaluate(config, workdir, induce_trees=induce.induce_trees)
  return workdir, results


def test_end_to_end_after_training(trained_run):
  workdir, results = trained_run
  stats = results['induced_trees']  # written by the training platform's render_trees hook
  level = stats['levels']['sentence']
  assert level['num_trees'] == 24 and set(level) >= {'projective', 'height', 'uas', 'same_edges'}
  # The trainer's UAS of `trees.mst` trees and ours agree (same checkpoint, same decoding).
  assert level['uas'] == pytest.approx(100 * results['test']['uas'], abs=1e-3)
  out = stats['output_dir']
  parsed = induce.read_conllu(os.path.join(out, 'sentence_trees.conllu'))
  reference = induce.read_conllu(os.path.join(out, 'sentence_reference.conllu'))
  assert len(parsed) == len(reference) == 24
  for (words, heads), (ref_words, ref_heads) in zip(parsed, reference):
    assert words == ref_words
    assert brute_force._is_tree(list(heads)) and list(heads).count(-1) == 1  # pylint: disable=protected-access
  pictures = sorted(f for f in os.listdir(os.path.join(out, 'sentence')) if f.endswith('.svg'))
  assert pictures == ['tree_000.svg', 'tree_001.svg']
  picture = ET.parse(os.path.join(out, 'sentence', 'tree_000.svg')).getroot()
  n = len(parsed[0][0])
  assert len([p for p in picture.iter('{http://www.w3.org/2000/svg}path')
              if 'arc' in p.get('class', '').split()]) == 2 * n  # induced + reference panels
  with open(os.path.join(out, 'statistics.json'), encoding='utf-8') as f:
    assert json.load(f)['levels']['sentence']['num_trees'] == 24


def test_the_default_jobs_parser_variant_draws_its_trees(tmp_path):
  """The default job's 'parser' variant (the supervised tree-CRF parser on the planted trees): the
  render hook draws its MST trees next to the planted ones; captions carry no predicted label (a
  parser's outputs are a dict, its data has none); the drawn UAS is the trainer's."""
  from jax_structured import config as config_lib  # pylint: disable=g-import-not-at-top
  from jax_structured import training  # pylint: disable=g-import-not-at-top
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.spec_from_file_location(
      'default_config', os.path.join(os.path.dirname(__file__), '..', 'configs', 'default.py'))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  base = module.get_config()
  overrides = config_lib.flatten(base.variants.parser.to_dict())
  del base['variants']
  config = config_lib.with_overrides(base, overrides)
  config.data.num_train, config.data.num_dev, config.data.num_test = 32, 8, 12
  config.data.batch_size = 16
  config.model.hidden_size = config.model.embedding_dim = 8
  config.train.num_steps = config.train.eval_every_steps = 3
  config.train.render_trees = 1
  results = training.train_and_evaluate(config, str(tmp_path), induce_trees=induce.induce_trees)
  level = results['induced_trees']['levels']['sentence']
  assert level['num_trees'] == 12
  assert level['uas'] == pytest.approx(100 * results['test']['uas'], abs=1e-3)
  out = results['induced_trees']['output_dir']
  with open(os.path.join(out, 'sentence_trees.conllu'), encoding='utf-8') as f:
    captions = [line for line in f if line.startswith('# caption')]
  assert len(captions) == 12 and captions[0].startswith('# caption = test example 0')
  assert not any('predicted' in c or 'gold' in c for c in captions)


def test_launcher_with_reference_file(trained_run, tmp_path, capsys):
  from absl import flags  # pylint: disable=g-import-not-at-top
  from launch import induce_trees as launcher  # pylint: disable=g-import-not-at-top
  workdir, results = trained_run
  out = results['induced_trees']['output_dir']
  # The reference file: the planted trees with the first word of every tree re-attached, so UAS
  # must drop by exactly one word per tree relative to the gold-head reference where it was right.
  reference = induce.read_conllu(os.path.join(out, 'sentence_reference.conllu'))
  induced = induce.read_conllu(os.path.join(out, 'sentence_trees.conllu'))
  changed = []
  for words, heads in reference:
    heads = heads.copy()
    heads[0] = 1 if heads[0] != 1 and heads[1] != 0 else heads[0]
    changed.append(heads)
  ref_path = str(tmp_path / 'ref.conllu')
  induce.write_conllu(ref_path, [w for w, _ in reference], changed)
  expected = 100 * np.mean(np.concatenate([h == r for (_, h), r in zip(induced, changed)]))
  flags.FLAGS(['induce_trees', f'--workdir={workdir}', '--split=test', f'--reference={ref_path}',
               '--num_pictures=1', f'--output_dir={tmp_path / "out"}'])
  try:
    launcher.main(['induce_trees'])
  finally:
    flags.FLAGS.unparse_flags()
  printed = capsys.readouterr().out
  assert 'Projective' in printed and 'Height' in printed and 'UAS' in printed
  with open(tmp_path / 'out' / 'statistics.json', encoding='utf-8') as f:
    assert json.load(f)['levels']['sentence']['uas'] == pytest.approx(expected)
  with pytest.raises(ValueError, match='has 1 trees but the test split has 24'):
    induce.write_conllu(ref_path, [reference[0][0]], [reference[0][1]])
    induce.induce_trees(workdir, 'test', reference_conllu=ref_path, output_dir=str(tmp_path / 'o2'))
