# exercise: split_heads
# the student's slip: one reshape


def split_heads(x, num_heads):
    *b, L, f = x.shape
    return x.reshape(*b, num_heads, L, f // num_heads)
