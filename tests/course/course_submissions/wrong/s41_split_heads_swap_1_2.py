# exercise: split_heads
# the student's slip: swapaxes(1, 2), written for a (B, n, d) input, instead of counting from the end
# diagnosis: axes in the wrong order
def split_heads(x, num_heads):
    *b, n, d = x.shape
    return x.reshape(*b, n, num_heads, d // num_heads).swapaxes(1, 2)
