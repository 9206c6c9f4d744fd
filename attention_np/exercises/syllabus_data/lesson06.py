"""Lesson 6: ``notebooks/06_positional_encoding.ipynb`` (the records of :mod:`.records`)."""

from attention_np.exercises.syllabus_data.records import Lesson, Question

LESSON = Lesson(
    number=6,
    stem="06_positional_encoding",
    title="Positional encoding: how order gets into attention",
    paper=("§3.5", "Table 3 row (E)", "§3.2.1's claim 6 (appendix)"),
    objectives=(
        "build the sinusoidal table and read its wavelengths (2π to 10000 · 2π, geometric) off the table",
        "show that PE(pos + k) = PE(pos) M_k with a rotation M_k that depends on k only, and what a head "
        "of width d_k can hold of it",
        "derive PE(i)·PE(j) = Σ_n cos((i - j) ω_n) and describe its profile against |i - j|",
        "show that attention without positions is permutation-equivariant, and what that costs on reversal "
        "(the exact position-blind bound)",
        "explain why RoPE's score depends on m - n only, and state what the extrapolation test measured",
        "state what the claim-6 experiment of the appendix measured (lesson 2's three scorers inside one "
        "trained encoder) and what it did not",
    ),
    prerequisites=(
        "lesson 5: the encoder, the reversal task and its training",
        "lesson 3: heads and their projections (W_q W_kᵀ has rank at most d_k)",
        "the angle-addition formulas; rotations of the plane",
        "permutation matrices",
        "lesson 2: additive attention and §3.2.1's claim 6 (for the appendix)",
    ),
    minutes=70,
    homework_minutes=75,
    why="attention is blind to order (§3.5), measured on the task and training of lesson 5",
    questions=(
        Question(
            kind="predict",
            text="Before running the permutation cell, predict max |f(P x) - P f(x)| for the "
                 "self-attention call, for the encoder without positional encoding and for the encoder "
                 "with it. Then run it.",
            answer="Self-attention and the encoder without PE are permutation-equivariant: the differences "
                   "are float64 rounding (the cell prints values of order 1e-16 to 1e-15). With PE the "
                   "outputs depend on where each token sits: `encoder, positional=True : max |f(P x) - P "
                   "f(x)| = 1.3e+00`, of order one.",
            rubric="1 pt: rounding-level for self-attention; 1 pt: rounding-level for the encoder without "
                   "PE; 1 pt: order one with PE.",
            quotes=("encoder, positional=True : max |f(P x) - P f(x)| = 1.3e+00",),
        ),
        Question(
            kind="derive",
            text="With sin a sin b + cos a cos b = cos(a - b), show that PE(i)·PE(j) = Σ_n cos((i - j) "
                 "ω_n), a function of i - j only, and that PE(i)·PE(i) = d_model/2. Check it against the "
                 "value printed for d_model = 128.",
            answer="Pair n contributes sin(i ω_n) sin(j ω_n) + cos(i ω_n) cos(j ω_n) = cos((i - j) ω_n); "
                   "the sum over the d_model/2 pairs depends on i - j only (and, cos being even, on |i - "
                   "j|). At i = j each term is cos 0 = 1: d_model/2 = 64. The cell prints `PE(i)·PE(i) = "
                   "64.0 (= d_model/2)`.",
            rubric="1 pt: one pair gives cos((i - j) ω_n); 1 pt: the sum depends on i - j only; 1 pt: "
                   "d_model/2 at i = j, 64.",
            quotes=("PE(i)·PE(i) = 64.0 (= d_model/2)",),
        ),
        Question(
            kind="break",
            text="Break RoPE's relative property: in the RoPE cell, rotate by the square of the position "
                 "(`an.apply_rope(q[None], np.array([m**2]))`, and n**2 for the key) and rerun the shift "
                 "loop. Is the score still constant? Then rotate the key by n + 1 instead. Explain both "
                 "results.",
            answer="With squared positions the score changes with the shift: rotations by m² ω and n² ω "
                   "leave the angle (m² - n²) ω = (m - n)(m + n) ω, which depends on m + n, the absolute "
                   "positions. With the key at n + 1 the score stays constant over shifts (the angle is (m "
                   "- n - 1) ω). What makes RoPE relative is an angle linear in the position: then only "
                   "the difference survives, whatever constant offset is added.",
            rubric="1 pt: squared positions: the score varies; 1 pt: n + 1: constant; 1 pt: only an angle "
                   "linear in the position leaves a function of m - n.",
        ),
        Question(
            kind="explain",
            text="Section 6 trains on length 10 and tests at 20, 40 and 80. What did it measure, and why "
                 "does its verdict not contradict the paper's 'may'?",
            answer="Beyond position 9 the accuracy is far below that of the trained positions (chance is "
                   "0.1), and longer inputs even hurt the trained positions (0.4204 at length 80, where "
                   "the new positions score 0.1984): in this setting the sinusoids did not let the model "
                   "extrapolate the copy-the-left-neighbour rule. The paper says 'may' and compared "
                   "encodings at the trained lengths only (Table 3 row (E)): a hypothesis, which the "
                   "lesson tested once, on one small model and task, without ruling it out elsewhere.",
            rubric="1 pt: new positions far below trained ones; 1 pt: the trained positions degrade with "
                   "length; 1 pt: 'may' is a hypothesis, tested here in one setting only.",
            quotes=("80 0.4204 0.1984",),
        ),
    ),
    figures=(
        "the sinusoids",
        "PE(i)·PE(j) against |i - j|",
        "training with and without PE",
        "the maps with and without PE",
        "figures/additive_vs_dot.png",
    ),
    explorer="masks",                       # ALiBi, the lesson's other way to put order into the scores
)
