"""Inputs of `python -m launch.benchmark liu_lapata`: its flags' parsers, the models' configs (the
config files or the paper's settings) and random batches in the layout of docs/internals.md."""
import importlib
from typing import Any, Callable, Mapping, Optional, Sequence

import ml_collections
import numpy as np

from jax_structured import config as config_lib
from launch import benchmarks

SNLI_CLASSES = 3
YELP_CLASSES = 5


def parse_sizes(text: str) -> list[tuple[int, int, int]]:
  """'32x16x8,32x32x16' -> [(32, 16, 8), (32, 32, 16)] (batch, premise, hypothesis lengths).

  Raises:
    ValueError naming the bad item.
  """
  return benchmarks.parse_sizes(text, ('BATCH', 'PREMISE', 'HYPOTHESIS'))


def parse_doc_shape(text: str) -> tuple[int, int]:
  """'9x17' -> (9, 17) (sentences per document, words per sentence); ValueError otherwise."""
  parts = text.strip().lower().split('x')
  if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
    raise ValueError(f'--doc_shape={text!r} is not SENTENCESxWORDS with positive integers')
  return int(parts[0]), int(parts[1])


def parse_overrides(text: str) -> dict[str, Any]:
  """'hidden_size=16,attention=simple' -> {'hidden_size': 16, 'attention': 'simple'}.

  Values are read as int, float, true/false, or kept as strings.

  Raises:
    ValueError naming an item without '='.
  """
  out = {}
  for item in (text or '').split(','):
    item = item.strip()
    if not item:
      continue
    key, sep, value = item.partition('=')
    if not sep or not key.strip():
      raise ValueError(f'--model_overrides item {item!r} is not key=value (in {text!r})')
    out[key.strip()] = _parse_value(value.strip())
  return out


def _parse_value(text: str) -> Any:
  if text.lower() in ('true', 'false'):
    return text.lower() == 'true'
  for cast in (int, float):
    try:
      return cast(text)
    except ValueError:
      pass
  return text


def select_variants(variants: Sequence[tuple], keep: Optional[str]) -> list[tuple]:
  """The variants whose key is in the comma-separated `keep` (all when None)."""
  if keep is None:
    return list(variants)
  wanted = {k.strip() for k in keep.split(',') if k.strip()}
  return [v for v in variants if v[0] in wanted]


