# exercise: softmax_backward
# slip: builds the Jacobian with np.diag and np.outer, which flatten their inputs: right only for 1-D p.
import numpy as np


def softmax_backward(dp, p):
    jac = np.diag(p.ravel()) - np.outer(p, p)
    return (jac @ dp.ravel()).reshape(p.shape)
