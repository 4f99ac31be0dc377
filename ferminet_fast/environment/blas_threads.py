"""The host's BLAS/LAPACK libraries held to one thread while a run trains.

On CPU, JAX runs its linear algebra (KFAC's Cholesky factorisations, the determinants' LU)
through the LAPACK that SciPy ships (OpenBLAS in SciPy's wheels). OpenBLAS keeps a thread
per core, and they spin for a while after each call; XLA's own threads, which run the rest
of the step on the same cores, then wait for them; with KFAC on CPU the step is markedly
faster without them (BENCHMARKS.md, "OpenBLAS's threads against XLA's"). The matrices handed
to LAPACK here have at most about a thousand rows (KFAC's factors of FermiNet's standard
network: 833), too small for OpenBLAS's threads to pay; that network's step was faster with
one thread too.

The limit applies to the libraries loaded when it is entered (SciPy's LAPACK is loaded
first for that), is lifted on exit, and is left alone when the user set the thread count
through the environment (OPENBLAS_NUM_THREADS, MKL_NUM_THREADS or OMP_NUM_THREADS).
"""

import contextlib
import os

import threadpoolctl

USER_SETTINGS = ('OPENBLAS_NUM_THREADS', 'MKL_NUM_THREADS', 'OMP_NUM_THREADS')


def limited():
  """A context in which the host's BLAS libraries use one thread (module docstring)."""
  if any(os.environ.get(name) for name in USER_SETTINGS):
    return contextlib.nullcontext()
  import scipy.linalg.cython_lapack  # noqa: F401  The LAPACK JAX's CPU kernels call.
  return threadpoolctl.threadpool_limits(limits=1, user_api='blas')
