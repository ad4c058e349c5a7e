"""Multi-host data parallelism: two processes on localhost (2 CPU devices each, gloo collectives).

Each process feeds its half of every global batch. The test checks that both processes end with
bit-identical parameters (each saves its own in-memory copy), that these equal a one-process run on
the same global batches, and that `train_and_evaluate` runs as a 2-process job (Orbax checkpoints
written jointly, metrics.json by process 0) with the same result as a one-process run.
Run as a script, this file is one worker: `python test_multihost.py PROCESS_ID PORT WORKDIR OUT`.
"""
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(TESTS)
NUM_PROCESSES = 2
STEPS_OVERRIDES = {'optimizer.name': 'adam', 'optimizer.learning_rate': 0.05}
TRAIN_OVERRIDES = {'train.num_steps': 4, 'train.eval_every_steps': 2, 'data.batch_size': 8,
                   'parallel': 'shard_map'}


def _worker(process_id: int, port: int, workdir: str, out: str) -> None:
  import jax  # pylint: disable=g-import-not-at-top
  jax.config.update('jax_num_cpu_devices', 2)
  jax.config.update('jax_cpu_collectives_implementation', 'gloo')
  jax.config.update('jax_disable_most_optimizations', True)
  jax.config.update('jax_enable_x64', True)  # as tests/conftest.py does for the one-process reference
  sys.path.insert(0, TESTS)
  from jax_structured import training  # pylint: disable=g-import-not-at-top
  assert training.maybe_initialize_distributed(coordinator_address=f'localhost:{port}',
                                               num_processes=NUM_PROCESSES, process_id=process_id)
  assert jax.process_count() == NUM_PROCESSES and jax.device_count() == 4
  import test_training_support as support  # pylint: disable=g-import-not-at-top
  # 1. Lock-step steps through the Runner; every process saves ITS copy of the parameters.
  state, losses, _, runner = support.run_steps('shard_map', support.global_batches(3), STEPS_OVERRIDES)
  assert runner.num_shards == 4
  flat = {'/'.join(str(getattr(k, 'key', k)) for k in path): np.asarray(leaf)
          for path, leaf in jax.tree_util.tree_leaves_with_path(state.params)}
  np.savez(os.path.join(out, f'params_{process_id}.npz'), losses=np.asarray(losses), **flat)
  # 2. The whole loop as a 2-process job.
  results = training.train_and_evaluate(support.make_config(**TRAIN_OVERRIDES), workdir)
  with open(os.path.join(out, f'results_{process_id}.json'), 'w') as f:
    json.dump({'test': results['test'], 'validation': results['validation'], 'steps': results['steps']}, f)


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(('localhost', 0))
    return s.getsockname()[1]


@pytest.mark.slow  # end to end from the command line: runs after the suite (.ci/run)
def test_two_processes_train_in_lock_step(tmp_path):
  import jax  # pylint: disable=g-import-not-at-top
  import test_training_support as support  # pylint: disable=g-import-not-at-top
  from jax_structured import training  # pylint: disable=g-import-not-at-top

  workdir, out = tmp_path / 'run', tmp_path / 'out'
  out.mkdir()
  port = _free_port()
  env = dict(os.environ, PYTHONPATH=REPO, JAX_PLATFORMS='cpu')
  env.pop('XLA_FLAGS', None)
  procs = [subprocess.Popen([sys.executable, __file__, str(i), str(port), str(workdir), str(out)],
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
           for i in range(NUM_PROCESSES)]
  logs = []
  try:
    for p in procs:
      logs.append(p.communicate(timeout=200)[0])
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
  for i, p in enumerate(procs):
    assert p.returncode == 0, f'process {i} failed:\n{logs[i][-4000:]}'

  # Identical parameters in both processes, equal to a one-process run on 8 devices.
  saved = [dict(np.load(out / f'params_{i}.npz')) for i in range(NUM_PROCESSES)]
  assert saved[0].keys() == saved[1].keys()
  for key in saved[0]:
    assert np.array_equal(saved[0][key], saved[1][key]), key
  state, losses, _, _ = support.run_steps('shard_map', support.global_batches(3), STEPS_OVERRIDES)
  np.testing.assert_allclose(saved[0]['losses'], losses, rtol=1e-5)
  flat = {'/'.join(str(getattr(k, 'key', k)) for k in path): np.asarray(leaf)
          for path, leaf in jax.tree_util.tree_leaves_with_path(state.params)}
  for key, value in flat.items():
    np.testing.assert_allclose(saved[0][key], value, rtol=2e-5, atol=2e-6, err_msg=key)

  # The 2-process train_and_evaluate: same metrics in both processes, files by process 0, and the
  # jointly written checkpoint equals a one-process run of the same config.
  results = [json.load(open(out / f'results_{i}.json')) for i in range(NUM_PROCESSES)]
  assert results[0] == results[1] and results[0]['steps'] == 4
  assert json.load(open(workdir / 'metrics.json'))['test'] == results[0]['test']
  single = training.train_and_evaluate(support.make_config(**TRAIN_OVERRIDES), str(tmp_path / 'single'))
  np.testing.assert_allclose(single['test']['loss'], results[0]['test']['loss'], rtol=1e-5)
  two = support.params_of(str(workdir))
  one = support.params_of(str(tmp_path / 'single'))
  jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6), two, one)


if __name__ == '__main__':
  _worker(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
