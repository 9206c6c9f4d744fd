# exercise: softmax_backward
# slip: the sign flipped: p * (sum(dp * p) - dp)


def softmax_backward(dp, p):
    return p * ((dp * p).sum(axis=-1, keepdims=True) - dp)
