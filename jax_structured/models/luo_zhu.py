"""Luo & Zhu, "Recurrent Neural Networks with Mixed Hierarchical Structures" (MHS-RNN), with its two
baselines, HAN (Yang et al. 2016: HN-ATT, HN-AVE) and HM-RNN (Chung et al. 2016), as registered encoders,
and the document model 'luo_zhu.document_classifier' that runs any encoder over whole documents.

Design (why the 'flat' reading of the 'classifier.document' head): MHS-RNN reads a document as ONE
token sequence: its word and phrase layers carry their states across sentence ends and the sentence layer
is updated inside the same scan (sec. III-B). The head's 'sentences' reading encodes each sentence
separately ([B, S, T] words), which cuts exactly those paths. So every encoder here takes a FLAT document `x [..., N, E]`, `lengths [...]`
and the structure input 'boundaries' [..., N] (1 at the last token of each sentence: the static boundary
p_t of eq. 2); a sentence is the segment ending at a flag, and the last real token always closes one.
The same input serves HAN (word BiGRU restarted per sentence, attention inside each sentence) so the
baselines see exactly the same data. Under the generic 'classifier.sentence' head they run wherever the
batch carries 'boundaries'; 'luo_zhu.document_classifier' builds that flat input on the device from the
document batches of the `document_classification` / `text_classification(split_sentences=True)` loaders
(`heads.flatten_documents`): it is the 'classifier.document' head in its 'flat' reading. Static
boundaries (`config.model.static_boundaries`): 'sentences' flags the last token of every sentence of the
loader's split; 'punctuation' (MHS-RNN in configs/luo_zhu, the paper's eq. 2: p_t = 1 iff the input is
a punctuation mark) also flags every punctuation token (commas, brackets, quotes, ...), from the per-token batch['punctuation'] that the loaders add when
`config.data.punctuation` is 'keep' (tokens unchanged) or 'p' (every punctuation token replaced by
the one token 'p' before the vocabulary is built, sec. IV-B). The flags are computed from the token
strings in the loader (`data.text.is_punctuation`), where the words are known; a sentence end without
punctuation (a document's last sentence, a pre-split corpus) stays a boundary.

Encoders ('boundaries' in STRUCTURE_INPUTS):
  'mhs_rnn'  sec. III-A/B (`attention=False`): states [h^1_t, h^2_t] [..., N, 2H]; sentence vector: the
             sentence layer's h^3 after the last token [..., H].
             sec. III-C..F (`attention=True`): word-phrase attention within each sentence over
             h^c_t = [h^1_t, h^2_t] (eq. 9), a bidirectional LSTM over the sentence vectors (eq. 10),
             sentence attention (eq. 11): sentence vector v [..., 2 * sentence_size]; the in-scan
             sentence layer (eq. 6) is then not used.
  'han'      Yang et al. (2016): word BiGRU (restarted per sentence) -> attention (HN-ATT) or mean
             (HN-AVE) per sentence -> sentence BiGRU -> attention / mean: sentence vector [..., 2H].
  'hm_rnn'   Chung et al. (2016) HM-LSTM, 3 layers with learned boundaries at every layer: states are
             the layers' h concatenated [..., N, L*H]; sentence vector: those after the last token.
All sow (with `sow_prefix`) 'boundaries' (z_t; hm_rnn: [..., N, L]), 'boundary_probs' (z~_t) and
'lengths'; mhs_rnn and han also 'static_boundaries' (the p_t used), 'word_attention'; mhs_rnn and
hm_rnn 'slope' (the a used, []).

Slope annealing (sec. IV-B "we tune the slope a in the range from 1 to 5"; Chung et al.: a grows during
training): `slope` -> `slope_end` linearly over `slope_anneal_steps` steps, read from the structure key
'step' (int [], the train step: `training.steps.train_step` adds batch['step'] = state.step and
'luo_zhu.document_classifier' passes it on); without it (evaluation) the slope is `slope`. The forward
value of every boundary is independent of a (z = 1 iff the detector's pre-activation is > 0): the slope
only shapes the straight-through gradient, so evaluation never depends on it.
"""
from __future__ import annotations

from typing import ClassVar, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured import nn as jsnn
from jax_structured.models import encoders as encoders_lib
from jax_structured.models import heads
from jax_structured.models import registry
from jax_structured.nn import flatten
from jax_structured.nn import han as han_lib
from jax_structured.nn import hm_rnn as hm_lib
from jax_structured.nn import mhs_rnn as mhs_lib


def annealed_slope(step: Optional[jax.Array], start: float, end: float, steps: int) -> jax.Array:
  """a(step) = start + (end - start) * min(step / steps, 1); `start` when steps == 0 or step is None."""
  if not steps or step is None:
    return jnp.asarray(start, jnp.float32)
  frac = jnp.minimum(jnp.asarray(step, jnp.float32) / steps, 1.0)
  return start + (end - start) * frac


