# exercise: softmax_backward
# the student's slip: sums dp without p


def softmax_backward(dp, p):
    return p * dp - p * dp.sum(axis=-1, keepdims=True)
