"""A trained classifier on new text: labels, probabilities, induced trees and sentence vectors.

`Predictor(workdir, checkpoint='best')` restores a sentence, pair or document classifier
(`training.load_trained`) and runs it on texts::

  predictor = Predictor('/tmp/run')
  predictor.predict(['a fine film', 'dull'])   # [{'label', 'probabilities', 'trees'}, ...]
  predictor.encode(['a fine film', 'dull'])    # float32 [2, D]: the vectors the task layer reads
  predictor.trees(['a fine film'])             # [{'sentence': [{'words', 'heads', 'weights'}]}]

Texts are tokenised as the run's loader did (`raw_text.tokenizer`; pairs are `premise<TAB>hypothesis`
or 2-tuples, documents one text each, their sentences split as training split them), encoded with the
run's vocabulary, batched and bucketed by length with the library's batching (`data.Split.batches`,
the run's `config.data.bucket_boundaries`; one compile per bucket shape) and run by
`induce.make_program`: trees are decoded by Chu-Liu-Edmonds (`trees.mst`) on the model's arc scores,
single- or multi-root as the model was trained (`config.model.single_root`), and the examples whose
matrix-tree marginals are flagged are recomputed by the exact path (never NaN). Heads are CoNLL-U
numbers (0 = ROOT, words from 1). `write_trees` draws them as `launch.induce_trees` does.
"""
from __future__ import annotations

import json
import os
from typing import Any, Iterable, Mapping, Optional, Sequence

import jax
import numpy as np

from jax_structured import data
from jax_structured import errors
from jax_structured import training
from jax_structured import trees as trees_lib
from jax_structured.analysis import induce
from jax_structured.analysis import raw_text

KINDS = ('sentence', 'pair', 'document')
# Sown values returned on request (`details`): name -> the sown names it covers.
DETAILS = {'marginals': ('arc_marginals', 'root_marginals', 'sentence_arc_marginals',
                         'sentence_root_marginals', 'document_arc_marginals', 'document_root_marginals',
                         'premise_arc_marginals', 'premise_root_marginals',
                         'hypothesis_arc_marginals', 'hypothesis_root_marginals'),
           'attention': ('attention_pooling', 'word_attention', 'document_word_attention',
                         'sentence_word_attention'),
           'boundaries': ('boundaries', 'boundary_probs', 'document_boundaries',
                          'document_boundary_probs', 'sentence_boundaries', 'sentence_boundary_probs')}
_OTHER_COMMANDS = {'parse': 'python -m launch.parse (a parser workdir: it parses CoNLL-U or text)',
                   'translation': 'python -m launch.translate (a translation workdir)',
                   'lm': 'launch.evaluate (a language model: perplexity of a split)'}


class WrongWorkdirError(errors.UserError):
  """The workdir holds a model that does not classify text (a parser, a translator, a language model)."""


