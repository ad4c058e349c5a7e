"""The keys of a config and their defaults, `resolve` (once per run), overrides and comparison.

A run reads a *resolved* config: `resolve(config)` returns a frozen `ResolvedConfig` in which the
top-level keys (`TOP_LEVEL_DEFAULTS`: `seed`, `task` ('' = the data kind), `parallel` ('shard_map' |
'pmap' | 'none')), `config.optimizer` (`OPTIMIZER_DEFAULTS`) and `config.train`
(`TRAIN_DEFAULTS`) hold every key, checked once; the training code reads `config.train.num_epochs`,
`config.optimizer.learning_rate`, `config.parallel` directly. A config file may leave a key out to get
its default; a key not listed is an error naming it, so a typo never silently falls back to a default.
`config.data` and `config.model` are checked by the data loader and the model builder; `config.variants`
(optional: name -> {dotted key: value}) gives one resolved config per variant (`variants`).

The launchers resolve the config they parsed; the public entry points of `training` resolve what they
are given (a resolved config is returned as it is), and a config read back from a workdir is resolved
when read. Config files should start from `optimizer_defaults()` / `train_defaults()` so that every key
is overridable from the command line (`--config.optimizer.learning_rate=0.1`; `config_flags` rejects
keys that do not exist). The config given is never mutated.
"""
from __future__ import annotations

import copy
import json
import os
from typing import Any, Mapping

import ml_collections

from jax_structured import errors

OPTIMIZER_DEFAULTS: dict[str, Any] = {
    # 'adagrad' | 'adam' | 'adadelta' | 'sgd'.
    'name': 'adam',
    'learning_rate': 1e-3,
    # adagrad: initial accumulator value (0.1 as in TF's AdagradOptimizer used by Liu & Lapata 2018).
    'initial_accumulator': 0.1,
    'eps': 1e-8,  # adam / adagrad / adadelta epsilon (adadelta: 1e-6 is Zeiler's; set it explicitly)
    'b1': 0.9,  # adam
    'b2': 0.999,  # adam
    'rho': 0.95,  # adadelta decay
    'momentum': 0.0,  # sgd (0 = plain SGD)
    'nesterov': False,  # sgd
    # L2 regularisation added to the gradient (g + weight_decay * w) of every non-embedding parameter.
    'weight_decay': 0.0,
    'clip_norm': 0.0,  # global-norm clipping threshold (0 = off); Cheng et al. 2016 use 5
    # Learning rate schedule: 'constant' | 'warmup_cosine' | 'exponential' | 'linear'.
    'schedule': 'constant',
    'warmup_steps': 0,
    'decay_steps': 0,  # cosine / linear horizon (0 = all training steps); exponential period
    'decay_rate': 1.0,  # exponential: lr * decay_rate ** (step / decay_steps)
    'end_learning_rate': 0.0,  # linear / cosine final value
    # Decay on plateau: lr *= plateau_factor after `plateau_patience` evaluations without an
    # improvement of the dev metric by more than `plateau_threshold` (relative); 1.0 = off.
    # Cheng et al. (2016), PTB: sgd, learning_rate 0.65, plateau_factor 0.85.
    'plateau_factor': 1.0,
    'plateau_patience': 1,
    'plateau_threshold': 0.0,
    # Parameter groups: a parameter is an embedding when its '/'-joined path matches this regex.
    'embedding_pattern': '(?i)embed',
    # Gradients of embeddings are multiplied by `embedding_grad_scale` during the first
    # `embedding_scale_epochs` epochs (Cheng et al. 2016: 0.35 in epoch 1 for GloVe vectors).
    'embedding_grad_scale': 1.0,
    'embedding_scale_epochs': 1,
    'freeze_embeddings': False,  # embeddings never change
    # Max-norm constraint (Kim 2014; Chen et al. 2017 sec. 2.5): after every update, each output unit's
    # weight vector (a column of a [..., D, C] kernel: the norm over all axes but the last) of every
    # parameter whose '/'-joined path matches `max_norm_pattern` is rescaled to norm `max_norm` when it
    # exceeds it (Kim: s = 3). 0 = off.
    'max_norm': 0.0,
    'max_norm_pattern': '(?:^|/)logits/kernel$',
}

