"""Run BLAS on one thread while training a small model: :func:`attention_np.kernels.threads.blas_threads`.

The helper lives in :mod:`attention_np.kernels.threads` (the blocked attention path uses it too);
this module keeps its old import path.
"""

from attention_np.kernels.threads import blas_threads

__all__ = ["blas_threads"]
