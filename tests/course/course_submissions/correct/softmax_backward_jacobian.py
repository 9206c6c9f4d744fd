# exercise: softmax_backward
import numpy as np


def softmax_backward(dp, p):
    n = p.shape[-1]
    jac = p[..., :, None] * (np.eye(n, dtype=p.dtype) - p[..., None, :])   # (..., n, n), symmetric
    return np.einsum("...ij,...j->...i", jac, dp)
