"""Plain parallel text files -> kind 'translation' (loader 'parallel_text'; IWSLT'15 English-Vietnamese by
default, the Stanford NMT release of Luong & Manning 2015 that Yu et al. 2018 translate in Table 2b).

Files: `<manual_dir>/<stem>.<source>` and `<manual_dir>/<stem>.<target>`, one already tokenised
sentence a line (UTF-8), line i of one aligned with line i of the other; tokens are split on whitespace
and kept as they are (the release's `&apos;` escapes included). Stems (config keys): `train_stem`
('train'), `validation_stem` ('tst2012'), `test_stem` ('tst2013'), the standard split. An empty
`validation_stem` holds out `validation_fraction` of the training pairs (deterministic from `seed`);
an empty `test_stem` gives no test split. We hold only tst2012 / tst2013 in ../shared/data/iwslt15_en_vi
(the 133k training pairs are too large to ship): configs/yu/iwslt15_en_vi.py trains on tst2012 by
default and points `manual_dir` at the full release when given.

Vocabularies are built on the training pairs only: the source `vocab` (`min_count`, `max_vocab_size`;
`<pad>` 0, `<unk>` 1) and the target vocabulary (`target_min_count`, `target_max_vocab_size`, both
counts including the specials) laid out as `<pad>` 0, `<unk>` 1, `<s>` 2 (BOS_ID), `</s>` 3 (EOS_ID),
then the words by frequency. The target vocabulary is the task's label set (`TaskData.label_names`:
the decoder's output classes, so `num_classes` is its size) and `extras['target_vocab']`;
`extras['bos_id']`, `extras['eos_id']` are 2 and 3.

Examples: {'source': int32 [n], 'target': int32 [m + 2] = <s> y_1..y_m </s>}. Training pairs with a
side longer than `max_length` (0 = no limit) are dropped and counted; evaluation pairs are never
dropped. `max_examples` > 0 keeps only the first pairs of every file (for smoke runs).

Errors (`ParallelTextError`, a `UserError` whose message starts with `file:line:`): the two files of a
stem have different numbers of lines; an empty (blank) line on either side. A missing file is a
FileNotFoundError naming it and the keys that set its path.
"""
from __future__ import annotations

import collections
import os
from typing import Any, Sequence

import numpy as np

from jax_structured import errors
from jax_structured.data import core
from jax_structured.data import registry

BOS, EOS = '<s>', '</s>'
BOS_ID, EOS_ID = 2, 3

DEFAULTS: dict[str, Any] = {
    'name': 'parallel_text',
    'manual_dir': '',           # folder with the files (required)
    'source': 'en',             # file suffix of the source language
    'target': 'vi',             # file suffix of the target language
    'train_stem': 'train',
    'validation_stem': 'tst2012',  # '' = hold out validation_fraction of train
    'test_stem': 'tst2013',     # '' = no test split
    'validation_fraction': 0.0,
    'seed': 0,
    'lowercase': False,
    'min_count': 1,             # source words seen >= min_count times in train
    'max_vocab_size': 0,        # source vocabulary size bound, specials included (0 = no bound)
    'target_min_count': 1,
    'target_max_vocab_size': 0,
    'max_length': 50,           # drop training pairs with a side longer than this (0 = keep all)
    'max_examples': 0,          # > 0: only the first max_examples pairs of every file
    'batch_size': 32,
    'eval_batch_size': 0,
    'bucket_boundaries': None,  # None = batching defaults (used for both sides)
}


class ParallelTextError(errors.UserError, ValueError):
  """A malformed pair of parallel files; the message starts with `file:line:`."""


def default_config():
  """`config.data` of the loader with every key at its default (an ml_collections.ConfigDict)."""
  import ml_collections  # pylint: disable=g-import-not-at-top
  config = ml_collections.ConfigDict(dict(DEFAULTS))
  config.bucket_boundaries = ml_collections.config_dict.placeholder(tuple)
  return config


