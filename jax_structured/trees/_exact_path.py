"""The exact path: chunks of the flagged batch elements, their elimination and its derivatives.

The batch elements that the LU error estimate flags (`_lu_path._needs_exact`) are recomputed by the
exact elimination (`_elimination`). The common path is a straight line, one LU and one solve plus two
norms for the estimate; the exact path lies outside it (`_replace_flagged`): a `lax.while_loop` over
the flagged elements only, gathered a fixed-size chunk at a time (at most 1/32 of the batch and 128k
n^3 work: `_chunk_size`) and written back in place, which stops before its first step when none is
flagged (under a user's `vmap`: it runs while any call of the mapped batch has a chunk left), so its
memory is one chunk's whatever number of elements is flagged, and its time about proportional to that
number. Below 32 words the chunks run at a multiple of 4 words and hold a power of two of sentences
(`_exact_padded`), so that the programs of different short lengths and batch sizes share few traces of
the exact path. Its marginals come from a hand-written reverse sweep of the elimination: the log-space
one past 32 words in checkpointed segments of sqrt(n) steps (`_sweep`): O(n^2.5) memory per sentence,
where autodiff kept every step (O(n^3)); the linear one keeps a record of vectors per step
(`_linear_marginals`). Every derivative of the exact marginals is forward mode: along a direction they
move by a Hessian-vector product (forward mode through both sweeps); reverse mode (a loss through the
marginals, as structured attention trains) needs the transposed product, and the Hessian is symmetric,
so it is the same forward-mode product on the cotangent; so are all higher derivatives (symmetric in
all their directions). `_hessian_product` binds them as one primitive whose transposes are itself
(`_exact_where_flagged`, `_FlaggedProduct`): reverse mode keeps nothing of the exact path but the
scores, never transposes its loop, and runs it over the flagged elements only (transposing the
forward-mode program would run both sweeps backwards from checkpoints). Under `trees.use_kernels` a
chunk's exact values and its first derivative are one fused launch each (`_exact_kernel`,
`_exact_kernel_grad`: the linear elimination and its sweeps; untrusted sentences and higher derivatives
stay on XLA). Measurements of this design:
docs/decisions/2026-11-29-exact-path-derivatives-and-while-loop.md and
docs/decisions/2026-12-04-matrix-tree-and-mst-measurements.md.
"""
import functools

import jax
import jax.numpy as jnp
from jax import lax

from jax_structured.trees import _exact_kernel
from jax_structured.trees import _exact_kernel_grad
from jax_structured.trees import _hessian_product
from jax_structured.trees import _inputs
from jax_structured.trees import _kernels
from jax_structured.trees._elimination import _elimination_marginals
from jax_structured.trees._elimination import _linear_marginals
from jax_structured.trees._lu_path import _arc_mask


def _per_sentence(sentence_fn, inputs):
  """`jax.vmap(sentence_fn)(*inputs)`, without the vmap for a batch of one (the exact path's chunk
  from n = 32 on): batched, the eliminations' per-step row and column picks become gathers, which
  made one sentence several times slower on the CPU."""
  if inputs[0].shape[0] == 1:
    return jax.tree.map(lambda x: x[None], sentence_fn(*(x[0] for x in inputs)))
  return jax.vmap(sentence_fn)(*inputs)


