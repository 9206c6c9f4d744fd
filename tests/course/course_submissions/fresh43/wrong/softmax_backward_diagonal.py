# exercise: softmax_backward
# slip: keeps only the Jacobian's diagonal p(1 - p): the -p_i p_j terms are dropped


def softmax_backward(dp, p):
    return p * (1 - p) * dp
