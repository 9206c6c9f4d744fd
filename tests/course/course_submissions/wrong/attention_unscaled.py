# exercise: attention
# the student's slip: forgot the scale

import numpy as np


def attention(q, k, v, mask=None):
    scores = np.einsum("...ld,...sd->...ls", q, k)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    top = scores.max(axis=-1, keepdims=True)
    top = np.where(np.isneginf(top), 0, top)
    w = np.exp(scores - top)
    total = w.sum(axis=-1, keepdims=True)
    w = w / np.where(total == 0, 1, total)
    return w @ v
