"""Datasets: TFDS builders (upstream formats), text processing, vocabularies, embeddings, batching.

`data.load(config.data) -> TaskData` is the entry point of launches; the submodules `batching`, `text`,
`embeddings`, `loaders` and `builders` are public for notebook use (`builders` imports TFDS on first use).
"""
from jax_structured.data import batching
from jax_structured.data import embeddings
from jax_structured.data import text
from jax_structured.data.core import PAD_ID, UNK_ID, Split, TaskData, Vocabulary
from jax_structured.data.registry import load, names, register

__all__ = ['PAD_ID', 'UNK_ID', 'Split', 'TaskData', 'Vocabulary', 'batching', 'embeddings', 'load',
           'names', 'register', 'text']