def _last(states: jax.Array, lengths: jax.Array) -> jax.Array:
  """states [M, N, D] at position lengths - 1 ([M, D]; 0 for empty sequences)."""
  index = jnp.maximum(lengths - 1, 0)[:, None, None]
  out = jnp.take_along_axis(states, index, axis=1)[:, 0]
  return jnp.where((lengths > 0)[:, None], out, 0.0)


class _Boundaries(encoders_lib.Encoder):
  """An encoder of flat documents: needs the structure input 'boundaries' [..., N].

  Attributes:
    hidden_size: the recurrent layers' size (per direction where bidirectional).
  """
  STRUCTURE_INPUTS: ClassVar[tuple[str, ...]] = ('boundaries',)
  hidden_size: int = 50

  def flat_inputs(self, x, lengths, structure):
    """x [..., N, E] -> (x [M, N, E], lengths int32 [M], boundaries [M, N], the leading shape)."""
    if structure is None or 'boundaries' not in structure:
      raise KeyError("this encoder needs the structure input 'boundaries' [..., N] (1 at the last token "
                     "of each sentence); use model 'luo_zhu.document_classifier' on document data, or "
                     "a loader that provides batch['boundaries']")
    bounds = jnp.asarray(structure['boundaries'])
    if bounds.shape != x.shape[:-1]:
      raise ValueError(f"structure['boundaries'] has shape {bounds.shape}; expected {x.shape[:-1]} "
                       '(one flag per token)')
    flat_x, flat_len, flat, lead = flatten.flatten_leading(x, lengths, {'boundaries': bounds})
    return flat_x, flat_len, flat['boundaries'], lead


class _Annealed(_Boundaries):
  """A flat-document encoder with hard-sigmoid boundary detectors.

  Attributes: as `_Boundaries`, plus
    slope, slope_end, slope_anneal_steps: the hard-sigmoid slope schedule (module docstring).
  """
  slope: float = 1.0
  slope_end: float = 5.0
  slope_anneal_steps: int = 0

  def slope_value(self, structure):
    return annealed_slope((structure or {}).get('step'), self.slope, self.slope_end,
                          self.slope_anneal_steps)


@encoders_lib.register('mhs_rnn')
class MHSRNNEncoder(_Annealed):
  """MHS-RNN (Luo & Zhu sec. III), with or without the attention of sec. III-C..F (module docstring).

  Attributes: as `_Annealed` (hidden_size: word, phrase and sentence layers; the paper: 50), plus
    attention: the word-phrase attention + bidirectional sentence layer + sentence attention.
    sentence_size: per direction of the sentence BiLSTM with attention (0: hidden_size).
    attention_size: size of u_t in both attentions (0: the attended vectors' size, as the paper).
  """
  attention: bool = True
  sentence_size: int = 0
  attention_size: int = 0

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del sow_splits
    flat_x, flat_len, bounds, batch_shape = self.flat_inputs(x, lengths, structure)
    steps = flat_x.shape[1]
    ids, closed, num = han_lib.sentence_ids(bounds, flat_len)
    slope = self.slope_value(structure)
    self.sow('intermediates', sow_prefix + 'slope', slope)
    out = mhs_lib.MHSRNN(self.hidden_size, name='mhs_rnn')(flat_x, closed, flat_len, slope)
    states = jnp.concatenate([out.h1, out.h2], -1)  # h^c_t of eq. 9
    self.sow('intermediates', sow_prefix + 'boundaries', out.z.reshape(batch_shape + (steps,)))
    self.sow('intermediates', sow_prefix + 'boundary_probs', out.z_prob.reshape(batch_shape + (steps,)))
    self.sow('intermediates', sow_prefix + 'static_boundaries', closed.reshape(batch_shape + (steps,)))
    self.sow('intermediates', sow_prefix + 'lengths', flat_len.reshape(batch_shape))
    if not self.attention:
      sentence = _last(out.h3, flat_len)
    else:
      mask = jsnn.sequence_mask(flat_len, steps)
      s, alpha = han_lib.SegmentAttention(self.attention_size, name='word_phrase_attention')(
          states, ids, mask)  # eq. 9
      self.sow('intermediates', sow_prefix + 'word_attention', alpha.reshape(batch_shape + (steps,)))
      h3 = jsnn.BiLSTM(self.sentence_size or self.hidden_size, name='sentence_bilstm')(s, num)  # eq. 10
      sentence = jsnn.AttentionPooling(self.attention_size, name='sentence_attention')(h3, num)  # eq. 11
    return encoders_lib.EncoderOutput(*flatten.unflatten_leading(batch_shape, states, sentence))


