"""Supervised trees from our own parser (issue 16): launch.parse --annotate writes the heads cache of a
dataset (jax_structured/analysis/parsing.py, data/parsed_trees.py), `config.data.trees` attaches it
(data/loaders/, -1-padded by data/batching.py), the configs/yu supervised rows train on it.

One tiny parser (configs/parser/ewt_tiny.py on the UD fixture, 2 steps) is trained per module."""
import importlib.util
import json
import os
import pathlib
import shlex
import subprocess
import sys

import jax
import numpy as np
import pytest

import brute_force
from jax_structured import data
from jax_structured import models
from jax_structured import training
from jax_structured.analysis import parsing
from jax_structured.data import batching
from jax_structured.data import loaders
from jax_structured.data import parsed_trees

REPO = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = REPO / 'tests' / 'fixtures'

# Questions of at most 8 tokens: one padded length, one parser compilation.
TREC_TRAIN = """\
DESC:manner How did serfdom develop in Russia ?
ENTY:cremat What films featured Popeye Doyle ?
HUM:ind Who was first on the moon ?
LOC:city What is the capital of France ?
NUM:date When did the war end ?
DESC:def What is a parser ?
"""
TREC_TEST = """\
NUM:dist How far is Denver from Aspen ?
LOC:city What county is Modesto in ?
"""


