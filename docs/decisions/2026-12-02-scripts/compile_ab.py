"""Compile time and HLO size of value + gradient of sum(W * marginals) through trees.marginals.

  python compile_ab.py LABEL   (LABEL: base, base_off, new, new_in_program)
One process per label: `jax.jit(...).lower(...).compile()` seconds (trace + lower + compile) and the
number of lines of the optimised HLO, at 4x8, 64x64, 32x200, float32, default XLA CPU flags.
"""
import os, sys, time
label = sys.argv[1]
if label == 'base_off':
  os.environ['JAX_STRUCTURED_EXACT_FALLBACK'] = '0'
import jax, jax.numpy as jnp
import jax_structured
from jax_structured import trees
print(jax_structured.__file__)  # base_*: PYTHONPATH=<a checkout of the commit before>

def marginals(a, r):
  if label == 'new_in_program':
    return trees.marginals(a, r, exact='in_program')
  return trees.marginals(a, r)

def loss(a, r, wa, wr):
  arc_m, root_m = marginals(a, r)
  if label == 'new':  # as models run it: flagged trees (NaN) weigh 0 (nn.exactness)
    flagged = jnp.isnan(root_m).any(-1)
    arc_m = jnp.where(flagged[:, None, None], 0.0, arc_m)
    root_m = jnp.where(flagged[:, None], 0.0, root_m)
  return jnp.sum(wa * arc_m) + jnp.sum(wr * root_m)

for b, n in ((4, 8), (64, 64), (32, 200)):
  args = (jnp.zeros((b, n, n)), jnp.zeros((b, n)), jnp.zeros((b, n, n)), jnp.zeros((b, n)))
  fn = jax.jit(jax.value_and_grad(loss, (0, 1)))
  t = time.perf_counter()
  compiled = fn.lower(*args).compile()
  seconds = time.perf_counter() - t
  text = compiled.as_text()
  print(f'{label} {b}x{n}: compile {seconds:.2f} s, HLO {len(text.splitlines())} lines, '
        f'while {text.count(" while(")}, conditional {text.count(" conditional(")}', flush=True)
  jax.clear_caches()
