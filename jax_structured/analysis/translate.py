"""Translate text with a trained 'translation.seq2seq' workdir (beam search on device), optionally scored
with sacrebleu against a reference file.

  translate_file(workdir, input_path, output_path=None, beam_size=10) -> {'sentences', 'output', ...}
  translate_lines(trained, lines, beam_size=10) -> list of translations

Input: one tokenised sentence a line (tokens split on whitespace; lower-cased when the run's
`config.data.lowercase`), words outside the training vocabulary become <unk>. Output: one line per
input line, the hypothesis' target tokens joined by single spaces (the data is tokenised text, so this
is the detokenised form BLEU is computed on); an empty input line gives an empty output line.
Sentences are batched by padded length (`data.batching.bucket_length`), so each shape compiles once.
"""
from __future__ import annotations

import collections
import os
from typing import Any, Optional, Sequence

import jax
import numpy as np

from jax_structured import errors
from jax_structured import training
from jax_structured import trees
from jax_structured.data import batching


def _is_translation(trained) -> bool:
  return hasattr(trained.model, 'translate') and trained.config.model.get('name') == 'translation.seq2seq'


def translate_lines(trained: Any, lines: Sequence[str], *, beam_size: int = 10,
                    batch_size: int = 32) -> list[str]:
  """Translations of `lines` (tokenised sentences) by a restored `training.Trained` model.

  Args:
    trained: `training.load_trained(workdir)` of a 'translation.seq2seq' run.
    lines: source sentences; blank ones translate to ''.
    beam_size: beam width (1 = greedy).
    batch_size: sentences per device call.

  Returns:
    One string per line: target tokens joined by spaces (no <s> / </s>).
  """
  if beam_size < 1:
    raise errors.UserError(f'--beam_size={beam_size} must be >= 1')
  lowercase = bool(trained.config.data.get('lowercase', False))
  target_tokens = list(trained.label_names)
  encoded = {}
  for i, line in enumerate(lines):
    words = (line.lower() if lowercase else line).split()
    if words:
      encoded[i] = trained.vocab.encode(words)
  groups = collections.defaultdict(list)
  for i, ids in encoded.items():
    groups[batching.bucket_length(len(ids), batching.DEFAULT_BOUNDARIES)].append(i)

  def run(variables, source, lengths):
    # A latent-tree encoder's flagged sentences by the exact path in this program: a translation
    # program is not run per training step (trees.exact_mode).
    with trees.exact_mode('in_program'):
      return trained.model.apply(variables, {'source': source, 'source_lengths': lengths}, beam_size,
                                 method='translate')

  run = jax.jit(run)
  out = [''] * len(lines)
  for width, indices in sorted(groups.items()):
    for start in range(0, len(indices), batch_size):
      chunk = indices[start:start + batch_size]
      rows = chunk + [chunk[0]] * (batch_size - len(chunk))  # a full batch: one shape per width
      source = np.zeros((batch_size, width), np.int32)
      for r, i in enumerate(rows):
        source[r, :len(encoded[i])] = encoded[i]
      lengths = np.asarray([len(encoded[i]) for i in rows], np.int32)
      result = jax.device_get(run(trained.variables, source, lengths))
      for r, i in enumerate(chunk):
        ids = result['hypotheses'][r, :int(result['hypothesis_lengths'][r])]
        out[i] = ' '.join(target_tokens[int(t)] for t in ids)
  return out


def _read_lines(path):
  """The lines of a UTF-8 text file, without a last empty line after the final newline."""
  with open(path, encoding='utf-8') as f:
    lines = f.read().split('\n')
  if lines and lines[-1] == '':
    lines.pop()
  return lines


def translate_file(workdir: str, input_path: str, output_path: Optional[str] = None, *,
                   beam_size: int = 10, batch_size: int = 32, checkpoint: str | int = 'best',
                   reference_path: Optional[str] = None) -> dict[str, Any]:
  """Translates `input_path` with the `checkpoint` of `workdir`; writes `output_path` (when given).

  Returns:
    {'sentences': number of lines, 'output': output_path, 'translations': the lines, 'step'} and,
    with `reference_path` (aligned target lines), 'bleu': sacrebleu's corpus BLEU on the tokenised
    text (tokenize='none').

  Raises:
    FileNotFoundError (missing workdir / input / reference); training.CheckpointError (damaged
    checkpoint); errors.UserError (empty input, a workdir that is not a translation model, a reference
    with another number of lines).
  """
  if not os.path.isdir(workdir):
    raise FileNotFoundError(f'workdir {workdir} does not exist (give --workdir a trained translation '
                            'run, e.g. from configs/yu/iwslt15_en_vi.py)')
  if not os.path.isfile(input_path):
    raise FileNotFoundError(f'input file {input_path} not found')
  lines = _read_lines(input_path)
  if not any(line.strip() for line in lines):
    raise errors.UserError(f'{input_path}: the input file is empty (it should hold one tokenised '
                           'sentence a line)')
  references = None
  if reference_path:
    if not os.path.isfile(reference_path):
      raise FileNotFoundError(f'reference file {reference_path} not found')
    references = _read_lines(reference_path)
    if len(references) != len(lines):
      raise errors.UserError(f'{reference_path}:{min(len(references), len(lines)) + 1}: the reference '
                             f'has {len(references)} lines, the input {input_path} {len(lines)}; they '
                             'must be aligned line by line')
  trained = training.load_trained(workdir, checkpoint)
  if not _is_translation(trained):
    raise errors.UserError(f'{workdir} holds a {trained.config.model.get("name")!r} model, not a '
                           "'translation.seq2seq' one: launch.translate needs a translation run")
  translations = translate_lines(trained, lines, beam_size=beam_size, batch_size=batch_size)
  if output_path:
    os.makedirs(os.path.dirname(os.path.abspath(output_path)), exist_ok=True)
    with open(output_path, 'w', encoding='utf-8') as f:
      f.write(''.join(t + '\n' for t in translations))
  result = {'sentences': len(lines), 'output': output_path, 'translations': translations,
            'step': trained.step, 'beam_size': beam_size}
  if references is not None:
    import sacrebleu  # pylint: disable=g-import-not-at-top
    lowercase = bool(trained.config.data.get('lowercase', False))
    refs = [(r.lower() if lowercase else r) for r in references]
    result['bleu'] = float(sacrebleu.corpus_bleu(translations, [refs], tokenize='none').score)
  return result
