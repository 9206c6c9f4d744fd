"""Lesson 2: ``notebooks/02_why_scale_by_sqrt_dk.ipynb`` (the records of :mod:`.records`)."""

from attention_np.exercises.syllabus_data.records import Lesson, Question

LESSON = Lesson(
    number=2,
    stem="02_why_scale_by_sqrt_dk",
    title="Why divide by √d_k?",
    paper=("§3.2.1", "footnote 4"),
    objectives=(
        "derive footnote 4 (E[q·k] = 0, Var(q·k) = d_k, 1 after the scale) and name the assumption each "
        "step uses",
        "explain how large scores saturate the softmax and shrink its gradient, on two scores (w(1 - w)) "
        "and over 16 keys (largest weight, entropy)",
        "read a gradient table by its median and its root mean square, and say why they differ",
        "say why dot-product attention is faster and smaller than additive attention (counted operations, "
        "the (L, S, d_hidden) array, the tanh calls)",
    ),
    prerequisites=(
        "lesson 1: Eq. (1), the softmax, the scores (L, S)",
        "the mean and variance of a sum of independent random variables",
        "derivatives, and what a gradient does in one step of gradient descent",
    ),
    minutes=75,
    homework_minutes=60,
    why="the one constant of Eq. (1): footnote 4, saturation, additive vs dot-product",
    questions=(
        Question(
            kind="derive",
            text="Close the notebook. From footnote 4's assumptions (the components q_i and k_i "
                 "independent, with mean 0 and variance 1), derive E[q·k] = 0 and Var(q·k) = d_k, then "
                 "Var(q·k / √d_k) = 1. Name the assumption each step uses.",
            answer="E[q_i k_i] = E[q_i] E[k_i] = 0 (q_i and k_i independent, mean 0). Var(q_i k_i) = "
                   "E[q_i² k_i²] - (E[q_i k_i])² = E[q_i²] E[k_i²] = 1 (independence; with mean 0, E[q_i²] "
                   "is the variance, 1). The d_k terms are independent of each other, so means and "
                   "variances add: E[q·k] = 0, Var(q·k) = d_k. Dividing by √d_k divides the variance by "
                   "d_k: 1. The moments cell measures it: at d_k = 64 it prints var 63.28 and var_scaled "
                   "0.9887.",
            rubric="1 pt: E[q_i k_i] = 0 and Var(q_i k_i) = 1, from the independence of q_i and k_i; 1 pt: "
                   "the variances of the d_k independent terms add up to d_k; 1 pt: the scale divides the "
                   "variance by d_k.",
            quotes=("64 0.002979 63.28 0.9887 0.01023",),
        ),
        Question(
            kind="predict",
            text="Predict the largest softmax weight of 16 keys when q and k have N(0, 1) entries, d_k = "
                 '256, without the 1/sqrt(d_k). Then with it. Then run the saturation cell ("Consequence '
                 '1") and compare.',
            answer="An unscaled score q . k sums d_k products of unit variance: variance 256, standard "
                   "deviation 16, so scores of 16 keys differ by tens and the softmax is nearly one-hot "
                   "(the mean largest weight is about 0.92). Scaled, the scores have variance 1 and the "
                   "largest weight is about 0.25 (uniform would be 1/16 = 0.0625). The saturation cell "
                   "prints, in its d_k = 256 row, max_weight_scaled 0.2473 and max_weight_unscaled 0.9196 "
                   "(attention_np.studies.scaling.softmax_saturation(SCALING_D_KS, rng=SEED): 2 000 "
                   "queries, 16 keys each).",
            rubric="1 pt: variance d_k (std 16); 1 pt: nearly one-hot unscaled (close to 1); 1 pt: scaled "
                   "weights well below 1 (order 0.2).",
            quotes=("256 0.2473 0.9196 2.353 0.1998",),
        ),
        Question(
            kind="break",
            text="Break footnote 4's assumption: give q and k components of mean 1 (and variance 1), e.g. "
                 "`q = 1 + rng.standard_normal((20000, 64))`, the same for k. Predict E[q·k] and Var(q·k) "
                 "from your derivation, then measure them. Which step fails, and does dividing by √d_k "
                 "still give variance 1?",
            answer="E[q_i k_i] = E[q_i] E[k_i] = 1, so E[q·k] = d_k (64). Var(q_i k_i) = E[q_i²] E[k_i²] - "
                   "(E[q_i] E[k_i])² = 2 · 2 - 1 = 3, so Var(q·k) = 3 d_k (192); 20 000 pairs measure it "
                   "within a few per cent. The step that fails is E[q_i k_i] = 0 (the mean-0 assumption), "
                   "and with it E[q_i²] = 1. Divided by √d_k, the scores have mean √d_k (8) and variance "
                   "3, not 1: the scale no longer normalizes. (Within one query's row a common shift "
                   "cancels in the softmax, but the spread over the keys, |q|² ≈ 2 d_k, still grows with "
                   "d_k.)",
            rubric="1 pt: E[q·k] = d_k; 1 pt: Var(q·k) = 3 d_k, from E[q_i²] = 2; 1 pt: names the failing "
                   "step (mean 0) and the scaled variance, 3.",
        ),
        Question(
            kind="explain",
            text="In the gradient cell, at d_k = 1024 the unscaled gradient at the queries has a median of "
                 "0.000664 but a root mean square of 16.15. How can the typical query get almost nothing "
                 "while the RMS grows? What does the lesson measure here, and what does it only expect?",
            answer="The median describes a typical query: its softmax is nearly one-hot, so the gradient "
                   "through it nearly vanishes (the one-hot argument of Consequence 2). The RMS is "
                   "dominated by the largest values: a few queries still get large gradients, and the "
                   "unscaled dq carries no 1/√d_k factor. Both statistics are measured; that the large "
                   "gradients belong to queries whose two best keys nearly tie is what the lesson expects, "
                   "not what it measured.",
            rubric="1 pt: the median is a typical, saturated query; 1 pt: the RMS is dominated by a few "
                   "large gradients (no 1/√d_k in unscaled dq); 1 pt: the near-tie explanation is a "
                   "hypothesis.",
            quotes=("1024 1.063 0.000664 1.231 16.15",),
        ),
    ),
    figures=(
        "figures/scaling_variance.png",
        "figures/scaling_saturation.png",
        "figures/scaling_gradients.png",
    ),
    explorer="eq1",
)