def _exact_log_z_and_marginals(arc_scores, root_scores, mask, single_root, kernels=None):
  """(log Z [...], arc marginals, root marginals) of a batch, exactly, NaN where undefined.

  The linear elimination (`_linear_marginals`) where `_linear_trusted`; the log-space one
  (`_elimination_marginals`) for the other elements, only when there are any (a `lax.cond`; under a
  user's `vmap`, when any element of the mapped batch has one). Differentiated in forward mode only
  (`_exact_chunk_product`): a select passes no NaN of the branch it drops into a tangent. `kernels`
  (`_kernels.selected()`, values only): the linear elimination by one kernel launch (`_exact_kernel`).
  """
  batch_shape = mask.shape[:-1]
  flat = lambda x: x.reshape((-1,) + x.shape[len(batch_shape):])
  inputs = (flat(arc_scores), flat(root_scores), flat(mask))
  if kernels is None:
    *linear, trusted = _per_sentence(functools.partial(_linear_marginals, single_root=single_root), inputs)
  else:
    *linear, trusted = _exact_kernel.linear_marginals(*inputs, single_root, kernels)
  linear, untrusted = tuple(linear), ~trusted

  def log_space(linear):
    exact = _per_sentence(functools.partial(_elimination_marginals, single_root=single_root), inputs)
    return tuple(jnp.where(untrusted.reshape((-1,) + (1,) * (e.ndim - 1)), e, v)
                 for e, v in zip(exact, linear))

  log_z, arc_m, root_m = lax.cond(_any_anywhere(untrusted), log_space, lambda v: v, linear)
  # NaN or +inf among the real scores: NaN; no tree at all (log Z = -inf): NaN marginals.
  invalid = (jnp.any(jnp.where(_arc_mask(mask), jnp.isnan(arc_scores) | (arc_scores == jnp.inf), False),
                     axis=(-2, -1))
             | jnp.any(jnp.where(mask, jnp.isnan(root_scores) | (root_scores == jnp.inf), False), axis=-1))
  unflat = lambda x: x.reshape(batch_shape + x.shape[1:])
  log_z = jnp.where(invalid, jnp.nan, unflat(log_z))
  undefined = invalid | (log_z == -jnp.inf)
  arc_m = jnp.where(undefined[..., None, None], jnp.nan, unflat(arc_m))
  root_m = jnp.where(undefined[..., None], jnp.nan, unflat(root_m))
  return log_z, arc_m, root_m


# Jitted on its own so that its trace, and the traces of its derivatives (JAX caches both per input
# shape), are made once per process, not once per program that contains it: the exact path is most
# of the tracing of anything that differentiates `marginals`.
_exact_chunk = jax.jit(_exact_log_z_and_marginals, static_argnums=(3, 4))


# Below this length the exact path's chunks run on sentences padded to a multiple of _PAD_MULTIPLE
# words (and hold a power of two of them, `_chunk_size`), so that programs over different short
# lengths and batch sizes (length buckets, test cases) share one trace of `_exact_chunk` and of its
# derivatives. The padding adds at most (n + 3)^3 / n^3 of the exact path's work on the sentences
# that take it; from _PAD_BELOW words on, chunks keep the exact length.
_PAD_BELOW = 32


_PAD_MULTIPLE = 4


