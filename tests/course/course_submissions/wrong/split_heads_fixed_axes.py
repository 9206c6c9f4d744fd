# exercise: split_heads
# the student's slip: transpose(1, 0, 2)


def split_heads(x, num_heads):
    L, f = x.shape[-2:]
    return x.reshape(L, num_heads, f // num_heads).transpose(1, 0, 2)
