# exercise: sinusoidal
# style: np.stack of (sin, cos) on a new last axis, then reshape interleaves them.
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length, dtype=np.float64)[:, None]
    angle = pos / np.power(10000.0, np.arange(d_model // 2) * 2.0 / d_model)
    return np.stack([np.sin(angle), np.cos(angle)], axis=-1).reshape(length, d_model)
