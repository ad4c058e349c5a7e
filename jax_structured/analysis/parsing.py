"""Running a trained parser workdir: parse sentences, a file to CoNLL-U, or annotate a dataset.

The analysis layer restores workdirs (`training.load_trained`); the parser itself (`models.parser`)
sits below, in `models`; reading sentences and writing CoNLL-U is `data.sentences`. The entry points::

  `parse(trained, sentences)`            batched parsing on device: power-of-two padded lengths, trees
                                         decoded by `models.parser.decode` inside the jitted function
  `parse_file(workdir, input, output)`   a text / CoNLL-U / dataset file -> CoNLL-U (launch.parse)
  `annotate(workdir, data_config)`       every sentence of a dataset the loaders read (TREC, SST, SNLI
                                         premises and hypotheses, Quora pairs, text_classification
                                         folders) -> the heads cache that `config.data.trees` attaches
                                         (`data.parsed_trees`; launch.parse --annotate)
"""
from __future__ import annotations

import os
import time
from typing import Any, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jax_structured import training
from jax_structured.data import parsed_trees
from jax_structured.data import registry as data_registry
from jax_structured.data import sentences
from jax_structured.data import text
from jax_structured.models import parser
from jax_structured.training import parse_task


def bucket_length(n: int) -> int:
  """The padded length of a batch whose longest sentence has `n` words: a power of two, >= 8."""
  return max(8, 1 << (n - 1).bit_length())


def _label_names(trained) -> tuple[list[str], list[str]]:
  """(relation names, tag names) of a trained parser workdir, checked against its model.

  Raises:
    TypeError when the workdir holds another model; KeyError without relation names (not trained on
    a treebank); ValueError when the model's tables do not match the saved names.
  """
  model = trained.model
  if not isinstance(model, parser.BiaffineParser):
    raise TypeError(f'the workdir holds a {type(model).__name__}, not a parser.biaffine model')
  extras = trained.extras or {}
  if 'relation_names' not in extras:
    raise KeyError('the workdir extras.json has no "relation_names": was it trained on '
                   'universal_dependencies data?')
  relation_names = list(extras['relation_names'])
  tag_vocab = extras.get('tag_vocab')
  tag_names = list(getattr(tag_vocab, 'tokens', tag_vocab or []))
  parse_task.check_data_sizes({'num_tags': model.num_tags, 'num_relations': model.num_relations},
                              tag_vocab=tag_names if model.num_tags else None,
                              relation_names=relation_names)
  return relation_names, tag_names


def _input_settings(trained, sentence_records, tag_names) -> dict[str, Any]:
  """How sentences become batches for this workdir: {'lowercase', 'max_chars', 'use_tags'}.

  `use_tags`: the model was trained with `tag_input='gold'` and EVERY sentence has input UPOS.

  Raises:
    ValueError when the model reads characters but its data config gives none, or when an input UPOS
    tag is not in the model's tag vocabulary.
  """
  model = trained.model
  data_config = trained.config.get('data', {})
  reads_chars = model.char_embedding_dim > 0
  max_chars = int(data_config.get('max_chars', 0)) if reads_chars else 0
  if reads_chars and max_chars < 3:
    raise ValueError(f'the parser in this workdir reads characters (model.char_embedding_dim='
                     f'{model.char_embedding_dim}) but its config has data.max_chars={max_chars}')
  use_tags = bool(model.tag_input == 'gold' and sentence_records and
                  all(s.get('tags') is not None for s in sentence_records))
  if use_tags:
    unknown = sorted({t for s in sentence_records for t in s['tags']} - set(tag_names))
    if unknown:
      raise ValueError(f'input UPOS tags {unknown} are not in the model tag vocabulary {tag_names}')
  return {'lowercase': bool(data_config.get('lowercase', False)), 'max_chars': max_chars,
          'use_tags': use_tags}


def _batch(trained, rows: Sequence[Mapping[str, Any]], batch_size: int, settings, tag_names,
           ) -> dict[str, np.ndarray]:
  """A 'parse' batch of `rows` (sentence records), padded to `batch_size` x `bucket_length`.

  Returns:
    {'tokens' int32[B, n], 'lengths' int32[B] (padding rows: one word, ignored), ['tags' int32[B, n]],
     ['chars' int32[B, n, max_chars]]}.
  """
  n = bucket_length(max(len(s['words']) for s in rows))
  max_chars, use_tags = settings['max_chars'], settings['use_tags']
  batch = {'tokens': np.zeros((batch_size, n), np.int32), 'lengths': np.ones((batch_size,), np.int32)}
  if use_tags:
    batch['tags'] = np.zeros((batch_size, n), np.int32)
  if max_chars:
    batch['chars'] = np.zeros((batch_size, n, max_chars), np.int32)
  for row, record in enumerate(rows):
    words = record['words']
    if max_chars:
      batch['chars'][row, :len(words)] = text.char_ids(words, max_chars)
    words = [w.lower() for w in words] if settings['lowercase'] else words
    batch['tokens'][row, :len(words)] = trained.vocab.encode(words)
    batch['lengths'][row] = len(words)
    if use_tags:
      batch['tags'][row, :len(words)] = [tag_names.index(t) for t in record['tags']]
  return batch