class Predictor:
  """A trained sentence / pair / document classifier restored from a workdir, run on new text.

  Attributes:
    trained: the restored `training.Trained`.
    kind: 'sentence', 'pair' or 'document'.
    batch_size: rows per batch (`config.train.eval_batch_size`, else `config.data.batch_size`).
    single_root: whether trees are decoded with one ROOT child.
    last: `raw_text.Lines` of the last call (skipped and truncated counts).
  """

  def __init__(self, workdir: str, checkpoint: str | int = 'best', *, batch_size: Optional[int] = None):
    """Restores `checkpoint` ('best', 'latest' or a step) of `workdir`.

    Raises:
      FileNotFoundError naming the workdir when it has no config or checkpoint; `WrongWorkdirError`
      for a parser / translation / language-model workdir (naming the command that reads it).
    """
    self.workdir = workdir
    self.trained = training.load_trained(workdir, checkpoint)
    self.kind = self.trained.kind
    if self.kind not in KINDS:
      other = _OTHER_COMMANDS.get(self.kind, 'the launcher of its task')
      raise WrongWorkdirError(f'{workdir} holds a {self.kind!r} model '
                              f'(config.model.name={self.trained.config.model.name!r}), not a sentence, '
                              f'pair or document classifier: use {other}')
    config = self.trained.config
    self.batch_size = int(batch_size or config.train.eval_batch_size or config.data.batch_size)
    self.single_root = bool(config.model.get('single_root', True))
    self.bucket_boundaries = config.data.get('bucket_boundaries')
    self._variables = jax.device_put(self.trained.variables)
    self._programs: dict[tuple, Any] = {}
    self.last: Optional[raw_text.Lines] = None

  # --- reading ------------------------------------------------------------------------------------

  def read(self, lines: Iterable[str | bytes], *, source: str = '<input>', on_bad_lines: str = 'error',
           encoding: str = 'utf-8', first_line: int = 1) -> raw_text.Lines:
    """`raw_text.read_lines` of input lines with this run's kind, vocabulary and data config."""
    self.last = raw_text.read_lines(lines, self.kind, self.trained.vocab, self.trained.config.data,
                                    source=source, on_bad_lines=on_bad_lines, encoding=encoding,
                                    first_line=first_line)
    return self.last

  def _lines(self, texts) -> raw_text.Lines:
    lines = self.read(raw_text.split_text(texts, self.kind))
    if lines.error is not None:
      raise lines.error
    return lines

  # --- running ------------------------------------------------------------------------------------

  def run(self, examples: Sequence[Mapping[str, Any]], *, features: bool = False, levels: bool = True,
          details: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Model outputs of encoded examples, in their order: per example {'logits' [C], ['levels':
    {prefix: {'heads', 'lengths', 'weights'} of its rows}], ['features' [D]], ['sown': {name: rows}]}."""
    unknown = sorted(set(details) - set(DETAILS))
    if unknown:
      raise ValueError(f'details {unknown}: valid {sorted(DETAILS)}')
    sown = tuple(name for d in sorted(details) for name in DETAILS[d])
    key = (features, levels, sown)
    if key not in self._programs:
      self._programs[key] = induce.make_program(self.trained.model, single_root=self.single_root,
                                                levels=levels, features=features, sown=sown)
    program = self._programs[key]
    out: list[Optional[dict]] = [None] * len(examples)
    split = data.Split('input', self.kind, list(examples), bucket_boundaries=self.bucket_boundaries)
    for batch in split.batches(self.batch_size, shuffle=False) if examples else ():
      index = np.asarray(batch['example_index'])
      result = jax.tree.map(np.asarray, program(self._variables,
                                                {k: v for k, v in batch.items() if k != 'example_index'}))
      rows = len(index)
      for b, example in enumerate(index):
        if example >= 0:
          out[int(example)] = jax.tree.map(lambda x, b=b: _rows_of(x, b, rows), result)
    return out  # type: ignore[return-value]

  def predict(self, texts: Iterable[str] | str, *, details: Sequence[str] = ()) -> list[dict[str, Any]]:
    """Label, class probabilities and induced trees of each text (one dict per text, in order).

    Args:
      texts: strings (pairs: 'premise\\thypothesis' or (premise, hypothesis)); a bad one is a
        `raw_text.BadLine` naming its position.
      details: any of DETAILS: also return the sown 'marginals', 'attention', 'boundaries'.

    Returns:
      [{'label': name, 'probabilities': {name: p}, 'trees': {level: [tree]} (models that induce
      structure; `trees`), 'details': {sown name: nested lists} (when asked)}].
    """
    lines = self._lines(texts)
    return [self.describe(o, w, details=bool(details))
            for o, w in zip(self.run(lines.examples, details=details), lines.words)]

  def describe(self, output: Mapping[str, Any], words: Any, *, details: bool = False) -> dict[str, Any]:
    """The JSON-able prediction of one `run` output and its input's words."""
    logits = np.asarray(output['logits'], np.float64).reshape(-1)
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    names = self.trained.label_names
    record: dict[str, Any] = {'label': names[int(np.argmax(logits))],
                              'probabilities': {n: round(float(p), 6) for n, p in zip(names, probs)}}
    decoded = self.tree_records(output, words)
    if decoded:
      record['trees'] = decoded
    if details:
      record['details'] = {k: _trimmed(k, v, output.get('levels', {})) for k, v in output.get('sown', {}).items()}
    return record

  def tree_records(self, output: Mapping[str, Any], words: Any) -> dict[str, list[dict[str, Any]]]:
    """{level: [{'words', 'heads' (CoNLL-U: 0 = ROOT), 'weights'}]} of one example's decoded levels."""
    out: dict[str, list] = {}
    for prefix, level in output.get('levels', {}).items():
      name = induce.LEVELS[prefix]
      heads = np.asarray(level['heads']).reshape(-1, np.shape(level['heads'])[-1])
      lengths = np.asarray(level['lengths']).reshape(-1)
      weights = np.asarray(level['weights']).reshape(heads.shape)
      texts = _level_words(name, words, len(heads))
      for row in range(len(heads)):
        k = int(lengths[row])
        if k == 0:
          continue
        out.setdefault(name, []).append({
            'words': list(texts[row])[:k] if row < len(texts) else [],
            'heads': [int(h) for h in trees_lib.heads_to_conllu(heads[row, :k])],
            'weights': [round(float(w), 6) for w in weights[row, :k]]})
    return out

  def trees(self, texts: Iterable[str] | str) -> list[dict[str, list[dict[str, Any]]]]:
    """The induced trees of each text: {level: [{'words', 'heads', 'weights'}]} (empty for a model
    that induces none)."""
    lines = self._lines(texts)
    return [self.tree_records(o, w) for o, w in zip(self.run(lines.examples), lines.words)]

  def encode(self, texts: Iterable[str] | str) -> np.ndarray:
    """float32 [N, D]: per text, the vector the task's classifier layer reads (`info()['pooling']`)."""
    lines = self._lines(texts)
    return self.vectors(lines.examples)

  def vectors(self, examples: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """float32 [N, D] features of encoded examples (`encode` without the reading)."""
    outputs = self.run(examples, features=True, levels=False)
    if not outputs:
      return np.zeros((0, 0), np.float32)
    return np.stack([np.asarray(o['features'], np.float32).reshape(-1) for o in outputs])

  def info(self, dimension: Optional[int] = None) -> dict[str, Any]:
    """What a row of `encode` is: model, encoder, checkpoint step, dimension, pooling."""
    model = self.trained.config.model
    encoder = model.get('encoder')
    pooling = {k: model[k] for k in ('pooling', 'document_pooling', 'interaction', 'reading') if k in model}
    return {'workdir': os.path.abspath(self.workdir), 'model': model.name,
            'encoder': encoder.get('name') if hasattr(encoder, 'get') else encoder,
            'kind': self.kind, 'step': int(self.trained.step), 'dimension': dimension,
            'dtype': 'float32', 'pooling': pooling,
            'row': ('the input of the classifier (models.heads.classify: its hidden layer, else its '
                    'logits layer), one row per input line in input order')}


def _rows_of(x: np.ndarray, b: int, batch_size: int) -> np.ndarray:
  """Example b's rows of an example-major array [B * k, ...] (k rows per example)."""
  if np.ndim(x) == 0:
    return x
  per = x.shape[0] // batch_size
  return x.reshape((batch_size, per) + x.shape[1:])[b] if per > 1 else x[b]


def _trimmed(name: str, value: Any, levels: Mapping[str, Any]) -> list:
  """A sown value as nested lists; arc / root marginals cut to their trees' lengths (others padded to
  the batch's bucket)."""
  value = np.asarray(value)
  for suffix, axes in (('arc_marginals', 2), ('root_marginals', 1)):
    level = levels.get(name[:-len(suffix)]) if name.endswith(suffix) else None
    if level is None:
      continue
    lengths = np.asarray(level['lengths']).reshape(-1)
    rows = value.reshape((len(lengths),) + value.shape[value.ndim - axes:])
    cut = [r[:k, :k] if axes == 2 else r[:k] for r, k in zip(rows, lengths.astype(int))]
    return [c.tolist() for c in cut] if np.ndim(level['lengths']) else cut[0].tolist()
  return value.tolist()


def _level_words(level: str, words: Any, rows: int) -> list:
  """The words of each row of a level for one example's input words."""
  if level == 'premise':
    return [words[0]]
  if level == 'hypothesis':
    return [words[1]]
  if level == 'document':
    return [[' '.join(s) for s in words]]
  if rows > 1 or (words and isinstance(words[0], list)):  # a document's sentences
    return list(words)
  return [words]


def write_trees(output_dir: str, predictions: Sequence[Mapping[str, Any]], *, num_pictures: int = 5,
                line_numbers: Optional[Sequence[int]] = None, source: str = 'input') -> list[str]:
  """Writes the trees of `predictions` (`Predictor.predict`) as `launch.induce_trees` does: per level
  `<level>_trees.conllu` and pictures of the first `num_pictures` (SVG + index.html), plus
  statistics.json (Table 5/6 statistics, `induce.tree_statistics`); returns the files written (none
  when no prediction holds a tree: the model induces none)."""
  per_level: dict[str, dict[str, list]] = {}
  for i, p in enumerate(predictions):
    line = line_numbers[i] if line_numbers is not None else i + 1
    for level, rows in p.get('trees', {}).items():
      rec = per_level.setdefault(level, {'words': [], 'heads': [], 'weights': [], 'caption': []})
      for r, tree in enumerate(rows):
        rec['words'].append(tree['words'])
        rec['heads'].append(trees_lib.heads_from_conllu(np.asarray(tree['heads'])))
        rec['weights'].append(np.asarray(tree['weights']))
        rec['caption'].append(f'{source} line {line}' + (f', sentence {r + 1}' if len(rows) > 1 else '')
                              + f': predicted {p["label"]}')
  if not per_level:
    return []
  os.makedirs(output_dir, exist_ok=True)
  files, stats = [], {}
  for level, rec in per_level.items():
    stats[level] = induce._level_statistics(rec['heads'], None)  # pylint: disable=protected-access
    files += induce._write_level(output_dir, level, rec, None, num_pictures,  # pylint: disable=protected-access
                                 title=f'{level}-level trees induced on {source}', stats=stats[level])
  with open(os.path.join(output_dir, 'statistics.json'), 'w', encoding='utf-8') as f:
    json.dump({'source': source, 'levels': stats}, f, indent=2, default=str)
  return files + [os.path.join(output_dir, 'statistics.json')]


# --- files (launch.predict, launch.encode) ----------------------------------------------------------

CHUNK_LINES = 4096  # input lines read, run and written at a time


def _chunks(stream, size: int):
  chunk = []
  for line in stream:
    chunk.append(line)
    if len(chunk) == size:
      yield chunk
      chunk = []
  if chunk:
    yield chunk


def predict_file(predictor: Predictor, stream, write, *, source: str, on_bad_lines: str = 'error',
                 encoding: str = 'utf-8', details: Sequence[str] = (), trees_dir: Optional[str] = None,
                 num_pictures: int = 5) -> dict[str, Any]:
  """Predicts every line of `stream` (bytes lines) and calls `write(json_line)` per input line, in
  input order: `{"line": n, "label", "probabilities", ["trees"], ["details"]}`, or `{"line": n,
  "skipped": reason}` for a line left out (`on_bad_lines='skip'`).

  With on_bad_lines='error', the lines before the first bad one are predicted and written, then its
  `raw_text.BadLine` is raised. Returns {'predicted', 'skipped', 'truncated', 'files'} (files: the
  trees written to `trees_dir`).
  """
  count, skipped, truncated, kept, numbers = 0, {}, {}, [], []
  for start, chunk in _enumerate_chunks(stream):
    lines = predictor.read(chunk, source=source, on_bad_lines=on_bad_lines, encoding=encoding,
                           first_line=start)
    outputs = predictor.run(lines.examples, details=details)
    records = {n: {'line': n, **predictor.describe(o, w, details=bool(details))}
               for n, o, w in zip(lines.line_numbers, outputs, lines.words)}
    records.update({n: {'line': n, 'skipped': reason} for n, reason in lines.bad})
    for n in sorted(records):
      write(json.dumps(records[n], ensure_ascii=False))
    if trees_dir:
      kept += [records[n] for n in lines.line_numbers]
      numbers += lines.line_numbers
    count += len(lines.examples)
    for total, part in ((skipped, lines.skipped), (truncated, lines.truncated)):
      for k, v in part.items():
        total[k] = total.get(k, 0) + v
    if lines.error is not None:
      raise lines.error
  files = (write_trees(trees_dir, kept, num_pictures=num_pictures, line_numbers=numbers, source=source)
           if trees_dir else [])
  return {'predicted': count, 'skipped': skipped, 'truncated': truncated, 'files': files}


def _enumerate_chunks(stream):
  start = 1
  for chunk in _chunks(stream, CHUNK_LINES):
    yield start, chunk
    start += len(chunk)


def encode_file(predictor: Predictor, stream, *, source: str, on_bad_lines: str = 'error',
                encoding: str = 'utf-8') -> tuple[np.ndarray, dict[str, Any]]:
  """(float32 [N, D] vectors of the good lines of `stream` in input order, their description: `info`
  plus 'lines' (the input line of each row), 'skipped', 'truncated', 'source').

  Raises:
    `raw_text.BadLine` (on_bad_lines='error') at the first bad line; its `vectors` and `description`
    attributes hold the rows of the lines before it.
  """
  parts, numbers, skipped, truncated = [], [], {}, {}
  error = None
  for start, chunk in _enumerate_chunks(stream):
    lines = predictor.read(chunk, source=source, on_bad_lines=on_bad_lines, encoding=encoding,
                           first_line=start)
    if lines.examples:
      parts.append(predictor.vectors(lines.examples))
      numbers += lines.line_numbers
    for total, part in ((skipped, lines.skipped), (truncated, lines.truncated)):
      for k, v in part.items():
        total[k] = total.get(k, 0) + v
    if lines.error is not None:
      error = lines.error
      break
  vectors = np.concatenate(parts) if parts else np.zeros((0, 0), np.float32)
  description = {**predictor.info(int(vectors.shape[1]) if parts else None), 'source': source,
                 'rows': int(vectors.shape[0]), 'lines': numbers, 'skipped': skipped,
                 'truncated': truncated}
  if error is not None:
    error.vectors, error.description = vectors, description
    raise error
  return vectors, description
