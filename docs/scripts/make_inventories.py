r"""Writes the local intersphinx inventories of JAX, Flax and Optax that docs/conf.py reads.

    python docs/scripts/make_inventories.py        # needs `pip install sphobjinv` (not a docs dependency)

The documentation is built where there is no internet (CI installs from PyPI only), so intersphinx cannot
download each project's `objects.inv`. These files list, for the names of those projects that our pages
and docstrings mention (collected with `grep -rhoE "(jax|flax|optax)(\.[A-Za-z_]+)+" jax_structured docs`),
where each is documented on the project's own site; Sphinx turns a reference to one of them (e.g. the
`jax.Array` of a signature) into a link there. To link a new name, add it to `NAMES` and rerun; the URLs
follow each site's layout (JAX: `_autosummary/<name>.html`; Flax and Optax: their API pages).
"""
import os

import sphobjinv as soi

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), '_inventories')

_JAX_OBJECTS = {  # name -> role; documented at _autosummary/<name>.html#<name>
    'jax.Array': 'class', 'jax.ShapeDtypeStruct': 'class', 'jax.custom_jvp': 'class',
    'jax.jit': 'function', 'jax.vmap': 'function', 'jax.pmap': 'function', 'jax.grad': 'function',
    'jax.value_and_grad': 'function', 'jax.vjp': 'function', 'jax.jvp': 'function',
    'jax.eval_shape': 'function', 'jax.checkpoint': 'function', 'jax.shard_map': 'function',
    'jax.device_put': 'function', 'jax.device_get': 'function', 'jax.devices': 'function',
    'jax.local_devices': 'function', 'jax.process_index': 'function', 'jax.process_count': 'function',
    'jax.device_count': 'function', 'jax.make_array_from_process_local_data': 'function',
    'jax.distributed.initialize': 'function', 'jax.tree.map': 'function', 'jax.tree.leaves': 'function',
    'jax.nn.sigmoid': 'function', 'jax.nn.log_softmax': 'function', 'jax.nn.softmax': 'function',
    'jax.random.PRNGKey': 'function', 'jax.random.split': 'function', 'jax.random.fold_in': 'function',
    'jax.random.normal': 'function', 'jax.random.categorical': 'function',
    'jax.lax.scan': 'function', 'jax.lax.cond': 'function', 'jax.lax.while_loop': 'function',
    'jax.lax.psum': 'function', 'jax.lax.pmean': 'function', 'jax.lax.stop_gradient': 'function',
    'jax.lax.platform_dependent': 'function', 'jax.ops.segment_sum': 'function',
    'jax.ops.segment_max': 'function', 'jax.sharding.Mesh': 'class', 'jax.sharding.NamedSharding': 'class',
    'jax.sharding.PartitionSpec': 'class',
}
_JAX_MODULES = ('jax.numpy', 'jax.lax', 'jax.random', 'jax.nn', 'jax.sharding', 'jax.tree')

NAMES = {
    'jax': [(name, role, f'_autosummary/{name}.html#$') for name, role in _JAX_OBJECTS.items()]
           + [(name, 'module', f'{name}.html#module-$') for name in _JAX_MODULES]
           + [('jax.typing.ArrayLike', 'data', 'jax.typing.html#$')],
    'flax': [('flax.linen', 'module', 'api_reference/flax.linen/index.html#module-$'),
             ('flax.linen.Module', 'class', 'api_reference/flax.linen/module.html#$'),
             ('flax.linen.compact', 'function', 'api_reference/flax.linen/decorators.html#$'),
             ('flax.linen.scan', 'function', 'api_reference/flax.linen/transformations.html#$'),
             ('flax.linen.Dense', 'class', 'api_reference/flax.linen/layers.html#$'),
             ('flax.linen.Embed', 'class', 'api_reference/flax.linen/layers.html#$'),
             ('flax.struct.dataclass', 'function', 'api_reference/flax.struct.html#$')],
    'optax': [('optax.GradientTransformation', 'class', 'api/transformations.html#$'),
              ('optax.Schedule', 'data', 'api/optimizer_schedules.html#$'),
              ('optax.linear_schedule', 'function', 'api/optimizer_schedules.html#$'),
              ('optax.apply_updates', 'function', 'api/apply_updates.html#$')],
}
PROJECTS = {'jax': ('JAX', '0.10'), 'flax': ('Flax', '0.12'), 'optax': ('Optax', '0.2')}


def main() -> None:
  os.makedirs(OUT, exist_ok=True)
  for key, entries in NAMES.items():
    project, version = PROJECTS[key]
    inventory = soi.Inventory()
    inventory.project, inventory.version = project, version
    for name, role, uri in entries:
      inventory.objects.append(soi.DataObjStr(name=name, domain='py', role=role, priority='1', uri=uri,
                                              dispname='-'))
    soi.writebytes(os.path.join(OUT, f'{key}.inv'), soi.compress(inventory.data_file(contract=True)))
    print(f'{key}.inv: {len(entries)} names')


if __name__ == '__main__':
  main()