def _validate(config) -> dict[str, Any]:
  given = dict(config.to_dict() if hasattr(config, 'to_dict') else config)
  unknown = sorted(set(given) - set(DEFAULTS))
  if unknown:
    raise errors.ConfigError('unknown key(s) for the parallel_text loader: '
                             + ', '.join(f'config.data.{k}' for k in unknown)
                             + f'; valid keys: {sorted(DEFAULTS)}')
  cfg = {**DEFAULTS, **given}
  for key, default in DEFAULTS.items():
    value = cfg[key]
    if default is None:
      continue
    if isinstance(default, bool):
      ok = isinstance(value, (bool, np.bool_))
    elif isinstance(default, int):
      ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    elif isinstance(default, float):
      ok = isinstance(value, (int, float, np.number)) and not isinstance(value, bool)
    else:
      ok = isinstance(value, str)
    if not ok:
      raise errors.ConfigError(f'config.data.{key}={value!r} must be of type {type(default).__name__}')
  for key in ('min_count', 'target_min_count', 'batch_size'):
    if cfg[key] < 1:
      raise errors.ConfigError(f'config.data.{key}={cfg[key]} must be >= 1')
  for key in ('max_vocab_size', 'target_max_vocab_size', 'max_length', 'max_examples',
              'eval_batch_size'):
    if cfg[key] < 0:
      raise errors.ConfigError(f'config.data.{key}={cfg[key]} must be >= 0')
  for key in ('max_vocab_size', 'target_max_vocab_size'):
    if 0 < cfg[key] < 5:
      raise errors.ConfigError(f'config.data.{key}={cfg[key]} leaves no room for words (the '
                               'specials take 2 source / 4 target entries)')
  if not cfg['manual_dir']:
    raise errors.ConfigError('config.data.manual_dir is empty: set it to the folder with the parallel '
                             'files (e.g. ../shared/data/iwslt15_en_vi)')
  if not cfg['train_stem']:
    raise errors.ConfigError('config.data.train_stem is empty: the vocabularies are built on train')
  if not cfg['validation_stem'] and not 0.0 < cfg['validation_fraction'] < 1.0:
    raise errors.ConfigError('config.data.validation_stem is empty, so config.data.validation_fraction '
                             f'(now {cfg["validation_fraction"]}) must be in (0, 1): the share of '
                             'train held out as validation')
  if cfg['bucket_boundaries'] is not None:
    cfg['bucket_boundaries'] = tuple(int(b) for b in cfg['bucket_boundaries'])
  return cfg


def _read_lines(path: str, limit: int) -> list[str]:
  try:
    with open(path, encoding='utf-8') as f:
      lines = f.read().split('\n')
  except UnicodeDecodeError as e:
    raise ParallelTextError(f'{path}: not UTF-8 text ({e})') from None
  if lines and lines[-1] == '':
    lines.pop()  # the final newline
  return lines[:limit] if limit else lines


def read_parallel(source_path: str, target_path: str, *, lowercase: bool = False,
                  max_examples: int = 0) -> list[tuple[list[str], list[str]]]:
  """Aligned token lists [(source tokens, target tokens)] of two parallel files.

  Raises:
    FileNotFoundError naming a missing file; ParallelTextError (`file:line: ...`) for a line-count
    mismatch (at the first line one file lacks) or an empty line.
  """
  for path in (source_path, target_path):
    if not os.path.isfile(path):
      raise FileNotFoundError(f'parallel text file {path} not found (set config.data.manual_dir, '
                              'config.data.<train|validation|test>_stem and config.data.source / '
                              'target so that <manual_dir>/<stem>.<language> names it)')
  sources = _read_lines(source_path, 0)
  targets = _read_lines(target_path, 0)
  if len(sources) != len(targets):
    shorter = source_path if len(sources) < len(targets) else target_path
    longer = target_path if shorter == source_path else source_path
    raise ParallelTextError(
        f'{longer}:{min(len(sources), len(targets)) + 1}: line-count mismatch: {source_path} has '
        f'{len(sources)} lines, {target_path} has {len(targets)}; this line has no counterpart in '
        f'{shorter} (the files must be aligned line by line)')
  if max_examples:
    sources, targets = sources[:max_examples], targets[:max_examples]
  pairs = []
  for i, (a, b) in enumerate(zip(sources, targets)):
    for path, line in ((source_path, a), (target_path, b)):
      if not line.strip():
        raise ParallelTextError(f'{path}:{i + 1}: empty line: every line must hold a sentence '
                                '(remove the pair from both files)')
    if lowercase:
      a, b = a.lower(), b.lower()
    pairs.append((a.split(), b.split()))
  return pairs


