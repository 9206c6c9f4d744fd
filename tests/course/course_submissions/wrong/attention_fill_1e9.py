# exercise: attention
# the student's slip: fills masked scores with -1e9
import math

import numpy as np


def attention(q, k, v, mask=None):
    scores = np.einsum("...ld,...sd->...ls", q, k) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = np.where(mask, scores, -1e9)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0, top)
    w = np.exp(scores - top)
    total = w.sum(axis=-1, keepdims=True)
    w = w / np.where(total == 0, 1, total)
    return w @ v
