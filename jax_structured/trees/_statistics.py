"""The statistics shared by the matrix-tree functions, under the exact modes (`exact_mode`).

Where the exact path runs (`exact_mode`, the `exact=` keyword): on concrete arrays ('auto'), in a
second program over the flagged elements only, after the LU program; inside a traced program the
LU path alone by default ('flag': flagged elements NaN, derivatives zero), so that the programs
users run most (a model's train and eval steps) compile without the exact path; the training loop
recomputes the examples whose trees were flagged with a separate program (`training.steps`), and
'in_program' puts the exact path above inside the caller's program (most of the compile time of a
program that differentiates `marginals`: docs/decisions/2026-12-02-exact-path-out-of-hot-programs.md).
"""
import contextlib
import contextvars
import functools

import jax
import jax.numpy as jnp
from jax import lax
import numpy as np

from jax_structured.trees import _kernels
from jax_structured.trees._exact_path import _chunk_size
from jax_structured.trees._exact_path import _exact_padded
from jax_structured.trees._exact_path import _exact_where_flagged
from jax_structured.trees._exact_path import _outside_chunk
from jax_structured.trees._lu_path import _laplacian
from jax_structured.trees._lu_path import _laplacian_column_abs_sums
from jax_structured.trees._lu_path import _logdet_and_inverse
from jax_structured.trees._lu_path import _marginals_from_inverse
from jax_structured.trees._lu_path import _potentials
from jax_structured.trees._lu_path import _prepare

__all__ = ['exact_mode', 'EXACT_MODES']


# How the functions of `_statistics` treat the batch elements that the LU error estimate flags.
EXACT_MODES = ('auto', 'in_program', 'flag')


_EXACT_MODE = contextvars.ContextVar('jax_structured_trees_exact_mode', default='auto')


def _check_mode(mode):
  if mode not in EXACT_MODES:
    raise ValueError(f'exact={mode!r}: use one of {EXACT_MODES} (see trees.exact_mode)')
  return mode


@contextlib.contextmanager
def exact_mode(mode):
  """The default `exact=` of the matrix-tree functions called (traced) inside the block.

  `log_partition`, `marginals`, `entropy`, `kl_divergence` and `log_prob` take `exact=None` by default,
  which reads this setting (itself 'auto' unless a block sets it). The modes:

  * 'auto': on concrete arrays (a notebook call outside any `jit` / `grad` / `vmap`), exact results by
    two programs, each compiled once per shape and cached: the LU path with its error estimate over the
    whole batch, then the exact elimination over the flagged elements only (none run when none is
    flagged). Inside a trace (the caller's `jit`, `grad`, `vmap`, a Flax `apply` under `jit`), the same as
    'flag': the program holds the LU path only.
  * 'flag': the LU path only. A flagged element's results are NaN (never a silently wrong value); its
    derivatives are zero (not NaN), so a loss that drops it (`jnp.where`) keeps finite gradients. The
    training loop runs every model this way and recomputes the examples whose trees were flagged with a
    separate program ('in_program', compiled the first time one is flagged): exact results, while the
    programs it runs at every step hold no exact path (`nn.exactness`, `training.steps`).
  * 'in_program': the exact elimination inside the traced program, run for the flagged elements only (a
    `lax.while_loop` that stops before its first step when none is flagged; derivatives of any order).
    Exact wherever the program runs, at a price paid by every program that contains it, flagged or
    not: value + gradient through `marginals` compiled 4.5x (4 x 8) to 5.5x (64 x 64) slower on a CPU,
    with 9x the HLO, and on a GPU the loop's predicate is read on the host at every call.

  Read when a function is traced: a jitted function keeps the mode of its first trace, so enter the
  block inside the function you jit (or jit a separate function per mode).

  Args:
    mode: one of EXACT_MODES.
  """
  token = _EXACT_MODE.set(_check_mode(mode))
  try:
    yield
  finally:
    _EXACT_MODE.reset(token)


def _resolve_mode(exact, *arrays):
  """'outside' (concrete inputs under 'auto'), 'flag' or 'in_program'."""
  mode = _check_mode(_EXACT_MODE.get() if exact is None else exact)
  if mode != 'auto':
    return mode
  traced = any(isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(arrays))
  return 'flag' if traced else 'outside'


def _statistics(arc_scores, root_scores, lengths, single_root, exact):
  """Everything the public functions share: log Z, marginals, shifted scores and masks, and
  `flagged` [...] bool (the LU error estimate was too large: `_needs_exact`), under the mode `exact`
  (`exact_mode`)."""
  mode = _resolve_mode(exact, arc_scores, root_scores, lengths)
  kernels = _kernels.selected(arc_scores.shape[-1])  # `use_kernels`
  if mode == 'outside':
    return _statistics_outside(arc_scores, root_scores, lengths, single_root, kernels)
  return _traced_statistics(arc_scores, root_scores, lengths, single_root, mode == 'in_program', kernels)


