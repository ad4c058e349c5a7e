"""Trees induced by a trained structured-attention model: decoding, CoNLL-U, Table 5/6 statistics,
pictures (Liu & Lapata 2018, Section 4.3).

`induce_trees(workdir, split)` restores the trained model (`training.load_trained`), runs it over the
split, collects the sown `<prefix>arc_scores`, `<prefix>root_scores`, `<prefix>lengths` of every
attention level (`''` or `'sentence_'` for words, `'document_'` for sentences, `'premise_'` / `'hypothesis_'`
for pairs), decodes the maximum spanning trees with `trees.mst` (Chu-Liu-Edmonds, on device, batched,
inside the same jitted function as the model), writes them as CoNLL-U, computes the statistics of
Tables 5 and 6 (projective %, mean height, node-depth distribution; same-edge % and UAS against
reference trees: gold `heads` in the data, or a CoNLL-U file of reference parses) and draws pictures
(SVG files and one HTML index, drawn by `viz.induce.render_pictures` from plain arrays). The pure pieces
(`decode_levels`, `tree_statistics`, `write_conllu`, `read_conllu`) work on hand-made arrays too.

This module sits above `training` (it restores trained workdirs); `training.train_and_evaluate` runs
`induce_trees` after training when its caller passes it (`induce_trees=analysis.induce_trees`, as
`launch.train` does) and `config.train.render_trees > 0`.
"""
from __future__ import annotations

import functools
import json
import os
from typing import Any, Mapping, Optional, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from jax_structured import training
from jax_structured import trees
from jax_structured.nn import exactness
from jax_structured.nn import intermediates as intermediates_lib
from jax_structured.viz import induce as viz_induce

# Sow prefixes of the attention levels -> the level's name in the statistics and file names.
LEVELS = {'': 'sentence', 'sentence_': 'sentence', 'document_': 'document', 'premise_': 'premise',
          'hypothesis_': 'hypothesis'}
MAX_DEPTH = 12  # depth histogram bins (deeper nodes are counted in the last bin)


# --- decoding ---------------------------------------------------------------------------------------

def decode_levels(found: Mapping[str, Any], *, single_root: bool = True) -> dict[str, dict[str, Any]]:
  """MST trees and the weights of their arcs from sown attention scores (jit-able, on device).

  Args:
    found: {sown name: value} (see `nn.intermediates.find_intermediates`) with, per level prefix p,
      `p + 'arc_scores'` [..., n, n], `p + 'root_scores'` [..., n], `p + 'lengths'` [...] and
      optionally `p + 'arc_marginals'` / `p + 'root_marginals'`.
    single_root: decode with exactly one ROOT child (the models' formulation).

  Returns:
    {prefix: {'heads' int32 [..., n] (-1 = ROOT and padding), 'lengths' int32 [...],
    'weights' float [..., n] (marginal of each chosen arc; 0 on padding; the softmax attention weight
    for 'simple' attention)}} for every level found.
  """
  out = {}
  for prefix in LEVELS:
    arc_scores = found.get(prefix + 'arc_scores')
    if arc_scores is None or prefix + 'root_scores' not in found or prefix + 'lengths' not in found:
      continue
    root_scores = found[prefix + 'root_scores']
    lengths = jnp.asarray(found[prefix + 'lengths'], jnp.int32)
    heads = trees.mst(arc_scores, root_scores, lengths, single_root=single_root)
    arc_marginals = found.get(prefix + 'arc_marginals')
    root_marginals = found.get(prefix + 'root_marginals')
    if arc_marginals is None or root_marginals is None:
      arc_marginals, root_marginals = trees.marginals(arc_scores, root_scores, lengths,
                                                      single_root=single_root)
    chosen = jnp.take_along_axis(arc_marginals, jnp.maximum(heads, 0)[..., None, :], axis=-2)[..., 0, :]
    n = heads.shape[-1]
    real = jnp.arange(n) < lengths[..., None]
    weights = jnp.where(heads < 0, root_marginals, chosen) * real
    out[prefix] = {'heads': heads, 'lengths': lengths, 'weights': weights}
  return out


