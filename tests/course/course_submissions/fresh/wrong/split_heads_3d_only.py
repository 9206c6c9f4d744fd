# exercise: split_heads
# slip: unpacks B, L, D = x.shape and transposes (0, 2, 1, 3): right only for exactly one leading axis.

def split_heads(x, num_heads):
    B, L, D = x.shape
    return x.reshape(B, L, num_heads, D // num_heads).transpose(0, 2, 1, 3)
