# exercise: sinusoidal
# style: frequencies as exp(-2i ln(10000) / d_model), columns filled by strided slices
import numpy as np


def sinusoidal(length, d_model):
    pos = np.arange(length, dtype=np.float64)[:, None]
    freq = np.exp(-np.log(10000.0) * np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    pe = np.zeros((length, d_model))
    pe[:, 0::2] = np.sin(pos * freq)
    pe[:, 1::2] = np.cos(pos * freq)
    return pe
