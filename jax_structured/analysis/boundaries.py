"""Phrase boundaries learned by a trained MHS-RNN (or HM-RNN): statistics and pictures (Luo & Zhu
sec. IV-D, Figure 5 and Table II).

`show_boundaries(workdir, split)` restores a trained 'luo_zhu.document_classifier' workdir
(`training.load_trained`), runs it over a split and collects what the encoder sows per document:
the dynamic boundaries z_t ('document_boundaries'; HM-RNN: one layer of [N, L]), z~_t
('document_boundary_probs'), the static boundaries p_t ('document_static_boundaries', else the sentence
ends), the word attention and the flat tokens. From these:

  * phrase lengths (`phrase_lengths`, `length_statistics`): as the paper defines them, the number of
    words between two consecutive boundaries, the first boundary word excluded and the second
    included; the boundaries are those of the phrase layer, b_t = z_t OR p_t (its update rule, eq. 5),
    the document's last word closing the last phrase; also for z_t alone ('dynamic_phrases'). The
    paper reports mean 4.72, min 1, max 15 (Yahoo Answers).
  * the share of boundaries after each word class (`boundary_shares`): conjunctions (Table II's
    words), commas, other punctuation, unknown words and other words: how many tokens of the class
    there are, how often z_t = 1 right after them (Table II's percentage), and which part of all
    dynamic boundaries falls after them; plus Table II itself, one row per conjunction. Where the data
    maps punctuation to 'p' (`config.data.punctuation='p'`) commas cannot be told apart from other
    punctuation: the class is then 'punctuation (p)'. At a static boundary the model's update does not
    depend on z_t (scenarios 1 and 6); the table gives p_t's count beside z_t's.
  * HTML pictures of the first documents, boundaries marked like Figure 5 (`viz.boundaries`).

Everything is written to `<output_dir>` (default `<workdir>/boundaries_<split>`): `boundaries.json`
(statistics), `documents.jsonl` (every document's words, z, z~, p) and `index.html`.
"""
from __future__ import annotations

import collections
import json
import os
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jax_structured import errors
from jax_structured import training
from jax_structured.data import text as text_lib
from jax_structured.nn import intermediates as intermediates_lib
from jax_structured.viz import boundaries as viz_boundaries

__all__ = ['BoundaryError', 'CONJUNCTIONS', 'PAPER_PHRASE_LENGTHS', 'phrase_lengths', 'length_statistics',
           'word_class', 'boundary_shares', 'collect_documents', 'document_statistics', 'show_boundaries']

# Table II of Luo & Zhu (its 'while' row appears twice there): the words counted as conjunctions.
CONJUNCTIONS = ('for', 'and', 'nor', 'but', 'or', 'yet', 'so', 'while', 'after', 'once', 'since', 'till',
                'until', 'when', 'that', 'what', 'which', 'if', 'unless', 'because')
# Sec. IV-D: phrase lengths of the trained model on Yahoo Answers.
PAPER_PHRASE_LENGTHS = {'mean': 4.72, 'min': 1, 'max': 15}
ENCODERS = ('mhs_rnn', 'hm_rnn')  # the encoders with a boundary detector
CLASSES = ('conjunction', 'comma', 'punctuation', 'punctuation (p)', 'unknown', 'other word')
_SOWN = ('document_tokens', 'document_boundaries', 'document_boundary_probs', 'document_static_boundaries',
         'document_lengths', 'document_word_attention', 'document_sentence_ends')


class BoundaryError(errors.UserError, ValueError):
  """A workdir or option `show_boundaries` cannot analyse (the launcher prints it, exit status 2)."""


