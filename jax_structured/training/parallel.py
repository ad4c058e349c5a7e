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
import time
from typing import Any, Callable, Mapping

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P
import numpy as np

AXIS = 'data'


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
  return jax.tree.map(_host, tree)


class Runner:
  """Places states and batches and runs compiled steps for one parallel mode.

  shard_map runs with `check_vma=False`: model code (Flax scans with zero initial carries) need not
  annotate device-varying values (the `trees` functions do, so they also run under a user's
  `check_vma=True`); the steps make every output replicated themselves (psum / pmean), which the
  equivalence tests check.

  Args:
    mode: 'shard_map' (default), 'pmap', or 'none' (one device: a mesh of size 1).
    train_step: `steps.train_step` with everything but (state, batch, rng) bound.
    eval_step: `steps.eval_step` with everything but (state, batch) bound.
  """

  def __init__(self, mode: str, train_step: Callable, eval_step: Callable):
    self.mode = mode
    # Seconds spent in calls that compiled a step for a new batch shape (such a call is waited for,
    # so its time is the compilation plus one step): progress reports leave it out of steps/s.
    self.compile_seconds = 0.0
    self._compiled: set = set()
    self.mesh = make_mesh(mode)
    self.replicated = NamedSharding(self.mesh, P())
    self.batch_sharding = NamedSharding(self.mesh, P(AXIS))
    self.num_shards = self.mesh.devices.size  # global number of data shards
    if mode == 'pmap':
      self.local_devices = jax.local_devices()
      local_mesh = jax.sharding.Mesh(np.asarray(self.local_devices), ('local',))
      self.stacked = NamedSharding(local_mesh, P('local'))
      self._train = jax.pmap(train_step, axis_name=AXIS, in_axes=(0, 0, None), donate_argnums=(0,))
      self._eval = jax.pmap(eval_step, axis_name=AXIS, in_axes=(0, 0))
    else:
      self._train = jax.jit(jax.shard_map(train_step, mesh=self.mesh, in_specs=(P(), P(AXIS), P()),
                                          out_specs=(P(), P()), check_vma=False),
                            donate_argnums=(0,))
      self._eval = jax.jit(jax.shard_map(eval_step, mesh=self.mesh, in_specs=(P(), P(AXIS)),
                                         out_specs=P(), check_vma=False))

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
    """`fn(*args)`; the first call with a batch shape (args[1]) is waited for and its time added to
    `compile_seconds`."""
    key = (name,) + tuple(sorted((k, tuple(v.shape), str(v.dtype)) for k, v in args[1].items()))
    if key in self._compiled:
      return fn(*args)
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    self.compile_seconds += time.perf_counter() - start
    self._compiled.add(key)
    return out

  def train(self, state: Any, batch: Mapping[str, Any], rng: jax.Array) -> tuple[Any, Any]:
    state, metrics = self._timed_if_new('train', self._train, state, batch, rng)
    if self.mode == 'pmap':
      metrics = jax.tree.map(lambda x: x[0], metrics)
    return state, metrics

  def evaluate(self, state: Any, batch: Mapping[str, Any]) -> Any:
    metrics = self._timed_if_new('eval', self._eval, state, batch)
    if self.mode == 'pmap':
      metrics = jax.tree.map(lambda x: x[0], metrics)
    return metrics

  def put_rng(self, rng: jax.Array) -> jax.Array:
    if self.mode == 'pmap':
      return jax.device_put(rng, self.local_devices[0])
    return self.replicate(rng)


def bind(fn: Callable, **kwargs) -> Callable:
  return functools.partial(fn, **kwargs)
