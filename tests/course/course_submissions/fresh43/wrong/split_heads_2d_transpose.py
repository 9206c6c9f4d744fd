# exercise: split_heads
# slip: transpose(1, 0, 2) written for a 2-D x: any leading axis breaks it


def split_heads(x, num_heads):
    L, hd = x.shape[-2:]
    return x.reshape(L, num_heads, hd // num_heads).transpose(1, 0, 2)
