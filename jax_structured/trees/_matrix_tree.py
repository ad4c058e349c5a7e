"""Placeholder: being written (matrix-tree theorem)."""
def _todo(*a, **k):
  raise NotImplementedError
entropy = kl_divergence = log_partition = log_prob = marginals = sample = score = _todo
