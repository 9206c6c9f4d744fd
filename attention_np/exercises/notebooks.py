"""The exercise notebooks as data: titles, the lesson each one practises, hints, the contract
each stub states, and the written questions with their answers and rubrics.

:func:`notebook` builds one notebook (nbformat 4 JSON, as a dict) in three variants: ``"repo"``
(``exercises/``, checked with ``attention_np.exercises.check``), ``"student"`` (the course kit,
checked with the kit's ``check.py``) and ``"solution"`` (model solutions, answers and rubrics).
"""

from __future__ import annotations

from attention_np.exercises.solutions import needs, solution_source

#: the rules every stub states (the checker holds every exercise to them), as (key, text) clauses
COMMON_CLAUSES = [
    ("inputs_unchanged", """\
    - Do not write into the inputs: the checker keeps a copy of every argument and compares it
      after your call (x -= m or np.exp(x, out=x) on an input is a mistake)."""),
    ("dtype", """\
    - dtype: a float32 input gives a float32 output, a float64 input a float64 output. Compute
      inside in any precision, then cast back (beware np.sqrt(n) and np.zeros(n): float64)."""),
    ("tolerance", """\
      float64 answers must agree to 1e-9 (relative); float32 ones within 1e-4 * (1 + |answer|)
      of the exact answer for the same float32 inputs."""),
    ("view_allowed", """\
    - Returning a view of an input is allowed (nobody writes into your result)."""),
]

COMMON_RULES = ("    Rules the checker holds you to (every exercise):\n"
                + "\n".join(t for _, t in COMMON_CLAUSES))

