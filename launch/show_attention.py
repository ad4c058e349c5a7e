r"""Draws the LSTMN intra-attention of a trained model (Cheng et al. 2016, Figures 4-5) as SVG + HTML.

Usage:
  python -m launch.show_attention --workdir=/tmp/ptb_lstmn [--split=validation] [--num_sentences=4]
      [--output_dir=DIR] [--checkpoint=best] [--min_weight=0.05]

Writes `<output_dir>/sentence_*.svg` (one per sentence and LSTMN layer) and `index.html`
(default output_dir: `<workdir>/attention_<split>`); see `jax_structured.analysis.attention`.
"""
from absl import flags

from jax_structured.analysis import attention

from launch import _errors
from launch import _workdir_flags

SPLIT = flags.DEFINE_string('split', 'validation', 'Split to draw: train, validation (dev) or test.')
NUM_SENTENCES = flags.DEFINE_integer('num_sentences', 4, 'How many sentences (the first of the split).',
                                     lower_bound=1)
OUTPUT_DIR = flags.DEFINE_string('output_dir', None, 'Output folder (default <workdir>/attention_<split>).')
MIN_WEIGHT = flags.DEFINE_float('min_weight', 0.05, 'Arcs below this attention weight are not drawn.',
                                lower_bound=0.0, upper_bound=1.0)


def main(argv):
  checkpoint = _workdir_flags.start(argv)
  result = attention.render_attention(_workdir_flags.WORKDIR.value, SPLIT.value, num_sentences=NUM_SENTENCES.value,
                                      output_dir=OUTPUT_DIR.value, checkpoint=checkpoint,
                                      min_weight=MIN_WEIGHT.value)
  print(f'{len(result["files"]) - 1} pictures of step {result["step"]} in {result["output_dir"]} '
        f'(open {result["files"][-1]})')


if __name__ == '__main__':
  _errors.run(main)
