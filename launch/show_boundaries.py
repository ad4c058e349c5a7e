r"""Phrase boundaries learned by a trained MHS-RNN / HM-RNN (Luo & Zhu sec. IV-D, Figure 5, Table II).

Usage:
  python -m launch.show_boundaries --workdir=/tmp/debian_mhs [--split=test] [--num_documents=5]
      [--output_dir=DIR] [--checkpoint=best] [--layer=0]

Prints the phrase-length statistics (mean / min / max, histogram) next to the paper's, and the share of
dynamic boundaries after conjunctions, commas and other word classes; writes `index.html` (documents
with their boundaries marked like Figure 5), `boundaries.json` and `documents.jsonl` to
`<output_dir>` (default `<workdir>/boundaries_<split>`); see `jax_structured.analysis.boundaries`.
"""
from absl import flags

from launch import _errors
from launch import _workdir_flags

SPLIT = flags.DEFINE_string('split', 'test', 'Split to analyse: train, validation (dev) or test.')
NUM_DOCUMENTS = flags.DEFINE_integer('num_documents', 5, 'How many documents to draw (the first).',
                                     lower_bound=0)
OUTPUT_DIR = flags.DEFINE_string('output_dir', None, 'Output folder (default <workdir>/boundaries_<split>).')
LAYER = flags.DEFINE_integer('layer', 0, 'HM-RNN: which layer\'s boundaries (0 = the lowest).', lower_bound=0)


def summary(result) -> str:
  """The printed report of `analysis.boundaries.show_boundaries`' result."""
  lines = [f'{result["documents"]} {result["split"]} documents, step {result["step"]} '
           f'(encoder {result["encoder"]})']
  paper = result['paper_phrases']
  for key, what in (('phrases', 'phrase lengths (b = z OR p)'), ('dynamic_phrases', 'between z only')):
    s = result[key]
    if s['count']:
      lines.append(f'{what}: {s["count"]} phrases, mean {s["mean"]:.2f}, min {s["min"]}, max {s["max"]}')
    else:
      lines.append(f'{what}: no phrases')
  lines.append(f'  paper (Yahoo Answers): mean {paper["mean"]}, min {paper["min"]}, max {paper["max"]}')
  hist = result['phrases']['histogram']
  if hist:
    lines.append('  histogram: ' + ', '.join(f'{k}: {v}' for k, v in hist.items()))
  lines.append('dynamic boundaries (z = 1) after each word class: class, tokens, % of class, % of all z')
  for cls, v in result['shares']['classes'].items():
    lines.append(f'  {cls:16s} {v["tokens"]:7d} {v["dynamic_pct"]:6.1f} {v["share_pct"]:6.1f}')
  conj = result['shares']['conjunctions']
  if conj:
    lines.append('conjunctions (Table II): ' + ', '.join(
        f'{w} {v["dynamic"]}/{v["tokens"]} ({v["dynamic_pct"]:.1f}%)' for w, v in conj.items()))
  lines.append(f'open {result["files"][1]}')
  return '\n'.join(lines)


def main(argv):
  checkpoint = _workdir_flags.start(argv)
  from jax_structured.analysis import boundaries  # pylint: disable=g-import-not-at-top
  result = boundaries.show_boundaries(_workdir_flags.WORKDIR.value, SPLIT.value, num_documents=NUM_DOCUMENTS.value,
                                      output_dir=OUTPUT_DIR.value, checkpoint=checkpoint,
                                      layer=LAYER.value)
  print(summary(result))


if __name__ == '__main__':
  _errors.run(main)
