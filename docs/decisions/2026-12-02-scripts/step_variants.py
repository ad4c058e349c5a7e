"""In-process: the new hot step as is vs without returning its gradient vs without the select, the
default job's simple model, chained epochs, interleaved rounds."""
import sys, time, functools
import jax, jax.numpy as jnp, numpy as np
from default_job import prepared_run
from jax_structured.training import steps, parallel
variant = sys.argv[1]; rounds = int(sys.argv[2])
run = prepared_run(variant)
parts = run.parts
host_state = jax.device_get(parts.state)
orig = steps.train_step
def no_grads(*a, **k):
  s, m, p = orig(*a, **k)
  return s, m, {**p, 'grads': jnp.zeros(())}
def no_pending(*a, **k):
  s, m, p = orig(*a, **k)
  return s, m, {'num_flagged': p['num_flagged'], 'stalled': p['stalled']}
import optax
from jax_structured.training import tasks as tasks_lib
def base_like(state, batch, rng, blocked=None, *, apply_fn, task, tx, embed_mask, axis_name='data', project=None):
  rng = steps._dropout_key(rng, state.step, axis_name)
  batch = {**batch, 'step': state.step}
  def loss_fn(params):
    outputs = apply_fn({'params': params, **state.model_state}, batch, train=True, rngs={'dropout': rng})
    return task.loss_and_metrics(outputs, batch)
  (_, metrics), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
  weight, total = steps._gradient_weight(metrics['loss'][1], axis_name)
  grads = jax.lax.pmean(jax.tree.map(lambda g: g * weight.astype(g.dtype), grads), axis_name)
  new_state, grad_norm = steps._apply_gradients(state, grads, tx=tx, embed_mask=embed_mask, project=project)
  metrics = steps._sum_metrics(metrics, axis_name)
  metrics['grad_norm'] = (grad_norm, jnp.ones((), jnp.float32))
  z = jnp.zeros((), jnp.int32)
  return new_state, metrics, {'num_flagged': z, 'stalled': z > 0}
runners = {}
for name, fn in (('as is', orig), ('no grads out', no_grads), ('no pending out', no_pending), ('base-like', base_like)):
  kw = parallel.model_steps(parts.model.apply, parts.task, parts.tx,
                            jax.tree.map(lambda _: False, parts.state.params))
  kw['train_step'] = functools.partial(fn, **kw['train_step'].keywords)
  runners[name] = parallel.Runner(parts.runner.mode, **kw)
batches0 = list(run.task_data.splits['train'].batches(run.batch_size, shuffle=True, seed=0, epoch=0))
res = {}
for name, r in runners.items():
  state = r.place(r.replicate(host_state)); rng = r.put_rng(jax.random.PRNGKey(0))
  bs = [r.shard_batch(b) for b in batches0]
  def epoch(state, r=r, bs=bs, rng=rng):
    for b in bs:
      state = r.start_train(state, b, rng)[0]
    return jax.block_until_ready(state)
  res[name] = [epoch, epoch(state), []]
for i in range(rounds):
  for name in (list(res) if i % 2 == 0 else list(res)[::-1]):
    ep, st, ts = res[name]; t = time.perf_counter(); res[name][1] = ep(st); ts.append(time.perf_counter() - t)
for name, (_, _, ts) in res.items():
  print(f'{name}: {1e3 * np.median(ts) / len(batches0):.3f} ms/step')
