# exercise: sinusoidal
# style: loops with math.sin and math.cos, entry by entry
import math

import numpy as np


def sinusoidal(length, d_model):
    pe = np.empty((length, d_model), dtype=np.float64)
    for pos in range(length):
        for i in range(d_model // 2):
            angle = pos / math.pow(10000, 2 * i / d_model)
            pe[pos, 2 * i] = math.sin(angle)
            pe[pos, 2 * i + 1] = math.cos(angle)
    return pe
