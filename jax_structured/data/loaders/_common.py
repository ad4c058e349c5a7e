"""The steps every loader shares: reading the builders' splits, hold-out, vocabularies, labels,
initial embeddings, `finish` (TaskData), and saving the vocabularies beside checkpoints."""
from __future__ import annotations

import collections
import json
import os
import pathlib
import re
from typing import Any, Callable, Iterable, Sequence

import numpy as np

from jax_structured import errors
from jax_structured.data import core
from jax_structured.data import embeddings as embeddings_lib
from jax_structured.data import parsed_trees
from jax_structured.data import text as text_lib
from jax_structured.data.loaders import options

_BUILDER_SPLITS = {'train': 'train', 'validation': 'validation', 'test': 'test'}  # ours -> the builders'


def read_splits(builder_name: str, cfg, builder_config: str | None
                ) -> tuple[dict[str, list[dict]], collections.Counter, tuple[str, ...]]:
  """Reads every available split; holds dev (and test) out of train where the files have none.

  Without a dev file, `validation_fraction` of train is held out as dev; without a dev and a test
  file, also `test_fraction` of it as test (`hold_out`, seeded by `seed`). A line says what was held
  out of which file, or that the run has no test split.

  Returns:
    ({train/dev/test: raw examples}, builder-dropped counts (with `on_bad_lines='skip'`, the skipped
    lines per reason), the names of the splits held out of train).
  """
  from jax_structured.data import builders  # pylint: disable=g-import-not-at-top
  manual_dir = os.path.expanduser(cfg['manual_dir'])
  available = builders.available_splits(builder_name, manual_dir=manual_dir, config=builder_config)
  if 'train' not in available:
    raise FileNotFoundError(
        f'{builder_name}: no training split in config.data.manual_dir={manual_dir} (found only '
        f'{available}); the vocabulary and label set are built on train')
  raw, skipped = {}, collections.Counter()
  source = dict(manual_dir=manual_dir, data_dir=parsed_trees.data_root(cfg), config=builder_config,
                encoding=cfg.get('encoding') or None, on_bad_lines=cfg.get('on_bad_lines', 'error'))
  for ours, theirs in _BUILDER_SPLITS.items():
    if theirs in available:
      raw[ours] = builders.load_examples(builder_name, theirs, **source)
  info = builders.report(builder_name, **source)
  for split, counts in info.get('dropped', {}).items():
    ours = {v: k for k, v in _BUILDER_SPLITS.items()}.get(split, split)
    for reason, count in counts.items():
      if count:
        skipped[f'{ours}/{reason}'] += int(count)
  first_bad = [line for lines in info.get('bad_lines', {}).values() for line in lines]
  if first_bad:
    print(f"{builder_name}: bad lines left out (config.data.on_bad_lines='skip'; counted in the "
          'summary below), first: ' + '; '.join(map(text_lib.printable, first_bad)), flush=True)
  fractions = {}
  if 'validation' not in raw and cfg['validation_fraction'] > 0:
    fractions['validation'] = cfg['validation_fraction']
    if 'test' not in raw and cfg.get('test_fraction', 0.0) > 0:
      fractions['test'] = cfg['test_fraction']
  train_file = ', '.join(info.get('source_files', {}).get('train', [])) or 'the train file'
  if fractions:
    parts = carve(raw['train'], fractions, cfg['seed'])
    print(_held_out_line(builder_name, manual_dir, train_file, len(raw['train']), parts, fractions,
                         cfg['seed']), flush=True)
    raw.update(parts)
  if 'test' not in raw:
    print(_no_test_line(builder_name, manual_dir, 'validation' in available), flush=True)
  splits = {s: raw[s] for s in ('train', 'validation', 'test') if s in raw}
  return splits, skipped, tuple(fractions)


_SPLIT_NAMES = {'validation': 'dev', 'test': 'test'}
_FRACTION_KEYS = {'validation': 'validation_fraction', 'test': 'test_fraction'}


