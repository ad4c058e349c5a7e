"""Multi-host start-up: `jax.distributed.initialize` when a job asks for it (once, before any computation).

A job asks by `initialize=True` (launch.train `--distributed`), by explicit arguments (the coordinator's
address, the number of processes, this process's id) or by the environment variable
`JAX_COORDINATOR_ADDRESS`; JAX reads `JAX_NUM_PROCESSES` / `JAX_PROCESS_ID` itself and detects SLURM /
Cloud TPU / MPI clusters. How the processes then share the work: `parallel`.
"""
from __future__ import annotations

import os

from absl import logging
import jax


def maybe_initialize_distributed(*, initialize: bool = False,
                                 coordinator_address: str | None = None, num_processes: int | None = None,
                                 process_id: int | None = None) -> bool:
  """Calls `jax.distributed.initialize` when asked (once, before any computation).

  Asked by `initialize=True` (no address: JAX detects the cluster), by any explicit argument, or by
  the environment variable `JAX_COORDINATOR_ADDRESS` (JAX reads `JAX_NUM_PROCESSES` / `JAX_PROCESS_ID`
  itself, and detects SLURM / Cloud TPU / MPI clusters when the arguments are None).

  Returns:
    True when JAX runs distributed (already or now).
  """
  if jax.distributed.is_initialized():
    return True
  asked = (coordinator_address or num_processes is not None or process_id is not None
           or initialize
           or os.environ.get('JAX_COORDINATOR_ADDRESS'))
  if not asked:
    return False
  jax.distributed.initialize(coordinator_address=coordinator_address, num_processes=num_processes,
                             process_id=process_id)
  logging.info('distributed: process %d of %d, %d global devices', jax.process_index(),
               jax.process_count(), jax.device_count())
  return True
