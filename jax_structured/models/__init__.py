"""jax_structured.models."""