def _held_out_line(name: str, manual_dir: str, train_file: str, total: int, parts: dict[str, list],
                   fractions: dict[str, float], seed: int) -> str:
  """'<name>: no dev file in DIR: held out N of the M examples of train.tsv as dev (...)'."""
  missing = ' or '.join(_SPLIT_NAMES[s] for s in fractions)
  held = ' and '.join(f'{len(parts[s])} as {_SPLIT_NAMES[s]} (config.data.{_FRACTION_KEYS[s]}='
                      f'{fractions[s]:.4g})' for s in fractions)
  return (f'{name}: no {missing} file in {manual_dir}: held out {held} of the {total} examples of '
          f'{train_file} (config.data.seed={seed}); train keeps {len(parts["train"])}')


def _no_test_line(name: str, manual_dir: str, has_dev: bool) -> str:
  """'<name>: no test file in DIR: this run has no test split ...'."""
  how = ('add a test file to the folder for one' if has_dev else
         'set config.data.test_fraction to hold one out of train')
  return (f'{name}: no test file in {manual_dir}: this run has no test split and reports no test '
          f'metric ({how})')


def carve(examples: list, fractions: dict[str, float], seed: int) -> dict[str, list]:
  """Deterministic random hold-out of round(fraction * n) examples per split, every part in file order.

  Args:
    examples: the training examples.
    fractions: `{'validation': f}` or `{'validation': f, 'test': g}`, fractions of all `examples`.
    seed: `config.data.seed`; the dev part depends only on it and on `f` (not on `g`).

  Returns:
    `{'train': rest, 'validation': dev, 'test': test}` (the splits of `fractions`, and train).

  Raises:
    errors.ConfigError: a fraction that leaves a split empty.
  """
  n = len(examples)
  order = np.random.default_rng([seed, 7]).permutation(n).tolist()
  taken, start = {}, 0
  for split, fraction in fractions.items():
    count = int(round(fraction * n))
    if count == 0 or start + count >= n:
      raise errors.ConfigError(f'config.data.{_FRACTION_KEYS.get(split, split)}={fraction} of {n} '
                               'training examples leaves an empty split')
    taken.update((i, split) for i in order[start:start + count])
    start += count
  parts = {'train': [], **{s: [] for s in fractions}}
  for i, example in enumerate(examples):
    parts[taken.get(i, 'train')].append(example)
  return parts


def hold_out(examples: list, fraction: float, seed: int) -> tuple[list, list]:
  """`carve` of dev only: (train, dev), both in file order."""
  parts = carve(examples, {'validation': fraction}, seed)
  return parts['train'], parts['validation']


def progress(items: Sequence, desc: str) -> Iterable:
  """A console progress bar for long preparations (quiet for small inputs)."""
  if len(items) < 10000:
    return items
  from tqdm import auto as tqdm  # pylint: disable=g-import-not-at-top
  # disable=None: no bar (and no control codes) when stderr is not a terminal, e.g. a log file.
  return tqdm.tqdm(items, desc=desc, unit='ex', mininterval=1.0, leave=False, disable=None)


def filter_train(name: str, split: str, items: list, length_fn: Callable, cfg,
                 skipped: collections.Counter, max_length: int | None = None) -> list:
  """Drops empty items everywhere and too long ones from train (counted)."""
  limit = cfg['max_length'] if max_length is None else max_length
  kept, counts = text_lib.filter_by_length(items, length_fn,
                                           max_length=limit if split == 'train' else None)
  for reason, count in counts.items():
    skipped[f'{split}/{reason}'] += count
  return kept


def vocabulary(token_lists: Iterable[Sequence[str]], cfg) -> core.Vocabulary:
  """The vocabulary of the training tokens (`min_count`, `max_vocab_size`)."""
  return core.Vocabulary.from_corpus(token_lists, min_count=cfg['min_count'],
                                     max_size=cfg['max_vocab_size'] or None)


def label_index(label_names: Sequence[str], label: str, *, name: str, split: str, index: int,
                cfg, builder_config: str | None) -> int:
  """The id of `label` (record `index` of `split` of loader and builder `name`); an unseen label is
  an error naming its file:line."""
  try:
    return label_names.index(label)
  except ValueError:
    where = locate(name, cfg, builder_config, split, label, index)
    raise ValueError(f'{where}: {name} {split} label {label!r} does not occur in train; known labels: '
                     f'{list(label_names)}') from None


