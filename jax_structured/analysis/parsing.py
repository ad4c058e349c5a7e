"""Running a trained parser workdir: parse a file to CoNLL-U, or annotate a dataset with its trees.

The analysis layer restores workdirs (`training.load_trained`); the parser itself and its batched
decoding (`models.parser.parse`) sit below, in `models`.

  `parse_file(workdir, input, output)`   a text / CoNLL-U / dataset file -> CoNLL-U (launch.parse)
  `annotate(workdir, data_config)`       every sentence of a dataset the loaders read (TREC, SST, SNLI
                                         premises and hypotheses, Quora pairs, text_classification
                                         folders) -> the heads cache that `config.data.trees` attaches
                                         (`data.parsed_trees`; launch.parse --annotate)
"""
from __future__ import annotations

import os
import time
from typing import Any

from jax_structured import training
from jax_structured.data import parsed_trees
from jax_structured.data import registry as data_registry
from jax_structured.models import parser


def parse_file(workdir: str, input_path: str, output_path: str, *, fmt: str = 'raw',
               checkpoint: str | int = 'best', batch_size: int = 32) -> dict[str, float]:
  """Parses `input_path` (format `fmt`, see `parser.read_sentences`) with the parser trained in
  `workdir`; writes CoNLL-U (atomically).

  Returns:
    The `parser.parse` stats (sentences/s includes compilation of each padded length; the time of the
    first batch of each length is reported separately as 'seconds_first_batches').
  """
  sentences = parser.read_sentences(input_path, fmt)
  trained = training.load_trained(workdir, checkpoint=checkpoint)
  results, stats = parser.parse(trained, sentences, batch_size=batch_size)
  tmp = output_path + '.tmp'
  with open(tmp, 'w', encoding='utf-8') as f:
    for sentence, (heads, relations, upos) in zip(sentences, results):
      f.write(parser.to_conllu(sentence, heads, relations, upos))
  os.replace(tmp, output_path)
  return stats


def dataset_words(data_config) -> dict[str, Any]:
  """The words of every example of `data_config`'s dataset, tokenised exactly as its loader does.

  The loader runs with `trees=''` (nothing attached), `embeddings=''` (no vectors trained) and
  `lowercase=False` (the parser reads the words with their case; the tokens and their number are the
  same either way, and `parsed_trees.attach` checks it).

  Returns:
    `parsed_trees.collect_words`'s record: {'kind', 'cfg' (the validated section, as given: `trees` and
    `lowercase` restored), 'words': {split: [words] or [(premise words, hypothesis words)]}}.
  """
  import ml_collections  # pylint: disable=g-import-not-at-top
  given = dict(data_config.to_dict() if hasattr(data_config, 'to_dict') else data_config)
  config = ml_collections.ConfigDict(given)
  for key, value in (('trees', ''), ('lowercase', False), ('embeddings', '')):
    if key in config:
      config[key] = value
  with parsed_trees.collect_words() as sink:
    data_registry.load(config)
  if not sink:
    raise ValueError(f'config.data.name={config.get("name")!r}: the loader recorded no words')
  sink['cfg'].update({k: given[k] for k in ('trees', 'lowercase', 'embeddings') if k in given})
  return sink


def annotate(workdir: str, data_config, *, checkpoint: str | int = 'best',
             batch_size: int = 32) -> dict[str, Any]:
  """Parses every sentence of a dataset with the parser of `workdir` and writes the heads cache.

  Premises and hypotheses of pairs are parsed alike; each distinct sentence once (SNLI repeats every
  premise about three times). The cache goes to `parsed_trees.cache_dir(data section, workdir)`, under
  the data section's TFDS data dir, beside the built dataset.

  Args:
    workdir: a trained 'parser.biaffine' workdir (configs/parser/ewt.py).
    data_config: the data section of a launch config (`config.data`; its `trees`, if set, is ignored:
      the cache is keyed by `workdir`).
    checkpoint: 'best', 'latest' or a step.
    batch_size: sentences per parser batch.

  Returns:
    {'directory', 'paths' {split: file}, 'examples' {split: count}, 'sentences' (distinct, parsed),
     'words', 'seconds', 'sentences_per_second', 'checkpoint_step'}.
  """
  record = dataset_words(data_config)
  kind, cfg, words = record['kind'], record['cfg'], record['words']
  trained = training.load_trained(workdir, checkpoint=checkpoint)
  distinct: dict[tuple[str, ...], int] = {}
  for items in words.values():
    for item in items:
      for side in (item if kind == 'pair' else (item,)):
        distinct.setdefault(tuple(side), len(distinct))
  sentences = [{'words': list(w), 'sent_id': str(i)} for w, i in distinct.items()]
  start = time.perf_counter()
  results, stats = parser.parse(trained, sentences, batch_size=batch_size) if sentences else ([], {})
  seconds = time.perf_counter() - start
  parsed = [[int(h) for h in heads] for heads, _, _ in results]

  def heads_of(side):
    return parsed[distinct[tuple(side)]]

  heads = {split: [tuple(heads_of(s) for s in item) if kind == 'pair' else heads_of(item)
                   for item in items] for split, items in words.items()}
  directory = parsed_trees.cache_dir(cfg, workdir)
  meta = {'parser_workdir': os.path.realpath(os.path.expanduser(workdir)),
          'checkpoint_step': int(trained.step), 'loader': cfg['name'],
          'fingerprint': parsed_trees.fingerprint(cfg), 'data': parsed_trees.identity(cfg)}
  paths = parsed_trees.write_cache(directory, kind, words, heads, meta)
  return {'directory': directory, 'paths': paths,
          'examples': {s: len(items) for s, items in words.items()}, 'sentences': len(sentences),
          'words': stats.get('words', 0), 'seconds': seconds,
          'sentences_per_second': len(sentences) / max(seconds, 1e-9),
          'checkpoint_step': int(trained.step)}