def phrase_lengths(boundaries: np.ndarray, lengths: np.ndarray) -> np.ndarray:
  """Lengths of the phrases of flat documents (Luo & Zhu sec. IV-D's definition).

  Args:
    boundaries: [D, N] 0/1, 1 after a phrase's last word (values > 0.5 count); read at real words.
    lengths: int [D] real words (0: an empty document, no phrase).

  Returns:
    int64 [P]: every phrase's number of words, documents in order; the last real word of a document
    always closes a phrase, so the lengths of a document sum to its length.
  """
  boundaries = np.asarray(boundaries) > 0.5
  lengths = np.asarray(lengths, np.int64).reshape(-1)
  if boundaries.ndim != 2 or boundaries.shape[0] != lengths.shape[0]:
    raise ValueError(f'phrase_lengths: boundaries {boundaries.shape} and lengths {lengths.shape} do not '
                     'match ([D, N] and [D])')
  if lengths.size and (lengths.min() < 0 or lengths.max() > boundaries.shape[1]):
    raise ValueError(f'phrase_lengths: lengths must be in [0, {boundaries.shape[1]}], got '
                     f'{lengths.min()}..{lengths.max()}')
  out = []
  for row, n in zip(boundaries, lengths):
    if n == 0:
      continue
    ends = np.flatnonzero(row[:n])
    if not ends.size or ends[-1] != n - 1:
      ends = np.append(ends, n - 1)
    out.append(np.diff(np.concatenate([[-1], ends])))
  return np.concatenate(out).astype(np.int64) if out else np.zeros((0,), np.int64)


def length_statistics(lengths: np.ndarray) -> dict[str, Any]:
  """{'count', 'mean', 'min', 'max', 'histogram': {length: count} in increasing length} (mean/min/max
  None when there is no phrase)."""
  lengths = np.asarray(lengths, np.int64).reshape(-1)
  if not lengths.size:
    return {'count': 0, 'mean': None, 'min': None, 'max': None, 'histogram': {}}
  values, counts = np.unique(lengths, return_counts=True)
  return {'count': int(lengths.size), 'mean': float(lengths.mean()), 'min': int(lengths.min()),
          'max': int(lengths.max()), 'histogram': {int(v): int(c) for v, c in zip(values, counts)}}


def word_class(token: str, *, unknown: str = '<unk>', punctuation_token: Optional[str] = None) -> str:
  """The class of a token for `boundary_shares`: one of CLASSES.

  Args:
    token: the token as in the vocabulary.
    unknown: the vocabulary's unknown-word token.
    punctuation_token: the token every punctuation mark was mapped to ('p' with
      `config.data.punctuation='p'`), or None.
  """
  if punctuation_token is not None and token == punctuation_token:
    return 'punctuation (p)'
  if token.lower() in CONJUNCTIONS:
    return 'conjunction'
  if token == ',':
    return 'comma'
  if text_lib.is_punctuation(token):
    return 'punctuation'
  if token == unknown:
    return 'unknown'
  return 'other word'


def boundary_shares(documents: Sequence[Sequence[str]], dynamic: Sequence[np.ndarray],
                    static: Sequence[np.ndarray], *, classify: Callable[[str], str] = word_class,
                    ) -> dict[str, Any]:
  """How often a dynamic boundary follows each word class and each conjunction (Table II).

  Args:
    documents: D lists of words.
    dynamic: D arrays [>= n_d] of z_t (> 0.5 counts).
    static: D arrays [>= n_d] of p_t.
    classify: token -> class (`word_class`).

  Returns:
    `{'classes': {class: {'tokens', 'dynamic', 'dynamic_pct', 'share_pct', 'static'}}, 'conjunctions':
    {word: {'tokens', 'dynamic', 'dynamic_pct'}}, 'tokens', 'dynamic'}`: per class present, its tokens,
    the number with z_t = 1 after them ('dynamic'), that as % of the class's tokens ('dynamic_pct'), as %
    of all dynamic boundaries ('share_pct') and the number with p_t = 1 ('static'); the same per Table
    II word present ('conjunctions'); and the totals.
  """
  tokens = collections.Counter()
  fired = collections.Counter()
  fixed = collections.Counter()
  conj_tokens = collections.Counter()
  conj_fired = collections.Counter()
  for words, z, p in zip(documents, dynamic, static):
    z = np.asarray(z)[:len(words)] > 0.5
    p = np.asarray(p)[:len(words)] > 0.5
    for word, zt, pt in zip(words, z, p):
      cls = classify(word)
      tokens[cls] += 1
      fired[cls] += int(zt)
      fixed[cls] += int(pt)
      if cls == 'conjunction':
        conj_tokens[word.lower()] += 1
        conj_fired[word.lower()] += int(zt)
  total_fired = sum(fired.values())
  pct = lambda a, b: 100.0 * a / b if b else 0.0
  classes = {c: {'tokens': tokens[c], 'dynamic': fired[c], 'dynamic_pct': pct(fired[c], tokens[c]),
                 'share_pct': pct(fired[c], total_fired), 'static': fixed[c]}
             for c in CLASSES if tokens[c]}
  conjunctions = {w: {'tokens': conj_tokens[w], 'dynamic': conj_fired[w],
                      'dynamic_pct': pct(conj_fired[w], conj_tokens[w])}
                  for w in CONJUNCTIONS if conj_tokens[w]}
  return {'classes': classes, 'conjunctions': conjunctions, 'tokens': sum(tokens.values()),
          'dynamic': total_fired}