def locate(builder_name: str, cfg, builder_config, split: str, needle: str, index: int) -> str:
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
    if split in ('validation', 'test') and not paths:
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


def initial_embeddings(cfg, vocab: core.Vocabulary, corpus: Callable[[], list[list[str]]]):
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


def finish(name: str, kind: str, cfg, vocab, label_names, examples: dict[str, list],
           skipped: collections.Counter, embedding_corpus: Callable[[], list[list[str]]],
           extras: dict | None = None, num_steps: int | None = None,
           context: int = 0, words: dict[str, list] | None = None) -> core.TaskData:
  """The loader's TaskData: parsed trees attached, initial embeddings, splits, counts printed.

  `words`: {split: each example's words (pairs: (premise, hypothesis))}, for parsed trees.
  """
  parsed_trees.record(name, kind, cfg, words)
  if cfg.get('trees'):
    parsed_trees.attach(name, kind, cfg, examples, words, options.loader_defaults(name))
  matrix, coverage = initial_embeddings(cfg, vocab, embedding_corpus)
  extras = dict(extras or {})
  if coverage is not None:
    extras['embedding_coverage'] = coverage
  splits = {s: core.Split(s, kind, ex, bucket_boundaries=cfg['bucket_boundaries'],
                          num_steps=num_steps, context=context,
                          words=_aligned_words(words, s, ex)) for s, ex in examples.items()}
  truncated = {k: v for k, v in sorted(skipped.items()) if _is_truncation(k)}
  skipped = {k: v for k, v in sorted(skipped.items()) if not _is_truncation(k)}
  if truncated:
    extras['truncated'] = truncated
  sizes = ', '.join(f'{s} {len(v)}' for s, v in examples.items())
  message = f'{name}: {sizes} examples; vocabulary {len(vocab)}; {len(label_names)} labels'
  if skipped:
    message += '; skipped ' + ', '.join(f'{k}: {v}' for k, v in skipped.items())
    # Saved with the run (extras.json in the workdir): what the data lost, per '<split>/<reason>'.
    extras['skipped'] = dict(skipped)
  if truncated:
    message += '; truncated (kept) ' + ', '.join(f'{k}: {v}' for k, v in truncated.items())
  print(message, flush=True)
  return core.TaskData(kind=kind, vocab=vocab, label_names=list(label_names), splits=splits,
                       embeddings=matrix, skipped=skipped, extras=extras)


def _aligned_words(words: dict[str, list] | None, split: str, examples: list) -> list | None:
  """`words[split]` when it holds one entry per example of `split`, else None."""
  kept = (words or {}).get(split)
  return list(kept) if kept is not None and len(kept) == len(examples) else None


def _is_truncation(key: str) -> bool:
  """Whether a count key `'<split>/<reason>'` counts truncated (kept) rather than dropped records."""
  return key.split('/', 1)[-1].startswith('truncated')


def train_label_names(data: dict[str, list], held_out: Sequence[str]) -> list[str]:
  """Label names of the training examples (and of the dev / test parts held out from train)."""
  splits = ['train', *held_out]
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


def classification(name, builder_config, cfg, data, skipped, held_out) -> core.TaskData:
  """Sentence classification with string labels: vocabulary and label names from train."""
  label_names = train_label_names(data, held_out)
  vocab = vocabulary((t for t, _ in data['train']), cfg)
  examples = {}
  for split, items in data.items():
    examples[split] = [
        {'tokens': vocab.encode(t),
         'label': label_index(label_names, y, name=name, split=split, index=i, cfg=cfg,
                              builder_config=builder_config)}
        for i, (t, y) in enumerate(items)]
  return finish(name, 'sentence', cfg, vocab, label_names, examples, skipped,
                lambda: [t for s in ('train', 'validation') for t, _ in data.get(s, [])],
                words={s: [t for t, _ in items] for s, items in data.items()})


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
