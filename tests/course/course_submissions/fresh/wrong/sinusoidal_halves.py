# exercise: sinusoidal
# slip: concatenates all the sines then all the cosines instead of interleaving them.
import numpy as np


def sinusoidal(length, d_model):
    angle = np.arange(length)[:, None] / 10000.0 ** (np.arange(0, d_model, 2) / d_model)
    return np.concatenate([np.sin(angle), np.cos(angle)], axis=1)
