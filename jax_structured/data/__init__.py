"""Datasets: TFDS builders (upstream formats), text processing, vocabularies, embeddings, batching."""
from jax_structured.data.core import PAD_ID, UNK_ID, Split, TaskData, Vocabulary
from jax_structured.data.registry import load, names, register

__all__ = ['PAD_ID', 'UNK_ID', 'Split', 'TaskData', 'Vocabulary', 'load', 'names', 'register']
