"""Registered loaders of the real datasets: TFDS builders -> tokens -> vocabulary -> encoded splits.

`data.load(config.data)` dispatches on `config.data.name` to one of the loaders below. Each loader
validates `config.data` against its schema (`default_config(name)` lists every key with its default;
unknown keys and wrongly typed values are errors naming `config.data.<key>`), reads the splits with
`builders.load_examples`, tokenises as the papers do, builds the vocabulary on the training split only
(`min_count`, plus `<pad>`/`<unk>`), encodes every split and optionally prepares initial embeddings.

Split names in `TaskData.splits` are `train`, `dev` and `test` (the builders' `validation` is `dev`).
When a dataset has no development split (TREC), `validation_fraction` of train is held out
deterministically (from `seed`) as `dev`.

What was dropped is counted in `TaskData.skipped` (`'<split>/<reason>': count`, including the records
the builders dropped, e.g. SNLI pairs without gold label, blank lines of a user's file) and printed;
what was truncated but kept (documents cut to `max_sentences`, sentences to `max_sentence_length`) is
counted apart, in `TaskData.extras['truncated']`, and printed as "truncated". `max_length` drops too long
*training* examples only: evaluation splits are never filtered (buckets grow for long inputs).

Loaders:
  sst                     kind 'sentence'  config 'fine' | 'binary'
  trec                    kind 'sentence'  config 'coarse' | 'fine'
  snli, quora_qqp         kind 'pair'
  ptb_lm                  kind 'lm'        (one stream per split when num_steps > 0)
  universal_dependencies  kind 'parse'     config = treebank (e.g. 'en_ewt'; '' = the only one)
  iwslt15_en_vi           kind 'translation'  train/validation/test_split name the built split of
                          each role (train.* | tst2012.* | tst2013.*); labels = target vocabulary
  document_classification kind 'document'  config 'yelp13' | 'yelp14' | 'yelp15' | 'imdb' | ...
  text_classification     kind 'sentence' or 'document' (`split_sentences`); config = dataset name
"""
from __future__ import annotations

import ast
import codecs
import collections
import copy
import json
import os
import pathlib
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from jax_structured import errors
from jax_structured.data import core
from jax_structured.data import embeddings as embeddings_lib
from jax_structured.data import parsed_trees
from jax_structured.data import registry
from jax_structured.data import text as text_lib
from jax_structured.data import tree_batching

# --------------------------------------------------------------------------------------------------
# Config schema

# Keys every loader accepts, with their defaults.
COMMON_DEFAULTS: dict[str, Any] = {
    'name': '',
    'manual_dir': '',          # folder with the upstream files (required)
    'data_dir': '',            # TFDS data dir ('' = $TFDS_DATA_DIR or ~/tensorflow_datasets)
    'config': '',              # builder / task config ('' = the loader's default)
    'batch_size': 32,          # training batch size (read by the training loop)
    'eval_batch_size': 0,      # 0 = batch_size (read by the training loop)
    'bucket_boundaries': None,  # None = batching defaults; () = one bucket of the longest example
    'seed': 0,                 # dev hold-out and random embedding rows
    'min_count': 1,            # keep training words seen >= min_count times (papers' "> 5" = 6)
    'max_vocab_size': 0,       # 0 = no limit (most frequent words kept, <pad>/<unk> included)
    'lowercase': True,
    'max_length': 0,           # drop training examples longer than this many tokens (0 = keep all)
    'validation_fraction': 0.0,  # hold out this much of train as dev when there is no dev split
    'embeddings': '',          # '' = none, 'word2vec' = train on train+dev, else a registered name
                               # (embeddings.registered_names(), e.g. 'glove-6b-50d') or a vectors file
    'embedding_dim': 300,      # word2vec size; for files, the expected dimension (0 = any)
    'word2vec_window': 5,
    'word2vec_epochs': 5,
}

# Per loader: its extra keys and the defaults that differ from COMMON_DEFAULTS.
LOADER_DEFAULTS: dict[str, dict[str, Any]] = {
    # `trees`: a parser workdir whose cached heads every example gets (`parsed_trees`; '' = none).
    'sst': {'config': 'fine', 'train_phrases': False, 'binary_trees': False, 'trees': ''},
    'trec': {'config': 'coarse', 'lowercase': False, 'clean': True, 'validation_fraction': 0.1,
             'trees': ''},
    'snli': {'lowercase': False, 'trees': ''},
    'quora_qqp': {'lowercase': False, 'trees': ''},
    'ptb_lm': {'lowercase': False, 'num_steps': 35, 'context': 0},
    'universal_dependencies': {'lowercase': False, 'tags': 'upos', 'strip_relation_subtypes': False,
                               'max_chars': 0},
    # `<role>_split`: the builder split ('train' | 'validation' | 'test' = train.* | tst2012.* |
    # tst2013.*) that serves as train / validation / test ('' = none; no validation split: hold out
    # `validation_fraction` of train); `max_examples` > 0: the first pairs of every split only.
    'iwslt15_en_vi': {'lowercase': False, 'max_length': 50, 'target_min_count': 1,
                      'target_max_vocab_size': 0, 'train_split': 'train',
                      'validation_split': 'validation', 'test_split': 'test', 'max_examples': 0},
    # `encoding`: text encoding of files without a byte-order mark (a BOM decides by itself).
    # `punctuation` (documents): '' ordinary tokens; 'keep': per-token flags `punctuation` [B, S, T]
    # in the batches (Luo & Zhu's static boundary p_t, eq. 2); 'p': flags, and every punctuation token
    # replaced by the one token 'p' before the vocabulary is built (Luo & Zhu sec. IV-B).
    'document_classification': {'config': 'yelp13', 'min_count': 6, 'max_sentences': 0,
                                'max_sentence_length': 0, 'embedding_dim': 200,
                                'tokenizer': 'auto', 'validation_fraction': 0.1,
                                'encoding': 'utf-8', 'punctuation': ''},
    'text_classification': {'min_count': 6, 'split_sentences': False, 'max_sentences': 0,
                            'max_sentence_length': 0, 'embedding_dim': 200,
                            'validation_fraction': 0.1, 'encoding': 'utf-8', 'punctuation': '',
                            'trees': ''},
}