#: exercise -> (summary, [(key or keys, text)]): the stub's docstring, one clause at a time. Each
#: clause key is named by the cases that test it (``Case.clauses`` in attention_np.exercises), public and
#: hidden; tests/course/test_exercises.py fails when a clause has none.
CLAUSES = {
    "softmax": ("Stable softmax over the last axis.", [
        ("batch", "    x : float array (..., n), any number of leading axes; n may be 1."),
        ("neg_inf", """\
        Entries are finite or -inf; every row has at least one finite entry (a row of
        all -inf is never given: its softmax is 0/0; `attention` handles that case)."""),
        ("extreme", "        Logits may be huge (~1e3) or tiny (~-1e3), rows on different scales."),
        ("sums_to_one", "    Returns p of x's shape and dtype: each row (last axis) is >= 0 and sums to 1."),
    ]),
    "softmax_backward": ("dL/dx from dL/dp, where p = softmax(x) over the last axis.", [
        ("batch", "    dp : float array (..., n), the gradient of the loss with respect to p."),
        ("zeros", "    p  : float array (..., n), p = softmax(x); it may hold exact zeros (masked entries)."),
        ("gradient", "    Returns dx of p's shape and dtype: the gradient (central differences agree)."),
    ]),
    "causal_mask": ("Causal mask, True = may attend.", [
        ("sizes", "    L, S : int >= 1, the numbers of queries and keys; L != S and L = 1 happen."),
        (("top_left", "bottom_right"), """\
    align : "top_left" (query i sees keys 0..i) or "bottom_right" (the L queries are the LAST
        L of S positions: query i sees keys 0..i + S - L)."""),
        ("bool", "    Returns a bool array (L, S)."),
    ]),
    "padding_mask": ("Key padding mask from lengths, True = may attend.", [
        ("zero_length", "    lengths : int array (B,), 0 <= lengths[b] <= S (a length may be 0)."),
        ("full_length", "    S : int, the padded length (a length may equal S)."),
        ("shape", """\
    Returns a bool array (B, 1, S): [b, 0, j] is True iff j < lengths[b]. The 1 broadcasts over
    the L queries of scores (B, L, S); for multi-head scores (B, h, L, S) pass mask[:, None]."""),
    ]),
    "attention": ("Eq. (1): softmax(q k^T / sqrt(d_k)) v.", [
        (("shapes", "L_ne_S", "L_1"), """\
    q : (..., L, d_k); k : (..., S, d_k); v : (..., S, d_v). L != S, L = 1 and d_k != d_v
        happen."""),
        ("broadcast", """\
        Leading axes broadcast: k and v may have fewer of them (shared across a batch of queries)."""),
        ("mask_broadcast", """\
    mask : None or a bool array broadcastable to (..., L, S), True = may attend: it may have
        fewer axes ((L, S) for a batch) or axes of size 1 ((B, 1, S))."""),
        ("masked_zero", "        Masked keys get weight exactly 0, however large their scores."),
        ("fully_masked", "        A query with no allowed key returns 0."),
        ("finite", "        q, k, v are finite everywhere, masked keys included (no NaN or inf are given)."),
        ("extreme", "        Scores may be large (|q k^T| ~ 1e3)."),
        ("returns", "    Returns (..., L, d_v)."),
    ]),
    "attention_backward": ("(dq, dk, dv) of out = attention(q, k, v, mask).", [
        (("shapes", "L_ne_S", "L_1", "mask_broadcast"), """\
    dout : (..., L, d_v), the gradient of the loss with respect to out; q, k, v, mask as in
        `attention` (L != S, L = 1, d_k != d_v, masks that only broadcast: (L, S), (B, 1, S))."""),
        ("fully_masked", """\
        The inputs are finite; a query may have no allowed key: its gradients are 0, never NaN."""),
        ("gradient", """\
    Returns (dq, dk, dv), each with its input's shape (central differences agree):"""),
        ("broadcast", """\
        sum over the axes that broadcasting added in the forward (k shared across a batch
        gets ONE gradient of k's shape, also when it has two fewer leading axes than q);"""),
        ("size_one", "        an axis of size 1 that broadcast keeps its size 1 in the gradient."),
    ]),
    "split_heads": ("(..., L, h*d) -> (..., h, L, d): head i owns feature columns [i*d, (i+1)*d).", [
        ("batch", "    x : (..., L, h*d) with any number of leading axes (none, one, two);"),
        ("heads", "    num_heads : int h; L may equal h*d or h."),
    ]),
    "merge_heads": ("(..., h, L, d) -> (..., L, h*d), the paper's Concat(head_1, ..., head_h).", [
        (("inverse", "batch"), "    The inverse of split_heads; any number of leading axes."),
    ]),
    "mha_forward": ("MultiHead(Q, K, V) = Concat(head_1..head_h) W_o + b_o (§3.2.2).", [
        (("self", "cross"), "    query : (B, L, d_model); key, value : (B, S, d_model); S != L happens."),
        ("d_k", """\
    params : dict, W_q and W_k (d_model, h*d_k), W_v (d_model, h*d_v), W_o (h*d_v, d_model),
        b_q and b_k (h*d_k,), b_v (h*d_v,), b_o (d_model,); d_k = W_q.shape[1] // num_heads,
        which need not be d_model / h. head_i = attention(query W_q + b_q, ...) on head i's
        columns."""),
        (("mask", "mask_head_axis"), """\
    mask : None or a bool array broadcastable to the scores (B, h, L, S), True = may attend:
        (L, S), or with a head axis (B, 1, L, S) or (B, 1, 1, S). A (B, L, S) mask is not valid
        here (it would line B up with the heads): add the head axis, mask[:, None]."""),
        ("fully_masked", """\
        A query with no allowed key (a sequence padded to length 0) gets 0 from every head, as
        in `attention`: its output is b_o."""),
        ("extreme", "    Scores may be large (|scores| ~ 1e3), as in `attention`."),
        ("returns", "    Returns (B, L, d_model)."),
    ]),
    "mha_backward": ("The backward of mha_forward (no mask).", [
        ("cross", """\
    dout : (B, L, d_model); query, key, value, params, num_heads as in mha_forward (S != L,
        d_k need not be d_model / h)."""),
        ("gradient", """\
    Returns (dquery, dkey, dvalue, grads): each d* has its input's shape; grads is a dict with
        the keys of params, each gradient of its parameter's shape (central differences agree)."""),
        ("bias_sum", "        Biases are summed over batch and positions."),
        ("self", """\
    When query, key and value are one array (self-attention), still return the
    three gradients separately, each through its own argument (the caller adds them)."""),
    ]),
    "tiled_attention": ("""Eq. (1) (no mask) one key block at a time, with an online softmax.

    Loop over key blocks only; never build the (L, S) scores at once (the cases cannot see how
    you loop: whoever reads your code can).""", [
        ("shapes", "    q : (..., L, d_k); k : (..., S, d_k); v : (..., S, d_v); L = 1 happens."),
        ("block_size", "    block_size : int >= 1; it need not divide S and may exceed it."),
        ("extreme", """\
    Scores may be huge or all very negative (e.g. every score of a row near -110 in float32)."""),
        ("per_query_max", """\
    Rows may sit on very different scales: each query keeps its own running max (one row's
        largest score may be in a later block while another row's is in the first)."""),
        ("returns", "    Returns (..., L, d_v)."),
    ]),
    "decode_step": ("One decoding step of causal multi-head self-attention with a KV cache.", [
        ("inputs", "    x : (B, 1, d_model), the new position; params, num_heads as in mha_forward."),
        ("empty_cache", """\
    k_cache : (B, h, t, d_k), v_cache : (B, h, t, d_v): the projected, split keys and values
        of the t earlier positions; t = 0 at the first step."""),
        ("extreme", "    Scores may be large (|scores| ~ 1e3), as in `attention`."),
        ("returns", """\
    Returns (out (B, 1, d_model), k_cache (B, h, t+1, d_k), v_cache (B, h, t+1, d_v)), the new
    position appended LAST; the new query sees every cached key and itself."""),
    ]),
    "sinusoidal": ("Sinusoidal positional encodings (§3.5).", [
        ("sizes", "    length : int >= 1 (1 happens); d_model : even int (2 happens)."),
        ("table", """\
    Returns float64 (length, d_model): PE[pos, 2i] = sin(pos / 10000^(2i/d_model)),
    PE[pos, 2i+1] = cos(pos / 10000^(2i/d_model)), pos = 0, 1, ..."""),
    ]),
}