def _canonical_length(n):
  """The sentence length the exact path's chunks run at (`_PAD_BELOW`)."""
  return -(-n // _PAD_MULTIPLE) * _PAD_MULTIPLE if 0 < n < _PAD_BELOW else n


def _at_canonical_length(chunk_fn, inputs):
  """`chunk_fn(*inputs)` run at `_canonical_length(n)` words and cut back to n.

  `inputs` are a chunk's `[k, n]` / `[k, n, n]` arrays (scores, mask, directions), padded with zeros
  (padded words are masked out, so the results on the real words are those at length n); every
  output's axes after the first are word axes, cut back to their first n entries.
  """
  n = inputs[2].shape[-1]  # the mask
  extra = _canonical_length(n) - n
  if not extra:
    return chunk_fn(*inputs)
  outputs = chunk_fn(*(jnp.pad(x, ((0, 0),) + ((0, extra),) * (x.ndim - 1)) for x in inputs))
  return jax.tree.map(lambda x: x[(slice(None),) + (slice(0, n),) * (x.ndim - 1)], outputs)


def _exact_padded(inputs, single_root, kernels=None):
  """`_exact_chunk` of a chunk `(arc [k, n, n], root [k, n], mask [k, n])`, run at the canonical length."""
  return _at_canonical_length(lambda *chunk: _exact_chunk(*chunk, single_root, kernels), inputs)


@functools.lru_cache(maxsize=None)
def _chunk_marginals(single_root):
  """`(arc [k, n, n], root [k, n], mask [k, n]) -> (arc marginals, root marginals)` of the exact path:
  the gradient of the chunk's summed log Z (one hashable function per root mode)."""
  return lambda arc_scores, root_scores, mask: _exact_log_z_and_marginals(
      arc_scores, root_scores, mask, single_root)[1:]


@functools.partial(jax.jit, static_argnums=(4,))
def _exact_chunk_product(arc_scores, root_scores, mask, directions, single_root):
  """The exact marginals' derivative along `directions` (a tuple of k `(d_arc, d_root)` pairs shaped
  like the scores): `D^(k+1) log Z [directions]` per sentence, by nested forward mode through both
  eliminations and their reverse sweeps (`_hessian_product.JvpProduct`). Jitted on its own, like
  `_exact_chunk`, so that programs with the same chunk shape share its trace."""
  return _hessian_product.JvpProduct(_chunk_marginals(single_root))(
      (arc_scores, root_scores), (mask,), directions)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _kernel_chunk_product(arc_scores, root_scores, mask, directions, single_root, kernels):
  """`_exact_chunk_product` along one direction (`directions = ((d_arc, d_root),)`: the first
  derivative, `H t`) by the fused kernel of `_exact_kernel_grad` (`kernels`: interpreted or not), exact
  where the linear elimination is trusted; the chunk's other sentences (no tree, non-finite scores, or
  a tree far below its columns' best arcs) take `_exact_chunk_product` on XLA, only when there are any
  (a `lax.cond`, as in `_exact_log_z_and_marginals`)."""
  ((d_arc, d_root),) = directions
  *product, trusted = _exact_kernel_grad.linear_marginals_product(
      arc_scores, root_scores, mask, d_arc, d_root, single_root, kernels)
  untrusted = ~trusted

  def log_space(product):
    exact = _exact_chunk_product(arc_scores, root_scores, mask, directions, single_root)
    return tuple(jnp.where(untrusted.reshape((-1,) + (1,) * (e.ndim - 1)), e, v)
                 for e, v in zip(exact, product))

  return lax.cond(_any_anywhere(untrusted), log_space, lambda v: v, tuple(product))


class _FlaggedProduct:
  """The derivative product (`_hessian_product.derivative_product`) of the exact marginals of the
  flagged batch elements, zero elsewhere: a `lax.while_loop` over chunks of the flagged elements
  (`_replace_flagged`) runs `_exact_chunk_product` on each, or with `kernels` (`_kernels.selected()`)
  and one direction (the first derivative: what training needs) `_kernel_chunk_product`, one launch
  per chunk. Block diagonal, each block a derivative of one sentence's log Z, so symmetric like the
  primitive needs.

  Called as `(args=(arc [B, n, n], root [B, n]), constants=(mask [B, n], flags [B]), directions)`.
  """

  def __init__(self, single_root, chunk, kernels=None):
    self.single_root, self.chunk, self.kernels = single_root, chunk, kernels

  def __call__(self, args, constants, directions):
    (arc_scores, root_scores), (mask, flags) = args, constants
    flat_directions = tuple(t for direction in directions for t in direction)

    def chunk_product(arc, root, mask, *chunk_directions):
      pairs = tuple(tuple(chunk_directions[i:i + 2]) for i in range(0, len(chunk_directions), 2))
      if self.kernels is not None and len(pairs) == 1:
        return _kernel_chunk_product(arc, root, mask, pairs, self.single_root, self.kernels)
      return _exact_chunk_product(arc, root, mask, pairs, self.single_root)

    zeros = _inputs.vary_like((jnp.zeros_like(arc_scores), jnp.zeros_like(root_scores)),
                              arc_scores, root_scores, mask, *flat_directions)
    return _replace_flagged(flags, lambda inputs: _at_canonical_length(chunk_product, inputs),
                            (arc_scores, root_scores, mask) + flat_directions, zeros, self.chunk)

  def __eq__(self, other):
    return type(other) is _FlaggedProduct and (other.single_root, other.chunk, other.kernels) == (
        self.single_root, self.chunk, self.kernels)

  def __hash__(self):
    return hash((_FlaggedProduct, self.single_root, self.chunk, self.kernels))


def _exact_where_flagged(single_root, chunk, flags, arc_scores, root_scores, mask, log_z, arc_marginals,
                         root_marginals):
  """The LU path's `(log_z [B], arc_marginals [B, n, n], root_marginals [B, n])` with the `flags` [B]
  elements replaced by the exact path's (`_replace_flagged`, chunks of `chunk`), and derivatives to
  match: the LU path's tangents where not flagged; where flagged, `d log Z = <marginals, d scores>`
  and the marginals' derivative by the primitive of `_hessian_product` over `_FlaggedProduct`, whose
  transpose is itself: reverse mode runs the exact path forward, over the flagged elements only.

  So when no element is flagged, the exact path adds two `lax.while_loop`s that stop before their
  first step (value, and one per derivative product) and selects; no conditional copies the
  [B, n, n] arrays and no chunk buffers are allocated.

  Under `trees.use_kernels` (`_kernels.selected(n)`, read here, when the caller is traced) the exact
  values of a chunk are one launch of `_exact_kernel` and the first derivative one launch of
  `_exact_kernel_grad` (`_FlaggedProduct`); higher derivatives and untrusted sentences stay on XLA.
  """
  kernels = _kernels.selected(mask.shape[-1])
  return _exact_where_flagged_rule(single_root, chunk, kernels, flags, arc_scores, root_scores, mask, log_z,
                                   arc_marginals, root_marginals)


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2))
def _exact_where_flagged_rule(single_root, chunk, kernels, flags, arc_scores, root_scores, mask, log_z,
                              arc_marginals, root_marginals):
  """`_exact_where_flagged` with the kernels' setting given (`kernels`: `_kernels.selected()`)."""
  exact_fn = functools.partial(_exact_padded, single_root=single_root, kernels=kernels)
  return _replace_flagged(flags, exact_fn, (arc_scores, root_scores, mask),
                          (log_z, arc_marginals, root_marginals), chunk)


