"""Reading values sown with `Module.sow('intermediates', name, value)` out of a nested collection."""
from typing import Any, Mapping

from flax import traverse_util


def find_intermediates(intermediates: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
  """Flat `{name: value}` of every sown value whose name starts with `prefix`, wherever it was sown.

  `model.apply(..., mutable=['intermediates'])` returns the sown values nested by module path, each
  wrapped in a tuple (one entry per call); this unwraps single-call tuples and keys by the sown name.

  Args:
    intermediates: the 'intermediates' collection (or the whole mutated-variables dict).
    prefix: keep only names starting with it, e.g. `'sentence_'`.

  Returns:
    dict name -> value (a tuple if the module was called several times under the same name).

  Raises:
    ValueError: if the same name was sown by two different modules (ambiguous).
  """
  if 'intermediates' in intermediates:
    intermediates = intermediates['intermediates']
  found: dict[str, Any] = {}
  where: dict[str, str] = {}
  flat = traverse_util.flatten_dict(dict(intermediates), is_leaf=lambda _, v: isinstance(v, tuple))
  for path, value in flat.items():
    name = path[-1]
    if not name.startswith(prefix):
      continue
    if name in found:
      raise ValueError(f'intermediate {name!r} sown by both {where[name]} and {"/".join(path[:-1])}')
    found[name] = value[0] if isinstance(value, tuple) and len(value) == 1 else value
    where[name] = '/'.join(path[:-1])
  return found