def make_decoder(model, *, single_root: bool = True):
  """A `fn(variables, batch) -> (logits, {prefix: decoded level})` for `model` (`make_program`)."""
  program = make_program(model, single_root=single_root)

  def decode(variables, batch):
    out = program(variables, batch)
    return out['logits'], out['levels']
  return decode


# The layers a classifier head's input reaches first (`models.heads.classify`: 'hidden' when the head
# has an MLP layer, else 'logits'; dropout is the identity at inference).
CLASSIFIER_LAYERS = ('hidden', 'logits')


def make_program(model, *, single_root: bool = True, levels: bool = True, features: bool = False,
                 sown: Sequence[str] = ()):
  """A `fn(variables, batch) -> {'logits', ['levels'], ['features'], ['sown']}` for `model`: one jitted
  program with the trees functions' LU path only over the batch, and for the examples with a flagged
  tree (`nn.exactness`) a second one under `trees.exact_mode('in_program')` over those only (compiled
  the first time one is flagged; `training.parallel.with_exact_rows`): never a NaN tree.

  Args:
    model: a Linen module called as `model.apply(variables, batch, train=False)`.
    single_root: decode trees with exactly one ROOT child.
    levels: decode the trees ('levels'; False: no Chu-Liu-Edmonds nor marginals in the program).
    features: also return 'features' [B, D], the input of the classifier (the first call of a Dense
      layer named in CLASSIFIER_LAYERS directly under the head: the vector its task layer reads).
    sown: names of sown intermediates to return under 'sown' (those present; each example-major).

  Returns:
    The function; 'levels' as `decode_levels` gives them.
  """
  def decode(variables, batch, exact):
    mutable = ['intermediates'] if exact else ['intermediates', exactness.FLAGGED]
    seen = []

    def interceptor(next_fun, args, kwargs, context):
      module = context.module
      if (features and not seen and context.method_name == '__call__' and isinstance(module, nn.Dense)
          and tuple(module.scope.path) in ((name,) for name in CLASSIFIER_LAYERS)):
        seen.append(args[0])
      return next_fun(*args, **kwargs)

    with trees.exact_mode('in_program' if exact else 'flag'), nn.intercept_methods(interceptor):
      logits, state = model.apply(variables, batch, train=False, mutable=mutable)
      found = intermediates_lib.find_intermediates(state.get('intermediates', {}))
      found = {k: (v[-1] if isinstance(v, tuple) else v) for k, v in found.items()}
      out = {'logits': logits}
      if levels:
        out['levels'] = decode_levels(found, single_root=single_root)
    if features:
      if not seen:
        raise ValueError(f'{type(model).__name__} has no classifier layer {CLASSIFIER_LAYERS}: no '
                         'features to return')
      out['features'] = seen[0]
    if sown:
      out['sown'] = {k: found[k] for k in sown if k in found}
    if exact:
      return out
    flagged = training.steps.flagged_examples(state.get(exactness.FLAGGED, {}), batch)
    if flagged is None:  # no trees computed: nothing to redo
      flagged = jnp.zeros(training.tasks.example_weights(batch).shape, bool)
    return out, flagged

  hot = jax.jit(functools.partial(decode, exact=False))
  exact = jax.jit(functools.partial(decode, exact=True))
  return lambda variables, batch: training.parallel.with_exact_rows(hot, exact, variables, batch)


# --- statistics (Tables 5 and 6) --------------------------------------------------------------------

@jax.jit
def _statistics_arrays(heads, lengths, reference_heads):
  """The per-tree arrays behind `tree_statistics`, in one compiled function (`trees` utilities)."""
  out = {'is_tree': trees.is_tree(heads, lengths), 'depths': trees.tree_depths(heads, lengths),
         'projective': trees.is_projective(heads, lengths),
         'height': trees.tree_height(heads, lengths)}
  if reference_heads is not None:
    out['uas'] = trees.attachment_score(heads, reference_heads, lengths)
    out['same_edges'] = trees.same_edge_rate(heads, reference_heads, lengths, include_root=False)
  return out


def tree_statistics(heads: np.ndarray, lengths: np.ndarray, reference_heads: Optional[np.ndarray] = None,
                    ) -> dict[str, Any]:
  """Liu & Lapata (2018) Table 5/6 statistics of a set of trees.

  Args:
    heads: int [N, n] trees (-1 = ROOT and padding).
    lengths: int [N] real sizes (trees of length 0 are ignored).
    reference_heads: optional int [N, n] reference trees over the same words.

  Returns:
    {'num_trees', 'num_nodes', 'projective' (% of trees), 'height' (mean tree height; ROOT's
    children have depth 1), 'depth_distribution' ({depth: % of nodes}, up to the deepest node,
    the last bin also counting deeper nodes when past MAX_DEPTH), and with a reference
    'uas' (% of words with the reference head) and 'same_edges' (% of induced word -> word edges that
    are reference edges)}.
  """
  heads = np.asarray(heads, np.int32)
  lengths = np.asarray(lengths, np.int32)
  keep = lengths > 0
  heads, lengths = heads[keep], lengths[keep]
  if not len(heads):
    return {'num_trees': 0, 'num_nodes': 0}
  if reference_heads is not None:
    reference_heads = np.asarray(reference_heads, np.int32)[keep]
    if reference_heads.shape != heads.shape:
      raise ValueError(f'reference trees have shape {reference_heads.shape}, induced {heads.shape}')
  arrays = jax.tree.map(np.asarray, _statistics_arrays(heads, lengths, reference_heads))
  if not arrays['is_tree'].all():
    bad = int(np.argmin(arrays['is_tree']))
    raise ValueError(f'tree {bad} is not a tree: heads {heads[bad, :lengths[bad]].tolist()}')
  depths = arrays['depths']
  real = np.arange(heads.shape[-1]) < lengths[:, None]
  num_nodes = int(real.sum())
  deepest = int(depths.max())
  histogram = {d: 100.0 * float(np.sum((depths == d) & real)) / num_nodes
               for d in range(1, min(deepest, MAX_DEPTH) + 1)}
  if deepest > MAX_DEPTH:
    histogram[MAX_DEPTH] += 100.0 * float(np.sum((depths > MAX_DEPTH) & real)) / num_nodes
  stats = {'num_trees': int(len(heads)), 'num_nodes': num_nodes,
           'projective': 100.0 * float(np.mean(arrays['projective'])),
           'height': float(np.mean(arrays['height'])),
           'depth_distribution': histogram}
  if reference_heads is not None:
    stats['uas'] = 100.0 * float(arrays['uas'])
    stats['same_edges'] = 100.0 * float(arrays['same_edges'])
  return stats


def format_statistics(stats: Mapping[str, Any]) -> str:
  """The statistics of `induce_trees` as a text table in the layout of Tables 5 and 6."""
  lines = []
  for level, s in stats.get('levels', {}).items():
    lines.append(f'{level}-level trees ({s.get("num_trees", 0)} trees, {s.get("num_nodes", 0)} nodes)')
    if not s.get('num_trees'):
      continue
    lines.append(f'  {"Projective":<16}{s["projective"]:6.1f}%')
    lines.append(f'  {"Height":<16}{s["height"]:6.2f}')
    for d, share in s['depth_distribution'].items():
      lines.append(f'  {"Nodes depth " + str(d):<16}{share:6.1f}%')
    if 'same_edges' in s:
      lines.append(f'  {"Same Edges":<16}{s["same_edges"]:6.1f}%')
      lines.append(f'  {"UAS":<16}{s["uas"]:6.1f}%')
  return '\n'.join(lines)


# --- CoNLL-U ----------------------------------------------------------------------------------------

