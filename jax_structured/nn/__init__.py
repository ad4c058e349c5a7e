"""Flax Linen building blocks: masked (Bi)LSTMs, embeddings, pooling, softmax and structured attention.

Every module takes `lengths` and guarantees that padding never changes a real output.
"""
from jax_structured.nn.attention import IntraAttention
from jax_structured.nn.attention import inter_attention
from jax_structured.nn.attention import intra_attention
from jax_structured.nn.attention import masked_softmax
from jax_structured.nn import exactness
from jax_structured.nn.embedding import WordEmbedding
from jax_structured.nn.embedding import pretrained_init
from jax_structured.nn.intermediates import find_intermediates
from jax_structured.nn.lstmn import LSTMN
from jax_structured.nn.lstmn import FusionLSTMN
from jax_structured.nn.lstmn import StackedLSTMN
from jax_structured.nn.lstmn import lstmn_scan
from jax_structured.nn.masks import masked_fill
from jax_structured.nn.masks import pair_mask
from jax_structured.nn.masks import sequence_mask
from jax_structured.nn.mlp import MLP
from jax_structured.nn.pooling import POOLINGS
from jax_structured.nn.pooling import AttentionPooling
from jax_structured.nn.pooling import Pooling
from jax_structured.nn.pooling import masked_max
from jax_structured.nn.pooling import masked_mean
from jax_structured.nn.pooling import masked_sum
from jax_structured.nn.rnn import LSTM
from jax_structured.nn.rnn import BiLSTM
from jax_structured.nn.rnn import split_directions
from jax_structured.nn.structured_attention import NORMALIZERS
from jax_structured.nn.structured_attention import StructuredAttention
from jax_structured.nn.structured_attention import local_head_marginals
from jax_structured.nn.structured_attention import normalize as normalize_attention

__all__ = [
    'AttentionPooling', 'BiLSTM', 'FusionLSTMN', 'IntraAttention', 'LSTM', 'LSTMN', 'MLP', 'NORMALIZERS', 'POOLINGS',
    'Pooling', 'StructuredAttention', 'WordEmbedding', 'inter_attention', 'intra_attention',
    'local_head_marginals', 'masked_fill', 'masked_max', 'masked_mean', 'masked_softmax',
    'masked_sum', 'normalize_attention', 'pair_mask', 'pretrained_init', 'sequence_mask',
    'split_directions', 'StackedLSTMN', 'lstmn_scan', 'find_intermediates', 'exactness',
]
