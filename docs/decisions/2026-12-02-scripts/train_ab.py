"""One variant of a config trained to the end (same seed): steps/s, dev/test metrics, the train loss
history (TensorBoard scalars), the flagged examples logged.

  python train_ab.py OUT_JSON WORKDIR CONFIG_FILE[:OPTIONS] [VARIANT] [key=value ...]
"""
import ast, importlib.util, json, sys, time, glob, struct
from jax_structured import training
from jax_structured import config as config_lib
out, workdir, spec = sys.argv[1:4]
rest = sys.argv[4:]
variant = rest[0] if rest and '=' not in rest[0] else None
overrides = {}
for a in rest:
  if '=' in a:
    k, v = a.split('=', 1)
    try:
      v = ast.literal_eval(v)
    except (ValueError, SyntaxError):
      pass
    overrides[k] = v
path, _, options = spec.partition(':')
module_spec = importlib.util.spec_from_file_location('cfg', path)
module = importlib.util.module_from_spec(module_spec); module_spec.loader.exec_module(module)
config = module.get_config(options) if options else module.get_config()
if variant:
  v = config.variants[variant]
  for section in v:
    config[section].update(v[section].to_dict() if hasattr(v[section], 'to_dict') else v[section])
if 'variants' in config:
  del config['variants']
if overrides:
  config = config_lib.with_overrides(config, overrides)
t = time.time()
results = training.train_and_evaluate(config, workdir)
wall = time.time() - t
from tensorboardX.proto import event_pb2
scalars = {}
for f in sorted(glob.glob(f'{workdir}/**/events.out.tfevents*', recursive=True)):
  data = open(f, 'rb').read(); i = 0
  while i < len(data):
    n = struct.unpack('<Q', data[i:i+8])[0]; e = event_pb2.Event(); e.ParseFromString(data[i+12:i+12+n]); i += 12 + n + 4
    for val in e.summary.value:
      if val.tag.startswith('train/') or val.tag.startswith('dev/'):
        scalars.setdefault(val.tag, []).append((e.step, val.simple_value))
json.dump({'wall_s': wall, 'steps': results.get('steps'), 'steps_per_second': results.get('steps_per_second'),
           'train_seconds': results.get('train_seconds'),
           'validation': results.get('validation'), 'test': results.get('test'), 'scalars': scalars},
          open(out, 'w'), indent=1)
print(json.dumps({k: results.get(k) for k in ('steps', 'steps_per_second', 'validation', 'test')}))