def clause_keys(name: str) -> list:
    """Every clause key of exercise ``name``'s contract, in order (a clause may have several)."""
    return [k for keys, _ in CLAUSES[name][1] for k in ((keys,) if isinstance(keys, str) else keys)]


#: exercise -> the stub's docstring: exactly what the checker holds a student to
CONTRACTS = {name: summary + "\n\n" + "\n".join(text for _, text in clauses)
             for name, (summary, clauses) in CLAUSES.items()}

#: where an exercise notebook of the repository (exercises/) finds its lessons; docs/conf.py
#: rewrites the prefix for the site. The student kit ships no lesson: see :func:`lesson_reference`.
LESSONS = "../notebooks/"


def lesson_reference(lesson: str, variant: str, lessons_url: str | None = None) -> str:
    """How an exercise notebook of ``variant`` refers to ``lesson`` (a notebook stem).

    "repo": a link to ``../notebooks/LESSON.ipynb``. Otherwise (the kit): with ``lessons_url``, a
    link to ``LESSONS_URL/LESSON.html`` (the course site's lesson page), or to ``lessons_url``
    with ``{lesson}`` replaced by the stem; without it, the lesson's name and where it is, never
    a link to a file the kit lacks.
    """
    if variant == "repo":
        return f"[{lesson}]({LESSONS}{lesson}.ipynb)"
    if lessons_url:
        url = (lessons_url.replace("{lesson}", lesson) if "{lesson}" in lessons_url
               else f"{lessons_url.rstrip('/')}/{lesson}.html")
        return f"[{lesson}]({url})"
    return f"`{lesson}` (the course's lesson notebook `{lesson}.ipynb`, not in this folder)"


