# exercise: sinusoidal
# slip: 2 * i // d_model (floor division): every exponent is 0, every column has frequency 1
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    i = np.arange(d_model // 2)[None, :]
    angle = pos / 10000.0 ** (2 * i // d_model)
    pe = np.empty((length, d_model))
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe
