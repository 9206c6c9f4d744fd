# exercise: sinusoidal
# the student's slip: np.arange(length, dtype=np.float32) 'to save memory': a float32 table
# diagnosis: dtype not kept
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length, dtype=np.float32)[:, None]
    div = np.float32(10000.0) ** (np.arange(0, d_model, 2, dtype=np.float32) / d_model)
    pe = np.zeros((length, d_model), dtype=np.float32)
    pe[:, 0::2] = np.sin(pos / div)
    pe[:, 1::2] = np.cos(pos / div)
    return pe
