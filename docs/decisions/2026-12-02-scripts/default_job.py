"""Shared by the scripts here: the default job's config with one variant applied, prepared for training."""
import tempfile

from configs import default
from jax_structured.training import trainer


def with_variant(config, variant):
  """`config` with `config.variants[variant]` applied section by section, without `variants`."""
  v = config.variants[variant]
  for section in v:
    config[section].update(v[section].to_dict() if hasattr(v[section], 'to_dict') else v[section])
  del config['variants']
  return config


def prepared_run(variant):
  """`trainer._plan_run` of the default job's `variant` in a fresh temporary workdir."""
  return trainer._plan_run(with_variant(default.get_config(), variant), tempfile.mkdtemp())
