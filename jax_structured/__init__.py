"""jax-structured: structure-aware text representations in JAX/Flax.

`from jax_structured import trees` gives the pure tree functions (matrix-tree marginals, Chu-Liu-Edmonds,
projective inside-outside / Eisner); `nn`, `models`, `data`, `training` and `viz` build on them.
"""
__version__ = '0.1.0'