def _collector(model):
  """A jitted `fn(variables, batch) -> (logits, {sown name: value})` of the names in _SOWN."""
  @jax.jit
  def run(variables, batch):
    logits, state = model.apply(variables, batch, train=False, mutable=['intermediates'])
    found = intermediates_lib.find_intermediates(state.get('intermediates', {}))
    found = {k: (v[-1] if isinstance(v, tuple) else v) for k, v in found.items() if k in _SOWN}
    return logits, found
  return run


def collect_documents(model, variables, data_split, vocab, label_names: Sequence[str], *, batch_size: int,
                      layer: int = 0, where: str = 'the model') -> list[dict[str, Any]]:
  """Runs a 'luo_zhu.document_classifier' over a split and returns one record per real document.

  Args:
    model, variables: the Linen module and its variables.
    data_split: a `data.Split` of kind 'document' (its batches carry 'example_index').
    vocab: the vocabulary (`decode`); label_names: the label names.
    batch_size: rows per batch (one compiled shape per bucket).
    layer: HM-RNN only: which layer of its boundaries [N, L].
    where: names the workdir in errors.

  Returns:
    In split order, {'example', 'words' (n strings), 'z' (n 0/1), 'z_prob' (n, or None), 'p' (n 0/1:
    the static boundaries the encoder used, else the sentence ends), 'attention' (n or None), 'gold',
    'predicted'}; documents of length 0 are skipped.

  Raises:
    BoundaryError: the model sows no boundaries, or `layer` is not one of its layers.
  """
  num_layers = getattr(getattr(model, 'encoder', None), 'num_layers', None)
  if num_layers is not None and not 0 <= layer < num_layers:
    raise BoundaryError(f'layer={layer}: the HM-RNN of {where} has {num_layers} boundary layers '
                        f'(0..{num_layers - 1})')
  run = _collector(model)
  variables = jax.device_put(variables)
  docs: dict[int, dict[str, Any]] = {}
  for batch in data_split.batches(batch_size, shuffle=False):
    model_batch = {k: v for k, v in batch.items() if k != 'example_index'}
    logits, found = run(variables, model_batch)
    if 'document_boundaries' not in found or 'document_tokens' not in found:
      raise BoundaryError(f'{where} sows no learned boundaries: show_boundaries reads '
                          "'luo_zhu.document_classifier' models with encoder 'mhs_rnn' or 'hm_rnn'")
    found = jax.tree.map(np.asarray, found)
    z, prob = found['document_boundaries'], found.get('document_boundary_probs')
    if z.ndim == 3:  # HM-RNN: [B, N, L]
      if not 0 <= layer < z.shape[-1]:
        raise BoundaryError(f'layer={layer}: the HM-RNN of {where} has {z.shape[-1]} boundary layers '
                            f'(0..{z.shape[-1] - 1})')
      z, prob = z[..., layer], (prob[..., layer] if prob is not None else None)
    static = found.get('document_static_boundaries', found.get('document_sentence_ends'))
    tokens = found['document_tokens']
    lengths = found.get('document_lengths')
    if lengths is None:
      lengths = np.sum(tokens != 0, axis=-1)
    attention = found.get('document_word_attention')
    predictions = np.asarray(jnp.argmax(logits, -1))
    for row, example in enumerate(np.asarray(batch['example_index'])):
      n = int(lengths[row])
      if example < 0 or n == 0:
        continue
      label = int(batch['label'][row]) if 'label' in batch else None
      docs[int(example)] = {
          'example': int(example), 'words': vocab.decode(tokens[row, :n]),
          'z': z[row, :n].astype(np.int32).tolist(),
          'z_prob': None if prob is None else np.round(prob[row, :n].astype(np.float64), 4).tolist(),
          'p': (np.zeros(n, np.int32) if static is None else static[row, :n].astype(np.int32)).tolist(),
          'attention': None if attention is None else attention[row, :n].astype(np.float64).tolist(),
          'gold': None if label is None else label_names[label],
          'predicted': label_names[int(predictions[row])]}
  return [docs[i] for i in sorted(docs)]


