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

from jax_structured.data import core
from jax_structured.data import embeddings as embeddings_lib
from jax_structured.data import parsed_trees
from jax_structured.data import text as text_lib
from jax_structured.data.loaders import options

_BUILDER_SPLITS = {'train': 'train', 'validation': 'validation', 'test': 'test'}  # ours -> the builders'


def read_splits(builder_name: str, cfg, builder_config: str | None
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
                                         data_dir=parsed_trees.data_root(cfg), config=builder_config,
                                         encoding=encoding)
  info = builders.report(builder_name, manual_dir=manual_dir, data_dir=parsed_trees.data_root(cfg),
                         config=builder_config, encoding=encoding)
  for split, counts in info.get('dropped', {}).items():
    ours = {v: k for k, v in _BUILDER_SPLITS.items()}.get(split, split)
    for reason, count in counts.items():
      if count:
        skipped[f'{ours}/{reason}'] += int(count)
  held_out = 'validation' not in raw and cfg['validation_fraction'] > 0
  if held_out:
    raw['train'], raw['validation'] = hold_out(raw['train'], cfg['validation_fraction'], cfg['seed'])
  return {s: raw[s] for s in ('train', 'validation', 'test') if s in raw}, skipped, held_out


def hold_out(examples: list, fraction: float, seed: int) -> tuple[list, list]:
  """Deterministic random hold-out of round(fraction * n) examples, both parts in file order."""
  n = len(examples)
  num_dev = int(round(fraction * n))
  if num_dev == 0 or num_dev == n:
    raise ValueError(f'validation_fraction={fraction} of {n} training examples leaves an empty split')
  dev_idx = set(np.random.default_rng([seed, 7]).permutation(n)[:num_dev].tolist())
  return ([e for i, e in enumerate(examples) if i not in dev_idx],
          [e for i, e in enumerate(examples) if i in dev_idx])


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


def train_label_names(data: dict[str, list], held_out: bool) -> list[str]:
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
