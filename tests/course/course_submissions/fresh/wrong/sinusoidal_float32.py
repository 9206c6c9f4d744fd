# exercise: sinusoidal
# slip: allocates the table as float32 (to save memory) instead of returning float64.
import numpy as np


def sinusoidal(length, d_model):
    angle = np.arange(length)[:, None] / 10000.0 ** (np.arange(0, d_model, 2) / d_model)
    pe = np.zeros((length, d_model), dtype=np.float32)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe
