"""Measuring and benchmark scripts, each run from the repository root: python -m scripts.NAME."""