def default_config(name: str):
  """A `ml_collections.ConfigDict` with every key of loader `name` at its default."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  if name not in LOADER_DEFAULTS:
    raise KeyError(f'unknown loader {name!r}; known: {sorted(LOADER_DEFAULTS)}')
  config = ml_collections.ConfigDict(_defaults(name))
  if config.bucket_boundaries is None:
    # A typed placeholder, so that `--config.data.bucket_boundaries='((6, 20), (20, 50))'` works from
    # the command line (ml_collections cannot override a plain None field).
    config.bucket_boundaries = ml_collections.config_dict.placeholder(tuple)
  return config


def _defaults(name: str) -> dict[str, Any]:
  return {**COMMON_DEFAULTS, **LOADER_DEFAULTS[name], 'name': name}


def validate_config(config, name: str) -> dict[str, Any]:
  """Checks `config.data` for loader `name`; returns a plain dict with the defaults filled in.

  Raises:
    errors.ConfigError (a ValueError): an unknown key or a value of the wrong type, naming
      `config.data.<key>`.
  """
  defaults = _defaults(name)
  given = dict(config.to_dict() if hasattr(config, 'to_dict') else config)
  unknown = sorted(set(given) - set(defaults))
  if unknown:
    raise errors.ConfigError(f'unknown key(s) for the {name} loader: ' +
                             ', '.join(f'config.data.{k}' for k in unknown) +
                             f'; valid keys: {sorted(defaults)}')
  cfg = dict(defaults, **given)
  for key, default in defaults.items():
    value = cfg[key]
    if default is None or value is None and key == 'bucket_boundaries':
      continue
    if isinstance(default, bool):
      ok = isinstance(value, (bool, np.bool_))
    elif isinstance(default, int):
      ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    elif isinstance(default, float):
      ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
    else:
      ok = isinstance(value, type(default))
    if not ok:
      raise errors.ConfigError(f'config.data.{key}={value!r} must be of type {type(default).__name__}')
  if cfg['name'] != name:
    raise errors.ConfigError(f'config.data.name={cfg["name"]!r}, expected {name!r}')
  for key in ('min_count', 'batch_size'):
    if cfg[key] < 1:
      raise errors.ConfigError(f'config.data.{key}={cfg[key]} must be >= 1')
  for key in ('max_vocab_size', 'max_length', 'eval_batch_size', 'embedding_dim'):
    if cfg[key] < 0:
      raise errors.ConfigError(f'config.data.{key}={cfg[key]} must be >= 0')
  if not 0.0 <= cfg['validation_fraction'] < 1.0:
    raise errors.ConfigError(f'config.data.validation_fraction={cfg["validation_fraction"]} must be '
                             'in [0, 1)')
  if not cfg['manual_dir']:
    raise errors.ConfigError(f'config.data.manual_dir is empty: set it to the folder with the upstream '
                             f'{name} files (e.g. ../shared/data/<dataset>)')
  if 'encoding' in cfg:
    try:
      codecs.lookup(cfg['encoding'])
    except LookupError:
      raise errors.ConfigError(f'config.data.encoding={cfg["encoding"]!r} is not a text encoding '
                               'Python knows (e.g. utf-8, cp1252, latin-1)') from None
  if cfg['bucket_boundaries'] is not None:
    cfg['bucket_boundaries'] = _tuple(cfg['bucket_boundaries'])
  return cfg


_TRUE, _FALSE = ('true', '1', 'yes', 'on'), ('false', '0', 'no', 'off')


def parse_overrides(name: str, overrides: Mapping[str, Any], *,
                    where: str = '--config.data') -> dict[str, Any]:
  """Command-line values of loader `name`'s keys, typed like the key's default.

  Args:
    name: a loader of `LOADER_DEFAULTS`.
    overrides: `{key: value}`; a `str` value is parsed as written on the command line (`'20'` -> 20
      for an int key; `true`/`false`/`1`/`0` for a bool key; a Python literal such as
      `'((6, 20), (20, 50))'` for `bucket_boundaries`); other values are checked as they are.
    where: how the user wrote the section, for messages (`--config.data`).

  Returns:
    `{key: typed value}`.

  Raises:
    errors.ConfigKeyError: a key loader `name` does not have (with the closest keys and every key).
    errors.ConfigError: a value that does not parse as the key's type.
  """
  defaults = _defaults(name)
  out = {}
  for key, value in overrides.items():
    if key not in defaults:
      raise errors.unknown_key(defaults, key, where=where, note=f'(the {name} loader has no such key)')
    default = defaults[key]
    if isinstance(value, str) and not isinstance(default, str):
      text = value.strip()
      try:
        if isinstance(default, bool):
          if text.lower() not in _TRUE + _FALSE:
            raise ValueError(text)
          value = text.lower() in _TRUE
        elif isinstance(default, int):
          value = int(text)
        elif isinstance(default, float):
          value = float(text)
        else:  # bucket_boundaries: a literal
          value = ast.literal_eval(text)
      except (ValueError, SyntaxError):
        kind = 'a bool (true/false)' if isinstance(default, bool) else (
            f'a {type(default).__name__}' if default is not None else 'a Python literal')
        raise errors.ConfigError(f'{where}.{key}={value!r} is not {kind}') from None
    out[key] = value
  return out


def _tuple(value):
  if isinstance(value, (list, tuple)):
    return tuple(_tuple(v) for v in value)
  return int(value)


# --------------------------------------------------------------------------------------------------
# Shared steps

_BUILDER_SPLITS = {'train': 'train', 'validation': 'validation', 'test': 'test'}  # ours -> the builders'


def _data_dir(cfg) -> str:
  if cfg['data_dir']:
    return os.path.expanduser(cfg['data_dir'])
  return os.environ.get('TFDS_DATA_DIR', os.path.expanduser('~/tensorflow_datasets'))


def _read_splits(builder_name: str, cfg, builder_config: str | None
                 ) -> tuple[dict[str, list[dict]], collections.Counter, bool]:
  """Reads every available split.

  Returns:
    ({train/dev/test: raw examples}, builder-dropped counts, whether dev was held out from train).
  """
  from jax_structured.data import builders  # pylint: disable=g-import-not-at-top
  manual_dir = os.path.expanduser(cfg['manual_dir'])
  available = builders.available_splits(builder_name, manual_dir=manual_dir, config=builder_config)
  if 'train' not in available:
    raise FileNotFoundError(
        f'{builder_name}: no training split in config.data.manual_dir={manual_dir} (found only '
        f'{available}); the vocabulary and label set are built on train')
  raw, skipped = {}, collections.Counter()
  encoding = cfg.get('encoding') or None
  for ours, theirs in _BUILDER_SPLITS.items():
    if theirs in available:
      raw[ours] = builders.load_examples(builder_name, theirs, manual_dir=manual_dir,
                                         data_dir=_data_dir(cfg), config=builder_config,
                                         encoding=encoding)
  info = builders.report(builder_name, manual_dir=manual_dir, data_dir=_data_dir(cfg),
                         config=builder_config, encoding=encoding)
  for split, counts in info.get('dropped', {}).items():
    ours = {v: k for k, v in _BUILDER_SPLITS.items()}.get(split, split)
    for reason, count in counts.items():
      if count:
        skipped[f'{ours}/{reason}'] += int(count)
  held_out = 'validation' not in raw and cfg['validation_fraction'] > 0
  if held_out:
    raw['train'], raw['validation'] = _hold_out(raw['train'], cfg['validation_fraction'], cfg['seed'])
  return {s: raw[s] for s in ('train', 'validation', 'test') if s in raw}, skipped, held_out


def _hold_out(examples: list, fraction: float, seed: int) -> tuple[list, list]:
  """Deterministic random hold-out of round(fraction * n) examples, both parts in file order."""
  n = len(examples)
  num_dev = int(round(fraction * n))
  if num_dev == 0 or num_dev == n:
    raise ValueError(f'validation_fraction={fraction} of {n} training examples leaves an empty split')
  dev_idx = set(np.random.default_rng([seed, 7]).permutation(n)[:num_dev].tolist())
  return ([e for i, e in enumerate(examples) if i not in dev_idx],
          [e for i, e in enumerate(examples) if i in dev_idx])


def _progress(items: Sequence, desc: str) -> Iterable:
  """A console progress bar for long preparations (quiet for small inputs)."""
  if len(items) < 10000:
    return items
  from tqdm import auto as tqdm  # pylint: disable=g-import-not-at-top
  # disable=None: no bar (and no control codes) when stderr is not a terminal, e.g. a log file.
  return tqdm.tqdm(items, desc=desc, unit='ex', mininterval=1.0, leave=False, disable=None)


def _filter_train(name: str, split: str, items: list, length_fn: Callable, cfg,
                  skipped: collections.Counter, max_length: int | None = None) -> list:
  """Drops empty items everywhere and too long ones from train (counted)."""
  limit = cfg['max_length'] if max_length is None else max_length
  kept, counts = text_lib.filter_by_length(items, length_fn,
                                           max_length=limit if split == 'train' else None)
  for reason, count in counts.items():
    skipped[f'{split}/{reason}'] += count
  return kept


def _vocab(token_lists: Iterable[Sequence[str]], cfg, min_count_key='min_count',
           max_size_key='max_vocab_size') -> core.Vocabulary:
  return core.Vocabulary.from_corpus(token_lists, min_count=cfg[min_count_key],
                                     max_size=cfg[max_size_key] or None)


def _label_index(label_names: Sequence[str], label: str, *, name: str, split: str, index: int,
                 cfg, builder_name: str, builder_config: str | None) -> int:
  try:
    return label_names.index(label)
  except ValueError:
    where = _locate(builder_name, cfg, builder_config, split, label, index)
    raise ValueError(f'{where}: {name} {split} label {label!r} does not occur in train; known labels: '
                     f'{list(label_names)}') from None


def _locate(builder_name: str, cfg, builder_config, split: str, needle: str, index: int) -> str:
  """`file:line` of record `index` of `split`, found by searching its upstream files for `needle`.

  Lines where `needle` is a whole field (start of line, or between tabs/quotes/commas/colons) are
  preferred; among them the line `index + 1` (one record per line) wins. Best effort: falls back to
  the record number.
  """
  from jax_structured.data import builders  # pylint: disable=g-import-not-at-top
  try:
    cls = builders.BUILDERS[builder_name]
    files = cls.source_files(pathlib.Path(os.path.expanduser(cfg['manual_dir'])), builder_config)
    paths = files.get(_BUILDER_SPLITS.get(split, split), [])
    if split == 'validation' and not paths:
      paths = files.get('train', [])  # held out from train
    quoted = re.escape(needle)
    tiers = [re.compile(rf'^"?{quoted}(?:"|\t|,|:|\s|$)'),
             re.compile(rf'(?:^|\t|"|,){quoted}(?:"|\t|,|:|$)'),
             re.compile(rf'(?:^|\s){quoted}(?:\s|$)')]
    for tier in tiers:
      for path in paths:
        with open(path, 'rb') as f:
          hits = [n for n, line in enumerate(f, start=1)
                  if tier.search(line.decode('utf-8', errors='replace'))]
        if hits:
          return f'{path}:{index + 1 if index + 1 in hits else hits[0]}'
    if paths:
      return f'{paths[0]} (record #{index + 1})'
  except Exception:  # pylint: disable=broad-except
    pass
  return f'{builder_name} {split} record #{index + 1}'


def _embeddings(cfg, vocab: core.Vocabulary, corpus: Callable[[], list[list[str]]]):
  """Initial embeddings per `config.data.embeddings` ('' | 'word2vec' | registered name | path)."""
  spec = cfg['embeddings']
  if not spec:
    return None, None
  if spec == 'word2vec':
    if cfg['embedding_dim'] <= 0:
      raise ValueError('config.data.embedding_dim must be > 0 to train word2vec')
    return embeddings_lib.train_word2vec(corpus(), vocab, dim=cfg['embedding_dim'],
                                         window=cfg['word2vec_window'],
                                         epochs=cfg['word2vec_epochs'], seed=cfg['seed'])
  return embeddings_lib.load_pretrained(spec, vocab, seed=cfg['seed'],
                                        expected_dim=cfg['embedding_dim'] or None, corpus=corpus())


def _finish(name: str, kind: str, cfg, vocab, label_names, examples: dict[str, list],
            skipped: collections.Counter, embedding_corpus: Callable[[], list[list[str]]],
            extras: dict | None = None, num_steps: int | None = None,
            context: int = 0, words: dict[str, list] | None = None) -> core.TaskData:
  # `words`: {split: each example's words (pairs: (premise, hypothesis))}, for parsed trees.
  parsed_trees.record(name, kind, cfg, words)
  if cfg.get('trees'):
    parsed_trees.attach(name, kind, cfg, examples, words)
  matrix, coverage = _embeddings(cfg, vocab, embedding_corpus)
  extras = dict(extras or {})
  if coverage is not None:
    extras['embedding_coverage'] = coverage
  splits = {s: core.Split(s, kind, ex, bucket_boundaries=cfg['bucket_boundaries'],
                          num_steps=num_steps, context=context) for s, ex in examples.items()}
  truncated = {k: v for k, v in sorted(skipped.items()) if _is_truncation(k)}
  skipped = {k: v for k, v in sorted(skipped.items()) if not _is_truncation(k)}
  if truncated:
    extras['truncated'] = truncated
  sizes = ', '.join(f'{s} {len(v)}' for s, v in examples.items())
  message = f'{name}: {sizes} examples; vocabulary {len(vocab)}; {len(label_names)} labels'
  if skipped:
    message += '; skipped ' + ', '.join(f'{k}: {v}' for k, v in skipped.items())
  if truncated:
    message += '; truncated (kept) ' + ', '.join(f'{k}: {v}' for k, v in truncated.items())
  print(message, flush=True)
  return core.TaskData(kind=kind, vocab=vocab, label_names=list(label_names), splits=splits,
                       embeddings=matrix, skipped=skipped, extras=extras)


def _is_truncation(key: str) -> bool:
  """Whether a count key `'<split>/<reason>'` counts truncated (kept) rather than dropped records."""
  return key.split('/', 1)[-1].startswith('truncated')


def _label_names(data: dict[str, list], held_out: bool) -> list[str]:
  """Label names of the training examples (and of a dev part held out from train)."""
  splits = ['train'] + (['validation'] if held_out else [])
  return _sorted_labels(y for s in splits for _, y in data.get(s, []))


def _sorted_labels(labels: Iterable[str]) -> list[str]:
  """Label names sorted, numerically when they all are integers ('1' < '2' < '10')."""
  labels = set(labels)
  if all(_is_int(x) for x in labels):
    return sorted(labels, key=int)
  return sorted(labels)


def _is_int(x: str) -> bool:
  try:
    int(x)
    return True
  except ValueError:
    return False


# --------------------------------------------------------------------------------------------------
# Sentence classification

SST_LABELS = {'fine': ['very negative', 'negative', 'neutral', 'positive', 'very positive'],
              'binary': ['negative', 'positive']}


@registry.register('sst')
def load_sst(config) -> core.TaskData:
  """Stanford Sentiment Treebank (Socher et al. 2013), kind 'sentence'.

  `config`: 'fine' (5 classes) or 'binary' (neutral sentences dropped by the builder). Tokens are the
  tree leaves as in the files (lower-cased if `lowercase`). `train_phrases=True` trains on every
  labelled phrase of the training trees (as Kim 2014 and Tai et al. 2015 do; binary: neutral phrases
  dropped, 0-1 -> negative, 3-4 -> positive); dev/test always use whole sentences.
  `binary_trees=True` adds each sentence's binarised tree as node arrays (`tree_batching`:
  'tree_children', 'tree_heights', 'tree_labels' (binary: neutral phrases -1); the batched Tree-LSTM's
  structure inputs and the phrase-level supervision's node labels); the tokens
  are then the tree leaves exactly (split on ASCII spaces only: an SST word may contain U+00A0). With
  both, every labelled phrase is a training example with its own subtree (`tree_batching.subtree_arrays`),
  root first, so tree encoders train on phrases as examples too.
  """
  cfg = validate_config(config, 'sst')
  if cfg['config'] not in SST_LABELS:
    raise ValueError(f'config.data.config={cfg["config"]!r} for sst must be "fine" or "binary"')
  raw, skipped, _ = _read_splits('sst', cfg, cfg['config'])
  lower = cfg['lowercase']
  data = {}
  sentences = {}  # each split's whole sentences: the word2vec corpus when train holds phrases
  for split, records in raw.items():
    items, sentences[split] = [], []
    for index, r in enumerate(_progress(records, f'sst/{split}')):
      if cfg['binary_trees']:
        tokens = [t.lower() if lower else t for t in r['text'].split(' ')]
        sentences[split].append(tokens)
        try:
          tree = tree_batching.binary_tree_arrays(r['tree'], tokens, lowercase=lower,
                                                  binary_labels=cfg['config'] == 'binary')
        except tree_batching.TreeError as e:
          where = _locate('sst', cfg, cfg['config'], split, r['tree'][:60], index)
          raise tree_batching.TreeError(f'{where}: {e}') from None
        if split == 'train' and cfg['train_phrases']:
          items.extend(_sst_subtree_examples(tokens, tree))
        else:
          items.append((tokens, int(r['label']), tree))
      else:
        sentences[split].append(text_lib.whitespace_tokenize(r['text'], lowercase=lower))
        if split == 'train' and cfg['train_phrases']:
          for label, tokens in text_lib.sst_phrases(r['tree']):
            if cfg['config'] == 'binary':
              if label == 2:
                continue
              label = int(label > 2)
            items.append(([t.lower() if lower else t for t in tokens], int(label), {}))
        else:
          items.append((sentences[split][-1], int(r['label']), {}))
    data[split] = _filter_train('sst', split, items, lambda x: len(x[0]), cfg, skipped)
  vocab = _vocab((t for t, _, _ in data['train']), cfg)
  examples = {s: [{'tokens': vocab.encode(t), 'label': y, **tree} for t, y, tree in items]
              for s, items in data.items()}
  if cfg['train_phrases']:  # word2vec on the sentences, not on every phrase of them again
    corpus = lambda: [t for s in ('train', 'validation') for t in sentences.get(s, [])]
  else:
    corpus = lambda: [t for s in ('train', 'validation') for t, _, _ in data.get(s, [])]
  return _finish('sst', 'sentence', cfg, vocab, SST_LABELS[cfg['config']], examples, skipped, corpus,
                 words={s: [t for t, _, _ in items] for s, items in data.items()})


def _sst_subtree_examples(tokens, tree):
  """(tokens, label, arrays) of every labelled phrase of one binarised SST tree, root first, then the
  other nodes by node id (leaves in word order, internal nodes in post-order); nodes labelled -1
  (binary SST: neutral) are left out."""
  labels = tree['tree_labels']
  root = len(labels) - 1
  out = []
  for node in [root] + list(range(root)):
    if labels[node] < 0:
      continue
    first, end, arrays = tree_batching.subtree_arrays(tree, node)
    out.append((tokens[first:end], int(labels[node]), arrays))
  return out


def trec_tokens(question: str, *, clean: bool = LOADER_DEFAULTS['trec']['clean'],
                lowercase: bool = LOADER_DEFAULTS['trec']['lowercase']) -> list[str]:
  """The words of one TREC question as the `trec` loader reads them (defaults: its defaults): Kim's
  `clean_str` (`clean=True`) or whitespace; `launch.parse --format=trec` uses the same words."""
  if clean:
    return text_lib.clean_str(question, lowercase=lowercase).split()
  return text_lib.whitespace_tokenize(question, lowercase=lowercase)


@registry.register('trec')
def load_trec(config) -> core.TaskData:
  """TREC question classification (Li & Roth 2002), kind 'sentence'.

  `config`: 'coarse' (6 classes) or 'fine' (50). Text is cleaned with Kim (2014)'s `clean_str`
  (`clean=True`; Kim keeps the case for TREC, hence `lowercase=False` by default). TREC has no dev
  split: `validation_fraction` (0.1) of train is held out. Label names are sorted from train; a test
  label unseen in train is an error naming the file and line.
  """
  cfg = validate_config(config, 'trec')
  if cfg['config'] not in ('coarse', 'fine'):
    raise ValueError(f'config.data.config={cfg["config"]!r} for trec must be "coarse" or "fine"')
  raw, skipped, held_out = _read_splits('trec', cfg, None)
  key = f'label_{cfg["config"]}'
  tokens = lambda t: trec_tokens(t, clean=cfg['clean'], lowercase=cfg['lowercase'])
  data = {s: _filter_train('trec', s, [(tokens(r['text']), r[key]) for r in records],
                           lambda x: len(x[0]), cfg, skipped) for s, records in raw.items()}
  return _classification('trec', 'trec', None, cfg, data, skipped, held_out)


def _classification(name, builder_name, builder_config, cfg, data, skipped,
                    held_out) -> core.TaskData:
  """Sentence classification with string labels: vocabulary and label names from train."""
  label_names = _label_names(data, held_out)
  vocab = _vocab((t for t, _ in data['train']), cfg)
  examples = {}
  for split, items in data.items():
    examples[split] = [
        {'tokens': vocab.encode(t),
         'label': _label_index(label_names, y, name=name, split=split, index=i, cfg=cfg,
                               builder_name=builder_name, builder_config=builder_config)}
        for i, (t, y) in enumerate(items)]
  return _finish(name, 'sentence', cfg, vocab, label_names, examples, skipped,
                 lambda: [t for s in ('train', 'validation') for t, _ in data.get(s, [])],
                 words={s: [t for t, _ in items] for s, items in data.items()})


# --------------------------------------------------------------------------------------------------
# Sentence pairs

SNLI_LABELS = ['entailment', 'neutral', 'contradiction']
QUORA_LABELS = ['not_duplicate', 'duplicate']


def _binary_parse_tokens(parse: str, lowercase: bool) -> list[str]:
  """Tokens of an SNLI binary parse `( ( A man ) ( ... ) )`: every non-bracket item."""
  return [t.lower() if lowercase else t for t in parse.split() if t not in ('(', ')')]


@registry.register('snli')
def load_snli(config) -> core.TaskData:
  """SNLI 1.0 (Bowman et al. 2015), kind 'pair'.

  Tokens come from the binary parses (the tokenisation of the corpus). Labels: entailment, neutral,
  contradiction; pairs without gold label are dropped by the builder (counted in `skipped`).
  """
  cfg = validate_config(config, 'snli')
  raw, skipped, _ = _read_splits('snli', cfg, None)
  lower = cfg['lowercase']
  data = {}
  for split, records in raw.items():
    items = [(_binary_parse_tokens(r['premise_binary_parse'], lower),
              _binary_parse_tokens(r['hypothesis_binary_parse'], lower),
              SNLI_LABELS.index(r['label']) if r['label'] in SNLI_LABELS else
              _label_index(SNLI_LABELS, r['label'], name='snli', split=split, index=i, cfg=cfg,
                           builder_name='snli', builder_config=None))
             for i, r in enumerate(_progress(records, f'snli/{split}'))]
    data[split] = _filter_train('snli', split, items, lambda x: min(len(x[0]), len(x[1])) and
                                max(len(x[0]), len(x[1])), cfg, skipped)
  return _pairs('snli', cfg, data, SNLI_LABELS, skipped)


@registry.register('quora_qqp')
def load_quora_qqp(config) -> core.TaskData:
  """Quora Question Pairs in the partition of Wang et al. (2017), kind 'pair' (labels 0/1)."""
  cfg = validate_config(config, 'quora_qqp')
  raw, skipped, _ = _read_splits('quora_qqp', cfg, None)
  lower = cfg['lowercase']
  data = {}
  for split, records in raw.items():
    items = []
    for i, r in enumerate(_progress(records, f'quora_qqp/{split}')):
      label = int(r['label'])
      if label not in (0, 1):
        raise ValueError(f'{_locate("quora_qqp", cfg, None, split, str(label), i)}: quora_qqp label '
                         f'{label} is not 0 or 1')
      items.append((text_lib.whitespace_tokenize(r['question1'], lowercase=lower),
                    text_lib.whitespace_tokenize(r['question2'], lowercase=lower), label))
    data[split] = _filter_train('quora_qqp', split, items, lambda x: min(len(x[0]), len(x[1])) and
                                max(len(x[0]), len(x[1])), cfg, skipped)
  return _pairs('quora_qqp', cfg, data, QUORA_LABELS, skipped)


def _pairs(name, cfg, data, label_names, skipped) -> core.TaskData:
  vocab = _vocab((t for p, h, _ in data['train'] for t in (p, h)), cfg)
  examples = {s: [{'premise': vocab.encode(p), 'hypothesis': vocab.encode(h), 'label': y}
                  for p, h, y in items] for s, items in data.items()}
  return _finish(name, 'pair', cfg, vocab, label_names, examples, skipped,
                 lambda: [t for s in ('train', 'validation') for p, h, _ in data.get(s, []) for t in (p, h)],
                 words={s: [(p, h) for p, h, _ in items] for s, items in data.items()})


# --------------------------------------------------------------------------------------------------
# Language modelling

EOS = '<eos>'


@registry.register('ptb_lm')
def load_ptb_lm(config) -> core.TaskData:
  """Penn Treebank language modelling (Mikolov's simple-examples), kind 'lm'.

  Every line becomes its words followed by `<eos>` (the data is used as is: it already maps rare
  words to `<unk>`, which is our UNK id). With `num_steps > 0` each split is one stream, batched
  contiguously (`batching.lm_stream_batches`, Zaremba et al. 2014); with `num_steps = 0` every
  sentence is one example (`inputs`/`targets` within the sentence). `context > 0` (stream batches
  only) adds the `context` tokens before each window to the batch (`context [B, C]`), so a model that
  carries no state between steps still reads across window boundaries.
  """
  cfg = validate_config(config, 'ptb_lm')
  if cfg['num_steps'] < 0:
    raise ValueError(f'config.data.num_steps={cfg["num_steps"]} must be >= 0')
  if cfg['context'] < 0 or (cfg['context'] and not cfg['num_steps']):
    raise ValueError(f'config.data.context={cfg["context"]} must be >= 0 and needs num_steps > 0')
  raw, skipped, _ = _read_splits('ptb_lm', cfg, None)
  data = {}
  for split, records in raw.items():
    lines = [text_lib.whitespace_tokenize(r['text'], lowercase=cfg['lowercase']) + [EOS]
             for r in records]
    data[split] = lines if cfg['num_steps'] else _filter_train(
        'ptb_lm', split, lines, len, cfg, skipped, max_length=cfg['max_length'] + 1 if
        cfg['max_length'] else 0)
  vocab = _vocab(data['train'], cfg)
  if cfg['num_steps']:
    examples = {s: [{'tokens': vocab.encode([t for line in lines for t in line])}]
                for s, lines in data.items()}
  else:
    examples = {s: [{'tokens': vocab.encode(line)} for line in lines] for s, lines in data.items()}
  return _finish('ptb_lm', 'lm', cfg, vocab, [], examples, skipped,
                 lambda: [line for s in ('train', 'validation') for line in data.get(s, [])],
                 num_steps=cfg['num_steps'] or None, context=cfg['context'])


# --------------------------------------------------------------------------------------------------
# Dependency parsing

@registry.register('universal_dependencies')
def load_universal_dependencies(config) -> core.TaskData:
  """A Universal Dependencies treebank, kind 'parse'.

  Examples: `tokens` (word ids), `tags` (UPOS, or XPOS with `tags='xpos'`, ids of
  `extras['tag_vocab']`), `heads` (0-based, -1 = ROOT: the CoNLL-U HEAD minus one) and `relations`
  (ids of `extras['relation_vocab']`, names `extras['relation_names']`; `<pad>` = 0 and `<unk>` = 1
  for relations unseen in train). `strip_relation_subtypes` maps `nsubj:pass` to `nsubj`. With
  `max_chars > 0` every example also has `chars` int32[n, max_chars], the byte ids of its words as
  written (before `lowercase`; `text.char_ids`), for the parser's character CNN. (Parses are
  written as CoNLL-U by `models.parser.to_conllu` from the input file's own rows.)
  """
  cfg = validate_config(config, 'universal_dependencies')
  if cfg['tags'] not in ('upos', 'xpos'):
    raise ValueError(f'config.data.tags={cfg["tags"]!r} must be "upos" or "xpos"')
  if cfg['max_chars'] and cfg['max_chars'] < 3:
    raise ValueError(f'config.data.max_chars={cfg["max_chars"]} must be 0 (no character ids) or '
                     '>= 3 (word begin, a byte, word end)')
  raw, skipped, _ = _read_splits('universal_dependencies', cfg, cfg['config'] or None)
  data = {s: _filter_train('universal_dependencies', s, records, lambda r: len(r['tokens']), cfg,
                           skipped) for s, records in raw.items()}

  def relation(deprel):
    return deprel.split(':')[0] if cfg['strip_relation_subtypes'] else deprel

  def words(r):
    return [w.lower() for w in r['tokens']] if cfg['lowercase'] else list(r['tokens'])

  train = data['train']
  vocab = _vocab((words(r) for r in train), cfg)
  tag_vocab = core.Vocabulary(sorted({t for r in train for t in r[cfg['tags']]}))
  relation_vocab = core.Vocabulary(sorted({relation(d) for r in train for d in r['deprels']}))
  examples = {}
  for split, records in data.items():
    out = []
    for i, r in enumerate(_progress(records, f'universal_dependencies/{split}')):
      n = len(r['tokens'])
      lengths = {len(r[k]) for k in ('upos', 'xpos', 'heads', 'deprels')}
      if lengths != {n}:
        raise ValueError(f'universal_dependencies {split} sentence {r.get("sent_id", i)!r}: columns '
                         f'of different lengths ({n} tokens, {sorted(lengths)})')
      heads = np.asarray(r['heads'], np.int32) - 1
      if heads.min() < -1 or heads.max() >= n:
        raise ValueError(f'universal_dependencies {split} sentence {r.get("sent_id", i)!r}: a HEAD '
                         f'outside 0..{n}')
      example = {'tokens': vocab.encode(words(r)), 'tags': tag_vocab.encode(r[cfg['tags']]),
                 'heads': heads,
                 'relations': relation_vocab.encode([relation(d) for d in r['deprels']])}
      if cfg['max_chars']:
        example['chars'] = text_lib.char_ids(r['tokens'], cfg['max_chars'])
      out.append(example)
    examples[split] = out
  extras = {
      'tag_vocab': tag_vocab,
      'relation_vocab': relation_vocab,
      'relation_names': list(relation_vocab.tokens),
  }
  return _finish('universal_dependencies', 'parse', cfg, vocab, [], examples, skipped,
                 lambda: [words(r) for s in ('train', 'validation') for r in data.get(s, [])],
                 extras=extras)


# --------------------------------------------------------------------------------------------------
# Translation

TARGET_BOS, TARGET_EOS = '<s>', '</s>'
BOS_ID, EOS_ID = 2, 3  # target ids of <s> and </s> (translation.seq2seq's bos_id / eos_id defaults)
_TRANSLATION_SPLITS = ('train', 'validation', 'test')  # ours = the builder's split names


def _check_translation_keys(cfg) -> None:
  """The split keys and target-vocabulary bounds of the iwslt15_en_vi loader (ConfigError)."""
  chosen = {}
  for ours in _TRANSLATION_SPLITS:
    key = f'{ours}_split'
    if cfg[key] not in _TRANSLATION_SPLITS + ('',):
      raise errors.ConfigError(f'config.data.{key}={cfg[key]!r} must name a split of the builder '
                               f"({', '.join(repr(s) for s in _TRANSLATION_SPLITS)}) or be ''")
    if cfg[key]:
      if cfg[key] in chosen.values():
        other = next(k for k, v in chosen.items() if v == cfg[key])
        raise errors.ConfigError(f'config.data.{key} and config.data.{other} both name the '
                                 f'{cfg[key]!r} split: a split serves one purpose')
      chosen[key] = cfg[key]
  if not cfg['train_split']:
    raise errors.ConfigError('config.data.train_split is empty: the vocabularies are built on train')
  if not cfg['validation_split'] and not 0.0 < cfg['validation_fraction'] < 1.0:
    raise errors.ConfigError('config.data.validation_split is empty, so config.data.validation_fraction '
                             f'(now {cfg["validation_fraction"]}) must be in (0, 1): the share of '
                             'train held out as validation')
  if cfg['validation_split'] and cfg['validation_fraction']:
    raise errors.ConfigError(f'config.data.validation_fraction={cfg["validation_fraction"]} holds out '
                             'part of train only when config.data.validation_split is empty (now '
                             f'{cfg["validation_split"]!r}): set one of them')
  for key in ('target_min_count',):
    if cfg[key] < 1:
      raise errors.ConfigError(f'config.data.{key}={cfg[key]} must be >= 1')
  for key in ('target_max_vocab_size', 'max_examples'):
    if cfg[key] < 0:
      raise errors.ConfigError(f'config.data.{key}={cfg[key]} must be >= 0')
  for key, specials in (('max_vocab_size', 2), ('target_max_vocab_size', 4)):
    if 0 < cfg[key] <= specials:
      raise errors.ConfigError(f'config.data.{key}={cfg[key]} leaves no room for words (the specials '
                               f'take {specials} entries)')


def target_vocabulary(sentences: Iterable[Sequence[str]], *, min_count: int = 1,
                      max_size: int = 0) -> core.Vocabulary:
  """<pad> 0, <unk> 1, <s> 2 (BOS_ID), </s> 3 (EOS_ID), then the words of `sentences`, most frequent
  first (`min_count`; `max_size` > 0 bounds the size, specials included)."""
  counted = core.Vocabulary.from_corpus(
      ([t for t in s if t not in (TARGET_BOS, TARGET_EOS)] for s in sentences), min_count=min_count,
      max_size=(max_size - 2) if max_size else None)
  vocab = core.Vocabulary([TARGET_BOS, TARGET_EOS] + counted.tokens[2:])
  assert vocab.id(TARGET_BOS) == BOS_ID and vocab.id(TARGET_EOS) == EOS_ID
  return vocab


@registry.register('iwslt15_en_vi')
def load_iwslt15_en_vi(config) -> core.TaskData:
  """IWSLT'15 English-Vietnamese (Luong & Manning 2015 release), kind 'translation'.

  Reads the builder `iwslt15_en_vi` (train <- train.*, validation <- tst2012.*, test <- tst2013.*,
  whichever exist). `train_split` / `validation_split` / `test_split` name the built split each
  role takes ('' = none; an empty `validation_split` holds out `validation_fraction` of train,
  deterministic from `seed`), e.g. train on 'validation' (tst2012) and test on 'test' (tst2013).
  `max_examples` > 0 keeps the first pairs of every split read (before the hold-out).

  `source` = English ids, `target` = `<s>` + Vietnamese ids + `</s>` (tokens split on whitespace).
  Both vocabularies are built on train: `vocab` = `extras['source_vocab']` (`min_count`,
  `max_vocab_size`; `<pad>` 0, `<unk>` 1) and `extras['target_vocab']` = `label_names` (the
  decoder's classes; `target_vocabulary`'s layout: `<pad>` `<unk>` `<s>` `</s>`, `target_min_count`,
  `target_max_vocab_size`); `extras['bos_id']`, `extras['eos_id']` are 2 and 3. Training pairs with
  a side longer than `max_length` (50, as Luong et al.) are dropped and counted; evaluation pairs
  never are.

  Raises:
    errors.ConfigError naming `config.data.<key>`; FileNotFoundError for a split whose files are
    absent (naming them); builders.FormatError `file:line:` for misaligned files or an empty line.
  """
  from jax_structured.data import builders  # pylint: disable=g-import-not-at-top
  from jax_structured.data.builders import iwslt15_en_vi as builder_lib  # pylint: disable=g-import-not-at-top
  cfg = validate_config(config, 'iwslt15_en_vi')
  _check_translation_keys(cfg)
  manual_dir = os.path.expanduser(cfg['manual_dir'])
  available = builders.available_splits('iwslt15_en_vi', manual_dir=manual_dir)
  raw = {}
  for ours in _TRANSLATION_SPLITS:
    theirs = cfg[f'{ours}_split']
    if not theirs:
      continue
    if theirs not in available:
      stem = os.path.join(manual_dir, builder_lib.STEMS[theirs])
      raise FileNotFoundError(f'config.data.{ours}_split={theirs!r}: {stem}.en / {stem}.vi are not '
                              f'in config.data.manual_dir (splits there: {available}); name another '
                              "split or '' in config.data.train_split / validation_split / test_split")
    records = builders.load_examples('iwslt15_en_vi', theirs, manual_dir=manual_dir,
                                     data_dir=_data_dir(cfg))
    if cfg['max_examples']:
      records = records[:cfg['max_examples']]
    lower = cfg['lowercase']
    raw[ours] = [(text_lib.whitespace_tokenize(r['en'], lowercase=lower),
                  text_lib.whitespace_tokenize(r['vi'], lowercase=lower)) for r in records]
  if 'validation' not in raw:
    try:
      raw['train'], raw['validation'] = _hold_out(raw['train'], cfg['validation_fraction'], cfg['seed'])
    except ValueError:
      raise errors.ConfigError(f'config.data.validation_fraction={cfg["validation_fraction"]} of '
                               f'{len(raw["train"])} training pairs leaves an empty split') from None
  skipped = collections.Counter()
  raw['train'] = _filter_train('iwslt15_en_vi', 'train', raw['train'],
                               lambda p: max(len(p[0]), len(p[1])), cfg, skipped)
  if not raw['train']:
    raise errors.ConfigError(f'no training pair of at most config.data.max_length={cfg["max_length"]} '
                             'tokens a side: raise it (0 = no limit)')
  source_vocab = _vocab((s for s, _ in raw['train']), cfg)
  target_vocab = target_vocabulary((t for _, t in raw['train']), min_count=cfg['target_min_count'],
                                   max_size=cfg['target_max_vocab_size'])
  examples = {split: [{'source': source_vocab.encode(s),
                       'target': target_vocab.encode([TARGET_BOS] + t + [TARGET_EOS])}
                      for s, t in raw[split]] for split in _TRANSLATION_SPLITS if split in raw}
  extras = {'source_vocab': source_vocab, 'target_vocab': target_vocab, 'bos_id': BOS_ID,
            'eos_id': EOS_ID}
  return _finish('iwslt15_en_vi', 'translation', cfg, source_vocab, target_vocab.tokens, examples,
                 skipped, lambda: [s for split in ('train', 'validation') for s, _ in raw[split]],
                 extras=extras)


# --------------------------------------------------------------------------------------------------
# Documents

# Formats whose text is already tokenised (Tang et al. 2015: lower-cased, space separated).
_PRETOKENISED = ('yelp13', 'yelp14', 'yelp15', 'imdb')


def _document(sentences: Sequence[str], cfg, counts: collections.Counter, *,
              whitespace: bool = False) -> list[list[str]]:
  """Tokenised non-empty sentences, truncated to max_sentences x max_sentence_length (counted)."""
  out = []
  for s in sentences:
    if whitespace:
      tokens = text_lib.whitespace_tokenize(s, lowercase=cfg['lowercase'])
    else:
      tokens = text_lib.tokenize(s, lowercase=cfg['lowercase'])
    if not tokens:
      counts['empty_sentence'] += 1
      continue
    if cfg['max_sentence_length'] and len(tokens) > cfg['max_sentence_length']:
      counts['truncated_sentence'] += 1
      tokens = tokens[:cfg['max_sentence_length']]
    out.append(tokens)
  if cfg['max_sentences'] and len(out) > cfg['max_sentences']:
    counts['truncated_document'] += 1
    out = out[:cfg['max_sentences']]
  return out


def _check_document_keys(cfg):
  for key in ('max_sentences', 'max_sentence_length'):
    if cfg[key] < 0:
      raise ValueError(f'config.data.{key}={cfg[key]} must be >= 0')
  if cfg['punctuation'] not in PUNCTUATION_OPTIONS:
    raise ValueError(f'config.data.punctuation={cfg["punctuation"]!r} must be one of '
                     f'{PUNCTUATION_OPTIONS}: \'\' (ordinary tokens), \'keep\' (per-token flags) or '
                     f"'p' (flags, every punctuation token mapped to {PUNCTUATION_TOKEN!r})")


PUNCTUATION_OPTIONS = ('', 'keep', 'p')
PUNCTUATION_TOKEN = 'p'  # Luo & Zhu sec. IV-B: "we replace all of the punctuation marks with 'p'"


def _mark_punctuation(data: dict[str, list], option: str) -> dict[str, list]:
  """{split: [(doc, label, flags)]}: per-token 0/1 `text.is_punctuation` flags of every sentence, the
  punctuation tokens replaced by PUNCTUATION_TOKEN when `option == 'p'` (flags from the original
  strings, so a real word 'p' keeps flag 0)."""
  out = {}
  for split, items in data.items():
    rows = []
    for doc, label in items:
      flags = [[int(text_lib.is_punctuation(t)) for t in sentence] for sentence in doc]
      if option == 'p':
        doc = [[PUNCTUATION_TOKEN if f else t for t, f in zip(sentence, fs)]
               for sentence, fs in zip(doc, flags)]
      rows.append((doc, label, flags))
    out[split] = rows
  return out


@registry.register('document_classification')
def load_document_classification(config) -> core.TaskData:
  """Document classification (Yelp 2013-15, IMDB, Yahoo, Amazon, CSFD, convote), kind 'document'.

  The builder gives each document's sentences (Tang et al.'s `<sssss>` segmentation) or, for formats
  without one, the whole text, split here with `text.split_sentences`. Sentences are tokenised on
  whitespace for the pre-tokenised Tang et al. files (`tokenizer='auto'`) and with `text.tokenize`
  otherwise (lower-cased by default); empty sentences are dropped, documents truncated to
  `max_sentences` sentences of at most `max_sentence_length` tokens (0 = no limit). Liu & Lapata (2018): vocabulary of words seen more
  than 5 times (`min_count=6`), 200-d word2vec trained on train+dev (`embeddings='word2vec'`).
  `max_length` drops training documents with more tokens in total.
  """
  cfg = validate_config(config, 'document_classification')
  _check_document_keys(cfg)
  if cfg['tokenizer'] not in ('auto', 'whitespace', 'regex'):
    raise ValueError(f'config.data.tokenizer={cfg["tokenizer"]!r} must be "auto", "whitespace" or '
                     '"regex"')
  whitespace = (cfg['tokenizer'] == 'whitespace' or
                cfg['tokenizer'] == 'auto' and cfg['config'] in _PRETOKENISED)
  raw, skipped, held_out = _read_splits('document_classification', cfg, cfg['config'] or None)
  data = {}
  for split, records in raw.items():
    counts = collections.Counter()
    items = [(_document(_sentences(r['sentences']), cfg, counts, whitespace=whitespace), r['label'])
             for r in _progress(records, f'document_classification/{split}')]
    for reason, count in counts.items():
      skipped[f'{split}/{reason}'] += count
    data[split] = _filter_documents(split, items, cfg, skipped)
  return _documents('document_classification', 'document_classification', cfg['config'] or None,
                    cfg, data, skipped, held_out)


def _sentences(parts: Sequence[str]) -> list[str]:
  """The builder's sentences; a single element is a whole text, split here (`split_sentences`)."""
  if len(parts) == 1:
    return text_lib.split_sentences(parts[0])
  return list(parts)


