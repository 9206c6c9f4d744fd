# exercise: softmax_backward
# slip: keeps only the diagonal term p * dp of the Jacobian and drops the - p * <dp, p> term.

def softmax_backward(dp, p):
    return p * dp
