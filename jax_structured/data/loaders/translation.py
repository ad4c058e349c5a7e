"""The IWSLT'15 English-Vietnamese loader (`iwslt15_en_vi`, kind 'translation')."""
from __future__ import annotations

import collections
import os
from typing import Iterable, Sequence

from jax_structured import errors
from jax_structured.data import core
from jax_structured.data import parsed_trees
from jax_structured.data import text as text_lib
from jax_structured.data.loaders import _common
from jax_structured.data.loaders import options

# `<role>_split`: the builder split ('train' | 'validation' | 'test' = train.* | tst2012.* |
# tst2013.*) that serves as train / validation / test ('' = none; no validation split: hold out
# `validation_fraction` of train); `max_examples` > 0: the first pairs of every split only.
DEFAULTS = {'lowercase': False, 'max_length': 50, 'target_min_count': 1, 'target_max_vocab_size': 0,
            'train_split': 'train', 'validation_split': 'validation', 'test_split': 'test',
            'max_examples': 0}
TARGET_BOS, TARGET_EOS = '<s>', '</s>'
BOS_ID, EOS_ID = 2, 3  # target ids of <s> and </s> (translation.seq2seq's bos_id / eos_id defaults)
_SPLITS = ('train', 'validation', 'test')  # ours = the builder's split names


def _check_keys(cfg) -> None:
  """The split keys and target-vocabulary bounds of the iwslt15_en_vi loader (ConfigError)."""
  chosen = {}
  for ours in _SPLITS:
    key = f'{ours}_split'
    if cfg[key] not in _SPLITS + ('',):
      raise errors.ConfigError(f'config.data.{key}={cfg[key]!r} must name a split of the builder '
                               f"({', '.join(repr(s) for s in _SPLITS)}) or be ''")
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


@options.register('iwslt15_en_vi', DEFAULTS)
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
  cfg = options.validate_config(config, 'iwslt15_en_vi')
  _check_keys(cfg)
  raw = _read_pairs(cfg)
  if 'validation' not in raw:
    try:
      raw['train'], raw['validation'] = _common.hold_out(raw['train'], cfg['validation_fraction'],
                                                         cfg['seed'])
    except ValueError:
      raise errors.ConfigError(f'config.data.validation_fraction={cfg["validation_fraction"]} of '
                               f'{len(raw["train"])} training pairs leaves an empty split') from None
  skipped = collections.Counter()
  raw['train'] = _common.filter_train('iwslt15_en_vi', 'train', raw['train'],
                                      lambda p: max(len(p[0]), len(p[1])), cfg, skipped)
  if not raw['train']:
    raise errors.ConfigError(f'no training pair of at most config.data.max_length={cfg["max_length"]} '
                             'tokens a side: raise it (0 = no limit)')
  source_vocab = _common.vocabulary((s for s, _ in raw['train']), cfg)
  target_vocab = target_vocabulary((t for _, t in raw['train']), min_count=cfg['target_min_count'],
                                   max_size=cfg['target_max_vocab_size'])
  examples = {split: [{'source': source_vocab.encode(s),
                       'target': target_vocab.encode([TARGET_BOS] + t + [TARGET_EOS])}
                      for s, t in raw[split]] for split in _SPLITS if split in raw}
  extras = {'source_vocab': source_vocab, 'target_vocab': target_vocab, 'bos_id': BOS_ID,
            'eos_id': EOS_ID}
  return _common.finish('iwslt15_en_vi', 'translation', cfg, source_vocab, target_vocab.tokens,
                        examples, skipped,
                        lambda: [s for split in ('train', 'validation') for s, _ in raw[split]],
                        extras=extras)


def _read_pairs(cfg) -> dict[str, list[tuple[list[str], list[str]]]]:
  """{role: [(English words, Vietnamese words)]} of every role whose `<role>_split` is set."""
  from jax_structured.data import builders  # pylint: disable=g-import-not-at-top
  from jax_structured.data.builders import iwslt15_en_vi as builder_lib  # pylint: disable=g-import-not-at-top
  manual_dir = os.path.expanduser(cfg['manual_dir'])
  available = builders.available_splits('iwslt15_en_vi', manual_dir=manual_dir)
  raw = {}
  for ours in _SPLITS:
    theirs = cfg[f'{ours}_split']
    if not theirs:
      continue
    if theirs not in available:
      stem = os.path.join(manual_dir, builder_lib.STEMS[theirs])
      raise FileNotFoundError(f'config.data.{ours}_split={theirs!r}: {stem}.en / {stem}.vi are not '
                              f'in config.data.manual_dir (splits there: {available}); name another '
                              "split or '' in config.data.train_split / validation_split / test_split")
    records = builders.load_examples('iwslt15_en_vi', theirs, manual_dir=manual_dir,
                                     data_dir=parsed_trees.data_root(cfg))
    if cfg['max_examples']:
      records = records[:cfg['max_examples']]
    lower = cfg['lowercase']
    raw[ours] = [(text_lib.whitespace_tokenize(r['en'], lowercase=lower),
                  text_lib.whitespace_tokenize(r['vi'], lowercase=lower)) for r in records]
  return raw
