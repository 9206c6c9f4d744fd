# exercise: softmax
# style: new arrays only (np.subtract/np.exp/np.divide into a fresh buffer), never the input
import numpy as np


def softmax(x):
    buf = np.subtract(x, x.max(axis=-1, keepdims=True))
    np.exp(buf, out=buf)
    np.divide(buf, buf.sum(axis=-1, keepdims=True), out=buf)
    return buf
