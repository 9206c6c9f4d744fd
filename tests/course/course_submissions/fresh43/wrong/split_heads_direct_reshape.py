# exercise: split_heads
# slip: reshapes straight to (..., h, L, d): the shape is right, the columns are not (unless L or h is 1)


def split_heads(x, num_heads):
    *lead, L, hd = x.shape
    return x.reshape(*lead, num_heads, L, hd // num_heads)
