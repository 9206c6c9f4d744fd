# exercise: sinusoidal
# the student's slip: 10000 ** (2 * i // d_model): integer division makes every exponent 0
# diagnosis: every pair has the same frequency
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    i = np.arange(d_model // 2)
    div = 10000.0 ** (2 * i // d_model)
    pe = np.zeros((length, d_model))
    pe[:, 0::2] = np.sin(pos / div)
    pe[:, 1::2] = np.cos(pos / div)
    return pe
