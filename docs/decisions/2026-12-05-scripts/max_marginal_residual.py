"""How much of the non-projective max-marginals a forest-per-modifier method would leave to decode.

python docs/decisions/2026-12-05-scripts/max_marginal_residual.py   (record 2026-12-05-k-best-by-camerini.md)

For every word m, the arcs h -> m with h inside m's subtree of the best tree are the ones the forest
trick of the record does not answer; their number summed over m is the sum of the subtree sizes of the
best tree = the sum of the depths of its words. Prints that sum per sentence (mean over the batch) and
the ratio of the n (n + 1) constrained decodings of trees.max_marginals to it (plus n forest passes).
"""
import jax
import numpy as np

from jax_structured import trees

for batch, n in [(64, 64), (512, 32), (32, 200)]:
  keys = jax.random.split(jax.random.key(0), 2)
  arc = jax.random.normal(keys[0], (batch, n, n))
  root = jax.random.normal(keys[1], (batch, n))
  heads = np.asarray(trees.mst(arc, root))
  total = 0
  for sentence in heads:
    for m in range(n):
      x, depth = m, 0
      while x >= 0:
        x, depth = sentence[x], depth + 1
      total += depth
  residual = total / batch
  print(f'{batch}x{n}: sum of depths per sentence {residual:.1f} of n (n + 1) = {n * n + n}; '
        f'decodings n (n + 1) / (residual + n) = {(n * n + n) / (residual + n):.1f}x fewer', flush=True)
