# exercise: sinusoidal
# the student's slip: cos on the even columns and sin on the odd ones
# diagnosis: sin and cos swapped
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    div = 10000 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((length, d_model))
    pe[:, 0::2] = np.cos(pos / div)
    pe[:, 1::2] = np.sin(pos / div)
    return pe
