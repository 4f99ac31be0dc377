"""GaussGAN: WGAN-GP with its validation metrics and quantum noise circuit, against
PyTorch, SciPy, scikit-learn and a per-sample NumPy loop."""
