"""Optimizers as optax transformations, chosen by name (optim), and KFAC (kfac)."""
