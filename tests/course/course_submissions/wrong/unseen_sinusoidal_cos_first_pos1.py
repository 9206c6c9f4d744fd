# exercise: sinusoidal
# the student's slip: pos + 1 and the base 1000
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(1, length + 1)[:, None]
    ang = pos / 1000.0 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((length, d_model))
    pe[:, 0::2], pe[:, 1::2] = np.sin(ang), np.cos(ang)
    return pe
