# exercise: softmax_backward
# slip: contracts the Jacobian with dp on the wrong index ("...ij,...j->...j", not "...ij,...i->...j"):
# about 0
import numpy as np


def softmax_backward(dp, p):
    jac = p[..., :, None] * (np.eye(p.shape[-1], dtype=p.dtype) - p[..., None, :])
    return np.einsum("...ij,...j->...j", jac, dp)