def paper_snli_config() -> ml_collections.ConfigDict:
  """The SNLI settings of sec. 4.1: LSTM 150 (100 semantic + 50 structure), GloVe 300-d (trained),
  two-layer perceptrons of 200, dropout 0.2, Adagrad with learning rate 0.05, batches of 32."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = 'pair'
  config.model = ml_collections.ConfigDict({
      'name': 'liu_lapata.pair_classifier', 'embedding_dim': 300, 'hidden_size': 150,
      'semantic_size': 100, 'attention': 'structured', 'mlp_hidden': 200, 'dropout_rate': 0.2})
  config.optimizer = config_lib.optimizer_defaults()
  config.optimizer.name = 'adagrad'
  config.optimizer.learning_rate = 0.05
  return config


def paper_document_config() -> ml_collections.ConfigDict:
  """The document settings of sec. 4.2: word2vec 200-d (trained), LSTMs of 100 (75 semantic + 25
  structure) at both levels, dropout 0.3 on input and output layers, Adagrad 0.05, L2 1e-4 on all
  parameters but the embeddings, batches of 32."""
  config = ml_collections.ConfigDict()
  config.seed = 0
  config.task = 'document'
  config.model = ml_collections.ConfigDict({
      'name': 'liu_lapata.document_classifier', 'embedding_dim': 200, 'hidden_size': 100,
      'semantic_size': 75, 'sentence_attention': 'structured', 'document_attention': 'structured',
      'pooling': 'max', 'mlp_hidden': 0, 'dropout_rate': 0.3})
  config.optimizer = config_lib.optimizer_defaults()
  config.optimizer.name = 'adagrad'
  config.optimizer.learning_rate = 0.05
  config.optimizer.weight_decay = 1e-4
  config.variants = ml_collections.ConfigDict({'none': {'model': {'hidden_size': 75}}})  # "75D"
  return config


def load_config(names: Sequence[str], fallback: Callable[[], ml_collections.ConfigDict],
                package: str = 'configs.liu_lapata') -> tuple[ml_collections.ConfigDict, str]:
  """`get_config()` of the first existing `configs/liu_lapata/<name>.py`, else `fallback()`.

  Returns:
    (config, source) with source the config file's path or a note that the paper's settings are used.
  """
  for name in names:
    module_name = f'{package}.{name}'
    try:
      module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
      if e.name == module_name or module_name.startswith(f'{e.name}.'):
        continue  # the file (or its package) does not exist: try the next name
      raise
    return module.get_config(), module_name.replace('.', '/') + '.py'
  paths = ', '.join(f'{package.replace(".", "/")}/{n}.py' for n in names)
  return fallback(), f"the paper's settings (no {paths})"


def variant_config(config: ml_collections.ConfigDict, attention: Mapping[str, str],
                   overrides: Mapping[str, Any], variant: Optional[str] = None,
                   ) -> ml_collections.ConfigDict:
  """A copy of `config` whose `config.model` is updated, in order, by the model keys of
  `config.variants[variant]` (when the config defines that variant: e.g. the 75-d "no attention" row
  of Table 4), the variant's attention keys, and `overrides`."""
  config = ml_collections.ConfigDict(config.to_dict())
  model = config.model.to_dict()
  variants = config.get('variants') or {}
  if variant is not None and variant in variants:
    model.update(dict(variants[variant].get('model', {})))
  model.update(attention)
  model.update(overrides)
  config.model = ml_collections.ConfigDict(model)
  return config


def random_lengths(rng: np.random.Generator, size: Sequence[int], padded: int) -> np.ndarray:
  """Real lengths uniform in [padded // 2 + 1, padded] (a bucket holds lengths above the previous
  boundary, which is half this one for the default geometric boundaries)."""
  return rng.integers(padded // 2 + 1, padded + 1, size=size).astype(np.int32)


def snli_batch(rng: np.random.Generator, batch: int, premise: int, hypothesis: int, vocab_size: int,
               ) -> dict[str, np.ndarray]:
  """A random pair batch: premise [B, premise], hypothesis [B, hypothesis] int32 ids in
  [1, vocab_size) (0 past the lengths), lengths int32 [B], label int32 [B] in [0, 3),
  example_mask float32 [B] of ones."""
  out = {}
  for key, padded in (('premise', premise), ('hypothesis', hypothesis)):
    lengths = random_lengths(rng, (batch,), padded)
    tokens = rng.integers(1, vocab_size, size=(batch, padded)).astype(np.int32)
    out[key] = np.where(np.arange(padded) < lengths[:, None], tokens, 0).astype(np.int32)
    out[f'{key}_lengths'] = lengths
  out['label'] = rng.integers(0, SNLI_CLASSES, size=(batch,)).astype(np.int32)
  out['example_mask'] = np.ones((batch,), np.float32)
  return out


def document_batch(rng: np.random.Generator, batch: int, sentences: int, words: int, vocab_size: int,
                   ) -> dict[str, np.ndarray]:
  """A random document batch: tokens [B, S, T] int32, sentence_lengths [B, S], num_sentences [B]
  (every slot full: S sentences of T words, the Yelp averages by default), label [B] in [0, 5),
  example_mask [B]."""
  tokens = rng.integers(1, vocab_size, size=(batch, sentences, words)).astype(np.int32)
  return {'tokens': tokens,
          'sentence_lengths': np.full((batch, sentences), words, np.int32),
          'num_sentences': np.full((batch,), sentences, np.int32),
          'label': rng.integers(0, YELP_CLASSES, size=(batch,)).astype(np.int32),
          'example_mask': np.ones((batch,), np.float32)}
