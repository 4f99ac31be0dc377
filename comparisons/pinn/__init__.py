"""PINN sparse-sensor flow reconstruction: Kovasznay flow and a pseudo-spectral turbulence
generator, QR-pivoted POD sensors, a Fourier-feature PINN with second derivatives; against
PyTorch and SciPy."""
