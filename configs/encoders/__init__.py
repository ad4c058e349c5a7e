"""Configs that compare registered encoders under one head (compare.py)."""
