# exercise: sinusoidal
# style: np.outer of positions and inverse frequencies, sin and cos written into strided column views.
import numpy as np


def sinusoidal(length, d_model):
    inv_freq = np.exp(-np.log(10000.0) * np.arange(0, d_model, 2) / d_model)
    angle = np.outer(np.arange(length), inv_freq)
    pe = np.zeros((length, d_model))
    pe[:, ::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe
