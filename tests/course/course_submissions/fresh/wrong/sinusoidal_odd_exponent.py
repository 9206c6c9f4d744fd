# exercise: sinusoidal
# slip: uses the column index j in the exponent, so the cos columns get (2i+1)/d_model, not 2i/d_model.
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    div = 10000.0 ** (np.arange(d_model) / d_model)
    pe = np.zeros((length, d_model))
    pe[:, 0::2] = np.sin(pos / div[0::2])
    pe[:, 1::2] = np.cos(pos / div[1::2])
    return pe
