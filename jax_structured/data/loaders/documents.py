"""The document and labelled-text loaders: `document_classification` (kind 'document') and
`text_classification` (kind 'sentence' or 'document')."""
from __future__ import annotations

import collections
from typing import Sequence

import numpy as np

from jax_structured.data import core
from jax_structured.data import text as text_lib
from jax_structured.data.loaders import _common
from jax_structured.data.loaders import options

# `encoding`: text encoding of files without a byte-order mark (a BOM decides by itself).
# `punctuation` (documents): '' ordinary tokens; 'keep': per-token flags `punctuation` [B, S, T]
# in the batches (Luo & Zhu's static boundary p_t, eq. 2); 'p': flags, and every punctuation token
# replaced by the one token 'p' before the vocabulary is built (Luo & Zhu sec. IV-B).
DOCUMENT_DEFAULTS = {'config': 'yelp13', 'min_count': 6, 'max_sentences': 0, 'max_sentence_length': 0,
                     'embedding_dim': 200, 'tokenizer': 'auto', 'validation_fraction': 0.1,
                     'encoding': 'utf-8', 'punctuation': '', **options.BAD_LINES_DEFAULTS}
# A user's folder: without dev, 10% of train is dev; without dev and test, another 10% is test.
TEXT_DEFAULTS = {'min_count': 6, 'split_sentences': False, 'max_sentences': 0,
                 'max_sentence_length': 0, 'embedding_dim': 200, 'validation_fraction': 0.1,
                 'test_fraction': 0.1, 'encoding': 'utf-8', 'punctuation': '', 'trees': '',
                 **options.BAD_LINES_DEFAULTS}
# Formats whose text is already tokenised (Tang et al. 2015: lower-cased, space separated).
_PRETOKENISED = ('yelp13', 'yelp14', 'yelp15', 'imdb')
PUNCTUATION_OPTIONS = ('', 'keep', 'p')
PUNCTUATION_TOKEN = 'p'  # Luo & Zhu sec. IV-B: "we replace all of the punctuation marks with 'p'"


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
  """The keys both document loaders share: truncation bounds and `punctuation`."""
  for key in ('max_sentences', 'max_sentence_length'):
    if cfg[key] < 0:
      raise ValueError(f'config.data.{key}={cfg[key]} must be >= 0')
  if cfg['punctuation'] not in PUNCTUATION_OPTIONS:
    raise ValueError(f'config.data.punctuation={cfg["punctuation"]!r} must be one of '
                     f'{PUNCTUATION_OPTIONS}: \'\' (ordinary tokens), \'keep\' (per-token flags) or '
                     f"'p' (flags, every punctuation token mapped to {PUNCTUATION_TOKEN!r})")


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


@options.register('document_classification', DOCUMENT_DEFAULTS)
def load_document_classification(config) -> core.TaskData:
  """Document classification (Yelp 2013-15, IMDB, Yahoo, Amazon, CSFD, convote), kind 'document'.

  The builder gives each document's sentences (Tang et al.'s `<sssss>` segmentation) or, for formats
  without one, the whole text, split here with `text.split_sentences`. Sentences are tokenised on
  whitespace for the pre-tokenised Tang et al. files (`tokenizer='auto'`) and with `text.tokenize`
  otherwise (lower-cased by default); empty sentences are dropped, documents truncated to
  `max_sentences` sentences of at most `max_sentence_length` tokens (0 = no limit). Liu & Lapata
  (2018): vocabulary of words seen more than 5 times (`min_count=6`), 200-d word2vec trained on
  train+dev (`embeddings='word2vec'`).
  `max_length` drops training documents with more tokens in total.
  """
  cfg = options.validate_config(config, 'document_classification')
  _check_document_keys(cfg)
  if cfg['tokenizer'] not in ('auto', 'whitespace', 'regex'):
    raise ValueError(f'config.data.tokenizer={cfg["tokenizer"]!r} must be "auto", "whitespace" or '
                     '"regex"')
  whitespace = (cfg['tokenizer'] == 'whitespace' or
                cfg['tokenizer'] == 'auto' and cfg['config'] in _PRETOKENISED)
  builder_config = cfg['config'] or None
  raw, skipped, held_out = _common.read_splits('document_classification', cfg, builder_config)
  data = _tokenised_documents('document_classification', raw, lambda r: _sentences(r['sentences']),
                              cfg, skipped, whitespace=whitespace)
  return _documents('document_classification', builder_config, cfg, data, skipped, held_out)


