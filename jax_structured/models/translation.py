"""Attentive encoder-decoder translation (Bahdanau et al. 2015) over ANY registered encoder, as Yu et al.
(2018, sec. 4.2, Table 2b) use it: the encoder's states are the annotation vectors h_j (a BiLSTM's for
the "standard attention" baseline; the tree-constrained RN's s_i for theirs).

Model 'translation.seq2seq' (`Seq2Seq`), one decoder step t (`DecoderCell`, eqs. of Bahdanau et al.
appendix A.2, with the context fed to a stacked LSTM):

  e_tj  = v_a^T tanh(W_a s_{t-1} + U_a h_j)          additive attention over the real source words
  a_tj  = softmax_j(e_tj),  c_t = sum_j a_tj h_j
  x_t   = [E y_{t-1}; c_t (; h~_{t-1} with `input_feeding`, Luong et al. 2015 sec. 3.3)]
  s_t   = LSTM_L(... LSTM_1(x_t) ...)                 `decoder_layers` stacked LSTM cells, dropout between
  h~_t  = tanh(W_c [s_t; c_t])                        (Luong et al. 2015 eq. 5; Bahdanau's maxout
                                                        deep output is replaced by this tanh layer)
  p(y_t | y_<t, x) = softmax(W_s dropout(h~_t) + b_s)

s_{t-1} is the top layer's state; every layer starts from h_0 = tanh(W_init mean_j h_j) (Bahdanau's
s_0 = tanh(W_s h_1^<-) generalised to encoders without a backward state), c_0 = 0, h~_0 = 0.

Batches (kind 'translation', loader `iwslt15_en_vi`): `source [B, S]`, `source_lengths [B]`,
`target [B, T] = <s> y_1 .. y_m </s>` (padded with 0), `target_lengths [B] = m + 2`. Training uses
teacher forcing: the decoder reads target[:, :-1] and predicts target[:, 1:]. `__call__` returns
{'logits': [B, T - 1, V]}, plus, when not training and `eval_beam_size > 0`, the beam-search
translation {'hypotheses' [B, L], 'hypothesis_lengths' [B], 'hypothesis_scores' [B]} (`translate`).

Loss and BLEU (the 'translation' task, `training.translation_task`): `token_nll` (masked token
cross-entropy, summed) and `bleu_statistics` (the sufficient statistics of corpus BLEU, Papineni et al.
2002, computed on device from token ids; sacrebleu turns their sums into the score).

The target vocabulary is the task's label set: `num_classes` = its size; `bos_id` / `eos_id` are its
`<s>` / `</s>` ids (2 and 3 in `data.loaders.target_vocabulary`'s layout).
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import flax.linen as nn
import jax
import jax.numpy as jnp

from jax_structured import nn as jsnn
from jax_structured.models import encoders as encoders_lib
from jax_structured.models import heads
from jax_structured.models import registry
from jax_structured.nn import beam_search as beam_lib

UNK_ID = 1  # data.core.UNK_ID (models import nothing from data)
NGRAM_ORDER = 4


class DecoderCell(nn.Module):
  """One decoder step (module docstring): `(carry, tokens [B]) -> (carry, logits [B, V])`.

  The source side is given once per sequence: `annotations [B, S, D]` (h_j), `keys [B, S, A]`
  (U_a h_j, precomputed) and `source_mask [B, S]`. carry = (((c, s) per layer), h~).

  Attributes:
    vocab_size: target vocabulary V.
    embedding_dim: target word vectors E.
    hidden_size: LSTM state size.
    num_layers: stacked LSTM layers.
    attention_size: A, the hidden size of the additive attention.
    input_feeding: also feed h~_{t-1} to the first layer.
    dropout_rate: dropout between LSTM layers and on h~_t (training).
    embedding_dropout: dropout on the target word vectors (training).
    deterministic: no dropout.
  """
  vocab_size: int
  embedding_dim: int
  hidden_size: int
  num_layers: int
  attention_size: int
  input_feeding: bool = False
  dropout_rate: float = 0.0
  embedding_dropout: float = 0.0
  deterministic: bool = True

  @nn.compact
  def __call__(self, carry, tokens, annotations, keys, source_mask):
    layers, feed = carry
    emb = jsnn.WordEmbedding(self.vocab_size, self.embedding_dim, dropout_rate=self.embedding_dropout,
                             name='target_embed')(tokens, deterministic=self.deterministic)
    query = nn.Dense(self.attention_size, use_bias=False, name='attention_query')(layers[-1][1])
    energies = nn.Dense(1, use_bias=False, name='attention_v')(
        jnp.tanh(keys + query[:, None, :]))[..., 0]  # e_tj [B, S]
    weights = jsnn.masked_softmax(energies, source_mask)  # a_tj
    context = jnp.einsum('bs,bsd->bd', weights, annotations)  # c_t
    x = jnp.concatenate([emb, context] + ([feed] if self.input_feeding else []), axis=-1)
    new_layers = []
    for i, state in enumerate(layers):
      if i > 0:
        x = nn.Dropout(self.dropout_rate)(x, deterministic=self.deterministic)
      state, x = nn.LSTMCell(self.hidden_size, name=f'lstm_{i}')(state, x)
      new_layers.append(state)
    attentional = jnp.tanh(nn.Dense(self.hidden_size, use_bias=False, name='attentional')(
        jnp.concatenate([x, context], axis=-1)))  # h~_t
    out = nn.Dropout(self.dropout_rate)(attentional, deterministic=self.deterministic)
    logits = nn.Dense(self.vocab_size, name='output')(out)
    return (tuple(new_layers), attentional), logits


def token_nll(logits: jax.Array, targets: jax.Array, mask: jax.Array) -> tuple[jax.Array, jax.Array]:
  """Masked token cross-entropy: (sum of -log p(target) over `mask`, number of masked-in tokens),
  in float32 or the logits' wider dtype.

  Args:
    logits: float [B, T, V]; targets: int [B, T]; mask: float [B, T] (1 = a real target token).
  """
  logp = jax.nn.log_softmax(logits.astype(jnp.promote_types(logits.dtype, jnp.float32)), axis=-1)
  nll = -jnp.take_along_axis(logp, targets[..., None].astype(jnp.int32), axis=-1)[..., 0]
  mask = mask.astype(logp.dtype)
  return jnp.sum(nll * mask), jnp.sum(mask)


def _ngrams_equal(a: jax.Array, b: jax.Array, n: int) -> jax.Array:
  """eq[..., i, j] = (a[i:i+n] == b[j:j+n]) for a [..., La], b [..., Lb] (windows running past the
  arrays' ends compare distinct fill values, so they never match; the caller masks them anyway)."""
  eq = jnp.ones(a.shape[:-1] + (a.shape[-1], b.shape[-1]), bool)
  for k in range(n):
    ak = jnp.pad(a[..., k:], [(0, 0)] * (a.ndim - 1) + [(0, k)], constant_values=-7)
    bk = jnp.pad(b[..., k:], [(0, 0)] * (b.ndim - 1) + [(0, k)], constant_values=-9)
    eq = eq & (ak[..., :, None] == bk[..., None, :])
  return eq


def bleu_statistics(hypotheses: jax.Array, hypothesis_lengths: jax.Array, references: jax.Array,
                    reference_lengths: jax.Array, *, order: int = NGRAM_ORDER,
                    unk_id: Optional[int] = UNK_ID) -> dict[str, jax.Array]:
  """Per-sentence sufficient statistics of BLEU (Papineni et al. 2002) from token ids, on device.

  For n = 1..order: `correct_n` = clipped n-gram matches sum_g min(count_hyp(g), count_ref(g)) over
  the hypothesis' distinct n-grams g, `total_n` = max(len - n + 1, 0); plus `sys_len`, `ref_len`.
  Summed over a corpus they are what sacrebleu's `BLEU.compute_bleu` takes, so the score equals
  `sacrebleu.corpus_bleu(hyps, [refs], tokenize='none')` on the whitespace-joined tokens (tested).
  `unk_id` in the REFERENCES stands for a word outside the target vocabulary: it matches nothing (as
  the string '<unk>' a hypothesis may print never equals the real reference word).

  Args:
    hypotheses: int [B, L]; hypothesis_lengths: int [B] (words, EOS excluded).
    references: int [B, R]; reference_lengths: int [B].

  Returns:
    {'correct_1'..'correct_<order>', 'total_1'.., 'sys_len', 'ref_len'}: float32 [B].
  """
  hyp = jnp.asarray(hypotheses, jnp.int32)
  ref = jnp.asarray(references, jnp.int32)
  if unk_id is not None:
    ref = jnp.where(ref == unk_id, -1, ref)
  hyp_len = jnp.asarray(hypothesis_lengths, jnp.int32)
  ref_len = jnp.asarray(reference_lengths, jnp.int32)
  out = {'sys_len': hyp_len.astype(jnp.float32), 'ref_len': ref_len.astype(jnp.float32)}
  for n in range(1, order + 1):
    hyp_valid = jnp.arange(hyp.shape[-1]) <= (hyp_len - n)[:, None]  # n-gram starts
    ref_valid = jnp.arange(ref.shape[-1]) <= (ref_len - n)[:, None]
    in_hyp = jnp.sum(_ngrams_equal(hyp, hyp, n) & hyp_valid[:, None, :], axis=-1)  # count_hyp(g_i)
    in_ref = jnp.sum(_ngrams_equal(hyp, ref, n) & ref_valid[:, None, :], axis=-1)  # count_ref(g_i)
    # Each of the count_hyp(g) positions of g adds min(.) / count_hyp(g): g adds min(.) in all.
    share = jnp.minimum(in_hyp, in_ref) / jnp.maximum(in_hyp, 1)
    out[f'correct_{n}'] = jnp.round(jnp.sum(jnp.where(hyp_valid, share, 0.0), axis=-1)).astype(
        jnp.float32)
    out[f'total_{n}'] = jnp.maximum(hyp_len - n + 1, 0).astype(jnp.float32)
  return out


class Seq2Seq(nn.Module):
  """Attentive encoder-decoder (module docstring). Call: `model.apply(variables, batch, train=...)`.

  Attributes:
    encoder: any registered encoder (`config.model.encoder`); its states are the annotations.
    vocab_size: source vocabulary (injected). num_classes: target vocabulary (injected).
    embedding_init: pretrained source vectors (injected, optional).
    embedding_dim: source word vectors. target_embedding_dim: target word vectors.
    freeze_embeddings: keep the source vectors fixed.
    embedding_dropout: dropout on source and target word vectors.
    static_channel: a second, frozen copy of the source vectors added to them (as `heads._Head`).
    decoder_size: decoder LSTM size. decoder_layers: stacked decoder layers.
    attention_size: hidden size of the additive attention.
    input_feeding: feed h~_{t-1} to the decoder (Luong et al. 2015).
    dropout_rate: decoder dropout (between layers, on h~_t) and on the annotations.
    bos_id, eos_id: target ids of <s> and </s>.
    eval_beam_size: beam width of the translations made in evaluation (0: none, no BLEU).
    max_decode_ratio, max_decode_extra: a hypothesis has at most
      floor(max_decode_ratio * source length) + max_decode_extra tokens (EOS included).
    length_normalization, length_alpha: `nn.beam_search` normalisation ('average' | 'gnmt' | 'none').
  """
  encoder: nn.Module
  vocab_size: int
  num_classes: int
  embedding_init: Optional[Callable[..., Any]] = None
  embedding_dim: int = 512
  target_embedding_dim: int = 512
  freeze_embeddings: bool = False
  embedding_dropout: float = 0.0
  static_channel: bool = False
  decoder_size: int = 512
  decoder_layers: int = 2
  attention_size: int = 512
  input_feeding: bool = False
  dropout_rate: float = 0.0
  bos_id: int = 2
  eos_id: int = 3
  eval_beam_size: int = 0
  max_decode_ratio: float = 2.0
  max_decode_extra: int = 10
  length_normalization: str = 'average'
  length_alpha: float = 0.6

  def _check(self):
    if self.num_classes <= max(self.bos_id, self.eos_id):
      raise ValueError(
          f'translation.seq2seq: the target vocabulary has {self.num_classes} entries, so '
          f'config.model.bos_id={self.bos_id} / eos_id={self.eos_id} do not exist: train on a '
          "translation loader that gives the target vocabulary as its labels (config.data.name="
          "'iwslt15_en_vi')")
    if self.decoder_layers < 1:
      raise ValueError(f'config.model.decoder_layers={self.decoder_layers} must be >= 1')
    if self.length_normalization not in beam_lib.NORMALIZATIONS:
      raise ValueError(f'config.model.length_normalization={self.length_normalization!r}; valid: '
                       f'{beam_lib.NORMALIZATIONS}')

  @nn.compact
  def __call__(self, batch: Mapping[str, jax.Array], *, train: bool = False,
               beam_size: Optional[int] = None) -> dict[str, jax.Array]:
    """Teacher-forced logits when the batch has `target`; beam-search translations when not training
    and `beam_size` (default `eval_beam_size`) > 0 (module docstring)."""
    self._check()
    source = self.encode(batch, train)
    outputs = {}
    if 'target' in batch:
      target = jnp.asarray(batch['target'], jnp.int32)
      scan = nn.scan(DecoderCell, variable_broadcast='params',
                     split_rngs={'params': False, 'dropout': True},
                     in_axes=(1, nn.broadcast, nn.broadcast, nn.broadcast), out_axes=1)
      decoder = scan(self.num_classes, self.target_embedding_dim, self.decoder_size,
                     self.decoder_layers, self.attention_size, self.input_feeding, self.dropout_rate,
                     self.embedding_dropout, not train, name='decoder')
      _, outputs['logits'] = decoder(self._initial_carry(source), target[:, :-1],
                                     source['annotations'], source['keys'], source['mask'])
    beam_size = self.eval_beam_size if beam_size is None else beam_size
    if not train and beam_size > 0:
      if 'decoder' not in self.variables.get('params', {}):
        raise ValueError('translation.seq2seq: no decoder parameters to translate with (initialise '
                         'the model on a batch with `target`)')
      outputs.update(self._beam(source, self.variables['params']['decoder'], beam_size))
    return outputs

  def encode(self, batch: Mapping[str, jax.Array], train: bool) -> dict[str, jax.Array]:
    """The source side: annotations [B, S, D], keys U_a h_j [B, S, A], mask [B, S], lengths [B],
    and the initial layer state tanh(W_init mean_j h_j) [B, H]."""
    lengths = jnp.asarray(batch['source_lengths'], jnp.int32)
    x = heads.embed(self, batch['source'], train)  # the source embedding `embed`, as every head's
    output = self.encoder(x, lengths, structure=heads.structure_inputs(self.encoder, batch, 'source_'),
                          train=train)
    mask = jsnn.sequence_mask(lengths, x.shape[1])
    annotations = jsnn.masked_fill(output.states, mask)
    annotations = nn.Dropout(self.dropout_rate)(annotations, deterministic=not train)
    keys = nn.Dense(self.attention_size, name='attention_keys')(annotations)
    init = jnp.tanh(nn.Dense(self.decoder_size, name='init_state')(
        jsnn.masked_mean(annotations, lengths)))
    return {'annotations': annotations, 'keys': keys, 'mask': mask, 'lengths': lengths, 'init': init}

  def _initial_carry(self, source):
    zeros = jnp.zeros_like(source['init'])
    return tuple((zeros, source['init']) for _ in range(self.decoder_layers)), zeros

  def _beam(self, source, decoder_params, beam_size: int) -> dict[str, jax.Array]:
    """Beam search with the decoder's parameters (an unbound cell applied inside the loop)."""
    cell = DecoderCell(self.num_classes, self.target_embedding_dim, self.decoder_size,
                       self.decoder_layers, self.attention_size, self.input_feeding, parent=None)
    batch_size, steps = source['annotations'].shape[:2]
    tiled = beam_lib.tile_beams({k: source[k] for k in ('annotations', 'keys', 'mask')}, beam_size)

    def step(carry, tokens):
      carry, logits = cell.apply({'params': decoder_params}, carry, tokens, tiled['annotations'],
                                 tiled['keys'], tiled['mask'])
      return jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1), carry

    max_length = int(self.max_decode_ratio * steps) + self.max_decode_extra
    max_lengths = jnp.floor(self.max_decode_ratio * source['lengths']).astype(jnp.int32) \
        + self.max_decode_extra
    result = beam_lib.beam_search(
        step, beam_lib.tile_beams(self._initial_carry(source), beam_size), batch_size=batch_size,
        beam_size=beam_size, max_length=max_length, bos_id=self.bos_id, eos_id=self.eos_id,
        max_lengths=max_lengths, normalization=self.length_normalization, alpha=self.length_alpha,
        banned_ids=(0, self.bos_id))
    return {'hypotheses': result.tokens, 'hypothesis_lengths': result.lengths,
            'hypothesis_scores': result.scores}

  def translate(self, batch: Mapping[str, jax.Array], beam_size: int = 10) -> dict[str, jax.Array]:
    """Beam-search translations of `batch` (`source`, `source_lengths`; no `target` needed):
    {'hypotheses' [B, L] (EOS at `hypothesis_lengths`, then 0), 'hypothesis_lengths' [B],
    'hypothesis_scores' [B]}. Call as `model.apply(variables, batch, beam_size, method='translate')`."""
    return self(batch, train=False, beam_size=beam_size)


