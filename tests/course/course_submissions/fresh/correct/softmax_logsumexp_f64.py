# exercise: softmax
# style: logsumexp computed in float64, exp(x - lse), cast back to the input's dtype.
import numpy as np


def softmax(x):
    x64 = np.asarray(x, dtype=np.float64)
    m = np.max(x64, axis=-1, keepdims=True)
    lse = m + np.log(np.sum(np.exp(x64 - m), axis=-1, keepdims=True))
    return np.exp(x64 - lse).astype(x.dtype)