#: stem -> (title, lessons it practises, {exercise: hints}). Exercise notebook NN goes with lesson NN
#: (notebooks/NN_*.ipynb); a lesson with no function to write (02, 05, 08, 09) has none.
NOTEBOOKS = {
    '01_attention': ('Eq. (1): the softmax, a padding mask, attention',
        ['01_scaled_dot_product_attention'], {
        'softmax': ['Subtracting any constant from a row leaves its softmax unchanged.',
                    'Which constant makes the largest exponent exactly 0?',
                    "Keep the input's dtype: a float32 input gives a float32 output."],
        'padding_mask': ['One row per sequence, one column per key, and a 1 for the queries.',
                         'Compare np.arange(S) with the lengths, broadcast.'],
        'attention': ['Scores are (..., L, S); the softmax runs over the keys.',
                      "Masked scores must get weight exactly 0, and a row with no allowed key returns 0, "
                      "not NaN.",
                      'k and v may have fewer leading axes than q (broadcasting): np.swapaxes, not .T.'],
    }),
    '03_multihead': ('Multi-head attention: heads and the forward pass',
        ['03_multi_head_attention'], {
        'split_heads': ['Head i owns feature columns [i*d, (i+1)*d).',
                        'reshape, then swap two axes.'],
        'merge_heads': ['The inverse of split_heads.'],
        'mha_forward': ['Project, split, attend per head, merge, project again.',
                        'd_k is the width of one head.'],
    }),
    '04_backward': ('The backward passes: softmax, Eq. (1), multi-head',
        ['04_backward_passes'], {
        'softmax_backward': ['Write the Jacobian of one row, dp_i/dx_j, on paper first.',
                             'Never build it: the product with dp collapses to one row sum.',
                             'The checker also compares with central differences of softmax.'],
        'attention_backward': ["Undo the forward lines last to first: out = P v, P = softmax(S), S = q "
                               "k^T * scale.",
                               'A gradient has the shape of its input: sum over axes that were broadcast.'],
        'mha_backward': ['The backward of a split is a merge, and vice versa.',
                         'A bias added at every position gets the sum of the gradients over every position.'],
    }),
    '06_positions': ('Sinusoidal positional encodings (§3.5)',
        ['06_positional_encoding'], {
        'sinusoidal': ['Columns 2i and 2i+1 share one frequency.',
                       'Build the (length, d_model/2) table of angles by broadcasting.'],
    }),
    '07_tiling_and_decoding': ('Causal masks when L != S, the online-softmax tiled forward, one decoding '
                               'step (beyond the paper)',
        ['07_tiling_and_kv_cache'], {
        'causal_mask': ['Convention: True = may attend.',
                        "With L != S, 'bottom_right' treats the L queries as the last L positions.",
                        'np.tri has an offset argument k.'],
        'tiled_attention': ['Loop over key blocks only; everything inside is vectorized.',
                            'Keep per query: the running max m, the running sum l and the running output.',
                            'When m grows, whatever was computed against the old m must be rescaled.'],
        'decode_step': ["Project only the new position; the cache holds the earlier keys and values, "
                        "already projected and split into heads.",
                        'The new query is the last position: which keys may it see?'],
    }),
}

#: stem -> [(question, model answer, rubric)]; the rubric's points add up to 3 per question
QUESTIONS = {
    '01_attention': [
        ("Why subtract each row's max before exp, and why does it not change the answer?",
         "softmax(x) = softmax(x - c) for any constant c per row: the factor exp(-c) cancels between "
         "numerator and denominator. With c = the row max, every exponent is <= 0 so exp cannot overflow, "
         "and the largest term is exp(0) = 1 so the sum cannot underflow to 0.",
         "1 pt: shift invariance (exp(-c) cancels); 1 pt: no overflow (exponents <= 0); 1 pt: the sum is "
         ">= 1, so no 0/0."),
        ('Why is the padding mask (B, 1, S) and not (B, S)?',
         "Scores are (B, L, S). Broadcasting aligns shapes from the right: a (B, S) mask is read as (1, "
         "B, S), lining the batch up with the queries: an error when B != L, and silently wrong when B == "
         "L. The 1 puts the batch on the first axis and broadcasts over the L queries. For multi-head "
         "scores (B, h, L, S) one more axis is needed: mask[:, None].",
         "1 pt: broadcasting aligns from the right; 1 pt: B would line up with L (wrong or an error); 1 "
         "pt: the head axis for multi-head scores."),
        ('What must a query that may attend to no key return, and what do -inf and -1e9 fills give instead?',
         "Its scores are all -inf: the max subtraction gives -inf - (-inf) = NaN. The contract (and the "
         "library) return 0: it attends to nothing. A finite fill such as -1e9 instead makes the row's "
         "softmax uniform over keys it may not see.",
         "1 pt: NaN from -inf - (-inf); 1 pt: the answer is 0; 1 pt: a finite fill gives uniform weights "
         "over masked keys."),
        ("Masking after the softmax and renormalising is the same formula as masking before. Why does it "
         "fail when a masked key scores 800 and an allowed one 1?",
         "The softmax of [800, 1] is [1, exp(-799)] and exp(-799) underflows to 0: the allowed key's "
         "weight is lost before the mask is applied, and renormalising divides 0 by 0. Masking the scores "
         "first removes the large score before exp is taken.",
         "1 pt: underflow of the allowed weights; 1 pt: 0/0 (or 0) after renormalising; 1 pt: mask the "
         "scores first."),
    ],
    '03_multihead': [
        ("x has shape (L, h*d). Why is x.reshape(h, L, d) not split_heads(x, h), although the shape is "
         "right?",
         "reshape keeps the row-major order of the entries: x.reshape(h, L, d)[i] is (when h divides L) rows "
         "[i*L/h, (i+1)*L/h) of x cut into pieces of width d, so a 'head' mixes positions and columns. "
         "Head i must be the columns [i*d, (i+1)*d) of every position: reshape to (L, h, d), which "
         "keeps positions apart, then swap the first two axes.",
         "1 pt: reshape keeps the memory order; 1 pt: the result mixes positions into a head; 1 pt: "
         "reshape to (L, h, d), then transpose."),
        ('Why must a multi-head mask have a head axis ((B, 1, L, S), not (B, L, S))?',
         "The scores are (B, h, L, S). A (B, L, S) mask is aligned from the right as (1, B, L, S): its "
         "batch axis lines up with the heads, an error when B != h and silently wrong when B == h.",
         '1 pt: scores are (B, h, L, S); 1 pt: B lines up with h; 1 pt: silently wrong when B == h.'),
    ],
    '04_backward': [
        ('softmax_backward(dp=ones, p) must return 0 for every p. Why?',
         "Each row of p sums to 1 whatever x is, so the loss L = sum_j 1 * p_j is constant and its "
         "gradient is 0. In the formula p * (dp - sum_j dp_j p_j) = p * (1 - 1) = 0.",
         '2 pts: the loss sum_j p_j = 1 does not depend on x; 1 pt: shown on the formula.'),
        ('Why is dL/db_k exactly 0?',
         "The key bias adds q_i . b_k to every score of row i: the same constant for every key. Softmax "
         "is invariant to adding a constant to a row, so the weights, the output and the loss do not "
         "depend on b_k.",
         "1 pt: q_i . b_k is the same for every key of row i; 1 pt: softmax shift invariance; 1 pt: so "
         "the loss does not depend on b_k."),
    ],
    '06_positions': [
        ('Why pairs of sin and cos with the same frequency?',
         "For each frequency w, (sin(w(pos + k)), cos(w(pos + k))) is a rotation by the angle w k of "
         "(sin(w pos), cos(w pos)): PE(pos + k) is a linear function of PE(pos) that depends only on k, "
         "which §3.5 suggests lets the model attend by relative position.",
         "1 pt: the angle-addition formulas; 1 pt: a rotation depending only on k; 1 pt: relative "
         "positions as a linear map."),
        ('What range of wavelengths do the columns cover?',
         "Column pair i has wavelength 2 pi * 10000^(2i/d_model): from 2 pi (i = 0) up to almost 10000 * "
         "2 pi, a geometric progression.",
         '2 pts: 2 pi to 10000 * 2 pi; 1 pt: geometric.'),
    ],
    '07_tiling_and_decoding': [
        ("Top-left or bottom-right: which alignment does a decode step with one query and t + 1 keys "
         "need, and what does the other one do?",
         "Bottom-right: the one query is the last position, so it sees every key (no key is in its "
         "future; the mask is all True). Top-left (PyTorch's and JAX's is_causal) lines query 0 up with "
         "key 0, so the single query would see key 0 only.",
         '1 pt: bottom-right; 1 pt: the last query sees all keys; 1 pt: top-left lets it see key 0 only.'),
        ('When the running max grows, why must both the running sum and the running output be rescaled?',
         "Both were accumulated as sums of exp(s - m_old) (times v for the output). Multiplying by "
         "exp(m_old - m_new) puts every earlier term on the new max, so that the final division compares "
         "like with like.",
         "1 pt: both are sums of exp(s - m_old); 1 pt: the factor exp(m_old - m_new); 1 pt: forgetting "
         "one makes the ratio wrong."),
        ('Why start the running max at -inf rather than 0?',
         "With m = 0, a row whose scores are all below about -104 (float32) has exp(s - 0) = 0 for every "
         "key: the sum is 0 and the output 0/0. Starting at -inf, the first block sets m to its own max, "
         "so the largest exponent is exp(0) = 1 whatever the scores.",
         '1 pt: exp of very negative scores underflows; 1 pt: 0/0; 1 pt: -inf lets the first block set m.'),
        ('The decode step applies no causal mask. Why is that right?',
         "The new query is the last position t; every cached key is at a position < t and its own key is "
         "at t, so none is in its future: the causal (bottom-right) mask row is all True.",
         "1 pt: the query is the last position; 1 pt: every key is at j <= t; 1 pt: so the bottom-right "
         "mask is all True."),
        ("What does the cache save at step t, compared with recomputing the keys and values of the whole "
         "prefix?",
         "The projections of the t earlier positions: without a cache each step projects t + 1 positions "
         "(O(t d_model^2) work), with it only the new one (O(d_model^2)). The attention itself still "
         "reads all t + 1 keys (O(t d_model)).",
         "1 pt: earlier keys/values are not re-projected; 1 pt: O(t d^2) -> O(d^2) per step; 1 pt: the "
         "attention over t + 1 keys remains."),
    ],
}