MODEL_KEYS = tuple(k for k in registry.config_fields(Seq2Seq) if k != 'encoder')


@registry.register('translation.seq2seq')
def build_seq2seq(config, *, vocab_size: int, num_classes: int, embeddings=None) -> Seq2Seq:
  """`Seq2Seq` from `config.model` (its fields, plus the `encoder` section)."""
  registry.check_keys({k: None for k in config.keys() if k != 'encoder'}, MODEL_KEYS,
                      'translation.seq2seq')
  section = config.get('encoder') if hasattr(config, 'get') else None
  if section is None:
    raise KeyError("config.model.encoder is missing for model 'translation.seq2seq': a section with "
                   "the encoder's name and keys, e.g. {'name': 'bilstm', 'hidden_size': 512}; "
                   f'registered encoders: {encoders_lib.names()}')
  kwargs = {k: config[k] for k in config.keys() if k not in ('name', 'encoder')}
  if embeddings is not None:
    kwargs['embedding_init'] = registry.embedding_initializer(
        embeddings, vocab_size=vocab_size, dim=kwargs.get('embedding_dim', Seq2Seq.embedding_dim),
        model_name='translation.seq2seq')
  return Seq2Seq(encoders_lib.build(section), vocab_size=vocab_size, num_classes=num_classes, **kwargs)


def default_config() -> dict[str, Any]:
  """Every `config.model` key of 'translation.seq2seq' at its default (encoder: a 512 BiLSTM)."""
  return {'name': 'translation.seq2seq', 'encoder': {'name': 'bilstm', 'hidden_size': 512},
          **{k: v for k, v in registry.config_fields(Seq2Seq).items() if k != 'encoder'}}
