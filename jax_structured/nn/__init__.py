"""jax_structured.nn."""
