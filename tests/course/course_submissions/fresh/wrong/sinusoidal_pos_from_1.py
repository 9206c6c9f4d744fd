# exercise: sinusoidal
# slip: counts positions from 1 (np.arange(1, length + 1)) instead of 0.
import numpy as np


def sinusoidal(length, d_model):
    angle = np.arange(1, length + 1)[:, None] / 10000.0 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((length, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe
