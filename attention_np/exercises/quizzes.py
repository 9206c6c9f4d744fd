"""A short quiz per lesson and the prerequisites' self-check, with answers computed at build time.

Every item is multiple choice or numeric, so the autograder can mark it (``kit/quiz.py`` reads
the student's ``quiz_answers.txt``). No answer is typed: a numeric item's ``answer`` is a
function that computes the value with the library (or NumPy) when the kit is built, and a choice
item's ``answer`` is a function that returns the index of the true option, found by computing
each option's claim. ``tests/course/test_course_material.py`` recomputes them independently.

:data:`QUIZZES` maps a lesson number to its items; :data:`SELF_CHECK` holds the prerequisites'
self-check (broadcasting, vector-Jacobian products, layer norm, Adam, cross-entropy), which is
for the student (its answers are printed on the page, folded) and is not graded.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

LETTERS = "abcdefgh"


@dataclass(frozen=True)
class Item:
    """A quiz item: ``kind`` "choice" (``choices``; ``answer()`` is the true option's index) or
    "number" (``answer()`` is the value; a reply within ``atol`` of it is right, or, when
    ``atol`` is 0, within ``rtol`` relative: 0 for a count, which must be exact). ``why``: the
    explanation printed in the key."""

    kind: str
    text: str
    answer: object
    why: str
    choices: tuple = ()
    rtol: float = 0.01
    atol: float = 0.0

    def value(self):
        """The answer, computed now: the letter of the true option, or the number."""
        got = self.answer()
        if self.kind == "choice":
            if not isinstance(got, (int, np.integer)) or not 0 <= got < len(self.choices):
                raise ValueError(f"{self.text[:40]!r}: answer() gave {got!r}, expected an option index")
            return LETTERS[int(got)]
        return float(got)


def _first_true(*claims) -> int:
    """The index of the one true claim (raise unless exactly one is true)."""
    true = [i for i, c in enumerate(claims) if bool(c)]
    if len(true) != 1:
        raise ValueError(f"expected exactly one true option, got {true}")
    return true[0]


def _rng():
    return np.random.default_rng(0)


# ---------------------------------------------------------------------------- the answers
def _lookup_output():
    from attention_np import paper
    keys = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    values = np.array([[10.0], [20.0], [30.0]])
    out, _ = paper.sdpa_forward(np.array([[2.0, 0.0]]), keys, values)
    return out[0, 0]


def _softmax_axis():
    from attention_np import paper
    q, k, v = _rng().standard_normal((3, 4, 6, 8))
    _, cache = paper.sdpa_forward(q[:, :5], k, v)                # L = 5 queries, S = 6 keys
    w = cache.weights
    return _first_true(np.allclose(w.sum(-2), 1), np.allclose(w.sum(-1), 1),
                       np.isclose(w.sum((-2, -1)), 1).all())


def _masked_count():
    from attention_np import paper
    return int((~paper.padding_mask(np.array([3, 5, 2]), 5)).sum())


def _causal_count():
    from attention_np import paper
    return int(paper.causal_mask(6).sum())


def _saturation_gradient():
    from attention_np import paper
    w = paper.softmax(np.array([6.0, 0.0]))[0]
    return w * (1 - w)


def _scaled_variance():
    q, k = _rng().standard_normal((2, 20_000, 256))
    var = ((q * k).sum(-1) / math.sqrt(256)).var()
    options = (256, 16, 1, 1 / 256)
    return int(np.argmin([abs(var - o) for o in options]))


def _unscaled_std():
    q, k = _rng().standard_normal((2, 20_000, 100))
    std = (q * k).sum(-1).std()
    options = (1, 10, 100)
    return int(np.argmin([abs(std - o) for o in options]))


def _split_heads_shape():
    from attention_np import paper
    shape = paper.split_heads(np.zeros((2, 10, 512)), 8).shape
    options = ((2, 10, 8, 64), (2, 8, 10, 64), (2, 64, 10, 8), (16, 10, 64))
    return options.index(shape)


def _mha_parameters():
    from attention_np import paper
    params = paper.init_mha_params(512, 8, bias=True, rng=_rng())
    return sum(p.size for p in params.values())


def _qk_flops():
    n, d_model, h = 128, 512, 8
    d_k = d_model // h
    q, k = np.ones((h, n, d_k)), np.ones((h, n, d_k))
    return 2 * q.shape[-1] * (q @ np.swapaxes(k, -1, -2)).size     # a multiply and an add per term


def _softmax_vjp():
    from attention_np import paper
    p = paper.softmax(np.array([0.0, math.log(3.0)]))        # [0.25, 0.75]
    return paper.softmax_backward(np.array([1.0, 0.0]), p)[0]


def _linear_dw_entries():
    from attention_np import paper
    x, W = _rng().standard_normal((7, 4, 3)), _rng().standard_normal((3, 5))
    _, dW, _ = paper.linear_backward(np.ones((7, 4, 5)), x, W, has_bias=False)
    return dW.size


def _masked_query_gradient():
    from attention_np import paper
    q, k, v = _rng().standard_normal((3, 1, 3, 4))
    mask = np.ones((1, 3, 3), dtype=bool)
    mask[0, 2] = False                                         # query 2 may attend no key
    _, cache = paper.sdpa_forward(q, k, v, mask)
    dq, _, _ = paper.sdpa_backward(np.ones((1, 3, 4)), cache)
    norm = np.abs(dq[0, 2]).max()
    return _first_true(norm == 0, 0 < norm < 1e-6, norm >= 1e-6)


def _uniform_cross_entropy():
    from attention_np.nn.loss import cross_entropy_forward
    loss, _ = cross_entropy_forward(np.zeros((1, 10)), np.array([3]))
    return loss


def _peak_lr():
    from attention_np.training.adam import transformer_lr
    return transformer_lr(4000, 512, warmup=4000)


def _adam_first_step():
    from attention_np.training.adam import adam_init, adam_step
    params, grads = {"w": np.array([1.0])}, {"w": np.array([-250.0])}
    state = adam_init(params)
    adam_step(params, grads, state, lr=0.01)
    return params["w"][0] - 1.0


def _pe_first_row_sum():
    from attention_np.nn.positional import sinusoidal_encoding
    return sinusoidal_encoding(1, 512)[0].sum()


def _pe_dot_depends_on_offset():
    from attention_np.nn.positional import sinusoidal_encoding
    pe = sinusoidal_encoding(40, 64)
    same = np.isclose(pe[3] @ pe[5], pe[20] @ pe[22])
    return _first_true(same, not same)


def _permutation_equivariance():
    from attention_np import paper
    x = _rng().standard_normal((6, 8))
    perm = _rng().permutation(6)
    f = lambda z: paper.sdpa_forward(z, z, z)[0]                # noqa: E731
    gap = np.abs(f(x[perm]) - f(x)[perm]).max()
    return _first_true(gap < 1e-12, 1e-12 <= gap < 0.1, gap >= 0.1)


def _online_sum():
    blocks = [np.array([1.0, 2.0]), np.array([4.0, 0.0])]
    m, ell = -np.inf, 0.0
    for s in blocks:                     # (m, l) = (running max, sum of exp(s - m)), merged per block
        m_new = max(m, s.max())
        ell = ell * math.exp(m - m_new) + np.exp(s - m_new).sum()
        m = m_new
    return ell


def _kv_cache_mib():
    cache = np.zeros((2, 6, 1, 1024, 512), dtype=np.float32)      # K and V, 6 layers, batch 1
    return cache.nbytes / 2 ** 20


def _dense_scores_mib():
    return np.zeros((4096, 4096)).nbytes / 2 ** 20


def _cross_attention_shape():
    from attention_np import paper
    q, kv = np.zeros((8, 7, 16)), np.zeros((8, 12, 16))             # 8 heads, 7 target and 12 source
    _, cache = paper.sdpa_forward(q, kv, kv)
    options = ((8, 12, 7), (8, 7, 12), (8, 7, 7), (8, 12, 12))
    return options.index(cache.weights.shape)


def _causal_change():
    from attention_np import paper
    x = _rng().standard_normal((8, 4))
    y = x.copy()
    y[7] += 5.0
    out = lambda z: paper.sdpa_forward(z, z, z, is_causal=True)[0]   # noqa: E731
    change = np.abs(out(x)[:7] - out(y)[:7]).max()
    return _first_true(change == 0, change > 0)


def _smoothing_target():
    eps, V = 0.1, 10
    target = np.full(V, eps / V)
    target[0] += 1 - eps
    return target[0]


def _uniform_entropy():
    w = np.full(14, 1 / 14)
    return -(w * np.log(w)).sum()


def _minilm_d_k():
    return 384 // 12


def _padding_weight():
    from attention_np import paper
    x = _rng().standard_normal((2, 5, 4))
    _, cache = paper.sdpa_forward(x, x, x, paper.padding_mask(np.array([5, 3])))
    top = cache.weights[1, :, 3:].max()
    return _first_true(top == 0, 0 < top < 1e-6, top >= 1e-6)


# ---------------------------------------------------------------------------- the quizzes
I = Item

QUIZZES = {
    1: (I("number", "Keys [1, 0], [0, 1], [-1, 0] with values 10, 20, 30 (d_k = 2). What does Eq. (1) "
          "return for the query [2, 0]? (two decimals)", _lookup_output,
          "scores [2, 0, -2] / √2; the softmax puts most weight on the first key, so the output is "
          "pulled towards 10", atol=0.005),
        I("choice", "For queries (L, d_k) and keys (S, d_k), the softmax of Eq. (1) makes each weight "
          "row sum to 1 over which axis of the (L, S) scores?", _softmax_axis,
          "each query's weights over the keys are a distribution",
          choices=("the queries' axis (L)", "the keys' axis (S)", "both axes at once")),
        I("number", "`paper.padding_mask(np.array([3, 5, 2]), 5)` has shape (3, 1, 5). How many of its "
          "entries are False (padded keys)?", _masked_count, "(5 - 3) + (5 - 5) + (5 - 2)", rtol=0),
        I("number", "How many (query, key) pairs may attend in `paper.causal_mask(6)` (L = S = 6)?",
          _causal_count, "query i reads keys 0..i: 1 + 2 + ... + 6", rtol=0)),
    2: (I("number", "Two scores [6, 0]: the first softmax weight is w. What is w (1 - w), the "
          "derivative of w with respect to the first score? (three significant digits)",
          _saturation_gradient, "w = 1 / (1 + e^-6) ≈ 0.9975: a saturated softmax passes almost no "
          "gradient"),
        I("choice", "q and k have independent N(0, 1) entries and d_k = 256. What is the variance of "
          "q·k / √d_k?", _scaled_variance, "Var(q·k) = d_k; dividing by √d_k divides it by d_k",
          choices=("256", "16", "1", "1/256")),
        I("choice", "Same assumptions, d_k = 100, no scale: the standard deviation of q·k is about",
          _unscaled_std, "Var(q·k) = d_k = 100, so the standard deviation is 10",
          choices=("1", "10", "100"))),
    3: (I("choice", "`paper.split_heads(x, 8)` for x of shape (2, 10, 512) returns the shape",
          _split_heads_shape, "(..., L, h·d) -> (..., h, L, d)",
          choices=("(2, 10, 8, 64)", "(2, 8, 10, 64)", "(2, 64, 10, 8)", "(16, 10, 64)")),
        I("number", "How many parameters do W_q, W_k, W_v, W_o and their biases hold for d_model = 512, "
          "h = 8 (`paper.init_mha_params(512, 8, bias=True)`)?", _mha_parameters,
          "four (512, 512) matrices and four biases of 512; h does not change the count", rtol=0),
        I("number", "FLOPs of q kᵀ over all heads for n = 128 positions, d_model = 512, h = 8 (one "
          "multiply and one add per term)?", _qk_flops, "h · 2 n² d_k = 2 n² d_model: the same for every h",
          rtol=0)),
    4: (I("number", "p = softmax([0, ln 3]) = [0.25, 0.75] and the upstream gradient is dp = [1, 0]. "
          "What is the first entry of the softmax's vector-Jacobian product dx = p ⊙ (dp - p·dp)?",
          _softmax_vjp, "0.25 (1 - 0.25)"),
        I("number", "y = x @ W with x of shape (7, 4, 3) and W of shape (3, 5). How many entries does "
          "dW have?", _linear_dw_entries, "dW has W's shape: the batch axes are summed over", rtol=0),
        I("choice", "Query 2 may attend no key (its mask row is all False). Its gradient dq is",
          _masked_query_gradient, "its weights are all 0, so no score of it reaches the output",
          choices=("exactly 0", "tiny but not 0", "of the same size as the other queries'"))),
    5: (I("number", "The cross-entropy of all-zero logits over 10 classes, for any target? "
          "(four decimals)", _uniform_cross_entropy, "-ln(1/10) = ln 10: the loss of a model at chance",
          atol=5e-5),
        I("number", "Eq. (3)'s learning rate at step 4000 for d_model = 512 and warmup = 4000 "
          "(`transformer_lr`)? (three significant digits)", _peak_lr,
          "512^-0.5 · 4000^-0.5: the peak, where the warm-up ends"),
        I("number", "Adam (β1 = 0.9, β2 = 0.98, ε = 1e-9), lr = 0.01, first step, gradient -250 on a "
          "parameter 1.0. By how much does the parameter change? (signed)", _adam_first_step,
          "after bias correction m̂ = g and √v̂ = |g|: the first step is lr · sign(-g)")),
    6: (I("number", "`sinusoidal_encoding(1, 512)[0]` is the encoding of position 0. What is the sum of "
          "its 512 entries?", _pe_first_row_sum, "sin 0 = 0 in the even columns, cos 0 = 1 in the odd "
          "ones: 256"),
        I("choice", "With sinusoidal encodings (d_model = 64), is PE(3)·PE(5) equal to PE(20)·PE(22)?",
          _pe_dot_depends_on_offset, "PE(i)·PE(j) = Σ cos((i - j) ω_n) depends on i - j only",
          choices=("yes", "no")),
        I("choice", "Self-attention without positions, x of shape (6, 8) and a permutation P of its rows: "
          "max |f(P x) - P f(x)| is", _permutation_equivariance,
          "attention is permutation-equivariant: only rounding differs",
          choices=("0 up to rounding (< 1e-12)", "small but visible (1e-12 to 0.1)", "large (>= 0.1)"))),
    7: (I("number", "Scores [1, 2] in a first key block and [4, 0] in a second. The online softmax "
          "keeps (m, ℓ), the running max and Σ exp(s - m). What is ℓ after both blocks? (four "
          "decimals)", _online_sum, "m = 4, ℓ = e^-3 + e^-2 + 1 + e^-4: the old sum is rescaled by "
          "exp(m_old - m_new)", atol=5e-5),
        I("number", "A KV cache for 6 layers, batch 1, 1024 tokens, d_model = 512, float32 (K and V). "
          "Its size in MiB?", _kv_cache_mib, "2 · 6 · 1024 · 512 · 4 bytes", rtol=0),
        I("number", "The dense (L, S) score matrix for L = S = 4096 in float64, in MiB?", _dense_scores_mib,
          "4096² · 8 bytes: what tiling avoids storing", rtol=0)),
    8: (I("choice", "Cross-attention with 8 heads, 7 target positions (queries) and 12 source positions "
          "(keys): the weights' shape is", _cross_attention_shape, "(heads, queries, keys)",
          choices=("(8, 12, 7)", "(8, 7, 12)", "(8, 7, 7)", "(8, 12, 12)")),
        I("choice", "In causal self-attention over 8 positions, changing position 7's input changes the "
          "outputs at positions 0..6 by", _causal_change, "no query before 7 may read key 7",
          choices=("exactly 0", "more than 0")),
        I("number", "Label smoothing ε = 0.1 over V = 10 classes (the target puts 1 - ε + ε/V on the "
          "label): the target probability of the label?", _smoothing_target, "0.9 + 0.01")),
    9: (I("number", "Uniform weights over 14 keys: their entropy in nats? (three decimals)",
          _uniform_entropy, "log 14", atol=5e-4),
        I("number", "all-MiniLM-L6-v2 has d_model = 384 and 12 heads per layer. What is d_k?",
          _minilm_d_k, "384 / 12", rtol=0),
        I("choice", "With a padding mask, the weight of a padded key in any head is",
          _padding_weight, "masked scores get weight exactly 0 (they are removed before the softmax)",
          choices=("exactly 0", "tiny but not 0", "about 1/S"))),
}


# ---------------------------------------------------------------------------- the self-check
def _broadcast_shape():
    shape = np.broadcast_shapes((3, 1, 5), (4, 1))
    options = ((3, 4, 5), (3, 4, 1), "an error")
    return options.index(shape)


def _vjp_square():
    x, v = np.array([3.0, 4.0]), np.array([1.0, 2.0])
    jacobian = np.diag(2 * x)                  # y = x², elementwise
    return (v @ jacobian)[1]


def _layernorm_first():
    from attention_np.nn.layernorm import layernorm_forward
    y, _ = layernorm_forward(np.array([1.0, 2.0, 3.0, 4.0]), np.ones(4), np.zeros(4), eps=0.0)
    return y[0]


def _cross_entropy_value():
    from attention_np.nn.loss import cross_entropy_forward
    loss, _ = cross_entropy_forward(np.array([[2.0, 0.0, 0.0]]), np.array([0]))
    return loss


def _cross_entropy_gradient():
    from attention_np.nn.loss import cross_entropy_backward, cross_entropy_forward
    _, cache = cross_entropy_forward(np.array([[0.0, 0.0, 0.0, 0.0]]), np.array([1]))
    return cross_entropy_backward(1.0, cache)[0, 1]


#: (topic, item)
SELF_CHECK = (
    ("broadcasting", I("choice", "`np.zeros((3, 1, 5)) + np.zeros((4, 1))` has the shape",
                       _broadcast_shape, "shapes align from the right; each size-1 axis stretches",
                       choices=("(3, 4, 5)", "(3, 4, 1)", "an error"))),
    ("vector-Jacobian products", I("number", "y = x² elementwise at x = [3, 4]; the upstream gradient is "
                                   "v = [1, 2]. What is the second entry of vᵀ J?", _vjp_square,
                                   "J = diag(2x), so vᵀ J = v ⊙ 2x = [6, 16]", atol=1e-9)),
    ("layer norm", I("number", "Layer norm (γ = 1, β = 0, ε = 0) of [1, 2, 3, 4]: its first entry? "
                     "(four decimals)", _layernorm_first,
                     "(1 - 2.5) / √1.25, with the variance over the 4 features (divided by 4)", atol=5e-5)),
    ("Adam", I("number", "Adam's first step (bias-corrected, ε negligible) with lr = 0.01 on a gradient "
               "of -250: the parameter's change? (signed)", _adam_first_step,
               "m̂ = g, √v̂ = |g|: lr · sign(-g), whatever the gradient's size", atol=1e-6)),
    ("cross-entropy", I("number", "The cross-entropy of logits [2, 0, 0] for target class 0? (four "
                        "decimals)", _cross_entropy_value, "-log(e² / (e² + 2))", atol=5e-5)),
    ("cross-entropy", I("number", "The gradient of the cross-entropy with respect to the target's logit, "
                        "for 4 all-zero logits (one position)?", _cross_entropy_gradient,
                        "softmax - one-hot: 1/4 - 1", atol=1e-9)),
)


# ---------------------------------------------------------------------------- documents
def _item_lines(label: str, item: Item) -> list:
    lines = [f"**{label}.** {item.text}"]
    if item.kind == "choice":
        lines += [""] + [f"- ({LETTERS[i]}) {c}" for i, c in enumerate(item.choices)]
    return lines + [""]


def _shown(item: Item) -> str:
    if item.kind == "choice":
        letter = item.value()
        return f"({letter}) {item.choices[LETTERS.index(letter)]}"
    return f"{item.value():.6g}"


def quizzes_markdown() -> str:
    """The student kit's quizzes.md: every lesson's quiz, and how to hand in the answers."""
    lines = ["# Quizzes", "",
             "One short quiz per lesson, after you have worked through it. Write your answers in "
             "`quiz_answers.txt` (one line per item, `LESSON.ITEM: ANSWER`: a letter for a choice, a "
             "number for the others: a line reads like `N.M: 0.25` or `N.M: c`, N.M the item's label) "
             "and submit that file with your notebooks; the autograder marks every item (1 point "
             "each). A number is right within 1 % unless the item asks for a number of decimals (then "
             "within half of the last one) or counts something (then exactly).", ""]
    for number, items in QUIZZES.items():
        lines += [f"## Lesson {number}", ""]
        for i, item in enumerate(items, 1):
            lines += _item_lines(f"{number}.{i}", item)
    return "\n".join(lines)


def answers_template() -> str:
    """The blank quiz_answers.txt handed out with the quizzes."""
    lines = ["# Your quiz answers: one line per item, LESSON.ITEM: ANSWER (a letter or a number).",
             "# Leave an answer empty if you skip it. Lines starting with # are ignored."]
    lines += [f"{n}.{i}: " for n, items in QUIZZES.items() for i in range(1, len(items) + 1)]
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=1)
def _key() -> tuple:
    return tuple((f"{n}.{i}", it.value()) for n, items in QUIZZES.items() for i, it in enumerate(items, 1))


def key() -> dict:
    """The autograder's key: "LESSON.ITEM" -> {kind, answer, rtol, atol, points}, computed now."""
    values = dict(_key())
    return {f"{n}.{i}": {"kind": it.kind, "answer": values[f"{n}.{i}"], "rtol": 0.0 if it.atol else it.rtol,
                         "atol": it.atol, "points": 1}
            for n, items in QUIZZES.items() for i, it in enumerate(items, 1)}


def key_markdown() -> str:
    """The solutions' quiz_key.md: each item's answer (computed) and why."""
    lines = ["# Quizzes: the key", "",
             "Every answer below was computed when the kit was built (attention_np.exercises.quizzes); "
             "the autograder marks `quiz_answers.txt` against the same values (`autograder/quiz_key.json`).",
             ""]
    for number, items in QUIZZES.items():
        lines += [f"## Lesson {number}", ""]
        for i, item in enumerate(items, 1):
            lines += _item_lines(f"{number}.{i}", item)[:-1]
            lines += ["", f"*Answer:* {_shown(item)}. {item.why[0].upper()}{item.why[1:]}.", ""]
    return "\n".join(lines)


def self_check_markdown() -> str:
    """The self-check of the prerequisites page, answers folded under each item."""
    lines = []
    for k, (topic, item) in enumerate(SELF_CHECK, 1):
        lines += _item_lines(f"{k} ({topic})", item)
        lines += ["<details><summary>Answer</summary>", "",
                  f"{_shown(item)}: {item.why}.", "", "</details>", ""]
    return "\n".join(lines)
