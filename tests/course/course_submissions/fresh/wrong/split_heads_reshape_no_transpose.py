# exercise: split_heads
# slip: reshapes (..., L, h*d) straight to (..., h, L, d) without moving the head axis.

def split_heads(x, num_heads):
    *lead, L, w = x.shape
    return x.reshape(*lead, num_heads, L, w // num_heads)
