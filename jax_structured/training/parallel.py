"""Data parallelism: drive the pure steps with `jax.shard_map` over a 1-D 'data' mesh or `jax.pmap`.

`Runner` hides the difference. Its state lives on device in its driver's layout; `canonical(state)`
gives the layout shared by both drivers and by checkpoints: jax Arrays replicated over the global
1-D mesh (`NamedSharding(mesh, P())`).

Multi-host: every process builds the same global batch (same data order), keeps the rows of its own
devices (`process_slice`) and assembles the global array with
`jax.make_array_from_process_local_data` (shard_map), or reshapes its rows to
[local devices, B / devices, ...] (pmap).
"""
from __future__ import annotations

import functools
import threading
import time
from typing import Any, Callable, Iterator, Mapping, Sequence

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

AXIS = 'data'
# Seconds between the "... still compiling" lines of a compilation that takes longer.
HEARTBEAT_SECONDS = 10.0


def _batch_shape(batch: Any) -> list[int]:
  """The shape shown for a batch: that of its first leaf of the highest rank (e.g. tokens [B, T])."""
  shapes = [tuple(np.shape(v)) for v in jax.tree.leaves(batch)]
  return list(max(shapes, key=len, default=()))


def report_compile(what: str, shape: Sequence[int], call: Callable[[], Any], *,
                   heartbeat_seconds: float = HEARTBEAT_SECONDS,
                   console: Callable[[str], None] | None = None) -> tuple[Any, float]:
  """Runs `call()` (a first call that compiles) between console lines saying what compiles.

  Prints "compiling the <what> for batch [32, 24] ...", then "... still compiling the <what> (20 s)"
  every `heartbeat_seconds` while the call runs (from a daemon thread that stops when it returns), then
  "compiled the <what> for batch [32, 24] in 23.4 s" (the time includes the first run of the program).

  Args:
    what: e.g. 'train step'.
    shape: the batch shape to name.
    call: no arguments; its result is waited for (`jax.block_until_ready`).
    heartbeat_seconds: period of the heartbeat lines (> 0).
    console: where lines go (default `metrics.console`: process 0's standard output).

  Returns:
    (the result, seconds it took).
  """
  if console is None:
    from jax_structured.training import metrics  # pylint: disable=g-import-not-at-top
    console = metrics.console
  shape_text = '[' + ', '.join(map(str, shape)) + ']'
  console(f'compiling the {what} for batch {shape_text} ...')
  done = threading.Event()
  start = time.perf_counter()

  def heartbeat():
    while not done.wait(heartbeat_seconds):
      console(f'... still compiling the {what} ({time.perf_counter() - start:.0f} s)')

  thread = threading.Thread(target=heartbeat, name='compile-heartbeat', daemon=True)
  thread.start()
  try:
    out = jax.block_until_ready(call())
  finally:
    done.set()
    thread.join()
  seconds = time.perf_counter() - start
  console(f'compiled the {what} for batch {shape_text} in {seconds:.1f} s')
  return out, seconds


def make_mesh(mode: str) -> jax.sharding.Mesh:
  """The 1-D 'data' mesh: all (global) devices, or this process's first device for mode 'none'.

  Mode 'none' is one device of this process (restoring / evaluating a model locally; training with
  it in a multi-process job is refused by the trainer).
  """
  devices = jax.local_devices()[:1] if mode == 'none' else jax.devices()
  return jax.sharding.Mesh(np.asarray(devices), (AXIS,))


def _host(x: jax.Array | np.ndarray) -> np.ndarray:
  """A host copy of a replicated (possibly multi-process) array."""
  if isinstance(x, jax.Array) and not x.is_fully_addressable:
    return np.asarray(x.addressable_data(0))
  return np.asarray(x)


def to_host(tree: Any) -> Any:
  """A copy of a pytree of (replicated, possibly multi-process) arrays as numpy arrays on the host."""
  return jax.tree.map(_host, tree)


