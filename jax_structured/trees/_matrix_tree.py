"""The matrix-tree theorem for non-projective dependency trees (Koo et al., 2007; Liu & Lapata, 2018).

A dependency tree over words `0..n-1` gives every word exactly one head (another word or ROOT) and
has no cycles. Its potential is the product of `exp(arc_scores[h, m])` over its arcs `h -> m` and
`exp(root_scores[m])` over its root children `m`. The partition function `Z = sum_T prod potentials`
is a determinant (Tutte's directed matrix-tree theorem):

* multi-root (`single_root=False`): with `A[h, m] = exp(arc_scores[h, m])` (zero diagonal) and
  `r[m] = exp(root_scores[m])`, the Laplacian `L[i, j] = -A[i, j] + [i == j] (sum_h A[h, j] + r[j])`
  is the graph Laplacian of words + ROOT with ROOT's row and column removed, and `Z = det L`.
* single-root (`single_root=True`, Koo et al. 2007, sec. 3.3; Liu & Lapata 2018, eqs. 12-15): the
  root-free Laplacian (eq. 13) with its first row replaced by `r` (eq. 14), `Z = det L_bar`.

Marginals are the derivatives of `log Z` (eq. 15 in the single-root case); with `X = L^-1`:

    multi-root:  P(h -> m) = A[h, m] (X[m, m] - X[m, h]),                       P(ROOT -> m) = r[m] X[m, m]
    single-root: P(h -> m) = A[h, m] ([m != 0] X[m, m] - [h != 0] X[m, h]),     P(ROOT -> m) = r[m] X[m, 0]

Numerics (all exact, no eps, no clamping of scores):

* Column shift: every potential in column `m` of the Laplacian belongs to modifier `m`, so scaling the
  column by `exp(-c[m])` with `c[m] = max(max_h arc_scores[h, m], root_scores[m])` scales `det` by
  `exp(-c[m])`; `log Z = log|det L(scores - c)| + sum_m c[m]`, and the marginals are unchanged. The
  largest potential of every column is then 1, so nothing overflows (float32 is fine for
  |scores| <= 60 and n = 500).
* Root row shift (single root): row 0 of `L_bar` holds only root potentials, so scaling it by
  `exp(-c_r)` with `c_r = max_m (root_scores[m] - c[m])` scales `det` by `exp(-c_r)` and leaves the
  marginals unchanged (`X[:, 0]` scales by `exp(c_r)`, the root potentials by `exp(-c_r)`, the other
  columns of `X` not at all); `log Z` gains `c_r`. The largest entry of row 0 is then 1, so root
  scores far below the arc scores (a bilinear arc scorer next to a linear root scorer) do not make
  row 0 tiny (docs/decisions/2026-11-26-error-estimate-by-sums-and-root-row-scaling.md).
* Padding: positions at or past `lengths` become identity rows/columns (their potentials are 0 and
  their diagonal is 1), so the determinant and the inverse restricted to real words are those of
  the unpadded problem; padded marginals are exactly 0. `lengths == 0` gives `log Z = 0`.
* `arc_scores[h, m] = -inf` forbids the arc: its potential is exactly 0 and so is its marginal.
* Non-finite input: a NaN or +inf among a batch element's *real* scores gives NaN `log Z`,
  marginals, entropy and KL for that batch element only; a batch element that admits no tree at
  all (a real word whose heads, words and ROOT, are all -inf; or, single root, words that can only
  hang from ROOT among themselves) gets `log Z = -inf` and NaN marginals and entropy. The other
  batch elements are untouched (every operation is per batch element). Padded scores are never
  read, whatever they hold.
* Sharp scores, the exact path and where it runs: `_lu_path`, `_elimination`, `_exact_path`,
  `_statistics`; sampling: `_sampling`.

All functions are pure, jit-able and vmap-able, accept any leading batch shape and float32 or
float64 scores, and run entirely on the device.
"""
import jax.numpy as jnp

from jax_structured.trees._lu_path import _arc_mask
from jax_structured.trees._lu_path import _laplacian
from jax_structured.trees._lu_path import _lu_logdet_and_inverse
from jax_structured.trees._lu_path import _marginals_from_inverse
from jax_structured.trees._lu_path import _potentials
from jax_structured.trees._lu_path import _prepare
from jax_structured.trees._statistics import _statistics

__all__ = ['entropy', 'kl_divergence', 'laplacian', 'log_partition', 'log_prob', 'lu_logdet_and_inverse',
           'marginals', 'marginals_from_inverse', 'score']