def write_conllu(path: str, sentences: Sequence[Sequence[str]], heads: Sequence[Sequence[int]],
                 weights: Optional[Sequence[Sequence[float]]] = None,
                 comments: Optional[Sequence[Mapping[str, Any]]] = None) -> None:
  """Writes trees as CoNLL-U (ID, FORM, HEAD, DEPREL root/dep; MISC `Weight=` arc marginals).

  Args:
    path: output file.
    sentences: words of each tree.
    heads: library heads of each tree (-1 = ROOT), same lengths as the words.
    weights: optional arc weights per word.
    comments: optional per-tree {key: value} written as `# key = value` lines.
  """
  with open(path, 'w', encoding='utf-8') as f:
    for i, (words, tree) in enumerate(zip(sentences, heads)):
      conllu_heads = trees.heads_to_conllu(np.asarray(tree)[:len(words)])
      f.write(f'# sent_id = {i + 1}\n')
      for key, value in (comments[i] if comments else {}).items():
        f.write(f'# {key} = {value}\n')
      f.write(f'# text = {" ".join(words)}\n')
      for m, word in enumerate(words):
        misc = '_' if weights is None else f'Weight={float(weights[i][m]):.4f}'
        form = str(word).replace('\t', ' ').replace('\n', ' ') or '_'
        head = int(conllu_heads[m])
        f.write(f'{m + 1}\t{form}\t_\t_\t_\t_\t{head}\t{"root" if head == 0 else "dep"}\t_\t{misc}\n')
      f.write('\n')


def read_conllu(path: str) -> list[tuple[list[str], np.ndarray]]:
  """Reads (words, heads) of every sentence of a CoNLL-U file (multiword and empty nodes skipped).

  Raises:
    FileNotFoundError: when `path` does not exist.
    ValueError: naming `path:line`, for malformed lines or heads.
  """
  if not os.path.exists(path):
    raise FileNotFoundError(f'reference CoNLL-U file not found: {path}')
  out, words, values, first_line = [], [], [], 0

  def flush():
    if words:
      out.append((list(words), trees.heads_from_conllu(np.asarray(values, dtype=str),
                                                       source=f'{path}:{first_line}')))
    words.clear()
    values.clear()

  with open(path, encoding='utf-8') as f:
    for number, line in enumerate(f, 1):
      line = line.rstrip('\n')
      if not line.strip():
        flush()
        continue
      if line.startswith('#'):
        continue
      cols = line.split('\t')
      if len(cols) != 10:
        raise ValueError(f'{path}:{number}: expected 10 tab-separated CoNLL-U columns, got {len(cols)}')
      if '-' in cols[0] or '.' in cols[0]:
        continue
      if not words:
        first_line = number
      if cols[0] != str(len(words) + 1):
        raise ValueError(f'{path}:{number}: word ID {cols[0]!r}, expected {len(words) + 1}')
      words.append(cols[1])
      values.append(cols[6])
  flush()
  return out


# --- the whole pipeline -----------------------------------------------------------------------------

def _words_of(batch: Mapping[str, np.ndarray], prefix: str, vocab, row: int, lengths: np.ndarray,
              ) -> list:
  """Words of tree `row` of a level: token strings, or sentence texts for document-level trees."""
  if prefix == 'document_':
    tokens, sentence_lengths = batch['tokens'][row], batch['sentence_lengths'][row]
    return [' '.join(vocab.decode(tokens[s, :sentence_lengths[s]])) for s in range(int(lengths))]
  key = {'premise_': 'premise', 'hypothesis_': 'hypothesis'}.get(prefix, 'tokens')
  return vocab.decode(batch[key][row][:int(lengths)])


def _reference_rows(batch, prefix: str, num_rows: int, n: int) -> Optional[np.ndarray]:
  if prefix in ('', 'sentence_') and 'heads' in batch:
    gold = np.asarray(batch['heads'])
    if gold.shape[-1] == n and int(np.prod(gold.shape[:-1])) == num_rows:
      return gold.reshape(num_rows, n)
  return None


