# exercise: padding_mask
# the student's slip: builds rows in a list comprehension, shape (B, S)
import numpy as np


def padding_mask(lengths, S):
    return np.array([[j < n for j in range(S)] for n in lengths])
