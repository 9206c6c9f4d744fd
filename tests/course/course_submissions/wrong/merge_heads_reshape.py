# exercise: merge_heads
# the student's slip: one reshape


def merge_heads(x):
    *b, h, L, d = x.shape
    return x.reshape(*b, L, h * d)