def _filter_documents(split, items, cfg, skipped):
  kept = []
  for doc, label in items:
    total = sum(len(s) for s in doc)
    if not doc:
      skipped[f'{split}/empty'] += 1
    elif split == 'train' and cfg['max_length'] and total > cfg['max_length']:
      skipped[f'{split}/too_long'] += 1
    else:
      kept.append((doc, label))
  return kept


def _documents(name, builder_name, builder_config, cfg, data, skipped, held_out) -> core.TaskData:
  label_names = _label_names(data, held_out)
  marked = _mark_punctuation(data, cfg['punctuation']) if cfg['punctuation'] else None
  if marked is not None:
    data = {split: [(doc, y) for doc, y, _ in items] for split, items in marked.items()}
  vocab = _vocab((s for doc, _ in data['train'] for s in doc), cfg)
  examples = {}
  for split, items in data.items():
    examples[split] = [
        {'sentences': [vocab.encode(s) for s in doc],
         'label': _label_index(label_names, y, name=name, split=split, index=i, cfg=cfg,
                               builder_name=builder_name, builder_config=builder_config)}
        for i, (doc, y) in enumerate(items)]
    if marked is not None:
      for example, (_, _, flags) in zip(examples[split], marked[split]):
        example['punctuation'] = [np.asarray(f, np.int32) for f in flags]
  return _finish(name, 'document', cfg, vocab, label_names, examples, skipped,
                 lambda: [s for sp in ('train', 'validation') for doc, _ in data.get(sp, []) for s in doc])


