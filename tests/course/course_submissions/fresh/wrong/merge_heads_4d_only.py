# exercise: merge_heads
# slip: unpacks B, h, L, d = x.shape and transposes (0, 2, 1, 3): right only for exactly one leading axis.

def merge_heads(x):
    B, h, L, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, L, h * d)
