# exercise: softmax
# style: flattens to rows and loops over them in float64, then casts back and reshapes
import numpy as np


def softmax(x):
    rows = np.asarray(x, dtype=np.float64).reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    for r in range(rows.shape[0]):
        e = np.exp(rows[r] - rows[r].max())
        out[r] = e / e.sum()
    return out.reshape(x.shape).astype(x.dtype)
