"""Pure functions over dependency trees: matrix-tree theorem, Chu-Liu-Edmonds, projective algorithms.

Conventions (see ARCHITECTURE.md): `arc_scores[..., h, m]` is the log-potential of head `h` -> modifier
`m`; `root_scores[..., m]` of ROOT -> `m`; `lengths[...]` the number of real words; `heads[..., m]`
the head of `m` (-1 = ROOT, and -1 on padding).
"""
from jax_structured.trees import _utils
from jax_structured.trees._labeled import labeled_log_partition
from jax_structured.trees._labeled import labeled_log_prob
from jax_structured.trees._labeled import labeled_marginals
from jax_structured.trees._labeled import labeled_mst
from jax_structured.trees._labeled import labeled_sample
from jax_structured.trees._labeled import labeled_score
from jax_structured.trees._kernels import KERNEL_MODES
from jax_structured.trees._kernels import use_kernels
from jax_structured.trees._matrix_tree import entropy
from jax_structured.trees._matrix_tree import kl_divergence
from jax_structured.trees._matrix_tree import laplacian
from jax_structured.trees._matrix_tree import log_partition
from jax_structured.trees._matrix_tree import log_prob
from jax_structured.trees._matrix_tree import lu_logdet_and_inverse
from jax_structured.trees._matrix_tree import marginals
from jax_structured.trees._matrix_tree import marginals_from_inverse
from jax_structured.trees._matrix_tree import score
from jax_structured.trees._sampling import sample
from jax_structured.trees._statistics import EXACT_MODES
from jax_structured.trees._statistics import exact_mode
from jax_structured.trees._kbest import k_best
from jax_structured.trees._kbest import projective_k_best
from jax_structured.trees._max_marginals import max_marginals
from jax_structured.trees._max_marginals import projective_max_marginals
from jax_structured.trees._mst import mst
from jax_structured.trees._projective import projective_log_partition
from jax_structured.trees._projective import projective_marginals
from jax_structured.trees._projective import projective_mst
from jax_structured.trees._utils import *  # noqa: F401,F403  (names listed in _utils.__all__)

__all__ = [
    'KERNEL_MODES', 'use_kernels',
    'EXACT_MODES', 'entropy', 'exact_mode', 'kl_divergence', 'log_partition', 'log_prob', 'marginals',
    'sample', 'score', 'laplacian', 'marginals_from_inverse', 'lu_logdet_and_inverse', 'mst',
    'projective_log_partition', 'projective_marginals', 'projective_mst',
    'max_marginals', 'projective_max_marginals', 'k_best', 'projective_k_best',
    'labeled_log_partition', 'labeled_marginals', 'labeled_mst', 'labeled_sample', 'labeled_score',
    'labeled_log_prob',
] + list(_utils.__all__)
