"""Placeholder: being written (tree statistics and conversions)."""
__all__ = []
