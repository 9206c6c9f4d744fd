# exercise: merge_heads
# the student's slip: x.transpose(0, 2, 1, 3): works for (B, h, L, d) only
# diagnosis: works only for a fixed number of axes


def merge_heads(x):
    B, h, L, d = x.shape
    return x.transpose(0, 2, 1, 3).reshape(B, L, h * d)