def _load_config_file(path, *args):
  spec = importlib.util.spec_from_file_location(path.stem, path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module.get_config(*args)


@pytest.fixture(scope='module')
def parser_workdir(tmp_path_factory):
  """A parser workdir trained for 2 steps on the UD fixture treebank (configs/parser/ewt_tiny.py)."""
  root = tmp_path_factory.mktemp('parser')
  config = _load_config_file(REPO / 'configs' / 'parser' / 'ewt_tiny.py')
  del config['variants']
  treebank = root / 'ud'
  treebank.mkdir()
  text = (FIXTURES / 'universal_dependencies' / 'xx_test-ud-train.conllu').read_text(encoding='utf-8')
  for split in ('train', 'dev', 'test'):
    (treebank / f'xx_tiny-ud-{split}.conllu').write_text(text, encoding='utf-8')
  config.data.manual_dir = str(treebank)
  config.data.data_dir = str(root / 'tfds')
  config.data.config = ''
  config.data.min_count = 1
  config.data.bucket_boundaries = (16,)
  task = data.load(config.data)
  config.model.num_tags = len(task.extras['tag_vocab'])
  config.model.num_relations = len(task.extras['relation_names'])
  # The cheapest compilation: no matrix-tree gradient.
  config.model.update(loss='local', hidden_size=8, tagger_hidden_size=4, embedding_dim=8,
                      tag_embedding_dim=4, arc_mlp_size=8, label_mlp_size=4)
  config.parallel = 'none'
  config.train.num_steps = 2
  config.train.eval_every_steps = 2
  workdir = root / 'run'
  training.train_and_evaluate(config, str(workdir))
  return str(workdir)


def _trec_dir(root):
  root.mkdir(exist_ok=True)
  (root / 'train_5500.label').write_text(TREC_TRAIN, encoding='utf-8')
  (root / 'TREC_10.label').write_text(TREC_TEST, encoding='utf-8')
  return root


def _trec_data(manual_dir, tfds_dir, **overrides):
  config = loaders.default_config('trec')
  config.manual_dir = str(manual_dir)
  config.data_dir = str(tfds_dir)
  config.validation_fraction = 2 / 6
  config.update(overrides)
  return config


@pytest.fixture(scope='module')
def trec(parser_workdir, tmp_path_factory):
  """(data config, annotate stats) of a tiny TREC folder annotated once by the tiny parser."""
  root = tmp_path_factory.mktemp('trec')
  config = _trec_data(_trec_dir(root / 'trec'), root / 'tfds', trees=parser_workdir)
  return config, parsing.annotate(parser_workdir, config, batch_size=8)


def _check_examples(task, kind):
  keys = ('premise_heads', 'hypothesis_heads') if kind == 'pair' else ('heads',)
  tokens = ('premise', 'hypothesis') if kind == 'pair' else ('tokens',)
  for split in task.splits.values():
    assert split.examples
    for example in split.examples:
      for key, token_key in zip(keys, tokens):
        heads = example[key]
        assert heads.dtype == np.int32 and len(heads) == len(example[token_key])
        assert brute_force._is_tree(heads.tolist())  # pylint: disable=protected-access
        assert (heads == -1).sum() == 1  # the parser decodes single-root trees


def test_annotate_trec_attaches_the_parsers_heads(parser_workdir, trec):
  config, stats = trec
  assert stats['examples'] == {'train': 4, 'validation': 2, 'test': 2}
  assert stats['sentences'] == 8 and stats['checkpoint_step'] == 2
  assert stats['directory'] == parsed_trees.cache_dir(loaders.validate_config(config, 'trec'))
  meta = json.loads((pathlib.Path(stats['directory']) / 'meta.json').read_text())
  assert meta['parser_workdir'] == os.path.realpath(parser_workdir) and meta['kind'] == 'sentence'
  task = data.load(config)
  _check_examples(task, 'sentence')
  # The attached heads are the parser's own trees of the loader's words (with their case).
  trained = training.load_trained(parser_workdir)
  words = parsing.dataset_words(config)['words']['test'][0]
  assert words[:3] == ['How', 'far', 'is']
  (expected, _, _), = parsing.parse(trained, [{'words': words}])[0]
  np.testing.assert_array_equal(task.splits['test'].examples[0]['heads'], expected)
  # Keys that do not change the examples (vocabulary, vectors, batches, case) share the cache.
  again = data.load(_trec_data(config.manual_dir, config.data_dir, trees=parser_workdir, min_count=2,
                               lowercase=True, batch_size=3))
  np.testing.assert_array_equal(again.splits['test'].examples[0]['heads'], expected)
  # Sentence batches pad heads with -1.
  batch = next(iter(task.splits['train'].batches(8, shuffle=False)))
  lengths = batch['lengths']
  assert all((batch['heads'][i, n:] == -1).all() for i, n in enumerate(lengths))


def test_missing_cache_error_prints_the_command_that_writes_it(parser_workdir, tmp_path):
  """text_classification folder: the error's command (run as printed) writes the cache."""
  manual = tmp_path / 'texts'
  manual.mkdir()
  (manual / 'train.tsv').write_text('q\tWhat is a tree ?\nq\tWho parses sentences ?\n'
                                    'a\tTrees have roots .\na\tParsers read words .\n', encoding='utf-8')
  (manual / 'test.tsv').write_text('q\tWhere do roots grow ?\n', encoding='utf-8')
  config = loaders.default_config('text_classification')
  config.update(manual_dir=str(manual), data_dir=str(tmp_path / 'tfds'), min_count=1,
                validation_fraction=0.25, trees=parser_workdir)
  with pytest.raises(parsed_trees.TreesError, match='no parsed trees') as info:
    data.load(config)
  message = str(info.value)
  command = message.split('\n')[-1].strip()
  assert command.startswith('python -m launch.parse --workdir=') and '--annotate=text_classification' in command
  argv = shlex.split(command)
  proc = subprocess.run([sys.executable] + argv[1:], cwd=REPO, capture_output=True, text=True,
                        timeout=300, check=False,
                        env={**os.environ, 'JAX_ENABLE_X64': str(jax.config.jax_enable_x64).lower()})
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert 'distinct sentences' in proc.stdout and 'parsed_trees' in proc.stdout
  _check_examples(data.load(config), 'sentence')
  # Documents have no per-sentence cache.
  config.split_sentences = True
  with pytest.raises(parsed_trees.TreesError, match='split_sentences=False'):
    data.load(config)


def _rewrite(path, index, change):
  lines = path.read_text().splitlines()
  row = json.loads(lines[index])
  change(row)
  lines[index] = json.dumps(row)
  path.write_text('\n'.join(lines) + '\n')


def test_stale_or_broken_caches_are_errors_naming_split_example_and_line(parser_workdir, trec):
  config, stats = trec
  path = pathlib.Path(stats['paths']['test'])
  original = path.read_text()

  def expect(pattern):
    with pytest.raises(parsed_trees.TreesError, match=pattern):
      data.load(config)
    path.write_text(original)

  _rewrite(path, 1, lambda r: r['heads'].append(-1))
  expect(rf'{path}:2 \(trec test example 1\): the parse has 7 heads \(heads\), the example has 6 '
         r'words(?s:.*)stale(?s:.*)launch.parse')
  _rewrite(path, 0, lambda r: r.update(heads=[1, 0] + r['heads'][2:]))
  expect(rf'{path}:1 \(trec test example 0\): heads .* are not a dependency tree \(word 0 is on a '
         r'cycle')
  _rewrite(path, 0, lambda r: r.update(hash='0' * 12))
  expect(r'trec test example 0\): the parsed words differ')
  path.write_text(original.splitlines()[0] + '\n')
  expect(r'1 parsed examples, but the trec test split has 2')
  # Data keys that change the examples change the cache: not annotated yet.
  with pytest.raises(parsed_trees.TreesError, match='no parsed trees'):
    data.load(_trec_data(config.manual_dir, config.data_dir, trees=parser_workdir, clean=False))
  assert parsed_trees.tree_problem([-1, 0, 5]) == 'word 2 has head 5, outside -1..2'
  assert parsed_trees.tree_problem([1, 1]) == 'word 1 is its own head'
  assert parsed_trees.tree_problem([-1, 2, 1]) == 'word 1 is on a cycle (it never reaches ROOT)'
  assert parsed_trees.tree_problem([-1, 0, -1]) is None


@pytest.mark.slow  # end to end from the command line: runs after the suite (.ci/run)
def test_quora_pairs_supervised_rows_train_and_padding_changes_nothing(parser_workdir, tmp_path):
  quora = _load_config_file(REPO / 'configs' / 'yu' / 'quora.py',
                            f'recurrent_rn_supervised,tiny,trees={parser_workdir},'
                            f'manual_dir={FIXTURES / "quora_qqp"}')
  quora.data.data_dir = str(tmp_path / 'tfds')
  quora.data.min_count = 1
  with pytest.raises(parsed_trees.TreesError, match='--annotate=quora_qqp'):
    data.load(quora.data)
  proc_stats = parsing.annotate(parser_workdir, quora.data, batch_size=8)
  assert set(proc_stats['examples']) == {'train', 'validation', 'test'}
  task = data.load(quora.data)
  _check_examples(task, 'pair')
  examples = task.splits['train'].examples
  batch = batching.collate(examples, 'pair', (12, 10))
  wider = batching.collate(examples, 'pair', (20, 16))
  for side in ('premise', 'hypothesis'):
    lengths = batch[f'{side}_lengths']
    assert all((batch[f'{side}_heads'][i, n:] == -1).all() for i, n in enumerate(lengths))
  child = quora.copy_and_resolve_references()
  child.model.embedding_dim = 16
  model = models.build(child.model, vocab_size=len(task.vocab), num_classes=2)
  variables = model.init(jax.random.PRNGKey(0), batch)
  np.testing.assert_allclose(model.apply(variables, batch), model.apply(variables, wider),
                             rtol=1e-6, atol=1e-8)
  # One training step of the row through the trainer.
  quora.parallel = 'none'
  quora.data.bucket_boundaries = ()
  quora.data.batch_size = 8
  quora.train.num_steps = 1
  quora.train.eval_every_steps = 1
  quora.train.log_every_steps = 1
  results = training.train_and_evaluate(quora, str(tmp_path / 'run'))
  assert results['steps'] == 1 and all(np.isfinite(v) for v in results['test'].values())


def test_trec_supervised_rows_are_variants_with_trees(parser_workdir, trec):
  """configs/yu/trec.py: the supervised rows only with trees=; its data section reads the same cache."""
  config_path = REPO / 'configs' / 'yu' / 'trec.py'
  supervised = {'rn_supervised', 'rn_intra_attn_supervised', 'recurrent_rn_supervised'}
  assert not supervised & set(_load_config_file(config_path, '').variants)
  with_trees = _load_config_file(config_path, f'trees={parser_workdir}')
  assert supervised <= set(with_trees.variants) and with_trees.data.trees == parser_workdir
  data_config, _ = trec
  config = _load_config_file(config_path, f'rn_supervised,tiny,trees={parser_workdir},'
                                          f'manual_dir={data_config.manual_dir}')
  assert config.model.encoder.tree == 'supervised'
  config.data.update(data_dir=data_config.data_dir, min_count=1,
                     validation_fraction=data_config.validation_fraction)
  _check_examples(data.load(config.data), 'sentence')
