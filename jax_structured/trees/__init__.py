"""jax_structured.trees."""