TRAIN_DEFAULTS: dict[str, Any] = {
    'num_epochs': 10,
    'num_steps': 0,  # > 0: stop after this many steps (overrides num_epochs)
    'eval_every_steps': 0,  # 0 = evaluate (and checkpoint) at the end of every epoch
    'checkpoint_every_steps': 0,  # > 0: also save the latest state every this many steps
    'log_every_steps': 50,
    'early_stopping_patience': 0,  # stop after this many evaluations without improvement (0 = off)
    'eval_batch_size': 0,  # 0 = data.batch_size
    'shuffle': True,
    'render_trees': 0,  # > 0: after training call viz.induce.induce_trees(num_pictures=render_trees)
    # `config.variants` runs: the metrics of the comparison table (comparison.md and the console),
    # e.g. ('accuracy', 'uas'); empty: every metric any variant reports. comparison.json keeps all.
    'comparison_metrics': (),
    # Sentence / pair classification: a single run (no `variants`) also fits the linear baseline
    # (`training.linear_baseline`: TF-IDF n-grams + logistic regression, tuned on dev) and writes
    # comparison.json / .md with the run's row and the baseline's. A `variants` run always does.
    'linear_baseline': False,
    # Language models (task 'lm'): the objective is the mean NLL per target token ('token'), or the
    # NLL summed over each row's target tokens and averaged over rows ('sequence': the objective of
    # Zaremba et al. 2014's and Cheng et al. 2016's Torch code, T times the per-token mean for
    # windows of T tokens; the SGD learning rates of those papers assume it).
    'lm_loss': 'token',
    # Sentence classification over trees (task 'sentence', a head with model.phrase_logits=True, e.g. the
    # 'tree_lstm' encoder on SST with data.binary_trees): the training objective adds this weight times
    # each sentence's mean NLL over its labelled non-root tree nodes (`tree_labels`; Tai et al. 2015
    # sec. 5.1 phrase-level supervision). 0 = sentence labels only. Evaluation stays sentence-level.
    'phrase_loss_weight': 0.0,
}

TOP_LEVEL_DEFAULTS: dict[str, Any] = {
    'seed': 0,
    'task': '',  # '' = the data kind
    'parallel': 'shard_map',  # one of PARALLEL_MODES ('' = the default)
}
# The sections of a config: `optimizer` and `train` are filled by `resolve`, `data` and `model` are
# checked by the data loader and the model builder, `variants` holds {name: overrides}.
SECTIONS = ('data', 'model', 'optimizer', 'train', 'variants')

PARALLEL_MODES = ('shard_map', 'pmap', 'none')
LM_LOSSES = ('token', 'sequence')
OPTIMIZERS = ('adagrad', 'adam', 'adadelta', 'sgd')
SCHEDULES = ('constant', 'warmup_cosine', 'exponential', 'linear')


def optimizer_defaults() -> ml_collections.ConfigDict:
  """A fresh ConfigDict with every optimizer key and its default (start config files from it)."""
  return ml_collections.ConfigDict(copy.deepcopy(OPTIMIZER_DEFAULTS))


def train_defaults() -> ml_collections.ConfigDict:
  """A fresh ConfigDict with every train key and its default (start config files from it)."""
  return ml_collections.ConfigDict(copy.deepcopy(TRAIN_DEFAULTS))


class ResolvedConfig(ml_collections.FrozenConfigDict):
  """A config after `resolve`: frozen, every training key present with a checked value.

  Read it like the ConfigDict it came from (`config.train.num_epochs`, `config.optimizer.name`,
  `config.parallel`); build it with `resolve`, never directly (that would skip the checks).
  """


def resolve(config: ml_collections.ConfigDict | Mapping[str, Any]) -> ResolvedConfig:
  """The config of a run, every training key filled with its default and checked once.

  The top-level keys (`TOP_LEVEL_DEFAULTS`), `config.optimizer` (`OPTIMIZER_DEFAULTS`) and
  `config.train` (`TRAIN_DEFAULTS`) hold every key; `config.variants` holds nested overrides per
  variant (dotted keys are unfolded; empty when the config has none). `config.data` and `config.model`
  are kept as given: the data loader (`data.load`) and the model builder (`models.build`) check
  their own keys. FieldReferences are resolved and lists become tuples. The config given is never
  modified.

  Args:
    config: a ConfigDict (a config file's `get_config()`), a plain dict of one (a workdir's
      config.json), or a `ResolvedConfig` (returned as it is).

  Returns:
    A `ResolvedConfig` (an `ml_collections.FrozenConfigDict`).

  Raises:
    errors.ConfigError (a ValueError; ConfigKeyError also a KeyError, ConfigTypeError also a
    TypeError) naming `config.<key>` for an unknown key, a value of the wrong type or out of range.
  """
  if isinstance(config, ResolvedConfig):
    return config
  given = (to_dict(config) if isinstance(config, ml_collections.ConfigDict)
           else json.loads(json.dumps(dict(config))))
  _drop_distributed(given)
  _check_known(given, dict.fromkeys([*TOP_LEVEL_DEFAULTS, *SECTIONS]), 'config')
  if given.get('parallel') in ('', None):
    given.pop('parallel', None)  # empty: the default
  out = _merge({k: v for k, v in given.items() if k in TOP_LEVEL_DEFAULTS}, TOP_LEVEL_DEFAULTS, 'config')
  if out['parallel'] not in PARALLEL_MODES:
    raise errors.ConfigError(f'config.parallel={out["parallel"]!r} is not one of {PARALLEL_MODES}')
  out['optimizer'] = _optimizer(given.get('optimizer'))
  out['train'] = _train(given.get('train'))
  out['variants'] = _variants(given.get('variants'))
  out.update({k: given[k] for k in ('data', 'model') if k in given})
  return ResolvedConfig(out)


