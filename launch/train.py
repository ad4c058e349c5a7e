r"""Trains (and evaluates) one experiment config into a workdir; resumes when the workdir has checkpoints.

    python -m launch.train --config=configs/default.py --workdir=/tmp/run [--config.train.num_steps=100]

Multi-host: start one process per host with the same flags plus
`--coordinator_address=HOST:PORT --num_processes=N --process_id=I` (or `--distributed` on a cluster JAX
detects itself, or the JAX_COORDINATOR_ADDRESS environment variable). Flags say where and how this
launch runs; config keys say what the experiment is (docs/configs.md, "Flags and config keys").
Keys not in the config are errors (`--config.train.num_epochz=3` fails). The launcher only parses
flags and resolves the config once (`jax_structured.config.resolve`: defaults filled, keys checked);
`jax_structured.training.train_and_evaluate` does the work.
"""
import json
import re

from absl import app
from absl import flags
from ml_collections import config_flags

from jax_structured import errors
from launch import _compilation_cache
from launch import _errors

_CONFIG = config_flags.DEFINE_config_file('config', None, 'Experiment config file (get_config()).',
                                          lock_config=True)
_WORKDIR = flags.DEFINE_string('workdir', None, 'Directory for checkpoints, metrics and the config.')
_COORDINATOR = flags.DEFINE_string('coordinator_address', None,
                                   'Multi-host: HOST:PORT of process 0 (jax.distributed.initialize).')
_NUM_PROCESSES = flags.DEFINE_integer('num_processes', None, 'Multi-host: number of processes.')
_PROCESS_ID = flags.DEFINE_integer('process_id', None, 'Multi-host: index of this process.')
_DISTRIBUTED = flags.DEFINE_bool('distributed', False, 'Multi-host on a cluster JAX detects itself (SLURM, '
                                 'Open MPI, Cloud TPU): jax.distributed.initialize with no address.')
flags.mark_flags_as_required(['config', 'workdir'])


_TEXT_CLASSIFICATION_DIR = flags.DEFINE_string(
    'text_classification_dir', None,
    'Train the same config on your own directory of train/dev/test .tsv (label<TAB>text) or .jsonl '
    'files: the data source becomes the text_classification loader; every data key it shares with '
    'the config keeps its value, and --config.data.<key>=<value> sets any of its keys (see '
    'jax_structured.data.loaders.with_text_classification_data).')

# --config.data.<key>=<value> given with --text_classification_dir: applied to the new data section
# (typed by its loader), not to the config's own, which may not have the key.
_DATA_OVERRIDES: dict[str, str] = {}


def take_data_overrides(argv: list[str]) -> list[str]:
  """argv without its `--config.data.<key>[=<value>]` arguments when --text_classification_dir is given.

  The taken overrides go to `_DATA_OVERRIDES` (`--config.data.lowercase` / `--noconfig.data.lowercase`
  are `'true'` / `'false'`; `--config.data.key VALUE` takes the next argument) and are checked at once
  against the text_classification loader's keys, before anything heavy is imported.
  """
  _check_no_distributed_key(argv)
  given = [i for i, arg in enumerate(argv) if re.match(r'--?text_classification_dir(=|$)', arg)]
  if not given:
    return argv
  last = argv[given[-1]]
  if not (last.partition('=')[2] if '=' in last else given[-1] + 1 < len(argv)):
    raise errors.UserError('--text_classification_dir is empty: give the folder with your '
                           'train/dev/test .tsv or .jsonl files')
  from jax_structured.data import loaders  # pylint: disable=g-import-not-at-top
  rest, i = [], 0
  while i < len(argv):
    match = re.fullmatch(r'--?(no)?config\.data\.([^=]+)(?:=(.*))?', argv[i], re.S)
    if not match:
      rest.append(argv[i])
      i += 1
      continue
    negated, key, value = match.groups()
    if value is None:
      if negated or i + 1 >= len(argv) or argv[i + 1].startswith('-'):
        value = 'false' if negated else 'true'
      else:
        i += 1
        value = argv[i]
    _DATA_OVERRIDES[key] = value
    i += 1
  loaders.parse_overrides('text_classification', _DATA_OVERRIDES)  # errors now, not after JAX loads
  return rest


def _check_no_distributed_key(argv: list[str]) -> None:
  """`--config.distributed` (a config key until 2026-12-04) names its replacement, the flag --distributed."""
  for arg in argv:
    if re.match(r'--?(no)?config\.distributed(=|$)', arg):
      raise errors.UserError(f'{arg}: multi-host start-up is the launcher flag --distributed now, not a '
                             'config key (docs/configs.md, "Flags and config keys")')


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f'unexpected arguments: {argv[1:]}')
  _compilation_cache.enable()
  from jax_structured import analysis  # pylint: disable=g-import-not-at-top
  from jax_structured import config as config_lib  # pylint: disable=g-import-not-at-top
  from jax_structured.data import loaders  # pylint: disable=g-import-not-at-top
  from jax_structured import training  # pylint: disable=g-import-not-at-top
  config = _CONFIG.value
  if _TEXT_CLASSIFICATION_DIR.value:
    config = loaders.with_text_classification_data(config, _TEXT_CLASSIFICATION_DIR.value,
                                                           _DATA_OVERRIDES)
  config = config_lib.resolve(config)
  training.maybe_initialize_distributed(
      initialize=_DISTRIBUTED.value, coordinator_address=_COORDINATOR.value,
      num_processes=_NUM_PROCESSES.value, process_id=_PROCESS_ID.value)
  results = training.train_and_evaluate(config, _WORKDIR.value, induce_trees=analysis.induce_trees)
  summary = ({name: {s: r.get(s) for s in ('validation', 'test')} for name, r in results.items()}
             if config.variants else {s: results.get(s) for s in ('validation', 'test')})
  print(json.dumps(summary, indent=2, sort_keys=True))


if __name__ == '__main__':
  _errors.run(main, argv_filter=take_data_overrides)