@registry.register('text_classification')
def load_text_classification(config) -> core.TaskData:
  """A user's own labelled texts (`{'text', 'label'}` records), kind 'sentence' or 'document'.

  `split_sentences=False`: each text is one token sequence (kind 'sentence'); True: texts are split
  into sentences (`text.split_sentences`) and tokenised per sentence (kind 'document', with
  `max_sentences` / `max_sentence_length` as for document_classification). Label names are sorted
  from train (numerically if all are integers); a dev/test label unseen in train is an error naming
  the file and line. Without a dev file, `validation_fraction` of train is held out.
  """
  cfg = validate_config(config, 'text_classification')
  _check_document_keys(cfg)
  builder_config = cfg['config'] or None
  if cfg['punctuation'] and not cfg['split_sentences']:
    raise ValueError(f'config.data.punctuation={cfg["punctuation"]!r} marks punctuation in documents: '
                     'set config.data.split_sentences=True too (or punctuation=\'\')')
  raw, skipped, held_out = _read_splits('text_classification', cfg, builder_config)
  if cfg['split_sentences']:
    data = {}
    for split, records in raw.items():
      counts = collections.Counter()
      items = [(_document(text_lib.split_sentences(r['text']), cfg, counts), r['label'])
               for r in _progress(records, f'text_classification/{split}')]
      for reason, count in counts.items():
        skipped[f'{split}/{reason}'] += count
      data[split] = _filter_documents(split, items, cfg, skipped)
    return _documents('text_classification', 'text_classification', builder_config, cfg, data,
                      skipped, held_out)
  data = {s: _filter_train('text_classification', s,
                           [(text_lib.tokenize(r['text'], lowercase=cfg['lowercase']), r['label'])
                            for r in _progress(records, f'text_classification/{s}')],
                           lambda x: len(x[0]), cfg, skipped) for s, records in raw.items()}
  return _classification('text_classification', 'text_classification', builder_config, cfg, data,
                         skipped, held_out)


