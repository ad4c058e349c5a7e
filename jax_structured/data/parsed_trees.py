"""Dependency trees from our own parser, cached beside a built dataset (`config.data.trees`).

The supervised-tree rows of Yu et al. (2018) (Tables 1a, 1b, 2a: "RN supervised", "RN intra-attn
supervised", "recurrent RN supervised") read one head per word. We take them from our biaffine tree-CRF
parser (`models.parser`, trained with configs/parser/ewt.py):

1. `python -m launch.parse --workdir=PARSER --annotate=CONFIG_OR_LOADER ...` (`analysis.parsing.annotate`)
   tokenises every split exactly as the loader does (`collect_words`), parses every distinct sentence
   (premises and hypotheses of pairs alike) and writes the cache (`write_cache`);
2. with `config.data.trees = PARSER` the loader attaches the cached heads to every example (`attach`):
   'heads' int32[n] (sentences) or 'premise_heads' int32[n] / 'hypothesis_heads' int32[m] (pairs), 0-based
   with -1 = ROOT (the `trees` convention), which `batching` pads with -1 and the heads of `models.heads`
   pass to the encoders as their `structure['heads']`.

Nothing is parsed on the fly: parsing SNLI takes minutes on a CPU, so a missing cache is an error that
prints the exact `launch.parse` command that writes it.

Cache layout (`cache_dir`), under the loader's TFDS data dir (`config.data.data_dir`, default
$TFDS_DATA_DIR or ~/tensorflow_datasets), i.e. beside the built datasets:

  <data_dir>/parsed_trees/<loader>-<dataset fingerprint>/<parser name>-<hash of its real path>/
      meta.json           {"parser_workdir", "checkpoint_step", "loader", "fingerprint", "data": the data
                           keys that decide the examples, "splits": {split: number of examples}, "format": 1}
      <split>.jsonl       one JSON object per example, in the loader's order (`train`, `validation`,
                          `test`): {"heads": [...], "hash": "..."} for sentences, {"premise_heads": [...],
                          "hypothesis_heads": [...], "hash": "..."} for pairs; `hash` = the first 12 hex
                          digits of the SHA-1 of the example's lower-cased words (`words_hash`).

The dataset fingerprint covers every data key that changes which examples there are and how they are
tokenised (`IDENTITY_EXCLUDED` lists the keys that do not, e.g. `min_count`, `embeddings`, `batch_size`;
`lowercase` is left out too: the parser always reads the words with their case, and the check is
case-blind). Re-running the annotation overwrites the cache (e.g. after training the parser further);
`meta.json` is written last, so an interrupted annotation leaves no usable cache. Any mismatch (a
different number of examples or of words, other words, heads that are not a tree) is an error naming
the split, the example index and the cache file's line.
"""
from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import os
import shlex
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from jax_structured import errors

FORMAT_VERSION = 1
KINDS = ('sentence', 'pair')
PAIR_SIDES = ('premise', 'hypothesis')
# Data keys that do not change the examples or their words (only ids, batches or vectors).
IDENTITY_EXCLUDED = ('trees', 'data_dir', 'batch_size', 'eval_batch_size', 'bucket_boundaries',
                     'min_count', 'max_vocab_size', 'embeddings', 'embedding_dim', 'word2vec_window',
                     'word2vec_epochs', 'lowercase', 'target_min_count', 'target_max_vocab_size')


class TreesError(errors.UserError, ValueError):
  """The cached trees cannot be attached (missing, stale or not trees); the message says what to do."""


# --- identity of a dataset and of a parser ---------------------------------------------------------

def identity(cfg: Mapping[str, Any]) -> dict[str, Any]:
  """The data keys that decide the examples and their words ({key: value}, `manual_dir` resolved)."""
  out = {k: v for k, v in sorted(cfg.items()) if k not in IDENTITY_EXCLUDED}
  if out.get('manual_dir'):
    out['manual_dir'] = os.path.realpath(os.path.expanduser(out['manual_dir']))
  return {k: list(v) if isinstance(v, tuple) else v for k, v in out.items()}


def fingerprint(cfg: Mapping[str, Any]) -> str:
  """12 hex digits of the SHA-1 of `identity(cfg)` (JSON, sorted keys)."""
  text = json.dumps(identity(cfg), sort_keys=True, default=str)
  return hashlib.sha1(text.encode('utf-8')).hexdigest()[:12]


def parser_key(workdir: str) -> str:
  """'<workdir name>-<10 hex digits of the SHA-1 of its real path>'."""
  path = os.path.realpath(os.path.expanduser(workdir))
  name = ''.join(c if c.isalnum() or c in '-_.' else '_' for c in os.path.basename(path)) or 'parser'
  return f'{name}-{hashlib.sha1(path.encode("utf-8")).hexdigest()[:10]}'


def data_root(cfg: Mapping[str, Any]) -> str:
  """The loader's TFDS data dir (`config.data.data_dir`, else $TFDS_DATA_DIR or ~/tensorflow_datasets)."""
  if cfg.get('data_dir'):
    return os.path.expanduser(cfg['data_dir'])
  return os.environ.get('TFDS_DATA_DIR', os.path.expanduser('~/tensorflow_datasets'))


