# exercise: sinusoidal
import numpy as np


def sinusoidal(length, d_model):
    # i * exp(-i a) = sin a + i cos a: viewed as floats, the pairs are (sin, cos), interleaved
    pos = np.arange(length, dtype=np.float64)[:, None]
    inv = np.power(10000.0, -np.arange(0, d_model, 2) / d_model)
    z = 1j * np.exp(-1j * (pos * inv))
    return np.ascontiguousarray(z).view(np.float64).reshape(length, d_model)