@_exact_where_flagged_rule.defjvp
def _exact_where_flagged_jvp(single_root, chunk, kernels, primals, tangents):
  flags, arc_scores, root_scores, mask = primals[:4]
  outputs = _exact_where_flagged_rule(single_root, chunk, kernels, *primals)
  _, d_arc, d_root, _, d_log_z, d_arc_marginals, d_root_marginals = tangents
  arc_m, root_m = outputs[1:]
  # Marginals are exactly 0 on padding and forbidden arcs: a tangent there (even inf) adds nothing.
  d_log_z_exact = (jnp.sum(jnp.where(arc_m != 0, arc_m * d_arc, 0.0), axis=(-2, -1))
                   + jnp.sum(jnp.where(root_m != 0, root_m * d_root, 0.0), axis=-1))
  d_arc_exact, d_root_exact = _hessian_product.derivative_product(
      _FlaggedProduct(single_root, chunk, kernels), (arc_scores, root_scores), (mask, flags), (d_arc, d_root))
  return outputs, (jnp.where(flags, d_log_z_exact, d_log_z),
                   jnp.where(flags[:, None, None], d_arc_exact, d_arc_marginals),
                   jnp.where(flags[:, None], d_root_exact, d_root_marginals))


@jax.custom_batching.custom_vmap
def _any_anywhere(flags):
  """`jnp.any(flags)`; under a user's `vmap`, over the whole mapped batch as well.

  The predicate of the exact fallback's loop (`_replace_flagged`) and of its choice of elimination
  (`_exact_log_z_and_marginals`): batched, a `lax.cond` becomes a select that runs the exact path for
  every call (20-100x the LU path) and a `lax.while_loop` runs every call's body with selects, so
  under `vmap` the predicate stays unbatched (any element of any mapped call) and the results are
  still chosen per element.
  """
  return jnp.any(flags)


@_any_anywhere.def_vmap
def _any_anywhere_vmap(axis_size, in_batched, flags):
  del axis_size, in_batched
  return _any_anywhere(flags), False


