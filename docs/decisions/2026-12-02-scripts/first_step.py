"""Times the first compile of each program the trainer runs (train, eval, exact ...), then stops.

  python docs/decisions/2026-12-02-scripts/first_step.py --config=... --workdir=... [--config.x=y]
Prints 'COMPILE <name> <seconds>' per new program (Runner._timed_if_new: compile + one call).
"""
import sys, time, os
from jax_structured.training import parallel
orig = parallel.Runner._timed_if_new
def timed(self, name, fn, *args):
  before = self.compile_seconds
  out = orig(self, name, fn, *args)
  if self.compile_seconds != before:
    print(f'COMPILE {name} {self.compile_seconds - before:.1f} s', flush=True)
    if name == 'eval' and os.environ.get('STOP_AFTER_EVAL_COMPILE'):
      os._exit(0)
  return out
parallel.Runner._timed_if_new = timed
sys.argv[0] = 'launch.train'
from launch import train
from launch import _errors
_errors.run(train.main, argv_filter=train.take_data_overrides)
