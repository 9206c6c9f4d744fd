# exercise: softmax_backward
# style: p * dp minus p times the row sum of p * dp


def softmax_backward(dp, p):
    pdp = p * dp
    return pdp - p * pdp.sum(axis=-1, keepdims=True)
