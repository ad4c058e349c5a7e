"""Which max-marginals one Chu-Liu-Edmonds run already proves, by a swap at the right contraction level.

python docs/decisions/2026-12-05-scripts/max_marginal_certificates.py B N [check]
(record 2026-12-05-k-best-by-camerini.md; float64, N(0, 1) scores, both root modes)

Edmonds' algorithm leaves an optimal dual: every id c of the contraction forest (a word or a contracted
cycle) has y_c (<= 0 for cycles), every arc a reduced score r(a) = s(a) - sum of y_c over the ids a
enters, r <= 0, and r = 0 on the best tree T*, which enters every id exactly once. For any tree T,
s(T) <= MST + sum over T of r(a), with equality when T enters every id once. For the arc e = h -> m let
L be the smallest id holding both h and m (none: the forest's top), X the id below L on m's side (the
largest id holding m and not h), x the word of X that T* enters and q its head. If q is also outside
every id below L that holds m (the smallest id holding q and m is L too) and h is not in the T*-subtree
of x, then T'' = T* - (q -> x) + (h -> m), with X re-expanded from m, enters every id once and holds e:
mm(e) = MST + r(e) - r(q -> x) = MST + g(h, m) - g(q, x), where g(u, v) = s(u, v) - score_offset[v] is
the arc's final re-weighted score (`_mst._contract`'s carry), lexicographic with the penalties of
`_mst.py` (a penalty left over means no valid tree holds e: -inf). The other arcs need a decoding.

Prints the share of arcs certified, the decodings left per sentence and, with `check`, the largest
difference between the certified values and `trees.max_marginals`.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update('jax_enable_x64', True)
from jax_structured import trees
from jax_structured.trees import _mst


def certify(arc, root, single_root):
  """(certified bool [B, n + 1, n], value float [B, n + 1, n]) with row 0 = ROOT."""
  batch, n, _ = arc.shape
  n_nodes = n + 1
  weights, penalty, valid, _ = _mst._graph(arc, root, jnp.full((batch,), n), single_root)
  st, _ = _mst._contract(weights, penalty, valid, incremental=True)
  parent, score_offset, key_offset = (np.asarray(st[k]) for k in ('parent', 'score_offset', 'key_offset'))
  heads = np.asarray(trees.mst(arc, root, single_root=single_root))
  full = np.concatenate([np.asarray(root)[:, None, :], np.asarray(arc)], 1)
  scores = np.zeros((batch, n_nodes, n_nodes))
  scores[:, :, 1:] = full
  penalty = np.asarray(penalty)
  certified = np.zeros((batch, n_nodes, n), bool)
  value = np.full((batch, n_nodes, n), np.nan)
  for b in range(batch):
    head = np.concatenate([[-1], heads[b] + 1])                      # node ids, 0 = ROOT
    best = sum(scores[b, head[v], v] for v in range(1, n_nodes))
    ancestors = []
    for v in range(n_nodes):
      chain = [v]
      while parent[b, chain[-1]] >= 0:
        chain.append(parent[b, chain[-1]])
      ancestors.append(chain)
    members = {}
    for v in range(n_nodes):
      for c in ancestors[v]:
        members.setdefault(c, set()).add(v)

    def lowest_common(u, v):
      mine = set(ancestors[v])
      return next((c for c in ancestors[u] if c in mine), -1)

    def in_subtree(u, root_of_subtree):
      while u != 0:
        if u == root_of_subtree:
          return True
        u = head[u]
      return False

    for m in range(1, n_nodes):
      for h in range(n_nodes):
        if h == m:
          continue
        common = lowest_common(h, m)
        chain = ancestors[m]
        x_id = chain[chain.index(common) - 1] if common >= 0 else chain[-1]
        (x,) = [v for v in members[x_id] if head[v] not in members[x_id]]
        q = head[x]
        if lowest_common(q, m) != common or in_subtree(h, x):
          continue
        certified[b, h, m - 1] = True
        key = (-penalty[b, h, m] - key_offset[b, m]) - (-penalty[b, q, x] - key_offset[b, x])
        value[b, h, m - 1] = -np.inf if key else (
            best + (scores[b, h, m] - score_offset[b, m]) - (scores[b, q, x] - score_offset[b, x]))
  return certified, value


batch, n = int(sys.argv[1]), int(sys.argv[2])
check = len(sys.argv) > 3 and sys.argv[3] == 'check'
for single_root in (True, False):
  keys = jax.random.split(jax.random.key(1), 2)
  arc = jax.random.normal(keys[0], (batch, n, n), jnp.float64)
  root = jax.random.normal(keys[1], (batch, n), jnp.float64)
  certified, value = certify(arc, root, single_root)
  total = batch * n * n
  line = (f'single_root={single_root} {batch}x{n}: certified {certified.sum()} of {total} arcs '
          f'({certified.sum() / total:.3f}); decodings left per sentence {(total - certified.sum()) / batch:.1f}')
  if check:
    arc_mm, root_mm = trees.max_marginals(arc, root, single_root=single_root)
    mm = np.concatenate([np.asarray(root_mm)[:, None, :], np.asarray(arc_mm)], 1)
    both_inf = np.isinf(value) & np.isinf(mm) & (np.sign(value) == np.sign(mm))
    diff = np.where(certified & ~both_inf, value - mm, 0)
    line += f'; max |certified - max_marginals| {np.abs(diff).max():.2e}'
  print(line, flush=True)
