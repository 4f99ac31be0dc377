"""Genesis op kernels (elementwise add, square matmul, sums) against PyTorch and NumPy."""