class Runner:
  """Places states and batches and runs compiled steps for one parallel mode.

  shard_map runs with `check_vma=False`: model code (Flax scans with zero initial carries) need not
  annotate device-varying values (the `trees` functions do, so they also run under a user's
  `check_vma=True`); the steps make every output replicated themselves (psum / pmean), which the
  equivalence tests check.

  The train and eval programs hold the trees functions' LU path only (`nn.exactness`). A train step
  whose batch has examples with flagged trees is completed by `finish_train`: the flagged examples are
  gathered into a small batch on the host and their gradient computed by the exact program, then one
  update applies both; evaluation adds the exact program's metric sums of its flagged examples. The
  exact programs are compiled the first time they are needed (once per sub-batch shape).

  Args:
    mode: 'shard_map' (default), 'pmap', or 'none' (one device: a mesh of size 1).
    train_step: `steps.train_step` with everything but (state, batch, rng) bound.
    eval_step: `steps.eval_step` with everything but (state, batch) bound.
    exact_gradients, apply_combined, exact_eval_step: `steps.exact_gradients` (state, batch, rng),
      `steps.apply_combined` (state, hot grads, hot count, exact gradient sums, exact count) and
      `steps.eval_step` with `exact=True` (state, batch), bound like the others (`model_steps` binds
      all five); without them a flagged example is an error.
  """

  def __init__(self, mode: str, train_step: Callable, eval_step: Callable, *,
               exact_gradients: Callable | None = None, apply_combined: Callable | None = None,
               exact_eval_step: Callable | None = None):
    self.mode = mode
    # Seconds spent in calls that compiled a step for a new batch shape (such a call is waited for,
    # so its time is the compilation plus one step): progress reports leave it out of steps/s.
    self.compile_seconds = 0.0
    self._compiled: set = set()
    self.heartbeat_seconds = HEARTBEAT_SECONDS  # period of the "... still compiling" lines
    self.mesh = make_mesh(mode)
    self.replicated = NamedSharding(self.mesh, P())
    self.batch_sharding = NamedSharding(self.mesh, P(AXIS))
    self.num_shards = self.mesh.devices.size  # global number of data shards
    self._has_exact = None not in (exact_gradients, apply_combined, exact_eval_step)
    if mode == 'pmap':
      self.local_devices = jax.local_devices()
      local_mesh = jax.sharding.Mesh(np.asarray(self.local_devices), ('local',))
      self.stacked = NamedSharding(local_mesh, P('local'))
      self._not_blocked = jax.device_put(np.zeros(len(self.local_devices), bool), self.stacked)
      self._train = jax.pmap(train_step, axis_name=AXIS, in_axes=(0, 0, None, 0), donate_argnums=(0,))
      self._eval = jax.pmap(eval_step, axis_name=AXIS, in_axes=(0, 0))
      if self._has_exact:
        self._exact_gradients = jax.pmap(exact_gradients, axis_name=AXIS, in_axes=(0, 0, None))
        self._apply_combined = jax.pmap(apply_combined, axis_name=AXIS, donate_argnums=(0,))
        self._exact_eval = jax.pmap(exact_eval_step, axis_name=AXIS, in_axes=(0, 0))
    else:
      self._not_blocked = self.replicate(np.zeros((), bool))
      shard = lambda fn, in_specs, out_specs: jax.shard_map(fn, mesh=self.mesh, in_specs=in_specs,
                                                            out_specs=out_specs, check_vma=False)
      self._train = jax.jit(shard(train_step, (P(), P(AXIS), P(), P()), (P(), P(), P())),
                            donate_argnums=(0,))
      self._eval = jax.jit(shard(eval_step, (P(), P(AXIS)), (P(), P())))
      if self._has_exact:
        self._exact_gradients = jax.jit(shard(exact_gradients, (P(), P(AXIS), P()), (P(), P(), P())))
        self._apply_combined = jax.jit(shard(apply_combined, (P(),) * 5, (P(), P())), donate_argnums=(0,))
        self._exact_eval = jax.jit(shard(exact_eval_step, (P(), P(AXIS)), (P(), P())))

  # --- states -------------------------------------------------------------------------------------
  def canonical(self, state: Any) -> Any:
    """The state replicated over the global mesh (the checkpoint layout)."""
    if self.mode == 'pmap':
      state = jax.tree.map(lambda x: np.asarray(x.addressable_data(0))[0]
                           if isinstance(x, jax.Array) else np.asarray(x)[0], state)
    return self.replicate(state)

  def replicate(self, state: Any) -> Any:
    """Host / single-device values (identical on every process) -> replicated global arrays."""
    def put(x):
      if isinstance(x, jax.Array) and x.sharding == self.replicated:
        return x
      x = _host(x)
      return jax.make_array_from_callback(x.shape, self.replicated, lambda idx: x[idx])
    return jax.tree.map(put, state)

  def place(self, state: Any) -> Any:
    """A canonical state -> this driver's layout (pmap: stacked over local devices)."""
    if self.mode == 'pmap':
      n = len(self.local_devices)
      return jax.tree.map(lambda x: jax.device_put(np.stack([x] * n), self.stacked), to_host(state))
    return self.replicate(state)

  # --- batches ------------------------------------------------------------------------------------
  def process_slice(self, global_rows: int) -> slice:
    """The rows of a global batch that this process feeds (its devices' contiguous block)."""
    if jax.process_count() == 1:
      return slice(0, global_rows)
    indices = self.batch_sharding.addressable_devices_indices_map((global_rows,)).values()
    starts = [i[0].start or 0 for i in indices]
    stops = [global_rows if i[0].stop is None else i[0].stop for i in indices]
    start, stop = min(starts), max(stops)
    if stop - start != sum(b - a for a, b in zip(starts, stops)):
      raise ValueError('this process\'s devices do not hold a contiguous block of the batch')
    return slice(start, stop)

  def shard_batch(self, batch: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """A global numpy batch (same on every process) -> device arrays split over 'data'."""
    rows = next(iter(batch.values())).shape[0]
    if rows % self.num_shards:
      raise ValueError(f'batch size {rows} is not divisible by the {self.num_shards} data shards')
    local = self.process_slice(rows)
    if self.mode == 'pmap':
      n = len(self.local_devices)
      return {k: jax.device_put(np.asarray(v)[local].reshape((n, -1) + v.shape[1:]), self.stacked)
              for k, v in batch.items()}
    return {k: jax.make_array_from_process_local_data(self.batch_sharding, np.asarray(v)[local],
                                                      v.shape) for k, v in batch.items()}

  # --- steps --------------------------------------------------------------------------------------
  def _timed_if_new(self, name: str, fn: Callable, *args) -> Any:
    """`fn(*args)`; the first call with a batch shape (the shapes of args[1]) is waited for, its time
    added to `compile_seconds`, and reported on the console (`report_compile`: what compiles, for which
    batch shape, a heartbeat every `heartbeat_seconds`, the time it took)."""
    key = (name,) + tuple((jax.tree_util.keystr(path), tuple(np.shape(v)), str(v.dtype))
                          for path, v in jax.tree_util.tree_flatten_with_path(args[1])[0])
    if key in self._compiled:
      return fn(*args)
    out, seconds = report_compile(f'{name} step', _batch_shape(args[1]), lambda: fn(*args),
                                  heartbeat_seconds=self.heartbeat_seconds)
    self.compile_seconds += seconds
    self._compiled.add(key)
    return out

  def train(self, state: Any, batch: Mapping[str, Any], rng: jax.Array) -> tuple[Any, Any]:
    """One whole train step: `start_train` then `finish_train` (waits for the step)."""
    return self.finish_train(*self.start_train(state, batch, rng), batch, rng)

  def start_train(self, state: Any, batch: Mapping[str, Any], rng: jax.Array,
                  blocked: Any = None) -> tuple[Any, Any, Any]:
    """Dispatches the train program; returns (state, metrics, pending) for `finish_train`. The state is
    final unless `pending['stalled']`: the batch had flagged examples, or `blocked` (the previous
    step's `pending['stalled']`, not yet read on the host) was True (`steps.train_step`)."""
    if blocked is None:
      blocked = self._not_blocked
    state, metrics, pending = self._timed_if_new('train', self._train, state, batch, rng, blocked)
    if self.mode == 'pmap':
      metrics = jax.tree.map(lambda x: x[0], metrics)
    return state, metrics, pending

  def flagged_count(self, pending: Any) -> int:
    """The number of flagged examples of a dispatched train step (waits for the step)."""
    return int(self._first(pending['num_flagged']))

  def finish_train(self, state: Any, metrics: Any, pending: Any, batch: Mapping[str, Any],
                   rng: jax.Array) -> tuple[Any, Any]:
    """Completes a step `start_train` dispatched: reads its number of flagged examples (waits for the
    step); when there are any, computes their gradient with the exact program (`exact_chunk_size` of
    them per call) and applies one update with both. `state`: the step's returned state (or that of
    a blocked step dispatched after it); `batch`: its global numpy batch (or, in one process, the
    device batch). Returns (state, metrics)."""
    if not self.flagged_count(pending):
      if bool(self._first(pending['stalled'])):
        raise RuntimeError('this train step was blocked: run it again (start_train) instead')
      return state, metrics
    self._require_exact()
    grad_sums, count, extra = None, None, {}
    for sub_batch in self._flagged_chunks(batch, self._first(pending['flagged'])):
      grads, chunk_count, chunk_metrics = self._timed_if_new('exact gradients', self._exact_gradients,
                                                             state, sub_batch, rng)
      grad_sums = grads if grad_sums is None else jax.tree.map(jnp.add, grad_sums, grads)
      count = chunk_count if count is None else count + chunk_count
      extra = add_metrics(extra, chunk_metrics)
    state, step_metrics = self._timed_if_new('apply combined', self._apply_combined, state,
                                             pending['grads'], pending['count'], grad_sums, count)
    extra = {**extra, **step_metrics}
    if self.mode == 'pmap':
      extra = jax.tree.map(lambda x: x[0], extra)
    return state, add_metrics(metrics, extra)

  def evaluate(self, state: Any, batch: Mapping[str, Any],
               host_batch: Mapping[str, np.ndarray] | None = None) -> Any:
    """Metric sums of one batch (from `shard_batch`); the examples with flagged trees by the exact
    program, gathered from `host_batch` (the global numpy batch; needed with several processes)."""
    metrics, flagged = self._timed_if_new('eval', self._eval, state, batch)
    flagged = self._first(flagged)
    if self.mode == 'pmap':
      metrics = jax.tree.map(lambda x: x[0], metrics)
    if not flagged.any():
      return metrics
    self._require_exact()
    for sub_batch in self._flagged_chunks(batch if host_batch is None else host_batch, flagged):
      exact_metrics, _ = self._timed_if_new('exact eval', self._exact_eval, state, sub_batch)
      if self.mode == 'pmap':
        exact_metrics = jax.tree.map(lambda x: x[0], exact_metrics)
      metrics = add_metrics(metrics, exact_metrics)
    return metrics

  def _flagged_chunks(self, batch: Mapping[str, Any], flagged: np.ndarray) -> Iterator[dict[str, Any]]:
    """The flagged examples of a batch (`_host_batch`) as device batches of `exact_chunk_size` rows."""
    host_batch = self._host_batch(batch)
    rows = np.flatnonzero(flagged)
    size = exact_chunk_size(flagged.shape[0], self.num_shards)
    for start in range(0, rows.size, size):
      yield self.shard_batch(select_rows(host_batch, rows[start:start + size], size))

  def _first(self, x: Any) -> np.ndarray:
    """A host copy of a replicated output (pmap: of the first local device's copy)."""
    x = _host(x)
    return x[0] if self.mode == 'pmap' else x

  def _host_batch(self, batch: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The global numpy batch: `batch` itself when it is one (every process holds the same global
    batch), else that of a device batch from `shard_batch` (one process)."""
    if all(isinstance(v, np.ndarray) or np.isscalar(v) for v in batch.values()):
      return dict(batch)
    if jax.process_count() > 1:
      raise ValueError('the flagged examples of a multi-process batch are gathered from the global '
                       'numpy batch: pass it (host_batch) instead of the device batch')
    if self.mode == 'pmap':
      return {k: np.asarray(v).reshape((-1,) + v.shape[2:]) for k, v in batch.items()}
    return {k: np.asarray(v) for k, v in batch.items()}

  def _require_exact(self) -> None:
    if not self._has_exact:
      raise ValueError('a batch has examples whose matrix-tree results the LU error estimate flagged, '
                       'and this Runner has no exact programs: build it with '
                       '`Runner(mode, **parallel.model_steps(...))`')

  def put_rng(self, rng: jax.Array) -> jax.Array:
    """Places a PRNG key where the compiled steps of this mode expect it (replicated over the mesh)."""
    if self.mode == 'pmap':
      return jax.device_put(rng, self.local_devices[0])
    return self.replicate(rng)


def bind(fn: Callable, **kwargs) -> Callable:
  """Binds keyword arguments of a step function (`functools.partial`), e.g. for `Runner` steps."""
  return functools.partial(fn, **kwargs)


def model_steps(apply_fn: Callable, task: Any, tx: Any, embed_mask: Any,
                project: Callable | None = None) -> dict[str, Callable]:
  """The five step functions of a Runner for one model and task (`Runner(mode, **model_steps(...))`)."""
  from jax_structured.training import steps  # pylint: disable=g-import-not-at-top
  update = dict(tx=tx, embed_mask=embed_mask, project=project)
  return {'train_step': bind(steps.train_step, apply_fn=apply_fn, task=task, **update),
          'eval_step': bind(steps.eval_step, apply_fn=apply_fn, task=task),
          'exact_gradients': bind(steps.exact_gradients, apply_fn=apply_fn, task=task),
          'apply_combined': bind(steps.apply_combined, **update),
          'exact_eval_step': bind(steps.eval_step, apply_fn=apply_fn, task=task, exact=True)}


def add_metrics(a: Mapping[str, tuple], b: Mapping[str, tuple]) -> dict[str, tuple]:
  """{metric: (sum, count)} of two parts of a batch, added (a metric in one part only is kept)."""
  out = dict(a)
  for k, (s, c) in b.items():
    out[k] = (out[k][0] + s, out[k][1] + c) if k in out else (s, c)
  return out


def exact_chunk_size(batch_size: int, multiple: int = 1) -> int:
  """Rows per call of an exact program over the flagged examples of a batch of `batch_size`: the power
  of two at or above an eighth of the batch, rounded up to a multiple of `multiple` (the data shards).

  One size per batch shape, so that the exact programs compile once per batch shape (a size per
  number of flagged examples compiled up to log2(B) programs of 10-30 s each on a CPU); one flagged
  example costs a program over an eighth of the batch, many take several calls.
  """
  size = 1 << max(0, -(-batch_size // 8) - 1).bit_length()
  return -(-max(size, multiple) // multiple) * multiple


def select_rows(batch: Mapping[str, np.ndarray], rows: np.ndarray, size: int) -> dict[str, np.ndarray]:
  """The examples `rows` (indices, at most `size`) of a global numpy batch, as a batch of `size`: the
  slots past them repeat them with `example_mask` 0. Arrays without the batch axis are kept."""
  batch_size = len(next(v for v in batch.values() if np.ndim(v)))
  slots = np.resize(rows, size)
  out = {k: (np.asarray(v)[slots] if np.ndim(v) and np.shape(v)[0] == batch_size else v)
         for k, v in batch.items()}
  mask = np.asarray(batch['example_mask'])[slots] if 'example_mask' in batch else np.ones(size, np.float32)
  out['example_mask'] = np.where(np.arange(size) < len(rows), mask, np.zeros_like(mask))
  return out


def with_exact_rows(hot: Callable, exact: Callable, variables: Any, batch: Mapping[str, Any]) -> Any:
  """`hot(variables, batch)` outputs, with the examples it flags recomputed by `exact`.

  For programs over a model outside training (`analysis.induce`): `hot` is the program with the trees
  functions' LU path only, returning (outputs, flagged bool [B]) (`nn.exactness.example_flags`);
  `exact` the same under `trees.exact_mode('in_program')`, returning outputs, run on the flagged
  examples only (`select_rows`, `exact_chunk_size` per call). Every output leaf must be example-major
  (leading size a multiple of B, the `nn.exactness` contract).
  """
  outputs, flagged = hot(variables, batch)
  flagged = np.asarray(flagged)
  if not flagged.any():
    return outputs
  host_batch = {k: np.asarray(v) for k, v in batch.items()}
  batch_size, flagged_rows = flagged.shape[0], np.flatnonzero(flagged)
  outputs = jax.tree.map(np.array, outputs)
  size = exact_chunk_size(batch_size)
  for start in range(0, flagged_rows.size, size):
    rows = flagged_rows[start:start + size]
    exact_outputs = exact(variables, select_rows(host_batch, rows, size))

    def merge(h, e, rows=rows):
      per = h.shape[0] // batch_size
      exact_rows = np.asarray(e).reshape((-1, per) + e.shape[1:])[:rows.size]
      h.reshape((batch_size, per) + h.shape[1:])[rows] = exact_rows
      return h

    outputs = jax.tree.map(merge, outputs, exact_outputs)
  return outputs
