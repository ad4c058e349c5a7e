r"""Trains (and evaluates) one experiment config into a workdir; resumes when the workdir has checkpoints.

    python -m launch.train --config=configs/default.py --workdir=/tmp/run [--config.train.num_steps=100]

Multi-host: start one process per host with the same flags plus
`--coordinator_address=HOST:PORT --num_processes=N --process_id=I` (or set `--config.distributed=True`
on a cluster JAX detects itself, or the JAX_COORDINATOR_ADDRESS environment variable).
Keys not in the config are errors (`--config.train.num_epochz=3` fails). The launcher only parses
flags; `jax_structured.training.train_and_evaluate` does the work.
"""
import json

from absl import app
from absl import flags
from ml_collections import config_flags

_CONFIG = config_flags.DEFINE_config_file('config', None, 'Experiment config file (get_config()).',
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string('workdir', None, 'Directory for checkpoints, metrics and the config.')
_COORDINATOR = flags.DEFINE_string('coordinator_address', None,
                                   'Multi-host: HOST:PORT of process 0 (jax.distributed.initialize).')
_NUM_PROCESSES = flags.DEFINE_integer('num_processes', None, 'Multi-host: number of processes.')
_PROCESS_ID = flags.DEFINE_integer('process_id', None, 'Multi-host: index of this process.')
flags.mark_flags_as_required(['config', 'workdir'])


_TEXT_CLASSIFICATION_DIR = flags.DEFINE_string(
    'text_classification_dir', None,
    'Train the same config on your own directory of train/dev/test .tsv (label<TAB>text) or .jsonl '
    'files: replaces config.data by the text_classification loader (shared keys keep their values).')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  from jax_structured import training  # pylint: disable=g-import-not-at-top
  training.maybe_initialize_distributed(_CONFIG.value, coordinator_address=_COORDINATOR.value,
                                        num_processes=_NUM_PROCESSES.value, process_id=_PROCESS_ID.value)
  config = _CONFIG.value
  if _TEXT_CLASSIFICATION_DIR.value:
    config = training.config.with_text_classification_data(config, _TEXT_CLASSIFICATION_DIR.value)
  results = training.train_and_evaluate(config, _WORKDIR.value)
  summary = ({name: {s: r.get(s) for s in ('validation', 'test')} for name, r in results.items()}
             if config.get('variants') else {s: results.get(s) for s in ('validation', 'test')})
  print(json.dumps(summary, indent=2, sort_keys=True))


if __name__ == '__main__':
  app.run(main)
