# exercise: softmax_backward
# slip: subtracts the row sum from dp in place: the caller's dp is changed


def softmax_backward(dp, p):
    dp -= (dp * p).sum(axis=-1, keepdims=True)
    return p * dp
