"""Compile seconds and train steps/s of the default job (configs/default.py, its 'structured' variant,
shortened), before and after issue 59's split, interleaved: each round runs the old tree then the new.

  taskset -c 1 python default_job_timing.py /tmp/wt59_before /tmp/wt59_after 4

Each run: configs/default.py with only its 'structured' variant, 4,000 training sentences, 400 steps,
no trees drawn, called through `training.train_and_evaluate` in a fresh process whose PYTHONPATH is
the tree. Compile seconds: the sum of the console's "compiled the ... in X s" lines; steps/s:
metrics.json; job CPU s: user + system seconds of the whole process (less sensitive than wall time to
other processes on a shared machine). "best": the lowest compile and CPU seconds and the highest
steps/s of each side; "median": the medians.
"""
import json, os, re, resource, subprocess, sys, tempfile

CHILD = r'''
import importlib.util, sys
spec = importlib.util.spec_from_file_location('default_config', sys.argv[1] + '/configs/default.py')
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
import ml_collections
c = m.get_config()
c.variants = ml_collections.ConfigDict({'structured': c.variants.structured.to_dict()})
c.data.update({'num_train': 4000, 'num_dev': 200, 'num_test': 200})
c.train.update({'num_steps': 400, 'eval_every_steps': 400, 'log_every_steps': 100, 'render_trees': 0})
from jax_structured import training
training.train_and_evaluate(c, sys.argv[2])
'''

def run(tree):
  work = tempfile.mkdtemp(prefix='h59_')
  env = dict(os.environ, PYTHONPATH=tree, JAX_PLATFORMS='cpu')
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  out = subprocess.run([sys.executable, '-c', CHILD, tree, work], env=env, capture_output=True,
                       text=True, cwd=tree, check=True).stdout
  compile_s = sum(float(x) for x in re.findall(r'compiled the .* in ([0-9.]+) s', out))
  metrics = json.load(open(os.path.join(work, 'structured', 'metrics.json')))
  now = resource.getrusage(resource.RUSAGE_CHILDREN)
  cpu_s = (now.ru_utime - usage.ru_utime) + (now.ru_stime - usage.ru_stime)  # the whole job's CPU seconds
  return compile_s, metrics['steps_per_second'], cpu_s

before, after, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = {before: [], after: []}
for r in range(rounds):
  for tree in (before, after):
    rows[tree].append(run(tree))
    print(tree, r, rows[tree][-1], flush=True)
med = lambda xs: sorted(xs)[len(xs) // 2]
print('all runs (compile s, steps/s):', json.dumps(rows))
for label, pick, best in (('best', min, max), ('median', med, med)):
  cb, ca = pick([r[0] for r in rows[before]]), pick([r[0] for r in rows[after]])
  sb, sa = best([r[1] for r in rows[before]]), best([r[1] for r in rows[after]])
  pb, pa = pick([r[2] for r in rows[before]]), pick([r[2] for r in rows[after]])
  print(f'{label}: compile s before {cb:.2f} after {ca:.2f} ratio {ca / cb:.3f}; steps/s before {sb:.1f} '
        f'after {sa:.1f} ratio {sa / sb:.3f}; job CPU s before {pb:.1f} after {pa:.1f} ratio {pa / pb:.3f}')
