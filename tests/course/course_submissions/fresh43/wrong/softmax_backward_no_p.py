# exercise: softmax_backward
# slip: dp - sum(dp * p): forgets the leading factor p


def softmax_backward(dp, p):
    return dp - (dp * p).sum(axis=-1, keepdims=True)
