# exercise: sinusoidal
# the student's slip: builds the table in float32
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length, dtype=np.float32)[:, None]
    i = np.arange(0, d_model, 2, dtype=np.float32)
    ang = pos / np.float32(10000) ** (i / d_model)
    pe = np.zeros((length, d_model), dtype=np.float32)
    pe[:, 0::2], pe[:, 1::2] = np.sin(ang), np.cos(ang)
    return pe
