# exercise: sinusoidal
# the student's slip: takes the even column indices 2i and multiplies by 2 again (exponent 4i/d_model)
# diagnosis: base 1e+08 instead of 10000
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    two_i = np.arange(0, d_model, 2)
    angle = pos / 10000.0 ** (2 * two_i / d_model)
    pe = np.empty((length, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe
