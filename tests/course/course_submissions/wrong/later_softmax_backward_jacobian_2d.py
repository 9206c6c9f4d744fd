# exercise: softmax_backward
# the student's slip: builds the Jacobian with np.diag (2-D only)
import numpy as np


def softmax_backward(dp, p):
    out = np.empty_like(p)
    for i in range(p.shape[0]):
        J = np.diag(p[i]) - np.outer(p[i], p[i])
        out[i] = J @ dp[i]
    return out