def _check_known(given: Mapping[str, Any], known: Mapping[str, Any], where: str) -> None:
  unknown = sorted(set(given) - set(known))
  if unknown:
    first = errors.unknown_key(known, unknown[0], where=where)
    others = f' (also unknown: {", ".join(f"{where}.{k}" for k in unknown[1:])})' if unknown[1:] else ''
    raise errors.ConfigKeyError(f'{first}{others}')


def _merge(section: Mapping[str, Any] | None, defaults: Mapping[str, Any], where: str) -> dict[str, Any]:
  """`section` over `defaults` (a new dict); unknown keys and values of another type are errors."""
  out = copy.deepcopy(dict(defaults))
  given = dict(section or {})
  _check_known(given, defaults, where)
  for key, value in given.items():
    default = defaults[key]
    if isinstance(default, bool) != isinstance(value, bool) or (
        isinstance(default, (int, float)) and not isinstance(value, (int, float))) or (
            isinstance(default, str) and not isinstance(value, str)):
      raise errors.ConfigTypeError(f'{where}.{key} must be a {type(default).__name__}, got {value!r}')
    if isinstance(default, float):
      value = float(value)
    out[key] = value
  return out


def _optimizer(section: Mapping[str, Any] | None) -> dict[str, Any]:
  """`config.optimizer` merged over `OPTIMIZER_DEFAULTS`, checked."""
  opt = _merge(section, OPTIMIZER_DEFAULTS, 'config.optimizer')
  if opt['name'] not in OPTIMIZERS:
    raise errors.ConfigError(f'config.optimizer.name={opt["name"]!r} is not one of {OPTIMIZERS}')
  if opt['schedule'] not in SCHEDULES:
    raise errors.ConfigError(f'config.optimizer.schedule={opt["schedule"]!r} is not one of {SCHEDULES}')
  for key in ('learning_rate', 'weight_decay', 'clip_norm', 'initial_accumulator', 'momentum', 'max_norm'):
    if opt[key] < 0:
      raise errors.ConfigError(f'config.optimizer.{key} must be >= 0, got {opt[key]}')
  if not 0 < opt['plateau_factor'] <= 1:
    raise errors.ConfigError(f'config.optimizer.plateau_factor must be in (0, 1], got {opt["plateau_factor"]}')
  if opt['schedule'] == 'exponential' and opt['decay_steps'] <= 0:
    raise errors.ConfigError('config.optimizer.decay_steps must be > 0 for schedule="exponential"')
  return opt


def _train(section: Mapping[str, Any] | None) -> dict[str, Any]:
  """`config.train` merged over `TRAIN_DEFAULTS`, checked."""
  train = _merge(section, TRAIN_DEFAULTS, 'config.train')
  if train['num_epochs'] <= 0 and train['num_steps'] <= 0:
    raise errors.ConfigError('one of config.train.num_epochs, config.train.num_steps must be > 0')
  if train['phrase_loss_weight'] < 0:
    raise errors.ConfigError(f'config.train.phrase_loss_weight must be >= 0, got {train["phrase_loss_weight"]}')
  if train['lm_loss'] not in LM_LOSSES:
    raise errors.ConfigError(f'config.train.lm_loss={train["lm_loss"]!r} is not one of {LM_LOSSES}')
  return train


def _variants(section: Mapping[str, Any] | None) -> dict[str, dict[str, Any]]:
  """{name: nested overrides} of `config.variants` (dotted keys unfolded); names are checked."""
  out = {}
  for name, overrides in (section or {}).items():
    if not name or os.sep in name or name.startswith('.'):
      raise errors.ConfigError(f'config.variants: bad variant name {name!r} (it becomes a directory name)')
    nested: dict[str, Any] = {}
    for dotted, value in flatten(overrides or {}).items():
      *parents, last = dotted.split('.')
      node = nested
      for part in parents:
        node = node.setdefault(part, {})
      node[last] = value
    out[name] = nested
  return out