def cache_dir(cfg: Mapping[str, Any], workdir: str | None = None) -> str:
  """The cache folder of the data of `cfg` (a validated data section) parsed by `workdir`
  (default `cfg['trees']`)."""
  workdir = workdir or cfg.get('trees')
  if not workdir:
    raise ValueError('cache_dir needs a parser workdir (config.data.trees)')
  return os.path.join(data_root(cfg), 'parsed_trees', f'{cfg["name"]}-{fingerprint(cfg)}',
                      parser_key(workdir))


def words_hash(words: Sequence[str] | tuple[Sequence[str], ...]) -> str:
  """12 hex digits of the SHA-1 of the lower-cased words (pairs: both sides, separated)."""
  sides = words if words and not isinstance(words[0], str) else (words,)
  text = '\x1e'.join('\x1f'.join(w.lower() for w in side) for side in sides)
  return hashlib.sha1(text.encode('utf-8')).hexdigest()[:12]


def annotate_command(cfg: Mapping[str, Any], defaults: Mapping[str, Any],
                     workdir: str | None = None) -> str:
  """The `launch.parse` command that writes the cache of `cfg`'s data parsed by `workdir`; the data
  keys at their loader's `defaults` (`loaders.loader_defaults(name)`) are left out of it."""
  keep = set(identity(cfg)) | {'data_dir'}
  data = {k: (list(v) if isinstance(v, tuple) else v) for k, v in sorted(cfg.items())
          if k in keep and k != 'name' and v != defaults.get(k)}
  if data.get('manual_dir'):
    data['manual_dir'] = os.path.realpath(os.path.expanduser(data['manual_dir']))
  workdir = workdir or cfg['trees']
  command = ['python', '-m', 'launch.parse', f'--workdir={workdir}', f'--annotate={cfg["name"]}']
  if data:
    command.append('--data=' + json.dumps(data, sort_keys=True))
  return ' '.join(shlex.quote(c) for c in command)


# --- collecting the loader's words (the annotation reads them) -------------------------------------

_SINK: contextvars.ContextVar[dict | None] = contextvars.ContextVar('parsed_trees_sink', default=None)


@contextlib.contextmanager
def collect_words() -> Iterator[dict[str, Any]]:
  """Within the block, a loader run records its examples' words into the yielded dict:
  {'kind': 'sentence' | 'pair', 'cfg': the validated data section, 'words': {split: [words] or
  [(premise words, hypothesis words)]}} (filled by `record`, called from the loaders' `finish`)."""
  sink: dict[str, Any] = {}
  token = _SINK.set(sink)
  try:
    yield sink
  finally:
    _SINK.reset(token)


def record(name: str, kind: str, cfg: Mapping[str, Any], words: Mapping[str, list] | None) -> None:
  """Called by every loader once its examples are final: fills the `collect_words` sink, if any.

  Raises:
    TreesError when words are being collected (or `config.data.trees` is set) for a loader or a kind
    that has no per-sentence words to parse.
  """
  sink = _SINK.get()
  if sink is None and not cfg.get('trees'):
    return
  if kind not in KINDS or words is None:
    raise TreesError(f'config.data.trees: parsed heads are attached to single sentences and sentence '
                     f'pairs only; the {name} loader gives {kind!r} examples'
                     + (' (set config.data.split_sentences=False)' if kind == 'document' else ''))
  if sink is not None:
    sink.update(kind=kind, cfg=dict(cfg), words=dict(words))


# --- checks ---------------------------------------------------------------------------------------

def tree_problem(heads: Sequence[int]) -> str | None:
  """Why `heads` (0-based, -1 = ROOT) is not a dependency tree over its words, or None if it is.

  A tree: every head is -1 or another word, at least one word hangs from ROOT, and following heads
  from any word reaches ROOT (no cycle). O(n) per word, n^2 at worst (sentences are short).
  """
  n = len(heads)
  if n == 0:
    return 'no words'
  for m, h in enumerate(heads):
    if not -1 <= h < n:
      return f'word {m} has head {h}, outside -1..{n - 1}'
    if h == m:
      return f'word {m} is its own head'
  for m in range(n):
    seen, k = 0, m
    while k != -1:
      k, seen = heads[k], seen + 1
      if seen > n:
        return f'word {m} is on a cycle (it never reaches ROOT)'
  return None


# --- writing and attaching ------------------------------------------------------------------------

