"""Benchmarks run by `python -m launch.benchmark <name>`; each module here has `main(argv)`.

The flags below are shared by every benchmark (each module documents how it reads `--sizes`).
"""
from absl import flags

SIZES = flags.DEFINE_string(
    'sizes', None, 'Comma-separated problem sizes, e.g. "512x32,64x64" (batch x length for trees); '
    'None means the benchmark\'s defaults.')
REPEATS = flags.DEFINE_integer('repeats', 20, 'Timed calls per measurement (after one warm-up/compile).',
                               lower_bound=1)
DTYPE = flags.DEFINE_enum('dtype', 'float32', ['float32', 'float64'], 'Floating point dtype of the inputs.')
MEMORY = flags.DEFINE_bool('memory', False,
                           'Also print the compiled peak memory (XLA memory_analysis) of each function.')
