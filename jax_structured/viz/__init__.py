"""jax_structured.viz."""
