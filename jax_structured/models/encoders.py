"""The encoder contract and its registry: every paper's sentence encoder under one interface.

An ENCODER is a Linen module registered by name with `@encoders.register('name')`; the config picks it
with `config.model.encoder.name` and its dataclass fields are the valid `config.model.encoder.*` keys.
Heads (`models.heads`) hold an encoder without knowing which one (AllenNLP's Seq2Seq / Seq2Vec split,
collapsed into one call that returns both)::

    encoder(x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()) -> EncoderOutput

  x:          float [..., T, E] embedded words (any leading batch shape; heads pass [B, T, E] or, for
              the words of documents, [B, S, T, E]).
  lengths:    int [...] real words per sequence (0 allowed for padding slots: outputs are zeros).
  structure:  optional per-example structure inputs, a dict with the keys the encoder class lists in
              `STRUCTURE_INPUTS`: 'heads' [..., T] int32 (dependency heads, -1 = ROOT, gold or parsed),
              'tree_children' [..., N, 2] / 'tree_leaves' ... (SST binary trees, see the Tree-LSTM
              encoders), 'boundaries' [..., T] float (static phrase-boundary flags). Heads fetch them from
              the batch by those names (with the text's prefix for pairs: 'premise_heads', ...).
  train:      enables dropout (rng stream 'dropout') and other training-only behaviour.
  sow_prefix: prefix for what the encoder sows into the 'intermediates' collection (induced trees
              `arc_scores`, `root_scores`, `lengths`, marginals; attention weights; boundaries), so that
              evaluation (tree UAS) and the analysis tools find them, e.g. 'sentence_' / 'document_'.
  sow_splits: for inputs that stack several texts along the first axis, ((prefix, rows), ...).

  Returns `EncoderOutput(states, sentence, nodes)`: `states` float [..., T, D] contextual word states,
  zero at positions >= lengths; `sentence` float [..., D'] the encoder's OWN sentence vector where it
  defines one (a Tree-LSTM root, DCNN k-max features, a CNN's max-over-time), else None; `nodes` float
  [..., N, D'] the states of every node of the sentence's tree in node-id order, of the same kind as
  `sentence` (the root's among them), where the encoder defines them (the binary Tree-LSTM: N = 2T - 1,
  labelled by the batch's `tree_labels` [..., N]; zero at padding nodes), else None. Phrase-level
  supervision (Tai et al. 2015) classifies them with the sentence classifier.

Every encoder keeps padding exact: a batch padded to a longer T gives the same outputs at real positions.
Class attributes: `STRUCTURE_INPUTS` (tuple of structure keys it requires), `CAUSAL` (state t depends
only on words <= t: usable under the language-model head).

Built-in encoders (this file): 'bow' (the embeddings themselves; mean pooling gives the bag of words),
'bilstm', 'lstm' (stacked, unidirectional), 'liu_lapata' (BiLSTM + none / simple / structured /
inside-outside attention, Liu & Lapata 2018 eqs. 7-18; `shared_features` is footnote 6 of Yu et al. 2018),
'lstmn' (Cheng et al. 2016, 1-3 layers; `cell='lstm'` the baseline), 'cnn' (Kim 2014). Paper families
register more in their own modules of `jax_structured.models`, all of which are imported on first
lookup (`discovery.import_submodules`).
"""
from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Mapping, Optional, Sequence

import flax
import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured import discovery
from jax_structured import nn as jsnn
from jax_structured.nn import flatten
from jax_structured.nn import lstmn as lstmn_lib

_ENCODERS: dict[str, type] = {}


@flax.struct.dataclass
class EncoderOutput:
  """What every encoder returns.

  Attributes:
    states: float [..., T, D] contextual word states, zero at padded positions.
    sentence: float [..., D'] the encoder's own sentence vector, or None where it defines none.
    nodes: float [..., N, D'] every tree node's state in node-id order (module docstring), or None.
  """
  states: jax.Array
  sentence: Optional[jax.Array] = None
  nodes: Optional[jax.Array] = None