@encoders_lib.register('han')
class HANEncoder(_Boundaries):
  """Hierarchical attention network (Yang et al. 2016) over flat documents: HN-ATT or HN-AVE.

  Attributes: as `_Boundaries` (hidden_size: GRU size per direction at both levels; Yang et al.: 50), plus
    attention: attention pooling at both levels (HN-ATT); False: the mean (HN-AVE).
    attention_size: size of u_t (0: the attended vectors' size, 100 in the paper).
  """
  attention: bool = True
  attention_size: int = 0

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del sow_splits, train
    flat_x, flat_len, bounds, batch_shape = self.flat_inputs(x, lengths, structure)
    steps = flat_x.shape[1]
    ids, closed, num = han_lib.sentence_ids(bounds, flat_len)
    mask = jsnn.sequence_mask(flat_len, steps)
    words = han_lib.ResetBiGRU(self.hidden_size, name='word_gru')(flat_x, flat_len, closed)
    mean = not self.attention
    s, alpha = han_lib.SegmentAttention(self.attention_size, mean=mean, name='word_pooling')(
        words, ids, mask)
    self.sow('intermediates', sow_prefix + 'word_attention', alpha.reshape(batch_shape + (steps,)))
    self.sow('intermediates', sow_prefix + 'static_boundaries', closed.reshape(batch_shape + (steps,)))
    sentences = han_lib.ResetBiGRU(self.hidden_size, name='sentence_gru')(s, num)
    if mean:
      v = jsnn.masked_mean(sentences, num)
    else:
      v = jsnn.AttentionPooling(self.attention_size, name='sentence_attention')(sentences, num)
    return encoders_lib.EncoderOutput(*flatten.unflatten_leading(batch_shape, words, v))


@encoders_lib.register('hm_rnn')
class HMRNNEncoder(_Annealed):
  """HM-RNN baseline (Chung et al. 2016): an HM-LSTM with learned boundaries at every layer. It reads
  the same flat documents; the static 'boundaries' are not used by its equations (the structure is all
  learned) but are required so that the three models are run on identical batches.

  Attributes: as `_Annealed` (hidden_size: per layer), plus
    num_layers: 3 in Luo & Zhu's baseline.
  """
  num_layers: int = 3

  @nn.compact
  def __call__(self, x, lengths, *, structure=None, train=False, sow_prefix='', sow_splits=()):
    del sow_splits, train
    flat_x, flat_len, _, batch_shape = self.flat_inputs(x, lengths, structure)
    steps = flat_x.shape[1]
    slope = self.slope_value(structure)
    self.sow('intermediates', sow_prefix + 'slope', slope)
    out = hm_lib.HMLSTM(self.hidden_size, self.num_layers, name='hm_lstm')(flat_x, flat_len, slope)
    states = out.h.reshape(out.h.shape[:2] + (-1,))
    self.sow('intermediates', sow_prefix + 'boundaries', out.z.reshape(batch_shape + (steps, -1)))
    self.sow('intermediates', sow_prefix + 'boundary_probs', out.z_prob.reshape(batch_shape + (steps, -1)))
    self.sow('intermediates', sow_prefix + 'lengths', flat_len.reshape(batch_shape))
    sentence = _last(states, flat_len)
    return encoders_lib.EncoderOutput(*flatten.unflatten_leading(batch_shape, states, sentence))


# --- The document model ---------------------------------------------------------------------------------

# `config.model` defaults of 'luo_zhu.document_classifier' where they differ from the head's.
DOCUMENT_DEFAULTS = {'embedding_dim': 100, 'pooling': 'encoder'}


@registry.register('luo_zhu.document_classifier')
def build_document_classifier(config, *, vocab_size, num_classes, embeddings=None):
  """The Luo & Zhu document model (eq. 12): `heads.DocumentClassifier` in its 'flat' reading.

  Keys: the head's fields for that reading (`heads._Head`'s, `pooling`, `static_boundaries`; defaults
  `DOCUMENT_DEFAULTS`: 100-d words, pooling 'encoder', the encoder's document vector as in the paper)
  and the `encoder` section. Parameters: `embed`, `encoder`, `pooling` (attention pooling only),
  `hidden`, `logits`.
  """
  valid = set(registry.config_fields(heads.DocumentClassifier)) - {
      'sentence_encoder', 'document_encoder', 'reading', 'document_pooling'}
  registry.check_keys(config, valid, 'luo_zhu.document_classifier')
  if config.get('encoder') is None:
    raise KeyError("config.model.encoder is missing for 'luo_zhu.document_classifier': e.g. "
                   "{'name': 'mhs_rnn', 'attention': True}")
  section = dict(config['encoder'])
  if section.get('name') in FAMILY:
    # `variants` switch between this family's encoders by dotted overrides of one section holding the
    # union of their keys: keys of a sibling encoder are dropped, any other unknown key still fails.
    siblings = set().union(*(encoders_lib.config_fields(encoders_lib.get(n)) for n in FAMILY))
    own = set(encoders_lib.config_fields(encoders_lib.get(section['name'])))
    section = {k: v for k, v in section.items() if k == 'name' or k in own or k not in siblings}
  values = {**DOCUMENT_DEFAULTS, **{k: v for k, v in config.items() if k not in ('name', 'encoder')},
            'reading': 'flat'}
  return heads.build_head('classifier.document', values, vocab_size=vocab_size,
                          num_classes=num_classes, embeddings=embeddings,
                          encoders={'encoder': encoders_lib.build(section, name='encoder')},
                          model_name='luo_zhu.document_classifier')


FAMILY = ('mhs_rnn', 'han', 'hm_rnn')

