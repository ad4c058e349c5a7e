"""Input checks shared by every `trees` function (one place for the contract of ARCHITECTURE.md)."""
import jax
import jax.numpy as jnp
import numpy as np


def check_scores(arc_scores, root_scores, lengths):
  """Validates and normalises the `(arc_scores, root_scores, lengths)` of any `trees` function.

  Args:
    arc_scores: [..., n, n] log-potentials of head -> modifier.
    root_scores: [..., n] log-potentials of ROOT -> modifier.
    lengths: None (every word is real) or an integer array broadcastable to the batch shape `[...]`;
      concrete values must lie in [0, n] (traced values cannot be checked and act as if clipped).

  Returns:
    (arc_scores, root_scores, lengths int32 [...]), the scores in one floating dtype (at least float32).

  Raises:
    ValueError naming the argument, its shape/dtype and what was expected.
  """
  arc_scores = jnp.asarray(arc_scores)
  root_scores = jnp.asarray(root_scores)
  if arc_scores.ndim < 2 or arc_scores.shape[-1] != arc_scores.shape[-2]:
    raise ValueError(f'arc_scores must have shape [..., n, n], got {arc_scores.shape}')
  batch_shape, n = arc_scores.shape[:-2], arc_scores.shape[-1]
  if root_scores.shape != batch_shape + (n,):
    raise ValueError(f'root_scores must have shape {batch_shape + (n,)} (= arc_scores.shape[:-1]), '
                     f'got {root_scores.shape}')
  dtype = jnp.promote_types(jnp.promote_types(arc_scores.dtype, root_scores.dtype), jnp.float32)
  if not jnp.issubdtype(dtype, jnp.floating):
    raise ValueError(f'scores must be real floating point, got {arc_scores.dtype} and {root_scores.dtype}')
  if lengths is None:
    lengths = jnp.full(batch_shape, n, jnp.int32)
  else:
    lengths = jnp.asarray(lengths)
    if not jnp.issubdtype(lengths.dtype, jnp.integer):
      raise ValueError(f'lengths must be integers, got dtype {lengths.dtype}')
    try:
      lengths = jnp.broadcast_to(lengths.astype(jnp.int32), batch_shape)
    except ValueError as e:
      raise ValueError(f'lengths of shape {lengths.shape} does not broadcast to the batch shape '
                       f'{batch_shape} of arc_scores {arc_scores.shape}') from e
    if not isinstance(lengths, jax.core.Tracer):
      values = np.asarray(lengths)
      if values.size and (values.min() < 0 or values.max() > n):
        raise ValueError(f'lengths must lie in [0, {n}] (n = arc_scores.shape[-1]), got values in '
                         f'[{values.min()}, {values.max()}]')
  return arc_scores.astype(dtype), root_scores.astype(dtype), lengths


def vary_like(tree, *likes):
  """`tree` (a loop's initial carry) made varying over the mesh axes any of `likes` varies over.

  Inside a user's `shard_map` (with its default `check_vma=True`), a `lax.scan` / `while_loop` whose
  carry starts from constants (zeros, `arange`) but is updated from the sharded scores would have a
  carry type that changes in the loop, which JAX rejects. Outside `shard_map` (or for values that
  already vary) this is the identity.

  Args:
    tree: a pytree of arrays.
    likes: arrays whose varying manual axes the carry must share (e.g. the scores).

  Returns:
    `tree` with every leaf varying over the union of the `likes`' varying axes.
  """
  want = frozenset()
  for like in likes:
    want |= _varying_axes(like)
  if not want:
    return tree

  def vary(leaf):
    missing = tuple(sorted(want - _varying_axes(leaf)))
    return jax.lax.pcast(leaf, missing, to='varying') if missing else leaf

  return jax.tree.map(vary, tree)


def _varying_axes(x) -> frozenset:
  """The manual mesh axes `x` varies over (`aval.mat.varying` in jax >= 0.10, `aval.vma` before)."""
  aval = jax.typeof(x)
  mat = getattr(aval, 'mat', None)
  return frozenset(mat.varying if mat is not None else getattr(aval, 'vma', ()))
