# exercise: softmax_backward
# slip: the row sum without keepdims: broadcasts against the last axis (right for 1-D, wrong or an error else)


def softmax_backward(dp, p):
    return p * (dp - (dp * p).sum(axis=-1))