class Encoder(nn.Module):
  """Base class of registered encoders (documents the contract; subclasses implement `__call__`)."""
  STRUCTURE_INPUTS: ClassVar[tuple[str, ...]] = ()
  CAUSAL: ClassVar[bool] = False

  def __call__(self, x: jax.Array, lengths: jax.Array, *, structure: Optional[Mapping[str, jax.Array]] = None,
               train: bool = False, sow_prefix: str = '', sow_splits: Sequence[tuple[str, int]] = (),
               ) -> EncoderOutput:
    raise NotImplementedError


def register(name: str):
  """Class decorator registering an `Encoder` subclass under `name` (an error if the name is taken)."""

  def wrap(cls):
    if not (isinstance(cls, type) and issubclass(cls, Encoder)):
      raise TypeError(f'encoder {name!r}: {cls!r} is not a subclass of models.encoders.Encoder')
    old = _ENCODERS.get(name)
    if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
      raise ValueError(f'encoder {name!r} registered twice: {old.__module__}.{old.__qualname__} and '
                       f'{cls.__module__}.{cls.__qualname__}')
    _ENCODERS[name] = cls
    return cls

  return wrap


def _import_families():
  discovery.import_submodules('jax_structured.models', registry='encoder registry')


def names() -> list[str]:
  """Registered encoder names."""
  _import_families()
  return sorted(_ENCODERS)


def get(name: str) -> type:
  """The encoder class registered as `name`; KeyError listing the registered names otherwise."""
  _import_families()
  if name not in _ENCODERS:
    raise KeyError(f'unknown encoder config.model.encoder.name={name!r}; registered: {sorted(_ENCODERS)}')
  return _ENCODERS[name]


def config_fields(cls: type) -> dict[str, Any]:
  """{config key: default} of an encoder class (its dataclass fields, without Flax's own)."""
  out = {}
  for field in dataclasses.fields(cls):
    if field.name in ('parent', 'name') or not field.init:
      continue
    if field.default is not dataclasses.MISSING:
      out[field.name] = field.default
    elif field.default_factory is not dataclasses.MISSING:  # pytype: disable=attribute-error
      out[field.name] = field.default_factory()
    else:
      out[field.name] = None
  return out


def build(config: Mapping[str, Any], *, name: Optional[str] = None,
          where: str = 'config.model.encoder') -> Encoder:
  """Instantiates the encoder `config['name']` from its keys.

  Args:
    config: a mapping (ConfigDict) with `name` and any of the encoder's fields.
    name: the Flax module name of the instance (None: named by the attribute of the head holding it).
    where: the config path named in errors.

  Raises:
    KeyError: unknown encoder (lists the registered ones) or unknown keys (lists the valid ones).
  """
  if config is None or 'name' not in config:
    raise KeyError(f'{where}.name is not set; registered encoders: {names()}')
  cls = get(config['name'])
  fields = config_fields(cls)
  unknown = sorted(set(config.keys()) - set(fields) - {'name'})
  if unknown:
    raise KeyError(f'unknown key(s) {[f"{where}.{k}" for k in unknown]} for encoder {config["name"]!r}; '
                   f'valid: {sorted(fields)}')
  kwargs = {k: (tuple(v) if isinstance(v, list) else v) for k, v in config.items() if k != 'name'}
  return cls(**kwargs, name=name)


def default_config(encoder_name: str) -> dict[str, Any]:
  """`{'name': encoder_name, **every field with its default}`: a full `config.model.encoder` section."""
  return {'name': encoder_name, **config_fields(get(encoder_name))}


def _mask(states: jax.Array, lengths: jax.Array) -> jax.Array:
  return jsnn.masked_fill(states, jsnn.sequence_mask(lengths, states.shape[-2]))


# --- Built-in encoders ---------------------------------------------------------------------------------


@register('bow')
class BagOfWords(Encoder):
  """Bag of words (Yu et al. 2018, Tables 1-2 'BoW'): the word vectors themselves, optionally through a
  ReLU projection; mean pooling of the states is the averaged embedding.

  Attributes:
    projection: size of a Dense + ReLU applied to each word vector (0: none, the states are x).
  """
  projection: int = 0
  CAUSAL: ClassVar[bool] = True

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del structure, train, sow_prefix, sow_splits
    if self.projection:
      x = nn.relu(nn.Dense(self.projection, name='projection')(x))
    return EncoderOutput(_mask(x, lengths))


