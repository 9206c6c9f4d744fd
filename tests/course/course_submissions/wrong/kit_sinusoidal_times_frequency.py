# exercise: sinusoidal
# the student's slip: exp(+log(10000) * 2i / d_model): multiplies the position by 10000^(2i/d) instead of
#   dividing
# diagnosis: frequencies rise instead of fall
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    freq = np.exp(np.log(10000.0) * np.arange(0, d_model, 2) / d_model)
    pe = np.empty((length, d_model))
    pe[:, 0::2] = np.sin(pos * freq)
    pe[:, 1::2] = np.cos(pos * freq)
    return pe
