"""Every `trees` function inside a user's `jax.shard_map` (default `check_vma=True`) on 8 CPU devices.

Loops whose carries start from constants must be marked as varying over the sharded axis, or JAX
rejects them; the results must equal the unsharded ones.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, PartitionSpec as P

from jax_structured import trees

# The library as users run it: the exact fallback on (tests/conftest.py).
pytestmark = pytest.mark.usefixtures('in_program_exact')

FUNCTIONS = {
    'log_partition': lambda a, r, l: trees.log_partition(a, r, l),
    'marginals': lambda a, r, l: trees.marginals(a, r, l),
    'entropy': lambda a, r, l: trees.entropy(a, r, l, single_root=False),
    'kl_divergence': lambda a, r, l: trees.kl_divergence(a, r, 0.5 * a, r, l),
    'grad_through_marginals': lambda a, r, l: jax.grad(
        lambda a: jnp.sum(trees.marginals(a, r, l)[0] ** 2))(a),
    'mst': lambda a, r, l: trees.mst(a, r, l),
    # Keys are split over the (per-shard) batch, so draws differ from unsharded ones: check trees.
    'sample': lambda a, r, l: trees.is_tree(
        trees.sample(jax.random.key(0), a, r, l, num_samples=2), jnp.broadcast_to(l, (2,) + l.shape),
        single_root=True),
    'projective_marginals': lambda a, r, l: trees.projective_marginals(a, r, l),
    'grad_through_projective': lambda a, r, l: jax.grad(
        lambda a: jnp.sum(trees.projective_marginals(a, r, l, single_root=False)[0] ** 2))(a),
    'projective_mst': lambda a, r, l: trees.projective_mst(a, r, l),
    'tree_statistics': lambda a, r, l: (trees.tree_height(trees.mst(a, r, l), l),
                                        trees.is_tree(trees.mst(a, r, l), l),
                                        trees.depth_histogram(trees.mst(a, r, l), l, max_depth=6)),
}


@pytest.mark.parametrize('name', sorted(FUNCTIONS))
def test_inside_shard_map_with_vma_checks(name):
  assert jax.device_count() == 8
  rng = np.random.default_rng(0)
  arc = rng.normal(size=(8, 6, 6)).astype(np.float32)
  root = rng.normal(size=(8, 6)).astype(np.float32)
  arc[0] *= 40.0  # sharp: the exact fallbacks are traced and taken on this shard
  root[0] *= 40.0
  lengths = np.array([6, 5, 4, 3, 2, 1, 6, 0])
  fn = FUNCTIONS[name]
  mesh = Mesh(np.array(jax.devices()), ('data',))
  sharded = jax.jit(jax.shard_map(fn, mesh=mesh, in_specs=(P('data'),) * 3,
                                  out_specs=P(None, 'data') if name == 'sample' else P('data')))
  if name == 'sample':
    assert np.all(sharded(arc, root, lengths))
    return
  got, want = sharded(arc, root, lengths), jax.jit(fn)(arc, root, lengths)
  for g, w in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
    np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
