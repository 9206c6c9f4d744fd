# exercise: causal_mask
# slip: slices rows of an S x S lower triangle, which only has S rows: wrong when L > S.
import numpy as np


def causal_mask(L, S, align):
    full = np.tril(np.ones((S, S), dtype=bool))
    return full[:L] if align == "top_left" else full[S - L:]
