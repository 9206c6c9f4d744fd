# exercise: sinusoidal
# the student's slip: sin block then cos block
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    freq = 1.0 / 10000 ** (np.arange(0, d_model, 2) / d_model)
    return np.concatenate([np.sin(pos * freq), np.cos(pos * freq)], axis=1)
