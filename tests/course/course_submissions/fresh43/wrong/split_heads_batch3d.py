# exercise: split_heads
# slip: assumes exactly one batch axis (B, L, h*d): no leading axis or two leading axes fail


def split_heads(x, num_heads):
    B, L, hd = x.shape
    return x.reshape(B, L, num_heads, hd // num_heads).transpose(0, 2, 1, 3)
