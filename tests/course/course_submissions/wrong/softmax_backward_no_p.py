# exercise: softmax_backward
# the student's slip: forgets the factor p in front


def softmax_backward(dp, p):
    s = (dp * p).sum(-1, keepdims=True)
    return dp - s
