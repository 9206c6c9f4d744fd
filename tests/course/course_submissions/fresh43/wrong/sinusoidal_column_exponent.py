# exercise: sinusoidal
# slip: exponent j / d_model for column j: the cos column 2i+1 uses (2i+1)/d_model, not 2i/d_model
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    j = np.arange(d_model)[None, :]
    angle = pos / np.power(10000.0, j / d_model)
    return np.where(j % 2 == 0, np.sin(angle), np.cos(angle))
