"""Placeholder: being written (inside-outside, Eisner)."""
def _todo(*a, **k):
  raise NotImplementedError
projective_log_partition = projective_marginals = projective_mst = _todo