def variants(config: ResolvedConfig) -> dict[str, ResolvedConfig]:
  """{name: the resolved config of that variant} of `config.variants`.

  Each variant is `config` with its overrides applied (`with_overrides`) and no variants of its own.

  Raises:
    errors.ConfigKeyError naming `config.variants.<name>` and the key when an override names a key
    that does not exist; the errors of `resolve` for the values.
  """
  base = to_dict(config)
  base['variants'] = {}
  return {name: resolve(with_overrides(ml_collections.ConfigDict(base), flatten(overrides.to_dict()),
                                       where=f'config.variants.{name}'))
          for name, overrides in config.variants.items()}


def to_dict(config: ml_collections.ConfigDict) -> dict[str, Any]:
  """A JSON-able plain dict of the resolved config (FieldReferences resolved, tuples as lists)."""
  return json.loads(config.to_json_best_effort(sort_keys=True))


def flatten(tree: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
  """{'a': {'b': 1}} -> {'a.b': 1}."""
  out = {}
  for key, value in tree.items():
    name = f'{prefix}{key}'
    if isinstance(value, Mapping):
      out.update(flatten(value, name + '.'))
    else:
      out[name] = value
  return out


def _drop_distributed(given: dict) -> None:
  """The former key `distributed` (host/process settings are launcher flags, docs/configs.md): False,
  the no-op that older config files and saved config.json hold, is dropped; True is an error naming
  the replacement (never a request silently lost)."""
  if given.pop('distributed', False):
    raise errors.ConfigError(
        'config.distributed=True: multi-host start-up is a launcher flag, not a config key: '
        'python -m launch.train --distributed (or call '
        'jax_structured.training.maybe_initialize_distributed(initialize=True) before training)')


# Keys that may change when a run resumes from its checkpoints (they do not change what is stored).
RESUMABLE_PREFIXES = ('train.', 'parallel', 'variants')


def incompatible_keys(saved: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
  """Dotted keys whose values differ between two config dicts, ignoring `RESUMABLE_PREFIXES`.

  Returns:
    Sorted lines 'key: saved=... current=...' (missing keys shown as <absent>).
  """
  a, b = flatten(saved), flatten(current)
  lines = []
  for key in sorted(set(a) | set(b)):
    if key.startswith(RESUMABLE_PREFIXES):
      continue
    va, vb = a.get(key, '<absent>'), b.get(key, '<absent>')
    if va != vb:
      lines.append(f'{key}: saved={va!r} current={vb!r}')
  return lines


def with_overrides(config: ml_collections.ConfigDict, overrides: Mapping[str, Any],
                   where: str = 'overrides') -> ml_collections.ConfigDict:
  """A copy of `config` with dotted-key overrides applied ({'model.attention': 'none'}).

  Raises:
    errors.ConfigKeyError (a KeyError) naming `where`, the dotted key, the closest keys and the valid
    keys of its section, when the key does not exist in `config`.
  """
  out = ml_collections.ConfigDict(to_dict(config))
  # A model or encoder section that the overrides give another model or encoder (`model.name`,
  # `model.encoder.name`, or any section named '*encoder') is replaced, not merged: the old one's keys
  # mean nothing to the new one, whose own keys the model / `models.encoders.build` check.
  replaced = []
  for dotted, value in overrides.items():
    parts = dotted.split('.')
    if len(parts) < 2 or parts[-1] != 'name' or not (parts[-2].endswith('encoder')
                                                      or dotted == 'model.name'):
      continue
    node = out
    for part in parts[:-2]:
      node = node.get(part) if isinstance(node, ml_collections.ConfigDict) else None
    old = node.get(parts[-2]) if isinstance(node, ml_collections.ConfigDict) else None
    if isinstance(old, ml_collections.ConfigDict) and old.get('name') != value:
      node[parts[-2]] = ml_collections.ConfigDict({'name': value})
      replaced.append('.'.join(parts[:-1]) + '.')
  for dotted, value in overrides.items():
    if any(dotted.startswith(section) for section in replaced):
      node, parts = out, dotted.split('.')
      for part in parts[:-1]:
        node = node[part]
      node[parts[-1]] = value.to_dict() if isinstance(value, ml_collections.ConfigDict) else value
      continue
    error = errors.unknown_key(out, dotted)
    if error is not None:
      raise errors.ConfigKeyError(f'{where}: {error}')
    node, parts = out, dotted.split('.')
    for part in parts[:-1]:
      node = node[part]
    value = value.to_dict() if isinstance(value, ml_collections.ConfigDict) else value
    node[parts[-1]] = value
  return out
