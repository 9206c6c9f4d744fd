# exercise: sinusoidal
# the student's slip: uses each column's own index j in the exponent
# diagnosis: each column uses its own index in the exponent
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    j = np.arange(d_model)[None, :]
    ang = pos / 10000.0 ** (j / d_model)
    return np.where(j % 2 == 0, np.sin(ang), np.cos(ang))
