# exercise: sinusoidal
# slip: builds the table in float32 "like the model's weights": the contract says float64
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length, dtype=np.float32)[:, None]
    angle = pos / np.float32(10000) ** (np.arange(0, d_model, 2, dtype=np.float32) / np.float32(d_model))
    pe = np.zeros((length, d_model), dtype=np.float32)
    pe[:, 0::2] = np.sin(angle)
    pe[:, 1::2] = np.cos(angle)
    return pe