def document_statistics(records: Sequence[Mapping[str, Any]], *,
                        punctuation_token: Optional[str] = None) -> dict[str, Any]:
  """{'documents', 'phrases' (b = z OR p), 'dynamic_phrases' (z only), 'shares'} of `collect_documents`
  records (`length_statistics`, `boundary_shares`)."""
  lengths = np.asarray([len(r['words']) for r in records], np.int64)
  width = max(lengths.tolist(), default=1)

  def padded(rows):
    out = np.zeros((len(rows), width), np.int32)
    for i, r in enumerate(rows):
      out[i, :len(r)] = r
    return out

  ends = [np.maximum(np.asarray(r['z']), np.asarray(r['p'])) for r in records]
  return {
      'documents': len(records),
      'phrases': length_statistics(phrase_lengths(padded(ends), lengths)),
      'dynamic_phrases': length_statistics(phrase_lengths(padded([r['z'] for r in records]), lengths)),
      'shares': boundary_shares([r['words'] for r in records], [np.asarray(r['z']) for r in records],
                                [np.asarray(r['p']) for r in records],
                                classify=lambda w: word_class(w, punctuation_token=punctuation_token))}


def show_boundaries(workdir: str, split: str = 'test', *, num_documents: int = 5,
                    output_dir: Optional[str] = None, checkpoint: str | int = 'best',
                    layer: int = 0) -> dict[str, Any]:
  """Boundary statistics and pictures of a trained MHS-RNN / HM-RNN on one split (module docstring).

  Args:
    workdir: a training workdir of 'luo_zhu.document_classifier' with encoder 'mhs_rnn' or 'hm_rnn'.
    split: 'train', 'validation' (alias 'dev') or 'test'.
    num_documents: how many documents (the first of the split) to draw.
    output_dir: where to write (default `<workdir>/boundaries_<split>`).
    checkpoint: 'best', 'latest' or a step.
    layer: HM-RNN only: which layer's boundaries (0 = the lowest).

  Returns:
    {'split', 'step', 'output_dir', 'encoder', 'files', 'documents', 'phrases' and 'dynamic_phrases'
    (`length_statistics`), 'paper_phrases', 'shares' (`boundary_shares`)}, also in boundaries.json.

  Raises:
    BoundaryError (a ValueError and `errors.UserError`): the model sows no learned boundaries (HAN,
    other families), a bad `layer` or `num_documents`; KeyError: unknown split.
  """
  if num_documents < 0:
    raise BoundaryError(f'num_documents must be >= 0, got {num_documents}')
  trained = training.load_trained(workdir, checkpoint=checkpoint)
  config = trained.config
  encoder = config.model.get('encoder')
  encoder_name = encoder.get('name') if encoder is not None else None
  if config.model.get('name') != 'luo_zhu.document_classifier' or encoder_name not in ENCODERS:
    raise BoundaryError(f'{workdir} holds config.model.name={config.model.get("name")!r} with encoder '
                        f'{encoder_name!r}: show_boundaries reads \'luo_zhu.document_classifier\' workdirs '
                        f'with encoder {" or ".join(map(repr, ENCODERS))} (HAN has no boundary detector)')
  data_split = training.load_split(config, trained.vocab, split)
  batch_size = int(config.train.eval_batch_size or config.data.batch_size)
  records = collect_documents(trained.model, trained.variables, data_split, trained.vocab,
                              trained.label_names, batch_size=batch_size, layer=layer,
                              where=f'the model of {workdir}')
  mapped = 'p' if config.data.get('punctuation', '') == 'p' else None
  stats = document_statistics(records, punctuation_token=mapped)
  phrases, shares = stats['phrases'], stats['shares']

  output_dir = output_dir or os.path.join(workdir, f'boundaries_{split}')
  os.makedirs(output_dir, exist_ok=True)
  result: dict[str, Any] = {
      'split': split, 'step': int(trained.step), 'output_dir': output_dir, 'encoder': encoder_name,
      **stats, 'paper_phrases': PAPER_PHRASE_LENGTHS, 'files': []}
  jsonl = os.path.join(output_dir, 'documents.jsonl')
  with open(jsonl, 'w', encoding='utf-8') as f:
    for r in records:
      f.write(json.dumps(r) + '\n')
  pictures = [viz_boundaries.document_html(
      r['words'], r['z'], r['p'], probabilities=r['z_prob'], attention=r['attention'],
      caption=f'{split} example {r["example"]}' + (f': gold {r["gold"]}' if r['gold'] is not None else '')
      + f', predicted {r["predicted"]}') for r in records[:num_documents]]
  sections = [
      ('Phrase lengths (b_t = z_t OR p_t)', _length_line(phrases) + viz_boundaries.histogram_html(
          phrases['histogram'])),
      ('Phrase lengths between dynamic boundaries only (z_t)', _length_line(stats['dynamic_phrases'])),
      ('Dynamic boundaries after each word class', viz_boundaries.table_html(
          ['class', 'tokens', 'z = 1', '% of class', '% of all z = 1', 'p = 1'],
          [[c, v['tokens'], v['dynamic'], v['dynamic_pct'], v['share_pct'], v['static']]
           for c, v in shares['classes'].items()])),
      ('Conjunctions (Luo & Zhu Table II)', viz_boundaries.table_html(
          ['word', '# in split', '# detected', 'percentage'],
          [[w, v['tokens'], v['dynamic'], v['dynamic_pct']] for w, v in shares['conjunctions'].items()])),
  ]
  index = os.path.join(output_dir, 'index.html')
  with open(index, 'w', encoding='utf-8') as f:
    f.write(viz_boundaries.boundary_page(
        f'Learned boundaries: {workdir} ({split}, step {trained.step})', pictures, sections,
        stats={'model': config.model.name, 'encoder': encoder_name, 'checkpoint step': trained.step,
               'documents': len(records), 'tokens': shares['tokens'],
               'dynamic boundaries': shares['dynamic']}))
  path = os.path.join(output_dir, 'boundaries.json')
  result['files'] = [jsonl, index, path]
  with open(path, 'w', encoding='utf-8') as f:
    json.dump(result, f, indent=1)
  return result


def _length_line(stats: Mapping[str, Any]) -> str:
  if not stats['count']:
    return '<p>no phrases</p>'
  paper = PAPER_PHRASE_LENGTHS
  return (f'<p>{stats["count"]} phrases: mean {stats["mean"]:.2f}, min {stats["min"]}, max {stats["max"]} '
          f'(Luo &amp; Zhu, Yahoo Answers: mean {paper["mean"]}, min {paper["min"]}, max {paper["max"]})</p>')
