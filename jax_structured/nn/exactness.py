"""Keeping the exact path of the matrix-tree functions out of a model's programs (`trees.exact_mode`).

Inside a traced program the matrix-tree functions run the LU path alone by default ('flag'): the
sentences whose LU result the error estimate flags (sharp scores, rare) come back NaN. The modules
that compute tree marginals or log-partitions (`StructuredAttention`, relation networks' `LatentTree`,
the parser's CRF loss) pass their results through `defer_marginals` / `defer_log_partition`:

* when the caller applies the model with the collection `FLAGGED` mutable (the training loop's train
  and evaluation steps, `training.steps`), each call sows `flagged` (bool [...], one per tree, split
  per stacked text like the module's other sown values) and returns zeros in place of the flagged
  trees' results: finite values with zero derivative, so that a loss which gives those examples
  weight 0 has finite gradients. The caller then recomputes those examples, and only those, with a
  program traced under `trees.exact_mode('in_program')` (`training.steps.exact_gradients`);
* otherwise the results pass through unchanged: exact on concrete arrays, NaN for a flagged tree in a
  program traced under the default mode (never a silently wrong value), exact under 'in_program'.

Contract of the sown flags (`example_flags` reads it): every sown array's leading axes, flattened in
row-major order, are example-major: its size is a multiple of the batch size B and its first
`size / B` entries belong to example 0, and so on. Modules that stack several texts of an example
along the batch axis sow each text's part separately (`sow_splits`).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

FLAGGED = 'flagged_trees'


def _sow_flags(module: nn.Module, flagged: jax.Array, sow_splits: Sequence[tuple[str, int]]) -> None:
  if not sow_splits:
    module.sow(FLAGGED, 'flagged', flagged)
    return
  start = 0
  for _, rows in sow_splits:
    module.sow(FLAGGED, 'flagged', flagged[start:start + rows])
    start += rows


def defer_marginals(module: nn.Module, arc_marginals: jax.Array, root_marginals: jax.Array, *,
                    sow_splits: Sequence[tuple[str, int]] = ()) -> tuple[jax.Array, jax.Array]:
  """`trees.marginals` results as the module should use them (module docstring).

  Args:
    module: the calling module (sows into `FLAGGED` when the caller made it mutable).
    arc_marginals: [..., n, n]; root_marginals: [..., n] (NaN for a flagged tree).
    sow_splits: ((prefix, rows), ...) of stacked texts along the first axis, as the module sows them.

  Returns:
    (arc_marginals, root_marginals): unchanged, or with zeros for the flagged trees when deferring.
  """
  if not module.is_mutable_collection(FLAGGED) or module.is_initializing():
    return arc_marginals, root_marginals
  flagged = jnp.isnan(root_marginals).any(-1) | jnp.isnan(arc_marginals).any((-2, -1))
  _sow_flags(module, flagged, sow_splits)
  return (jnp.where(flagged[..., None, None], 0.0, arc_marginals),
          jnp.where(flagged[..., None], 0.0, root_marginals))


def defer_log_partition(log_z: jax.Array) -> tuple[jax.Array, jax.Array]:
  """(log Z with 0 for the flagged trees, flagged [...] bool) of a `trees.log_partition` result, for
  a loss that computes log Z itself (the parser's CRF) and reports its flags to the training step."""
  flagged = jnp.isnan(log_z)
  return jnp.where(flagged, 0.0, log_z), flagged


def example_flags(flags: Mapping[str, Any] | Sequence[jax.Array], batch_size: int) -> jax.Array:
  """bool [batch_size]: the examples with at least one flagged tree among the sown `flags` (the
  `FLAGGED` collection, or a list of arrays) under the example-major contract (module docstring)."""
  out = jnp.zeros((batch_size,), bool)
  for leaf in jax.tree.leaves(flags):
    if leaf.size % batch_size:
      raise ValueError(f'a module sowed {leaf.shape} tree flags into {FLAGGED!r} for a batch of '
                       f'{batch_size} examples: sown flags must be example-major (a multiple of the '
                       'batch size, split per stacked text with sow_splits; nn.exactness)')
    out = out | leaf.reshape(batch_size, -1).any(-1)
  return out