def target_vocabulary(sentences: Sequence[Sequence[str]], *, min_count: int = 1,
                      max_size: int = 0) -> core.Vocabulary:
  """<pad>, <unk>, <s>, </s>, then the words of `sentences` (most frequent first; `max_size` > 0
  bounds the size, specials included)."""
  counted = core.Vocabulary.from_corpus(
      ([t for t in s if t not in (BOS, EOS)] for s in sentences), min_count=min_count,
      max_size=(max_size - 2) if max_size else None)
  vocab = core.Vocabulary([BOS, EOS] + counted.tokens[2:])
  assert vocab.id(BOS) == BOS_ID and vocab.id(EOS) == EOS_ID
  return vocab


@registry.register('parallel_text')
def load_parallel_text(config) -> core.TaskData:
  """TaskData of kind 'translation' from `config.data` (module docstring)."""
  cfg = _validate(config)
  folder = os.path.expanduser(cfg['manual_dir'])
  if not os.path.isdir(folder):
    raise FileNotFoundError(f'config.data.manual_dir={folder} is not a directory (it should hold '
                            f'<stem>.{cfg["source"]} / <stem>.{cfg["target"]} files)')
  stems = {'train': cfg['train_stem'], 'validation': cfg['validation_stem'], 'test': cfg['test_stem']}
  raw = {}
  for split, stem in stems.items():
    if stem:
      raw[split] = read_parallel(os.path.join(folder, f'{stem}.{cfg["source"]}'),
                                 os.path.join(folder, f'{stem}.{cfg["target"]}'),
                                 lowercase=cfg['lowercase'], max_examples=cfg['max_examples'])
  if 'validation' not in raw:
    pairs = raw['train']
    num_dev = int(round(cfg['validation_fraction'] * len(pairs)))
    if not 0 < num_dev < len(pairs):
      raise errors.ConfigError(f'config.data.validation_fraction={cfg["validation_fraction"]} of '
                               f'{len(pairs)} training pairs leaves an empty split')
    dev = set(np.random.default_rng([cfg['seed'], 7]).permutation(len(pairs))[:num_dev].tolist())
    raw['validation'] = [p for i, p in enumerate(pairs) if i in dev]
    raw['train'] = [p for i, p in enumerate(pairs) if i not in dev]
  skipped = collections.Counter()
  if cfg['max_length']:
    kept = [p for p in raw['train'] if max(len(p[0]), len(p[1])) <= cfg['max_length']]
    if len(kept) < len(raw['train']):
      skipped['train/too_long'] = len(raw['train']) - len(kept)
    raw['train'] = kept
  if not raw['train']:
    raise errors.ConfigError(f'no training pair of at most config.data.max_length={cfg["max_length"]} '
                             'tokens a side: raise it (0 = no limit)')
  source_vocab = core.Vocabulary.from_corpus((s for s, _ in raw['train']), min_count=cfg['min_count'],
                                             max_size=cfg['max_vocab_size'] or None)
  target_vocab = target_vocabulary([t for _, t in raw['train']], min_count=cfg['target_min_count'],
                                   max_size=cfg['target_max_vocab_size'])
  examples = {split: [{'source': source_vocab.encode(s), 'target': target_vocab.encode([BOS] + t + [EOS])}
                      for s, t in pairs] for split, pairs in raw.items()}
  splits = {s: core.Split(s, 'translation', ex, bucket_boundaries=cfg['bucket_boundaries'])
            for s, ex in examples.items()}
  sizes = ', '.join(f'{s} {len(v)}' for s, v in examples.items())
  message = (f'parallel_text {folder} ({cfg["source"]}->{cfg["target"]}): {sizes} pairs; vocabulary '
             f'{len(source_vocab)} source / {len(target_vocab)} target')
  if skipped:
    message += '; skipped ' + ', '.join(f'{k}: {v}' for k, v in sorted(skipped.items()))
  print(message, flush=True)
  return core.TaskData(kind='translation', vocab=source_vocab, label_names=list(target_vocab.tokens),
                       splits=splits, skipped=dict(skipped),
                       extras={'target_vocab': target_vocab, 'bos_id': BOS_ID, 'eos_id': EOS_ID})