# --------------------------------------------------------------------------------------------------
# Saving the vocabularies beside checkpoints

def save_vocabularies(task: core.TaskData, directory: str) -> list[str]:
  """Writes `vocab.json`, `labels.json` and every vocabulary in `task.extras` to `directory`.

  Returns:
    The written paths.
  """
  os.makedirs(directory, exist_ok=True)
  paths = [os.path.join(directory, 'vocab.json'), os.path.join(directory, 'labels.json')]
  task.vocab.save(paths[0])
  with open(paths[1], 'w', encoding='utf-8') as f:
    json.dump(task.label_names, f, ensure_ascii=False)
  for key, value in task.extras.items():
    if isinstance(value, core.Vocabulary):
      paths.append(os.path.join(directory, f'{key}.json'))
      value.save(paths[-1])
  return paths


def load_vocabularies(directory: str) -> dict[str, Any]:
  """Reads what `save_vocabularies` wrote: {'vocab', 'label_names', <extras key>: Vocabulary}."""
  out: dict[str, Any] = {'vocab': core.Vocabulary.load(os.path.join(directory, 'vocab.json'))}
  with open(os.path.join(directory, 'labels.json'), encoding='utf-8') as f:
    out['label_names'] = json.load(f)
  for name in sorted(os.listdir(directory)):
    if name.endswith('_vocab.json'):
      out[name[:-len('.json')]] = core.Vocabulary.load(os.path.join(directory, name))
  return out


