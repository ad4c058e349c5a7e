"""Restoring a trained workdir: `load_trained`, `load_split` and `evaluate`.

Reads only the workdir (config.json, the run files, the checkpoints) and, for `load_split` /
`evaluate`, the data of one split. It builds the model with `assembly` and does not depend on the
training loop (`trainer`).
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any

import ml_collections
import numpy as np

from jax_structured import config as config_lib
from jax_structured import errors
from jax_structured.training import assembly
from jax_structured.training import checkpoints as ckpt_lib
from jax_structured.training import metrics as metrics_lib
from jax_structured.training import parallel
from jax_structured.training import workdir_lock

@dataclasses.dataclass
class Trained:
  """A trained model restored from a workdir (`load_trained`).

  Attributes:
    config: the config saved at training time (a `jax_structured.config.ResolvedConfig`).
    model: the Linen module (`model.apply(variables, batch, train=False)`).
    variables: {'params': ..., other collections} as host numpy arrays.
    vocab: the training vocabulary (`data.Vocabulary`).
    label_names: list of label names.
    extras: JSON-able `TaskData.extras` saved at training time.
    step: the restored checkpoint's step.
    task: the task object (loss/metrics; `dev_metric`).
    kind: the data kind the run trained on ('sentence', 'pair', 'document', 'parse', 'translation',
      'lm'; `data.batching.KINDS`).
  """
  config: config_lib.ResolvedConfig
  model: Any
  variables: Any
  vocab: Any
  label_names: list
  extras: dict
  step: int = 0
  task: Any = None
  kind: str = ''


class _SavedData:
  """A TaskData stand-in rebuilt from the workdir files (no dataset needed)."""

  def __init__(self, files, run_info):
    self.kind = run_info['kind']
    self.vocab = files['vocab']
    self.label_names = files['label_names']
    self.extras = files['extras']
    self.num_classes = run_info['num_classes']
    shape = run_info.get('embeddings_shape')
    self.embeddings = None if shape is None else np.zeros(shape, np.float32)
    self.splits = {}


def _assemble_saved_run(workdir: str, *, mode: str | None = 'none'):
  """(config, files, saved data, parts) of `workdir`; the state laid out for `mode` (None: the
  run's own `config.parallel`)."""
  metrics_lib.quiet_library_logs()  # every launcher reading a workdir: no Orbax / TFDS restore chatter
  config = ckpt_lib.read_config(workdir)
  files = ckpt_lib.read_run_files(workdir)
  run_info = files['run_info']
  saved = _SavedData(files, run_info)
  # The optimizer state's structure does not depend on the number of steps: 1 is enough.
  parts = assembly.assemble(config, saved, sample=assembly.spec_to_abstract(run_info['batch_spec']),
                 mode=mode or config.parallel, total_steps=1)
  return config, files, saved, parts


def load_trained(workdir: str, checkpoint: str | int = 'best') -> Trained:
  """Restores a trained model from `workdir` alone (config, vocabulary, labels and checkpoint).

  The state is restored into an abstract target (`jax.eval_shape` of `model.init`).

  Args:
    workdir: a training workdir.
    checkpoint: 'best' (by the dev metric), 'latest', or a step number.

  Returns:
    A `Trained`.

  Raises:
    FileNotFoundError naming the workdir when it has no config or no checkpoint;
    CheckpointError naming the path of a damaged checkpoint.
  """
  config, files, _, parts = _assemble_saved_run(workdir)
  step, state = _restore_checkpoint(workdir, files['run_info'], parts.state, checkpoint)
  state = parallel.to_host(state)
  variables = {'params': state.params, **state.model_state}
  return Trained(config=config, model=parts.model, variables=variables, vocab=files['vocab'],
                 label_names=files['label_names'], extras=files['extras'], step=step, task=parts.task,
                 kind=files['run_info']['kind'])


def _restore_checkpoint(workdir: str, run_info: dict, target, checkpoint: str | int):
  """(step, state) of the `checkpoint` ('best', 'latest' or a step) of `workdir`, read-only."""
  ckpts = ckpt_lib.Checkpoints(workdir, dev_metric=run_info['dev_metric'],
                               higher_is_better=run_info['higher_is_better'], read_only=True)
  try:
    step = ckpts.resolve(checkpoint)
    state, _ = ckpts.restore(step, target)
  finally:
    ckpts.close()
  return step, state


def load_split(config: config_lib.ResolvedConfig | ml_collections.ConfigDict, vocab, split: str):
  """The `split` of a trained run's data, checked against the vocabulary saved with the run.

  Args:
    config: the run's config (`Trained.config`; only `config.data` is read).
    vocab: the saved vocabulary (`Trained.vocab`).
    split: 'train', 'validation' (alias 'dev') or 'test'.

  Returns:
    The `data.Split`.

  Raises:
    ValueError when the loader rebuilds a different vocabulary (token ids would not match the model);
    KeyError naming the known splits when `split` does not exist.
  """
  from jax_structured import data  # pylint: disable=g-import-not-at-top
  data_config = ml_collections.ConfigDict(config.data.to_dict())
  if data_config.get('embeddings'):  # the trained table is in the checkpoint: no word2vec / file read
    data_config.embeddings = ''
  task_data = data.load(data_config)
  if list(task_data.vocab.tokens) != list(vocab.tokens):
    raise ValueError(f'the data of config.data.name={config.data.name!r} gives a vocabulary that differs '
                     'from the one saved in the workdir (vocab.json): token ids would not match the '
                     'trained model')
  name = 'validation' if split == 'dev' else split
  if name not in task_data.splits:
    raise KeyError(f'config.data.name={config.data.name!r} has no split {split!r} '
                   f'(splits: {sorted(task_data.splits)})')
  return task_data.splits[name]


def evaluate(workdir: str, split: str = 'test', *, checkpoint: str | int = 'best') -> dict[str, Any]:
  """Evaluates the `checkpoint` of `workdir` on `split`; writes `<workdir>/eval_<split>.json`.

  Uses only the workdir (config, vocabulary, labels, checkpoints) and the evaluated split's data.

  Returns:
    {'split', 'step', 'checkpoint', metric: value, ...}.

  Raises:
    FileNotFoundError / NotADirectoryError when `workdir` does not exist / is a file;
    errors.NotSavedError naming the file and the cause when the result cannot be written (its
    `result` holds it; nothing half-written is left under the final name).
  """
  ckpt_lib.check_workdir(workdir)  # missing, or a file
  config, files, _, parts = _assemble_saved_run(workdir, mode=None)
  step, state = _restore_checkpoint(workdir, files['run_info'], parts.state, checkpoint)
  data_split = load_split(config, files['vocab'], split)
  batch_size = config.train.eval_batch_size or int(config.data.batch_size)
  result = {'split': split, 'step': step, 'checkpoint': str(checkpoint),
            **assembly.evaluate_split(parts, parts.runner.place(state), data_split, batch_size)}
  path = os.path.join(workdir, f'eval_{split}.json')
  try:
    metrics_lib.write_json(path, result)  # a temporary file renamed when complete
  except OSError as e:
    cause = workdir_lock.cannot_write(e, path)
    reason = str(cause) if cause is not e else f'{path}: {e.strerror or e}'
    raise errors.NotSavedError(f'could not save the evaluation: {reason}', result) from e
  return result
