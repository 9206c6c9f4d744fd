# exercise: sinusoidal
# the student's slip: np.log10 where the exp/log form of the frequencies needs the natural log
# diagnosis: base 54.6 instead of 10000
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    div = np.exp(np.arange(0, d_model, 2) * -(np.log10(10000.0) / d_model))
    pe = np.zeros((length, d_model))
    pe[:, 0::2] = np.sin(pos * div)
    pe[:, 1::2] = np.cos(pos * div)
    return pe
