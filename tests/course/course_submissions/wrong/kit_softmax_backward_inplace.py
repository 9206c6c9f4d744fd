# exercise: softmax_backward
# the student's slip: dp *= p to save memory, which writes into the caller's dp
# diagnosis: wrote into an input


def softmax_backward(dp, p):
    inner = (dp * p).sum(-1, keepdims=True)
    dp -= inner
    return p * dp
