r"""The linear baseline alone on a config's data, with data overrides (as the trainer fits it).

  python docs/decisions/2026-12-02-scripts/baseline_only.py CONFIG[:OPTIONS] [key=value ...] [solver=NAME]
      [text_classification_dir=DIR]

e.g. `configs/encoders/compare.py:sst2 train_phrases=True` (SST-2, every labelled phrase of the training
trees as an example, dev and test whole sentences): prints the baseline's line and its grid.
`text_classification_dir=DIR` reads the config on DIR as `launch.train --text_classification_dir` does;
`solver=NAME` fits with scikit-learn's solver NAME instead of linear_baseline.SOLVER; `solver=liblinear`
fits one binary classifier per class (scikit-learn's OneVsRestClassifier; liblinear has no multinomial
model), another model than the baseline's.
"""
import sys
import time

import ml_collections

from jax_structured import data
from jax_structured.training import linear_baseline


def _one_vs_rest():
  """Makes the baseline's LogisticRegression(...) a OneVsRestClassifier of binary ones (for liblinear)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  from sklearn import linear_model, multiclass  # pylint: disable=g-import-not-at-top

  class OneVsRest(multiclass.OneVsRestClassifier):
    coef_ = property(lambda self: np.vstack([e.coef_ for e in self.estimators_]))
    intercept_ = property(lambda self: np.concatenate([e.intercept_ for e in self.estimators_]))

  binary = linear_model.LogisticRegression
  linear_model.LogisticRegression = lambda **kw: OneVsRest(binary(**kw))


def main(argv):
  path, _, options = argv[1].partition(':')
  import importlib.util  # pylint: disable=g-import-not-at-top
  spec = importlib.util.spec_from_file_location('config', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  config = module.get_config(options)
  settings = dict(item.partition('=')[::2] for item in argv[2:])
  if 'text_classification_dir' in settings:
    from jax_structured.data.loaders import options as loader_options  # pylint: disable=g-import-not-at-top
    config = loader_options.with_text_classification_data(config, settings.pop('text_classification_dir'))
  data_config = ml_collections.ConfigDict(config.data.to_dict())
  data_config.embeddings = ''
  for key, value in settings.items():
    if key == 'solver':
      linear_baseline.SOLVER = value
      if value == 'liblinear':
        _one_vs_rest()
      continue
    setattr(data_config, key, type(getattr(data_config, key))(value == 'True' if value in ('True', 'False') else value))
  start = time.perf_counter()
  task_data = data.load(data_config)
  results = linear_baseline.fit(task_data)
  print(linear_baseline.describe(results))
  print('grid:', results['linear_baseline']['grid'])
  print(f'train examples {len(task_data.splits["train"])}; load + fits {time.perf_counter() - start:.0f} s')


if __name__ == '__main__':
  main(sys.argv)
