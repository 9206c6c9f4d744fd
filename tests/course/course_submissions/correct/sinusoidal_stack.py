# exercise: sinusoidal
import numpy as np


def sinusoidal(length, d_model):
    freqs = np.exp(-np.log(10000.0) * np.arange(d_model // 2) * 2 / d_model)
    ang = np.outer(np.arange(length), freqs)
    return np.stack([np.sin(ang), np.cos(ang)], axis=-1).reshape(length, d_model)
