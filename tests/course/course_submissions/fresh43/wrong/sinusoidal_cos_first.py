# exercise: sinusoidal
# slip: cos in the even columns and sin in the odd ones
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length)[:, None]
    angle = pos / 10000 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((length, d_model))
    pe[:, 0::2] = np.cos(angle)
    pe[:, 1::2] = np.sin(angle)
    return pe
