# exercise: softmax_backward
# the student's slip: flips the order of the subtraction


def softmax_backward(dp, p):
    return p * ((dp * p).sum(-1, keepdims=True) - dp)