def induce_trees(workdir: str, split: str = 'test', *, num_pictures: int = 5,
                 reference_conllu: Optional[str] = None, output_dir: Optional[str] = None,
                 checkpoint: str | int = 'best') -> dict[str, Any]:
  """Induces, writes, measures and draws the trees of a trained model on one split.

  Args:
    workdir: a training workdir (`training.train_and_evaluate`).
    split: the data split ('train', 'validation', 'test').
    num_pictures: how many trees (the first of the split) to draw.
    reference_conllu: optional CoNLL-U file of reference parses of the split's word-level trees, in
      split order (overrides gold `heads` of the data as the reference).
    output_dir: where to write (default `<workdir>/trees_<split>`).
    checkpoint: 'best', 'latest' or a step.

  Returns:
    {'split', 'step', 'output_dir', 'files', 'levels': {level: `tree_statistics` dict}}; also written
    to `<output_dir>/statistics.json`.

  Raises:
    ValueError: when the model sows no attention scores (attention 'none'), or the reference file does
      not match the split (names the file and the tree).
  """
  trained = training.load_trained(workdir, checkpoint=checkpoint)
  output_dir = output_dir or os.path.join(workdir, f'trees_{split}')
  os.makedirs(output_dir, exist_ok=True)
  per_level = _collect_trees(trained, workdir, split)
  result: dict[str, Any] = {'split': split, 'step': int(trained.step), 'output_dir': output_dir,
                            'levels': {}, 'files': []}
  for level, rec in per_level.items():
    order = sorted(range(len(rec['order'])), key=lambda i: rec['order'][i])
    for key in ('words', 'heads', 'weights', 'reference', 'caption'):
      rec[key] = [rec[key][i] for i in order]
    references = rec['reference']
    if reference_conllu and level in ('sentence', 'premise', 'hypothesis'):
      references = _conllu_references(reference_conllu, rec['words'], level, split)
    has_reference = bool(references) and all(r is not None for r in references)
    references = references if has_reference else None
    result['levels'][level] = _level_statistics(rec['heads'], references)
    result['files'] += _write_level(output_dir, level, rec, references, num_pictures,
                                    title=f'{level}-level trees induced on {split}',
                                    stats=result['levels'][level])
  with open(os.path.join(output_dir, 'statistics.json'), 'w', encoding='utf-8') as f:
    json.dump(result, f, indent=2, default=str)
  return result


def _collect_trees(trained, workdir: str, split: str) -> dict[str, dict[str, list]]:
  """{level: record} of the trees decoded from every batch of `split` (`_add_trees`), in batch order."""
  config = trained.config
  data_split = training.load_split(config, trained.vocab, split)
  batch_size = int(config.train.eval_batch_size or config.data.batch_size)
  decode = make_decoder(trained.model, single_root=bool(config.model.get('single_root', True)))
  variables = jax.device_put(trained.variables)
  per_level: dict[str, dict[str, list]] = {}
  for batch in data_split.batches(batch_size, shuffle=False):
    model_batch = {k: v for k, v in batch.items() if k != 'example_index'}
    logits, levels = decode(variables, model_batch)
    if not levels:
      raise ValueError(f'the model of {workdir} (config.model.name={config.model.name!r}) sowed no '
                       'arc_scores: trees are only induced for attention variants (not "none")')
    # Classifiers: the predicted label goes into each caption. A parser's outputs are a dict of
    # scores, and its data has no label: captions name the example only.
    predictions = (np.asarray(jnp.argmax(logits, -1))
                   if trained.label_names and not isinstance(logits, Mapping) else None)
    for prefix, level in levels.items():
      rec = per_level.setdefault(LEVELS[prefix], {
          'prefix': prefix, 'order': [], 'words': [], 'heads': [], 'weights': [], 'reference': [],
          'caption': []})
      _add_trees(rec, batch, prefix, level, predictions, trained, split)
  return per_level