def _traced_statistics(arc_scores, root_scores, lengths, single_root, in_program, kernels=None):
  """`_statistics` inside one program.

  The common path is a straight line: one LU factorisation and one solve (`_logdet_and_inverse`,
  whose error estimate costs two norms). With `in_program`, batch elements whose estimate is too large
  are recomputed by the exact elimination in chunks (`_exact_where_flagged`), outside that line: when
  no element is flagged, no exact work runs; what remains is the flagged elements' index list, a
  `lax.while_loop` that stops before its first step (one more per derivative product) and a select per
  output. Without it the flagged elements are NaN (their derivatives zero: `_logdet_and_inverse`
  returns zeros there) and the exact path is not traced at all. `kernels` (`_kernels.selected()`): None
  for that line, else the fused kernels replace it (True: interpreted), with the same flags.
  """
  arc_scores, root_scores, lengths, mask = _prepare(arc_scores, root_scores, lengths)
  arc_potentials, root_potentials, shift, root_shift = _potentials(arc_scores, root_scores, mask,
                                                                   single_root)
  total_shift = jnp.sum(shift, axis=-1)
  if kernels is None:
    lap = _laplacian(arc_potentials, root_potentials, mask, single_root)
    lap_column_sums = _laplacian_column_abs_sums(arc_potentials, root_potentials, mask, single_root)
    logdet, inverse, exact = _logdet_and_inverse(lap, lax.stop_gradient(lap_column_sums))
    exact = exact > 0
    arc_marginals, root_marginals = _marginals_from_inverse(arc_potentials, root_potentials, inverse,
                                                            single_root)
    log_z = logdet + total_shift + root_shift
  else:  # already NaN where flagged
    log_z, arc_marginals, root_marginals, exact = _kernels.fused_statistics(
        arc_scores, root_scores, lengths, single_root, kernels)

  n = mask.shape[-1]
  if not in_program:
    log_z = jnp.where(exact, jnp.nan, log_z)
    arc_marginals = jnp.where(exact[..., None, None], jnp.nan, arc_marginals)
    root_marginals = jnp.where(exact[..., None], jnp.nan, root_marginals)
  else:
    size = exact.size
    flat = lambda x, tail: x.reshape((size,) + tail)
    log_z, arc_marginals, root_marginals = _exact_where_flagged(
        single_root, _chunk_size(size, n), flat(exact, ()), flat(arc_scores, (n, n)), flat(root_scores, (n,)),
        flat(mask, (n,)), flat(log_z, ()), flat(arc_marginals, (n, n)), flat(root_marginals, (n,)))
    log_z = log_z.reshape(exact.shape)
    arc_marginals = arc_marginals.reshape(exact.shape + (n, n))
    root_marginals = root_marginals.reshape(exact.shape + (n,))
  logdet = log_z - total_shift  # NaN (as the entropy should be) when some word has no allowed head
  return dict(arc_scores=arc_scores, root_scores=root_scores, mask=mask, shift=shift, logdet=logdet,
              log_z=log_z, arc_marginals=arc_marginals, root_marginals=root_marginals, flagged=exact)


# The LU program of the 'auto' mode on concrete arrays (`_statistics_outside`): one per shape, dtype and
# root mode, cached by jit.
@functools.partial(jax.jit, static_argnums=(3, 4))
def _lu_statistics(arc_scores, root_scores, lengths, single_root, kernels):
  """`_traced_statistics` without the exact path, jitted (`kernels`: see there)."""
  return _traced_statistics(arc_scores, root_scores, lengths, single_root, False, kernels)


def _statistics_outside(arc_scores, root_scores, lengths, single_root, kernels=None):
  """`_statistics` of concrete arrays, exact: the LU program over the batch (`_lu_statistics`), then
  the exact elimination (`_exact_chunk`, jitted on its own) over the flagged elements only, gathered
  on the host in chunks of `_outside_chunk` and written back. Nothing but the LU program runs when no
  element is flagged (the flags are read once on the host)."""
  stats = _lu_statistics(arc_scores, root_scores, lengths, single_root, kernels)
  flagged = np.asarray(stats['flagged'])
  if not flagged.any():
    return stats
  n = stats['mask'].shape[-1]
  batch_shape = flagged.shape
  where = np.flatnonzero(flagged)
  flat = {k: np.array(stats[k]).reshape((-1,) + stats[k].shape[len(batch_shape):])
          for k in ('arc_scores', 'root_scores', 'mask', 'log_z', 'arc_marginals', 'root_marginals')}
  chunk = _outside_chunk(where.size, n)
  for start in range(0, where.size, chunk):
    rows = where[start:start + chunk]
    slots = np.resize(rows, chunk)  # a full chunk: the slots past `rows` repeat elements and are dropped
    inputs = tuple(jnp.asarray(flat[k][slots]) for k in ('arc_scores', 'root_scores', 'mask'))
    exact = _exact_padded(inputs, single_root, kernels)
    log_z, arc_m, root_m = (np.asarray(x)[:rows.size] for x in exact)
    flat['log_z'][rows], flat['arc_marginals'][rows], flat['root_marginals'][rows] = log_z, arc_m, root_m
  unflat = lambda x: jnp.asarray(x.reshape(batch_shape + x.shape[1:]))
  stats = dict(stats, log_z=unflat(flat['log_z']), arc_marginals=unflat(flat['arc_marginals']),
               root_marginals=unflat(flat['root_marginals']))
  stats['logdet'] = stats['log_z'] - jnp.sum(stats['shift'], axis=-1)
  return stats