# Chunks of the exact path. A chunk runs whole however few of its elements are flagged, so one sharp
# sentence costs one chunk; but every chunk also costs a fixed overhead, which many sharp sentences
# pay once per chunk. So a chunk holds at most 1/_CHUNK_SHARE of the batch (one sharp sentence then
# adds at most ~1/32 of the batch's sentences' exact work) and at most _CHUNK_WORK n^3 of work (memory
# and program size).
_CHUNK_WORK = 2**17


_CHUNK_SHARE = 32


def _power_of_two_chunk(count, cap):
  """The power of two at or below `cap` (at least 1), and at most the power of two at or above
  `count`: elements per call of an exact program over `count` elements (the last call's slots past
  them are filled and their results dropped)."""
  cap = max(1, cap)
  cap = 1 << (cap.bit_length() - 1)
  return min(cap, 1 << max(0, count - 1).bit_length())


def _chunk_size(size, n):
  """Elements per chunk of the in-program exact path over a batch of `size`: at most both
  `size / _CHUNK_SHARE` and `_CHUNK_WORK / n^3` (`_power_of_two_chunk`)."""
  return _power_of_two_chunk(size, min(_CHUNK_WORK // max(1, n)**3, size // _CHUNK_SHARE))


def _replace_flagged(flags, exact_fn, inputs, values, chunk):
  """`values` with the flagged elements replaced by `exact_fn`'s results: the exact fallback.

  Usually no element or a few are flagged (0.7% of the sentences of a trained document model, in 35%
  of its batches). The flagged elements' indices are listed first (`jnp.nonzero`, [size] ints), and a
  `lax.while_loop` gathers `chunk` of them at a time, runs `exact_fn` on them and writes the results
  into `values` in place, for as many chunks as there are flagged elements: none when none is. The
  loop's predicate stays unbatched under a user's `vmap` (`_any_anywhere`: it runs while any mapped
  call has a chunk left; the others' slots are dropped). So the exact path's memory is one chunk's,
  whatever number of elements is flagged, and nothing of it is touched when none is. A while loop
  cannot be transposed; its derivatives are the primitive of `_hessian_product` (`_exact_where_flagged`),
  which never transposes it.

  Args:
    flags: [size] bool, the elements to replace.
    exact_fn: pytree of [k, ...] inputs -> pytree of [k, ...], the exact results of those elements.
    inputs: pytree of [size, ...] arrays, the per-element inputs of `exact_fn`.
    values: pytree of [size, ...], the fast path's results.
    chunk: int >= 1, elements per call of `exact_fn` (may exceed the number flagged: the slots past
      the last flagged element repeat an element, and their results are dropped).

  Returns:
    a pytree like `values`.
  """
  size = flags.shape[0]
  chunk = max(1, chunk)
  num_chunks = -(-size // chunk)
  # Flagged elements first; slots past them hold `size`, whose results are dropped.
  where = jnp.nonzero(flags, size=num_chunks * chunk, fill_value=size)[0]
  count = jnp.sum(flags)

  def more(state):
    return _any_anywhere(state[0] * chunk < count)

  def one_chunk(state):
    index, values = state
    slots = lax.dynamic_slice(where, (index * chunk,), (chunk,))
    results = exact_fn(jax.tree.map(lambda x: x[jnp.minimum(slots, size - 1)], inputs))
    return index + 1, jax.tree.map(lambda v, e: v.at[slots].set(e, mode='drop'), values, results)

  start = _inputs.vary_like((jnp.zeros((), jnp.int32), values), count, *jax.tree.leaves(values))
  return lax.while_loop(more, one_chunk, start)[1]


def _outside_chunk(count, n):
  """Elements per call of the exact program outside (`_statistics_outside`) for `count` flagged
  elements: at most `_CHUNK_WORK / n^3` (`_power_of_two_chunk`), so that few shapes are compiled."""
  return _power_of_two_chunk(count, _CHUNK_WORK // max(1, n)**3)