def _sentences(parts: Sequence[str]) -> list[str]:
  """The builder's sentences; a single element is a whole text, split here (`split_sentences`)."""
  if len(parts) == 1:
    return text_lib.split_sentences(parts[0])
  return list(parts)


def _tokenised_documents(name: str, raw: dict[str, list[dict]], sentences_of, cfg,
                         skipped: collections.Counter, *, whitespace: bool = False
                         ) -> dict[str, list[tuple[list[list[str]], str]]]:
  """{split: [(tokenised sentences, label)]}: `_document` of `sentences_of(record)`, then
  `_filter_documents` (both counted in `skipped`)."""
  data = {}
  for split, records in raw.items():
    counts = collections.Counter()
    items = [(_document(sentences_of(r), cfg, counts, whitespace=whitespace), r['label'])
             for r in _common.progress(records, f'{name}/{split}')]
    for reason, count in counts.items():
      skipped[f'{split}/{reason}'] += count
    data[split] = _filter_documents(split, items, cfg, skipped)
  return data


def _filter_documents(split, items, cfg, skipped):
  """Drops empty documents everywhere and, in train, those of more than `max_length` tokens."""
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


def _documents(name, builder_config, cfg, data, skipped, held_out) -> core.TaskData:
  """Document examples: label names and vocabulary from train, punctuation flags if asked."""
  label_names = _common.train_label_names(data, held_out)
  marked = _mark_punctuation(data, cfg['punctuation']) if cfg['punctuation'] else None
  if marked is not None:
    data = {split: [(doc, y) for doc, y, _ in items] for split, items in marked.items()}
  vocab = _common.vocabulary((s for doc, _ in data['train'] for s in doc), cfg)
  examples = {}
  for split, items in data.items():
    examples[split] = [
        {'sentences': [vocab.encode(s) for s in doc],
         'label': _common.label_index(label_names, y, name=name, split=split, index=i, cfg=cfg,
                                      builder_config=builder_config)}
        for i, (doc, y) in enumerate(items)]
    if marked is not None:
      for example, (_, _, flags) in zip(examples[split], marked[split]):
        example['punctuation'] = [np.asarray(f, np.int32) for f in flags]
  return _common.finish(
      name, 'document', cfg, vocab, label_names, examples, skipped,
      lambda: [s for sp in ('train', 'validation') for doc, _ in data.get(sp, []) for s in doc])


@options.register('text_classification', TEXT_DEFAULTS)
def load_text_classification(config) -> core.TaskData:
  """A user's own labelled texts (`{'text', 'label'}` records), kind 'sentence' or 'document'.

  `split_sentences=False`: each text is one token sequence (kind 'sentence'); True: texts are split
  into sentences (`text.split_sentences`) and tokenised per sentence (kind 'document', with
  `max_sentences` / `max_sentence_length` as for document_classification). Label names are sorted
  from train (numerically if all are integers); a dev/test label unseen in train is an error naming
  the file and line. Without a dev file, `validation_fraction` of train is held out as dev; without
  a dev and a test file, also `test_fraction` of it as test (a line says how many of which file).
  `on_bad_lines='skip'` leaves malformed lines (empty text, no label, no tab, invalid JSON,
  undecodable) out, counted per reason in `TaskData.skipped` and the data summary line.
  """
  cfg = options.validate_config(config, 'text_classification')
  _check_document_keys(cfg)
  builder_config = cfg['config'] or None
  if cfg['punctuation'] and not cfg['split_sentences']:
    raise ValueError(f'config.data.punctuation={cfg["punctuation"]!r} marks punctuation in documents: '
                     'set config.data.split_sentences=True too (or punctuation=\'\')')
  raw, skipped, held_out = _common.read_splits('text_classification', cfg, builder_config)
  if cfg['split_sentences']:
    data = _tokenised_documents('text_classification', raw,
                                lambda r: text_lib.split_sentences(r['text']), cfg, skipped)
    return _documents('text_classification', builder_config, cfg, data, skipped, held_out)
  data = {s: _common.filter_train('text_classification', s,
                                  [(text_lib.tokenize(r['text'], lowercase=cfg['lowercase']), r['label'])
                                   for r in _common.progress(records, f'text_classification/{s}')],
                                  lambda x: len(x[0]), cfg, skipped) for s, records in raw.items()}
  return _common.classification('text_classification', builder_config, cfg, data, skipped, held_out)
