# exercise: sinusoidal
# slip: positions counted from 1, not 0
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(1, length + 1)[:, None]
    angle = pos / 10000 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((length, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe
