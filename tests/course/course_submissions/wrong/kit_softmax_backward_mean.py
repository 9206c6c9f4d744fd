# exercise: softmax_backward
# the student's slip: mean instead of sum for <dp, p>
# diagnosis: gradient of a constant loss is not 0


def softmax_backward(dp, p):
    return p * (dp - (dp * p).mean(axis=-1, keepdims=True))
