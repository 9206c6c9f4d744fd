"""§3.2 of "Attention Is All You Need", and nothing beyond it: softmax, the masks, the
projections, split/concat of heads, Eq. (1) and multi-head attention, each a forward and a
hand-written backward. This is the code a student reads, and the reference every fast kernel
is tested against.
"""
