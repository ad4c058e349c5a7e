r"""Induces the trees of a trained model and prints the Table 5/6 statistics (Liu & Lapata 2018).

  python -m launch.induce_trees --workdir=/tmp/default_run/structured --split=test \
      [--reference=parses.conllu] [--num_pictures=5] [--output_dir=DIR]

Writes CoNLL-U trees, SVG pictures and an HTML index to --output_dir (default <workdir>/trees_<split>).
"""
from absl import flags

from jax_structured.analysis import induce

from launch import _errors
from launch import _workdir_flags

_SPLIT = flags.DEFINE_string('split', 'test', 'Data split to induce trees on.')
_REFERENCE = flags.DEFINE_string('reference', None,
                                 'CoNLL-U file of reference parses of the split (default: gold heads '
                                 'of the data, when it has them).')
_NUM_PICTURES = flags.DEFINE_integer('num_pictures', 5, 'How many trees to draw.')
_OUTPUT_DIR = flags.DEFINE_string('output_dir', None, 'Output directory.')


def main(argv):
  checkpoint = _workdir_flags.start(argv)
  stats = induce.induce_trees(_workdir_flags.WORKDIR.value, _SPLIT.value, num_pictures=_NUM_PICTURES.value,
                              reference_conllu=_REFERENCE.value, output_dir=_OUTPUT_DIR.value,
                              checkpoint=checkpoint)
  print(induce.format_statistics(stats))
  print(f'trees, pictures and statistics.json written to {stats["output_dir"]}')


if __name__ == '__main__':
  _errors.run(main)