def write_cache(directory: str, kind: str, words: Mapping[str, list],
                heads: Mapping[str, list], meta: Mapping[str, Any]) -> dict[str, str]:
  """Writes `<split>.jsonl` for every split, then `meta.json` (each file atomically).

  Args:
    directory: `cache_dir(...)`.
    kind: 'sentence' or 'pair'.
    words: {split: [words] or [(premise words, hypothesis words)]} (as `collect_words` gives them).
    heads: {split: [int heads] or [(premise heads, hypothesis heads)]}, aligned with `words`.
    meta: what `meta.json` records besides the split sizes and the format version.

  Returns:
    {split: path} of the written split files.
  """
  os.makedirs(directory, exist_ok=True)
  meta_path = os.path.join(directory, 'meta.json')
  if os.path.exists(meta_path):
    os.remove(meta_path)  # an interrupted rewrite must not leave an old meta over new splits
  paths = {}
  for split, items in words.items():
    path = os.path.join(directory, f'{split}.jsonl')
    with open(path + '.tmp', 'w', encoding='utf-8') as f:
      for w, h in zip(items, heads[split], strict=True):
        if kind == 'pair':
          row = {'premise_heads': [int(x) for x in h[0]], 'hypothesis_heads': [int(x) for x in h[1]]}
        else:
          row = {'heads': [int(x) for x in h]}
        row['hash'] = words_hash(w)
        f.write(json.dumps(row) + '\n')
    os.replace(path + '.tmp', path)
    paths[split] = path
  full = {**meta, 'kind': kind, 'format': FORMAT_VERSION,
          'splits': {s: len(items) for s, items in words.items()}}
  with open(meta_path + '.tmp', 'w', encoding='utf-8') as f:
    json.dump(full, f, indent=1, sort_keys=True)
  os.replace(meta_path + '.tmp', meta_path)
  return paths


def attach(name: str, kind: str, cfg: Mapping[str, Any], examples: Mapping[str, list],
           words: Mapping[str, list] | None, defaults: Mapping[str, Any]) -> None:
  """Adds the cached heads of `cfg['trees']` to `examples` in place ('heads' int32[n], or
  'premise_heads' / 'hypothesis_heads' for pairs).

  Args:
    name: the loader name (messages).
    kind: 'sentence' or 'pair'.
    cfg: the loader's validated data section, with `trees` set.
    examples: {split: encoded examples}.
    words: {split: the examples' words} (aligned with `examples`).
    defaults: the loader's default data section (`annotate_command`).

  Raises:
    TreesError: no cache (the message holds the `launch.parse` command that writes it), a cache of
      other data, a split or example count that differs, an example whose word count or words differ
      from the parse, heads that are not a tree (each naming the split, example index and file:line).
  """
  if kind not in KINDS:
    raise TreesError(f'config.data.trees: the {name} loader gives {kind!r} examples; heads are attached '
                     f'to {KINDS} examples only')
  directory = cache_dir(cfg)
  meta_path = os.path.join(directory, 'meta.json')
  command = annotate_command(cfg, defaults)
  if not os.path.exists(meta_path):
    raise TreesError(f'config.data.trees={cfg["trees"]!r}: no parsed trees of this {name} data by that '
                     f'parser (no {meta_path}). Write them with:\n  {command}')
  with open(meta_path, encoding='utf-8') as f:
    meta = json.load(f)
  if meta.get('format') != FORMAT_VERSION or meta.get('kind') != kind:
    raise TreesError(f'{meta_path}: format {meta.get("format")} / kind {meta.get("kind")!r}, expected '
                     f'{FORMAT_VERSION} / {kind!r}; re-run:\n  {command}')
  stale = f'The cache is stale (the data or its tokenisation changed): re-run\n  {command}'
  for split, items in examples.items():
    path = os.path.join(directory, f'{split}.jsonl')
    if not os.path.exists(path):
      raise TreesError(f'config.data.trees: no parsed {split} split ({path}). {stale}')
    with open(path, encoding='utf-8') as f:
      lines = f.readlines()
    if len(lines) != len(items):
      raise TreesError(f'{path}: {len(lines)} parsed examples, but the {name} {split} split has '
                       f'{len(items)}. {stale}')
    for index, (example, line) in enumerate(zip(items, lines)):
      where = f'{path}:{index + 1} ({name} {split} example {index})'
      try:
        row = json.loads(line)
      except json.JSONDecodeError as e:
        raise TreesError(f'{where}: not JSON ({e}). {stale}') from None
      sides = [f'{s}_heads' for s in PAIR_SIDES] if kind == 'pair' else ['heads']
      token_keys = list(PAIR_SIDES) if kind == 'pair' else ['tokens']
      for key, token_key in zip(sides, token_keys):
        heads = row.get(key)
        if not isinstance(heads, list) or not all(isinstance(h, int) for h in heads):
          raise TreesError(f'{where}: no integer list {key!r}. {stale}')
        n = len(example[token_key])
        if len(heads) != n:
          raise TreesError(f'{where}: the parse has {len(heads)} heads ({key}), the example has {n} '
                           f'words. {stale}')
        problem = tree_problem(heads)
        if problem:
          raise TreesError(f'{where}: {key} {heads} are not a dependency tree ({problem}); re-parse:\n'
                           f'  {command}')
        example[key] = np.asarray(heads, np.int32)
      if words is not None and row.get('hash') != words_hash(words[split][index]):
        raise TreesError(f'{where}: the parsed words differ from the example\'s '
                         f'{words[split][index]!r}. {stale}')