def _add_trees(rec: dict[str, list], batch: Mapping[str, np.ndarray], prefix: str,
               level: Mapping[str, Any], predictions: Optional[np.ndarray], trained, split: str) -> None:
  """Appends the real trees of one batch's decoded `level` to `rec`: (example, row) order, words,
  heads, weights, reference heads (or None) and a caption each."""
  index = np.asarray(batch['example_index'])
  heads = np.asarray(level['heads'])
  n = heads.shape[-1]
  heads = heads.reshape(-1, n)
  lengths = np.asarray(level['lengths']).reshape(-1)
  weights = np.asarray(level['weights']).reshape(-1, n)
  per_row = heads.shape[0] // len(index)
  reference = _reference_rows(batch, prefix, heads.shape[0], n)
  names = trained.label_names
  for row in range(heads.shape[0]):
    example = int(index[row // per_row])
    if example < 0 or lengths[row] == 0:
      continue
    k = int(lengths[row])
    rec['order'].append((example, row % per_row))
    rec['words'].append(_words_of(batch, prefix, trained.vocab, row // per_row, lengths[row])
                        if prefix != 'sentence_' else
                        trained.vocab.decode(batch['tokens'].reshape(-1, n)[row][:k]))
    rec['heads'].append(heads[row, :k])
    rec['weights'].append(weights[row, :k])
    rec['reference'].append(None if reference is None else reference[row, :k])
    label = int(batch['label'][row // per_row]) if 'label' in batch else None
    rec['caption'].append(
        f'{split} example {example}'
        + (f', sentence {row % per_row + 1}' if per_row > 1 else '')
        + (f': gold {names[label]}' if label is not None else '')
        + (f', predicted {names[int(predictions[row // per_row])]}' if predictions is not None else ''))


def _conllu_references(path: str, words: Sequence[Sequence[str]], level: str, split: str) -> list:
  """The heads of the trees of CoNLL-U file `path`, checked against the words of the split's trees."""
  parsed = read_conllu(path)
  if len(parsed) != len(words):
    raise ValueError(f'{path} has {len(parsed)} trees but the {split} split has '
                     f'{len(words)} {level}-level trees')
  for i, ((theirs, _), ours) in enumerate(zip(parsed, words)):
    if len(theirs) != len(ours):
      raise ValueError(f'{path}: tree {i + 1} has {len(theirs)} words, the {split} '
                       f'split\'s tree {i + 1} has {len(ours)} ({" ".join(ours)})')
  return [ref for _, ref in parsed]


def _level_statistics(heads: Sequence[np.ndarray], references: Optional[Sequence[np.ndarray]]
                      ) -> dict[str, Any]:
  """`tree_statistics` of trees of different lengths (padded with -1), against `references` if given."""
  width = max(len(h) for h in heads)
  padded = np.full((len(heads), width), -1, np.int32)
  ref_padded = np.full_like(padded, -1)
  lengths = np.array([len(h) for h in heads], np.int32)
  for i, h in enumerate(heads):
    padded[i, :len(h)] = h
    if references is not None:
      ref_padded[i, :len(h)] = references[i]
  return tree_statistics(padded, lengths, ref_padded if references is not None else None)


def _write_level(output_dir: str, level: str, rec: Mapping[str, list],
                 references: Optional[Sequence[np.ndarray]], num_pictures: int, *, title: str,
                 stats: Mapping[str, Any]) -> list[str]:
  """Writes a level's trees (and references) as CoNLL-U and draws the first `num_pictures`; returns
  the files written."""
  conllu = os.path.join(output_dir, f'{level}_trees.conllu')
  write_conllu(conllu, rec['words'], rec['heads'], rec['weights'],
               comments=[{'caption': c} for c in rec['caption']])
  files = [conllu]
  if references is not None:
    ref_path = os.path.join(output_dir, f'{level}_reference.conllu')
    write_conllu(ref_path, rec['words'], references)
    files.append(ref_path)
  items = [{'words': rec['words'][i], 'heads': rec['heads'][i], 'weights': rec['weights'][i],
            'reference_heads': references[i] if references is not None else None,
            'caption': rec['caption'][i], 'document': level == 'document'}
           for i in range(min(num_pictures, len(rec['words'])))]
  if items:
    files += viz_induce.render_pictures(os.path.join(output_dir, level), items, title=title, stats=stats)
  return files
