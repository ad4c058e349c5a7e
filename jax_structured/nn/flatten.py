"""Any leading batch shape in, one batch axis inside: the reshape every sequence layer and encoder does.

Layers and encoders take `x [..., T, E]` with `lengths [...]` (heads pass [B, T, E] or, for the words of
documents, [B, S, T, E]) but scan over one batch axis. `flatten_leading` merges the leading shape into
that axis (M = prod(...)); `unflatten_leading` gives each result its leading shape back.
"""
from typing import Mapping, Optional

import jax
import jax.numpy as jnp


def flatten_leading(x: jax.Array, lengths: jax.Array,
                    structure: Optional[Mapping[str, jax.Array]] = None,
                    ) -> tuple[jax.Array, jax.Array, Optional[dict[str, jax.Array]], tuple[int, ...]]:
  """Merges the leading batch shape of a sequence batch into one axis.

  Args:
    x: float [..., T, E].
    lengths: int [...] real positions of each sequence.
    structure: optional {key: array [..., *rest]} per-sequence inputs (e.g. 'heads' [..., T]).

  Returns:
    (x [M, T, E], lengths int32 [M], structure {key: [M, *rest]} (None when None), the leading shape
    `...`); M = prod(...).
  """
  lead, (steps, dim) = x.shape[:-2], x.shape[-2:]
  flat_x = x.reshape((-1, steps, dim))
  flat_structure = None if structure is None else {
      k: jnp.asarray(v).reshape((flat_x.shape[0],) + jnp.shape(v)[len(lead):])
      for k, v in structure.items()}
  return flat_x, jnp.asarray(lengths, jnp.int32).reshape((-1,)), flat_structure, lead


def unflatten_leading(lead: tuple[int, ...], *arrays: Optional[jax.Array],
                      ) -> tuple[Optional[jax.Array], ...]:
  """[M, *rest] -> [*lead, *rest] for each array (None stays None), as a tuple."""
  return tuple(None if a is None else a.reshape(tuple(lead) + a.shape[1:]) for a in arrays)
