"""Cost of reading the flag count on the host every train step (the split exact path, issue 48).

  python docs/decisions/2026-12-02-scripts/sync_cost.py [ROUNDS] [VARIANT]
Default job (configs/default.py), VARIANT (default 'structured'): the train batches of one epoch placed
on the device first; per round, the epoch's steps dispatched back to back (no host read: what a step
costs when nothing would ever be flagged) vs the trainer's protocol (step k dispatched blocked on step
k-1's `stalled` output, then step k-1's flag count read; a flagged step completed and its successor
rerun). Rounds alternate the order. Run from the repository root.
"""
import sys, time
import jax, numpy as np
from default_job import prepared_run
VARIANT = sys.argv[2] if len(sys.argv) > 2 else 'structured'
run = prepared_run(VARIANT)
runner, state = run.parts.runner, run.parts.runner.place(run.parts.state)
rng = runner.put_rng(jax.random.PRNGKey(0))
batches = [runner.shard_batch(b) for b in run.task_data.splits['train'].batches(run.batch_size, shuffle=True, seed=0, epoch=0)]
shapes = {tuple(np.shape(v)) for b in batches for v in b.values()}
K = len(batches)
print(f'{K} batches, bucket shapes {len({tuple(sorted((k, v.shape) for k, v in b.items())) for b in batches})}')
def chained(state):
  for b in batches:
    state, metrics, pending = runner.start_train(state, b, rng)
  jax.block_until_ready(state)
  return state
flagged_steps = [0]
def read_each(state):
  """The trainer's protocol: dispatch step k (blocked on step k-1's stall flag), then read step k-1's
  flag count; a flagged step is completed by the exact program and its successor rerun."""
  previous = None
  for b in batches:
    blocked = None if previous is None else previous[2]['stalled']
    s, m, p = runner.start_train(state, b, rng, blocked)
    state, current = s, (s, m, p, b)
    if previous is not None and runner.flagged_count(previous[2]):
      flagged_steps[0] += 1
      state, _ = runner.finish_train(state, previous[1], previous[2], previous[3], rng)
      s, m, p = runner.start_train(state, b, rng)
      state, current = s, (s, m, p, b)
    previous = current
  if runner.flagged_count(previous[2]):
    state, _ = runner.finish_train(state, previous[1], previous[2], previous[3], rng)
  jax.block_until_ready(state)
  return state
state = read_each(chained(state))  # compile every shape
times = {'chained': [], 'read each': []}
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 6
for r in range(rounds):
  order = [chained, read_each] if r % 2 == 0 else [read_each, chained]
  for fn in order:
    t = time.perf_counter(); state = fn(state); times['chained' if fn is chained else 'read each'].append(time.perf_counter() - t)
med = {k: float(np.median(v)) for k, v in times.items()}
print({k: [round(x, 3) for x in v] for k, v in times.items()})
print(f'flagged steps (all rounds, with the warm-up): {flagged_steps[0]}')
print(f'per step: chained {1e3*med["chained"]/K:.2f} ms, read each {1e3*med["read each"]/K:.2f} ms, ratio {med["read each"]/med["chained"]:.4f}')
