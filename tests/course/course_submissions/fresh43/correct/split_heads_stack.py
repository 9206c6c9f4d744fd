# exercise: split_heads
# style: slices the column block of each head and stacks them on a new axis -3
import numpy as np


def split_heads(x, num_heads):
    d = x.shape[-1] // num_heads
    return np.stack([x[..., i * d:(i + 1) * d] for i in range(num_heads)], axis=-3)
