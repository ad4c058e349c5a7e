"""Training platform: train loop, optimisers, data parallelism, checkpoints, metrics, evaluation.

Entry points (launchers only parse flags and call these)::

  `train_and_evaluate(config, workdir) -> dict`   train (auto-resume), evaluate, write metrics.json
  `evaluate(workdir, split, checkpoint='best')`   evaluate a saved run on one split
  `load_trained(workdir, checkpoint='best')`      -> Trained(config, model, variables, vocab,
                                                   label_names, extras, step, task)

Tasks (`tasks.register`), optimisers (`optimizers`) and the pure steps (`steps.train_step` /
`steps.eval_step`) are public too. The config keys, their defaults and `resolve` (the frozen config
every function here reads; the entry points resolve a plain ConfigDict once) live in
`jax_structured.config` (a leaf module that every layer, the model presets included, may read).
"""
import importlib

from jax_structured.training import assembly
from jax_structured.training import checkpoints
from jax_structured.training import comparison
from jax_structured.training import distributed
from jax_structured.training import optimizers
from jax_structured.training import parallel
from jax_structured.training import parse_task  # registers the 'parse' task
from jax_structured.training import restore
from jax_structured.training import steps
from jax_structured.training import tasks
from jax_structured.training import translation_task  # registers the 'translation' task
from jax_structured.training.checkpoints import CheckpointError
from jax_structured.training.steps import TrainState
from jax_structured.training.steps import eval_step
from jax_structured.training.steps import train_step
from jax_structured.training.assembly import DeviceMemoryError
from jax_structured.training.assembly import build_model
from jax_structured.training.restore import Trained
from jax_structured.training.restore import evaluate
from jax_structured.training.restore import load_split
from jax_structured.training.restore import load_trained
from jax_structured.training.distributed import maybe_initialize_distributed


def __getattr__(name: str):
  """`train_and_evaluate` on first use (PEP 562): reading a checkpoint (`restore`, the `analysis`
  layer) does not import the training loop (`trainer`)."""
  if name == 'train_and_evaluate':
    return importlib.import_module('jax_structured.training.trainer').train_and_evaluate
  raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


__all__ = [
    'CheckpointError', 'DeviceMemoryError', 'Trained', 'TrainState', 'assembly', 'build_model', 'checkpoints',
    'comparison', 'distributed', 'eval_step',
    'evaluate', 'load_split', 'load_trained', 'maybe_initialize_distributed', 'optimizers',
    'parallel', 'parse_task', 'restore', 'steps', 'tasks', 'train_and_evaluate', 'translation_task',
    'train_step',
]
