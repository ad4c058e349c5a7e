"""Whole architectures from the papers, built from `config.model` by name.

`models.build(config.model, *, vocab_size, num_classes, embeddings=None)` returns a Linen module called
as `model.apply(variables, batch, train=bool, rngs={'dropout': key})` -> logits [B, num_classes]
(see docs/internals.md). Families register builders with `models.register(name)`.
"""
from jax_structured.models.registry import build
from jax_structured.models.registry import names
from jax_structured.models.registry import register

__all__ = ['build', 'names', 'register']