def exercise_notebook_of(name: str) -> str:
    """The stem of the notebook that holds exercise ``name``."""
    return next(stem for stem, (_, _, ex) in NOTEBOOKS.items() if name in ex)


def stub_source(name: str, signature: str) -> str:
    doc = CONTRACTS[name] + "\n\n" + COMMON_RULES + "\n    "
    return f'def {signature}:\n    """{doc}"""\n    raise NotImplementedError  # your code here'


def _md(text, **meta):
    return {"cell_type": "markdown", "metadata": dict(meta), "source": text}


def _code(text, **meta):
    return {"cell_type": "code", "execution_count": None, "metadata": dict(meta), "outputs": [],
            "source": text}


def notebook(stem: str, variant: str, signatures: dict, papers: dict | None = None,
             lessons_url: str | None = None) -> dict:
    """Notebook ``stem`` (see :data:`NOTEBOOKS`) as an nbformat-4 dict.

    ``variant`` is "repo", "student" or "solution"; ``signatures`` maps exercise -> signature,
    ``papers`` exercise -> the paper's sentence it implements; ``lessons_url`` where the kit's
    notebooks link their lessons (see :func:`lesson_reference`).
    """
    papers = papers or {}
    title, lessons, exercises = NOTEBOOKS[stem]
    links = ", ".join(lesson_reference(lesson, variant, lessons_url) for lesson in lessons)
    back = "; it links back here" if variant == "repo" else ""
    how = {"repo": "run each check cell (it calls `attention_np.exercises.check`), or from a shell "
                   "`python -m attention_np check NAME your_file.py`.",
           "student": "run each check cell, or from a shell `python check.py NAME your_file.py` "
                      "(exit 0: passed, 1: wrong, 2: cannot run). The checker needs NumPy alone.",
           "solution": "the model solutions below pass every check."}[variant]
    cells = [_md(f"# Exercise {stem[:2]}: {title}\n\n"
                 f"**Lesson:** {links} (read it first{back}).\n\n"
                 "Write each function below in vectorized NumPy: no Python loops over batch, heads "
                 "or positions (a style rule; the checker grades what your function returns, not "
                 "how). The docstring of each stub is the contract the checker holds you to. "
                 f"To check: {how} When your answer is wrong, the checker says what is wrong and "
                 "gives a hint (`MISTAKE: ...`); `FAILED: ...` when it cannot say more.")]
    imports = ("import math  # noqa: F401 (your solutions may use them)\n\n"
               "import numpy as np  # noqa: F401\n\n")
    setup = imports + {"repo": "from attention_np.exercises import check",
                       "student": "from check import check", "solution": "from check import check"}[variant]
    cells.append(_code(setup, tags=["setup"]))
    defined = set()                     # the solutions' functions earlier cells define
    for name, hints in exercises.items():
        sig = signatures[name]
        quote = f"> {papers[name]}\n\n" if name in papers else ""
        cells.append(_md(f"## `{sig}`\n\n{quote}**Hints**\n\n" + "\n".join(f"- {h}" for h in hints)))
        if variant == "solution":
            cells.append(_code(solution_source(name, defined), tags=["solution"], exercise=name))
            defined |= set(needs(name))
        else:
            cells.append(_code(stub_source(name, sig), tags=["stub"], exercise=name))
        fn = sig.split("(")[0]
        cells.append(_code(f'print(check("{name}", {fn}))', tags=["check"], exercise=name))
    cells.append(_md("## Questions\n\nAnswer in the cell under each question (a few sentences; "
                     "they are graded by hand with a rubric)."))
    for i, (question, answer, rubric) in enumerate(QUESTIONS[stem], 1):
        cells.append(_md(f"**Question {i}.** {question}", tags=["question"]))
        text = (f"**Answer.** {answer}\n\n**Rubric (3 pts).** {rubric}" if variant == "solution"
                else "*Your answer here.*")
        cells.append(_md(text, tags=["answer"], question=i))
    for i, cell in enumerate(cells):
        cell["id"] = f"{stem}-{variant}-{i}"
    return {"cells": cells, "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                        "language": "python"},
                                         "language_info": {"name": "python"}},
            "nbformat": 4, "nbformat_minor": 5}