# --- --text_classification_dir: the same launch config on the user's own files ---------------------

# Loaders whose examples are documents (sentence-split); the others give single texts.
_DOCUMENT_LOADERS = ('document_classification',)
# Data keys that name the source of the data, which the flag replaces.
_SOURCE_KEYS = ('name', 'manual_dir', 'config')


def with_text_classification_data(config: ml_collections.ConfigDict, manual_dir: str,
                                   overrides: Mapping[str, Any] | None = None
                                   ) -> ml_collections.ConfigDict:
  """The same launch on the user's own directory of `train`/`dev`/`test` TSV or JSONL files.

  Changes the source of the data, nothing else: `config.data` becomes the `text_classification`
  loader's section where
  - every key the config's data loader shares with `text_classification` keeps the config's value
    (`min_count`, `max_sentences`, `max_sentence_length`, `embeddings`, `lowercase`, `batch_size`,
    `data_dir`, ...), except the keys that name the source (`name`, `manual_dir`, `config`: the
    dataset is named after the folder). `validation_fraction` 0 (a data set that has its own dev
    split) keeps the loader's default, used only when the folder has no dev file. A config whose
    data is not one of the real loaders (the synthetic demo, whose keys mean other things, e.g. the
    generated `max_length`) keeps only `batch_size` and `eval_batch_size`;
  - `split_sentences` is on when the config's data was document level;
  - `overrides` (the command line's `--config.data.<key>=<value>`) are applied last.
  The rest of the config (model, optimizer, train, variants) is unchanged, except that a variant
  whose overrides set data keys the text_classification loader does not have is left out, and a line
  names it (the default job's `parser` variant, which trains on the planted trees of
  `config.data.kind='parse'`: a folder of labelled texts has no trees).

  Args:
    config: a launch config (not modified).
    manual_dir: directory with the user's files (see `data/builders/text_classification.py`).
    overrides: `{key: value}` of data keys; `str` values are parsed as on the command line
      (`parse_overrides`).

  Returns:
    A new ConfigDict.

  Raises:
    errors.ConfigKeyError: an override the text_classification loader does not have (named, with
      the closest keys).
    errors.ConfigError: an override value of the wrong type.
    errors.UserError: `manual_dir` is not a directory.
  """
  typed = parse_overrides('text_classification', dict(overrides or {}))
  if not os.path.isdir(os.path.expanduser(manual_dir)):
    raise errors.UserError(f'--text_classification_dir={manual_dir} is not a directory (it should '
                           'hold train.tsv / dev.tsv / test.tsv or the same names with .jsonl)')
  old = config.data
  old_name = old.get('name', '')
  data = default_config('text_classification')
  shared = (set(data) & set(old) - set(_SOURCE_KEYS) if old_name in LOADER_DEFAULTS
            else {'batch_size', 'eval_batch_size'} & set(old))
  for key in sorted(shared):
    if key == 'validation_fraction' and not old[key]:
      continue
    if key == 'bucket_boundaries' and old[key] is None:
      continue  # keep the loader's typed placeholder (overridable from the command line)
    data[key] = old[key]
  data.manual_dir = manual_dir
  data.split_sentences = bool(old.get('split_sentences', False)) or old_name in _DOCUMENT_LOADERS
  for key, value in typed.items():
    data[key] = value
  validate_config(data, 'text_classification')
  out = copy.deepcopy(config)
  with out.unlocked():
    out.data = data
    variants = out.get('variants')
    if variants:
      for name in list(variants.keys()):
        keys = _data_keys_of(variants[name])
        foreign = sorted(k for k in keys if k not in data)
        if foreign:
          print(f'--text_classification_dir: variant {name!r} left out: it sets config.data.'
                f'{foreign[0]}, which the text_classification loader does not have', flush=True)
          del variants[name]
  return out


def _data_keys_of(overrides) -> set[str]:
  """The `data` keys a variant's overrides set: nested ({'data': {'kind': ...}}) or dotted."""
  overrides = overrides.to_dict() if hasattr(overrides, 'to_dict') else dict(overrides or {})
  keys = set()
  for key, value in overrides.items():
    if key == 'data' and isinstance(value, Mapping):
      keys |= set(value)
    elif key.startswith('data.'):
      keys.add(key.split('.')[1])
  return keys