class _StackedRecurrent(Encoder):
  """Fields of the stacked recurrent encoders 'bilstm' and 'lstm'.

  Attributes:
    hidden_size: state size (per direction for 'bilstm').
    num_layers: stacked layers.
    dropout_rate: dropout between stacked layers.
  """
  hidden_size: int = 300
  num_layers: int = 1
  dropout_rate: float = 0.0


@register('bilstm')
class BiLSTMEncoder(_StackedRecurrent):
  """A (stacked) bidirectional LSTM; states [..., T, 2 * hidden_size] (forward half first).

  Attributes: as `_StackedRecurrent` (hidden_size per direction).
  """

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del structure, sow_prefix, sow_splits
    states = jsnn.BiLSTM(self.hidden_size, num_layers=self.num_layers, dropout_rate=self.dropout_rate,
                         name='bilstm')(x, lengths, deterministic=not train)
    return EncoderOutput(states)


@register('lstm')
class StackedLSTMEncoder(_StackedRecurrent):
  """A stacked unidirectional LSTM (left to right), with skip connections from the input to every layer
  above the first (Graves 2013, as Cheng et al. 2016 stack theirs); states [..., T, hidden_size].

  Attributes: as `_StackedRecurrent`.
  """
  CAUSAL: ClassVar[bool] = True

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del structure, sow_prefix, sow_splits
    flat_x, flat_lengths, _, lead = flatten.flatten_leading(x, lengths)
    states, _ = lstmn_lib.StackedLSTMN(self.hidden_size, self.num_layers, 'lstm',
                                       dropout_rate=self.dropout_rate, name='lstm')(
                                           flat_x, flat_lengths, train=train)
    return EncoderOutput(*flatten.unflatten_leading(lead, states))


@register('liu_lapata')
class LiuLapataEncoder(Encoder):
  """BiLSTM + intra-sentence attention of Liu & Lapata (2018): 'none' (the BiLSTM outputs), 'simple'
  (softmax intra-attention, eqs. 1-3), 'structured' (matrix-tree marginals, eqs. 7-18) or
  'inside_outside' (projective marginals, Kim et al. 2017).

  States: [..., T, 2 * semantic_size] with attention, [..., T, 2 * hidden_size] without ('none'), or
  [..., T, 2 * hidden_size] with `shared_features`. Structured variants sow `arc_scores`, `root_scores`,
  `lengths`, `arc_marginals`, `root_marginals` (prefixed by `sow_prefix`).

  Attributes:
    hidden_size: BiLSTM size per direction.
    semantic_size: per-direction semantic part of the BiLSTM output (eq. 7); the rest is structure.
    attention: 'none' | 'simple' | 'structured' | 'inside_outside'.
    num_layers: stacked BiLSTM layers.
    single_root: exactly one word hangs from ROOT (the paper's formulation).
    shared_features: footnote 6 of Yu et al. (2018): the same vector o_i (the whole BiLSTM output) both
      scores the attention and is summed (no semantic / structure split; `semantic_size` unused).
  """
  hidden_size: int = 100
  semantic_size: int = 75
  attention: str = 'structured'
  num_layers: int = 1
  single_root: bool = True
  shared_features: bool = False

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del structure
    normalizer = attention_normalizer(self.attention)
    hidden = jsnn.BiLSTM(self.hidden_size, num_layers=self.num_layers, name='bilstm')(
        x, lengths, deterministic=not train)
    states = jsnn.StructuredAttention(
        self.semantic_size, normalizer=normalizer, single_root=self.single_root,
        shared_features=self.shared_features, name='attention')(
            hidden, lengths, sow_prefix=sow_prefix, sow_splits=sow_splits)
    return EncoderOutput(states)


# Variant name (configs, Liu & Lapata Tables 1 and 4) -> `nn.StructuredAttention` normalizer.
ATTENTIONS = {'none': 'none', 'simple': 'softmax', 'structured': 'matrix_tree',
              'inside_outside': 'projective'}


