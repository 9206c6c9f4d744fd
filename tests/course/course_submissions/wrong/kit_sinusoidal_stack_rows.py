# exercise: sinusoidal
# the student's slip: np.stack([sin, cos], axis=1).reshape(length, d_model): the halves end up in two blocks
# diagnosis: sin and cos in two halves instead of interleaved
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    ang = pos / 10000 ** (np.arange(0, d_model, 2) / d_model)
    return np.stack([np.sin(ang), np.cos(ang)], axis=1).reshape(length, d_model)
