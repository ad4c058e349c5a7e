"""jax_structured.training."""
