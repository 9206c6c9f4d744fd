# exercise: softmax_backward
# style: builds the (n, n) Jacobian diag(p) - p p^T of every row and applies it with einsum
import numpy as np


def softmax_backward(dp, p):
    n = p.shape[-1]
    jac = np.eye(n, dtype=p.dtype) * p[..., None, :] - p[..., :, None] * p[..., None, :]
    return np.einsum("...ij,...j->...i", jac, dp)
