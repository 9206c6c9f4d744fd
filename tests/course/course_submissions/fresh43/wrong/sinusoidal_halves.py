# exercise: sinusoidal
# slip: [sin | cos] as two halves instead of interleaved columns: right only when d_model = 2
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    angle = pos / 10000 ** (np.arange(0, d_model, 2) / d_model)
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)