def log_partition(arc_scores, root_scores, lengths=None, *, single_root=True, exact=None):
  """log Z, the log-sum over all non-projective dependency trees of exp(tree score).

  `log Z = log det L + sum_m c[m]` with the column-shifted Laplacian `L` of Liu & Lapata eqs. 12-14
  (single root, Koo et al. 2007) or the multi-root Laplacian (root potentials on the diagonal).
  `jax.grad` of it equals `marginals` (closed-form JVP, one LU factorisation).

  Args:
    arc_scores: [..., n, n] float32/float64, `arc_scores[..., h, m]` log-potential of h -> m; -inf
      forbids the arc; the diagonal and padded entries are ignored.
    root_scores: [..., n] log-potentials of ROOT -> m.
    lengths: None (all n words are real) or int [...] number of real words in 0..n (concrete values
      outside raise ValueError; traced ones act as if clipped, which cannot be checked under jit).
    single_root: exactly one word hangs from ROOT if True; any number if False.
    exact: what the batch elements get whose LU result the error estimate flags (sharp scores): None
      (the setting of `exact_mode`, 'auto' by default: exact on concrete arrays, NaN inside a trace),
      'auto', 'flag' (NaN, zero derivative) or 'in_program' (the exact elimination inside the traced
      program, at a compile-time and per-call price paid by every call): see `exact_mode`.

  Returns:
    [...] log Z in the scores' dtype (0 for lengths == 0; NaN for a batch element with non-finite
    real scores, -inf for one that admits no tree; see the module docstring).
  """
  return _statistics(arc_scores, root_scores, lengths, single_root, exact)['log_z']


def marginals(arc_scores, root_scores, lengths=None, *, single_root=True, exact=None):
  """Arc and root marginal probabilities by the matrix-tree theorem (Liu & Lapata 2018, eq. 15).

  Differentiable to any order (the inverse carries the closed-form derivative `-X dL X`).

  Args:
    arc_scores: [..., n, n] float, see `log_partition`.
    root_scores: [..., n] float.
    lengths: None or int [...].
    single_root: see `log_partition`.
    exact: see `log_partition` and `exact_mode`.

  Returns:
    (arc_marginals [..., n, n], root_marginals [..., n]): `arc_marginals[..., h, m] = P(h -> m)`,
    `root_marginals[..., m] = P(ROOT -> m)`; for each real word `m`,
    `sum_h arc_marginals[h, m] + root_marginals[m] = 1`; exactly 0 on padding and forbidden arcs.
  """
  stats = _statistics(arc_scores, root_scores, lengths, single_root, exact)
  return stats['arc_marginals'], stats['root_marginals']


def score(arc_scores, root_scores, heads, lengths=None):
  """The score (log-potential) of given trees: sum over real words of the score of their arc.

  Args:
    arc_scores: [..., n, n] float.
    root_scores: [..., n] float.
    heads: [..., n] int, `heads[..., m]` the head word of `m` or -1 for ROOT; entries at or past
      `lengths` are ignored. Heads are not checked to form a tree (not possible under jit).
    lengths: None or int [...].

  Returns:
    [...] `sum_m root_scores[m] if heads[m] == -1 else arc_scores[heads[m], m]` over real `m`.
  """
  arc_scores, root_scores, _, mask = _prepare(arc_scores, root_scores, lengths)
  heads = jnp.asarray(heads)
  if heads.shape != root_scores.shape:
    raise ValueError(f'heads must have shape {root_scores.shape} (= root_scores.shape), got {heads.shape}')
  if not jnp.issubdtype(heads.dtype, jnp.integer):
    raise ValueError(f'heads must be integers, got dtype {heads.dtype}')
  n = root_scores.shape[-1]
  index = jnp.clip(heads, 0, n - 1).astype(jnp.int32)
  picked = jnp.take_along_axis(arc_scores, index[..., None, :], axis=-2)[..., 0, :]
  per_word = jnp.where(heads == -1, root_scores, picked)
  return jnp.sum(jnp.where(mask, per_word, 0.0), axis=-1)


def log_prob(arc_scores, root_scores, heads, lengths=None, *, single_root=True, exact=None):
  """log P(heads) = score(heads) - log Z under the tree CRF (the parser's CRF loss is its negative).

  Args:
    arc_scores, root_scores, heads, lengths: see `score`.
    single_root: see `log_partition`. A multi-root `heads` under `single_root=True` (or any
      non-tree) has probability 0 but this function does not detect it.
    exact: see `log_partition` and `exact_mode`.

  Returns:
    [...] log-probabilities.
  """
  return (score(arc_scores, root_scores, heads, lengths)
          - log_partition(arc_scores, root_scores, lengths, single_root=single_root, exact=exact))


def _expected_shifted_score(stats):
  """sum_T p(T) (score(T) - sum_m c[m]) = sum mu (s - c); terms with zero potential contribute 0."""
  arc_ok = _arc_mask(stats['mask']) & (stats['arc_scores'] > -jnp.inf)
  root_ok = stats['mask'] & (stats['root_scores'] > -jnp.inf)
  shift = stats['shift']
  arc_centred = jnp.where(arc_ok, stats['arc_scores'] - shift[..., None, :], 0.0)
  root_centred = jnp.where(root_ok, stats['root_scores'] - shift, 0.0)
  return (jnp.sum(stats['arc_marginals'] * arc_centred, axis=(-2, -1))
          + jnp.sum(stats['root_marginals'] * root_centred, axis=-1))


def entropy(arc_scores, root_scores, lengths=None, *, single_root=True, exact=None):
  """Entropy of the tree distribution, `H = log Z - sum_{h,m} P(h -> m) s[h, m] - sum_m P(ROOT -> m) r[m]`.

  Computed with the column-shifted scores (`log det L - sum mu (s - c)`, since every real word has
  exactly one head) to avoid cancellation between two large numbers.

  Args:
    arc_scores, root_scores, lengths, single_root, exact: see `log_partition`.

  Returns:
    [...] entropy in nats (0 for lengths <= 1 in the single-root case).
  """
  stats = _statistics(arc_scores, root_scores, lengths, single_root, exact)
  return stats['logdet'] - _expected_shifted_score(stats)


def kl_divergence(arc_p, root_p, arc_q, root_q, lengths=None, *, single_root=True, exact=None):
  """KL(p || q) between two tree distributions over the same words.

  `KL = log Z_q - log Z_p + sum_{h,m} P_p(h -> m) (p[h, m] - q[h, m]) + sum_m P_p(ROOT -> m)
  (root_p[m] - root_q[m])`; +inf when q forbids (-inf) a part that p allows.

  Args:
    arc_p, root_p: [..., n, n] and [..., n] scores of p.
    arc_q, root_q: the same shapes, scores of q.
    lengths: None or int [...], shared by p and q.
    single_root: see `log_partition`.
    exact: see `log_partition` and `exact_mode` (both distributions).

  Returns:
    [...] KL divergence in nats (>= 0).
  """
  arc_p, root_p, lengths, mask = _prepare(arc_p, root_p, lengths)
  arc_q, root_q, _, _ = _prepare(arc_q, root_q, lengths)
  if arc_q.shape != arc_p.shape:
    raise ValueError(f'arc_q must have the shape of arc_p {arc_p.shape}, got {arc_q.shape}')
  stats = _statistics(arc_p, root_p, lengths, single_root, exact)
  log_z_q = log_partition(arc_q, root_q, lengths, single_root=single_root, exact=exact)
  arc_ok = _arc_mask(mask) & (arc_p > -jnp.inf)
  root_ok = mask & (root_p > -jnp.inf)
  arc_diff = jnp.where(arc_ok, arc_p - arc_q, 0.0)
  root_diff = jnp.where(root_ok, root_p - root_q, 0.0)
  expected = (jnp.sum(stats['arc_marginals'] * arc_diff, axis=(-2, -1))
              + jnp.sum(stats['root_marginals'] * root_diff, axis=-1))
  return log_z_q - stats['log_z'] + expected


def laplacian(arc_scores, root_scores, lengths=None, *, single_root=True):
  """The column-shifted Laplacian of the matrix-tree theorem, with its potentials and log-scale.

  What `log_partition` and `marginals` factorise (Liu & Lapata 2018 eqs. 12-14; multi-root: the
  root potentials on the diagonal), for baselines that put another linear algebra on it (the module
  docstring gives the shifts): `log Z = log|det L| + log_scale`, and `marginals_from_inverse` of
  `L^-1` gives the marginals (eq. 15).

  Args:
    arc_scores: [..., n, n] float, see `log_partition`.
    root_scores: [..., n] float.
    lengths: None or int [...].
    single_root: Koo et al.'s first-row replacement (eq. 14) if True.

  Returns:
    (lap [..., n, n], arc_potentials [..., n, n], root_potentials [..., n], log_scale [...]):
    `arc_potentials[h, m] = exp(arc_scores[h, m] - shift[m])` (0 on the diagonal, padding and
    forbidden arcs), `root_potentials` likewise (and scaled by the root-row shift, single root),
    identity rows and columns on padding.
  """
  arc_scores, root_scores, _, mask = _prepare(arc_scores, root_scores, lengths)
  arc_potentials, root_potentials, shift, root_shift = _potentials(arc_scores, root_scores, mask, single_root)
  lap = _laplacian(arc_potentials, root_potentials, mask, single_root)
  return lap, arc_potentials, root_potentials, jnp.sum(shift, axis=-1) + root_shift


def marginals_from_inverse(arc_potentials, root_potentials, inverse, *, single_root=True):
  """Arc and root marginals from the inverse of `laplacian`'s matrix (Liu & Lapata 2018, eq. 15).

  Args:
    arc_potentials: [..., n, n] and root_potentials: [..., n], from `laplacian`.
    inverse: [..., n, n] the inverse of `laplacian`'s `lap`, by any method.
    single_root: the root mode `laplacian` was called with.

  Returns:
    (arc_marginals [..., n, n], root_marginals [..., n]), as `marginals` returns them (no error
    estimate and no exact path: as accurate as `inverse`).
  """
  return _marginals_from_inverse(arc_potentials, root_potentials, inverse, single_root)


def lu_logdet_and_inverse(lap):
  """`(log|det lap| [...], lap^-1 [..., n, n])` from one LU factorisation with partial pivoting.

  The linear algebra at the core of `log_partition` and `marginals`, without their closed-form
  derivative rule, error estimate or exact path (differentiating it differentiates the LU).

  Args:
    lap: [..., n, n] float, e.g. `laplacian`'s matrix.

  Returns:
    (logdet [...], inverse [..., n, n]).
  """
  return _lu_logdet_and_inverse(lap)
