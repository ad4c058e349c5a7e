"""Median time of one epoch of chained train steps (no host read) of the default job's model.
  python step_time.py VARIANT ROUNDS
Works on today's main (Runner.train returns (state, metrics)) and on this change (start_train)."""
import sys, time
import jax, numpy as np
from default_job import prepared_run
variant = sys.argv[1]; rounds = int(sys.argv[2])
run = prepared_run(variant)
runner, state = run.parts.runner, run.parts.runner.place(run.parts.state)
rng = runner.put_rng(jax.random.PRNGKey(0))
batches = [runner.shard_batch(b) for b in run.task_data.splits['train'].batches(run.batch_size, shuffle=True, seed=0, epoch=0)]
step = (lambda s, b: runner.start_train(s, b, rng)[0]) if hasattr(runner, 'start_train') else (lambda s, b: runner.train(s, b, rng)[0])
def epoch(state):
  for b in batches:
    state = step(state, b)
  return jax.block_until_ready(state)
state = epoch(state)
times = []
for _ in range(rounds):
  t = time.perf_counter(); state = epoch(state); times.append(time.perf_counter() - t)
print(f'{variant}: {1e3 * np.median(times) / len(batches):.3f} ms/step (median of {rounds} epochs of {len(batches)}), all {[round(x, 3) for x in times]}')