def _stats(sentence_records, seconds: float, first_seconds: float, first_sentences: int,
           ) -> dict[str, float]:
  rest = len(sentence_records) - first_sentences
  return {'sentences': len(sentence_records),
          'words': sum(len(s['words']) for s in sentence_records), 'seconds': seconds,
          'sentences_per_second': len(sentence_records) / max(seconds, 1e-9),
          'seconds_first_batches': first_seconds,
          'sentences_per_second_compiled': (rest / max(seconds - first_seconds, 1e-9) if rest
                                            else float('nan'))}


def parse(trained, sentence_records: Sequence[Mapping[str, Any]], *, batch_size: int = 32,
          decoding: str | None = None) -> tuple[list[tuple[np.ndarray, list[str], list[str] | None]], dict[str, float]]:
  """Parses sentences with a trained parser (restored by `training.load_trained`), on device, batched.

  Sentences are sorted by length and padded to power-of-two lengths (>= 8, `bucket_length`) so each
  shape compiles once; trees are decoded with `models.parser.decode` (`config.model.decoding`) inside
  the jitted function. Tags: with `config.model.tag_input == 'gold'` the input's UPOS (CoNLL-U input) are used
  when EVERY sentence has them, else the tagger head's predictions; 'predicted' and 'none' models
  always use (and write) their own predicted UPOS.

  Args:
    trained: a `training.Trained` of a 'parser.biaffine' model.
    sentence_records: `data.sentences.read_sentences` records (only 'words' and, for 'gold' tags,
      'tags' are read).
    batch_size: sentences per device batch.
    decoding: `models.parser.DECODINGS` name; None: the workdir's `config.model.decoding` ('pipeline'
      when unset).

  Returns:
    ([(heads int32[n] (-1 = ROOT), relation names, UPOS names or None)] in input order,
     stats {'sentences', 'words', 'seconds', 'sentences_per_second' (all, compilation included),
     'seconds_first_batches' (the first batch of each padded length, compilation included),
     'sentences_per_second_compiled' (the other batches; NaN when there are none)}).
  """
  model = trained.model
  relation_names, tag_names = _label_names(trained)
  settings = _input_settings(trained, sentence_records, tag_names)
  writes_upos = bool(model.num_tags and tag_names and not settings['use_tags'])
  if decoding is None:
    decoding = (trained.config.get('model') or {}).get('decoding', 'pipeline')
  if decoding not in parser.DECODINGS:
    raise ValueError(f'decoding={decoding!r}; expected one of {parser.DECODINGS}')

  @jax.jit
  def run(variables, batch):
    outputs = model.apply(variables, batch, train=False)
    heads, relations = parser.decode(outputs, batch['lengths'], decoding)
    return heads, relations, outputs.get('tags', jnp.zeros_like(heads))

  variables = jax.device_put(trained.variables)
  order = sorted(range(len(sentence_records)), key=lambda i: len(sentence_records[i]['words']))
  results: list[Any] = [None] * len(sentence_records)
  seen_shapes, first_seconds, first_sentences = set(), 0.0, 0
  start = time.perf_counter()
  for k in range(0, len(order), batch_size):
    index = order[k:k + batch_size]
    batch = _batch(trained, [sentence_records[i] for i in index], batch_size, settings, tag_names)
    t0 = time.perf_counter()
    heads, relations, tags = jax.device_get(run(variables, batch))
    n = batch['tokens'].shape[1]
    if n not in seen_shapes:  # the first batch of a padded length includes its compilation
      seen_shapes.add(n)
      first_seconds += time.perf_counter() - t0
      first_sentences += len(index)
    for row, i in enumerate(index):
      length = len(sentence_records[i]['words'])
      upos = [tag_names[int(t)] for t in tags[row, :length]] if writes_upos else None
      results[i] = (heads[row, :length], [relation_names[int(r)] for r in relations[row, :length]],
                    upos)
  stats = _stats(sentence_records, time.perf_counter() - start, first_seconds, first_sentences)
  return results, stats


def parse_file(workdir: str, input_path: str, output_path: str, *, fmt: str = 'raw',
               checkpoint: str | int = 'best', batch_size: int = 32) -> dict[str, float]:
  """Parses `input_path` (format `fmt`, see `data.sentences.read_sentences`) with the parser trained
  in `workdir`; writes CoNLL-U (atomically).

  Returns:
    The `parse` stats (sentences/s includes compilation of each padded length; the time of the
    first batch of each length is reported separately as 'seconds_first_batches').
  """
  records = sentences.read_sentences(input_path, fmt)
  trained = training.load_trained(workdir, checkpoint=checkpoint)
  results, stats = parse(trained, records, batch_size=batch_size)
  tmp = output_path + '.tmp'
  with open(tmp, 'w', encoding='utf-8') as f:
    for record, (heads, relations, upos) in zip(records, results):
      f.write(sentences.to_conllu(record, heads, relations, upos))
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
  records = [sentences.sentence(w, str(i)) for w, i in distinct.items()]
  start = time.perf_counter()
  results, stats = parse(trained, records, batch_size=batch_size) if records else ([], {})
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
          'examples': {s: len(items) for s, items in words.items()}, 'sentences': len(records),
          'words': stats.get('words', 0), 'seconds': seconds,
          'sentences_per_second': len(records) / max(seconds, 1e-9),
          'checkpoint_step': int(trained.step)}

