# exercise: merge_heads
# slip: transpose(0, 2, 1, 3): written for (B, h, L, d) only


def merge_heads(x):
    B, h, L, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, L, h * d)