def attention_normalizer(attention: str, key: str = 'attention') -> str:
  """The `StructuredAttention` normalizer of an attention variant; ValueError naming `key` otherwise."""
  if attention not in ATTENTIONS:
    raise ValueError(f'config.model.{key}={attention!r}; valid: {sorted(ATTENTIONS)}')
  return ATTENTIONS[attention]


@register('lstmn')
class LSTMNEncoder(Encoder):
  """Long short-term memory-network (Cheng, Dong & Lapata 2016, eqs. 4-10), 1-3 stacked layers with
  skip connections; `cell='lstm'` gives the stacked-LSTM baseline of their Tables 1-3 in the same code.
  States [..., T, hidden_size]: the top layer's hidden tape. Sows `intra_attention` per layer.

  Attributes:
    hidden_size: tape size.
    num_layers: stacked layers (the paper: 1-3).
    cell: 'lstmn' | 'lstm'.
    attention_size: size of the attention's hidden layer (default hidden_size).
    memory_span: attend to the last `memory_span` tokens only (0: the whole tape).
    dropout_rate: dropout between stacked layers.
  """
  hidden_size: int = 300
  num_layers: int = 1
  cell: str = 'lstmn'
  attention_size: int = 0
  memory_span: int = 0
  dropout_rate: float = 0.0
  CAUSAL: ClassVar[bool] = True

  def setup(self):
    if not 1 <= self.num_layers <= 3:
      raise ValueError(f'config.model.encoder.num_layers={self.num_layers}: the LSTMN has 1-3 layers '
                       '(Cheng et al. 2016)')
    self.lstmn = lstmn_lib.StackedLSTMN(
        self.hidden_size, self.num_layers, self.cell, attention_size=self.attention_size or None,
        memory_span=self.memory_span or None, dropout_rate=self.dropout_rate)

  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del structure, sow_prefix, sow_splits
    states, _ = self.tapes(x, lengths, train=train)
    return EncoderOutput(states)

  def tapes(self, x, lengths, *, train=False):
    """(hidden [..., T, H], memory [..., T, H]) of the top layer (the pair heads' fusion reads both)."""
    flat_x, flat_lengths, _, lead = flatten.flatten_leading(x, lengths)
    return flatten.unflatten_leading(lead, *self.lstmn(flat_x, flat_lengths, train=train))


@register('cnn')
class KimCNN(Encoder):
  """Convolutional sentence encoder of Kim (2014): for each width w, `features` filters over windows of
  w words (ReLU), max over time; the concatenation is the sentence vector [..., len(widths) * features].
  States [..., T, len(widths) * features]: each position's feature maps (window starting there; windows
  reaching past the sentence end see zeros), so max pooling of the states equals the sentence vector.
  A sentence shorter than a width is zero-padded to it (as Kim's code pads every sentence).

  Attributes:
    widths: filter widths (Kim: 3, 4, 5).
    features: feature maps per width (Kim: 100).
  """
  widths: Sequence[int] = (3, 4, 5)
  features: int = 100

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del structure, train, sow_prefix, sow_splits
    lengths = jnp.asarray(lengths, jnp.int32)
    flat, _, _, batch_shape = flatten.flatten_leading(_mask(x, lengths), lengths)
    steps = flat.shape[1]
    maps = []
    for w in self.widths:
      padded = jnp.pad(flat, ((0, 0), (0, w - 1), (0, 0)))  # windows may run past the end into zeros
      maps.append(nn.relu(nn.Conv(self.features, (w,), padding='VALID', name=f'conv_{w}')(padded)))
    maps = flatten.unflatten_leading(batch_shape, *maps)  # [..., T, features] per width
    states = jnp.concatenate(maps, -1)
    # A window starting at t is real when t < max(length - w + 1, 1) (a short sentence keeps one window).
    valid = [jsnn.sequence_mask(jnp.maximum(lengths - w + 1, jnp.minimum(lengths, 1)), steps)
             for w in self.widths]
    sentence = jnp.concatenate(
        [jnp.max(jnp.where(v[..., None], m, -jnp.inf), axis=-2) for v, m in zip(valid, maps)], -1)
    sentence = jnp.where(lengths[..., None] > 0, sentence, 0.0)
    return EncoderOutput(_mask(states, lengths), sentence)

