# exercise: sinusoidal
# slip: puts cos on the even columns and sin on the odd ones.
import numpy as np


def sinusoidal(length, d_model):
    angle = np.arange(length)[:, None] / 10000.0 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((length, d_model))
    pe[:, 0::2] = np.cos(angle)
    pe[:, 1::2] = np.sin(angle)
    return pe
