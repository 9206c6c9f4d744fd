"""The syllabus of the course: one table, from which every document that lists the lessons is made.

Each :class:`Lesson` says what a student will be able to do (objectives), what it assumes
(prerequisites), how long it takes, which exercises and questions go with it, the figures it
draws and the paper's sections it teaches. From :data:`LESSONS` and :data:`SESSIONS` this
module generates

- the two-week plan (six 90-minute sessions plus homework) and the full nine-lesson syllabus in
  ``docs/instructors.md``, the course-order table of ``docs/teaching.md`` and the lesson table of
  ``README.md``, each between marker comments ``<!-- syllabus:NAME -->`` ... ``<!-- /syllabus -->``;
- the lesson table of the student kit's README (:func:`kit_table`, used by :mod:`.course`);
- in every lesson notebook, a header cell (objectives, prerequisites, links to the paper and to
  the explorer) after the title and a questions cell at the end, both tagged (``syllabus-header``,
  ``syllabus-questions``), markdown only;
- the answers and rubrics of the lesson questions, for the solutions kit only
  (:func:`lesson_answers_markdown`).

``python -m attention_np.exercises.syllabus --write`` rewrites the marked sections and the
notebooks' generated cells (from the repository root); ``--check`` lists what differs, exit 1.
``tests/course/test_syllabus.py`` fails when a document differs from what this table generates.

Standard library only (plus :mod:`.notebooks`): the student kit's README is built from it. The
points of each exercise (:func:`exercise_points`, what its contract asks) are set here too; the
course build spreads them over the cases, and every count and total the instructors' guide and
the kits' READMEs state comes from here (:func:`points_section` imports the exercises, to count
their cases, when it runs).
"""

from __future__ import annotations

import json
import pathlib
import re
import sys
from dataclasses import dataclass

from attention_np.exercises.notebooks import CLAUSES, NOTEBOOKS, QUESTIONS
from attention_np.exercises.rubrics import rubric_markdown

PAPER = "https://arxiv.org/abs/1706.03762"
PAPER_TITLE = 'Vaswani et al. (2017), "Attention Is All You Need"'
EXPLORER = "../docs/explorer.md"
EXPLORER_VIEWS = {"eq1": "Eq. (1) live: d_k, scaled and unscaled", "masks": "the masks view",
                  "heads": "the heads of trained models"}
SESSION_MINUTES = 90
#: the most homework one session may leave (minutes): a longer lesson's homework is carried to a later session
MAX_HOMEWORK_MINUTES = 180
KINDS = {"predict": "Predict, then run.", "derive": "Derive by hand.",
         "break": "Break it and explain.", "explain": "Explain."}


@dataclass(frozen=True)
class Question:
    """A question at the end of a lesson. ``quotes`` are outputs of the lesson's own cells that
    the answer relies on (each must appear in the notebook's committed outputs), never a value
    measured from the machine (time, memory), which moves from run to run: such a value is a
    ``ranges`` entry ``(pattern, low, high)`` instead, ``pattern`` a regular expression whose one
    group is the printed number; the answer states the range, and the committed output's value lies
    in it (tests/course/test_syllabus.py)."""

    kind: str
    text: str
    answer: str
    rubric: str
    quotes: tuple = ()
    ranges: tuple = ()


@dataclass(frozen=True)
class Lesson:
    number: int
    stem: str
    title: str
    paper: tuple
    objectives: tuple
    prerequisites: tuple
    minutes: int                 # in class
    homework_minutes: int
    why: str                     # why the lesson sits here in the order
    questions: tuple
    figures: tuple               # files (figures/..., docs/img/...) or plots the lesson draws
    explorer: str | None = None
    project: tuple | None = None   # (task, rubric) for lessons without functions to write

    @property
    def exercises(self) -> tuple:
        """The functions of the exercise notebook that goes with this lesson."""
        return tuple(name for _, lessons, exercises in NOTEBOOKS.values() if self.stem in lessons
                     for name in exercises)

    @property
    def exercise_notebook(self) -> str | None:
        return next((stem for stem, (_, lessons, _) in NOTEBOOKS.items() if self.stem in lessons),
                    None)


@dataclass(frozen=True)
class Session:
    lessons: tuple               # lesson numbers
    in_class: tuple              # ((activity, minutes), ...) besides the lessons' own minutes
    homework: str
    carry: tuple = ()            # ((what, minutes, session it is due at), ...): part of its lessons' homework


Q = Question

LESSONS = (
    Lesson(
        1, "01_scaled_dot_product_attention", "Scaled dot-product attention, step by step",
        ("§3.2.1, Eq. (1)", "§3.2.3"),
        ("compute Eq. (1) by hand on a few keys and name what each step (scores, softmax, weighted sum) "
         "produces, with its shape",
         "predict the weights of a query that matches one key, two keys, or none better than another "
         "(attention as a soft dictionary lookup)",
         "say what a learned query projection W^Q changes: what a word looks for can differ from what it is",
         "build a padding mask (B, 1, S) and a causal mask, and check that masked keys get weight exactly 0",
         "name §3.2.3's three uses of attention and the inputs and mask of each"),
        ("NumPy: arrays, `@`, broadcasting, `axis=` arguments",
         "the dot product and what it measures",
         "exp and log; a probability distribution (positive, sums to 1)"),
        60, 120,
        "attention as a soft dictionary lookup, Eq. (1), learned projections by hand, padding and causal "
        "masks, §3.2.3's three uses",
        (Q("predict",
           'Before running the first cell ("Attention is a soft dictionary lookup"), predict the weights '
           "and the output for the query [0, 0], which matches no key better than another. Then run it.",
           "Every score is 0 (the query is the zero vector), and the softmax of equal scores is uniform: "
           "1/3 each. The output is the plain average of the values 10, 20 and 30: 20. The cell prints "
           "`query [0.0, 0.0]: weights [0.333 0.333 0.333] -> output 20.00`.",
           "1 pt: every score is 0; 1 pt: uniform weights, 1/3 each; 1 pt: the output is 20, the mean of "
           "the values.",
           ("query [0.0, 0.0]: weights [0.333 0.333 0.333] -> output 20.00",)),
         Q("derive",
           "The same cell prints the output 20.00 for the query [0, 4], although its weights are "
           "not uniform. Show that the output is exactly 20 for every query [0, a].",
           "The keys [1, 0] and [-1, 0] both score 0 against [0, a], so they get the same weight w, and "
           "the key [0, 1] gets 1 - 2w. The output is 10 w + 20 (1 - 2w) + 30 w = 20 for every w. The "
           "cell prints `query [0.0, 4.0]: weights [0.053 0.894 0.053] -> output 20.00`.",
           "1 pt: the first and third keys score the same; 1 pt: weights w, 1 - 2w, w; 1 pt: "
           "10 w + 20 (1 - 2w) + 30 w = 20 for every w.",
           ("query [0.0, 4.0]: weights [0.053 0.894 0.053] -> output 20.00",)),
         Q("break",
           "Break the padding mask: in the padding cell, pass `pad.transpose(0, 2, 1)` (shape (B, S, 1): it "
           "masks the padded *queries* instead of the padded keys) to `paper.sdpa_forward` and print "
           "`cache.weights[1].round(3)`. What goes wrong, and why does the lesson mask keys?",
           "The mask now says which queries may attend, not which keys may be read. The three real words "
           "of sentence 2 attend to all six keys, padding included: the padded keys are zero vectors, "
           "score 0, and each takes a share of the weight (about a tenth here), so padding leaks into the "
           "real words' outputs. The three padded queries get no key at all, so their weights are all 0 "
           "(and their outputs 0: the section on a query with no allowed key). Padding must be removed "
           "from what every query reads, which is the keys' axis; the padded queries' own outputs are "
           "ignored by the loss anyway.",
           "1 pt: the real words now put weight on padded keys; 1 pt: the padded queries get no key (all "
           "weights 0); 1 pt: a mask must remove padding from the keys every query reads."),
         Q("predict",
           'Before running "What learned projections add", predict which word *sat* attends to most '
           "without and with the hand-made W_q. Then run it.",
           "Without W_q the query is *sat*'s own vector, which matches itself best; W_q turns the verb "
           "feature into the animal feature, so the query looks for an animal and finds *cat*. The cell "
           "prints `-> attends most to 'sat'` without and `-> attends most to 'cat'` with W_q (weight 0.69).",
           "1 pt: itself without W_q; 1 pt: *cat* with W_q; 1 pt: because W_q maps the verb feature to "
           "the animal feature.",
           ("'sat' without W_q: [0.12 0.19 0.44 0.08 0.12 0.07] -> attends most to 'sat'",
            "'sat' with W_q: [0.05 0.69 0.18 0.02 0.05 0.02] -> attends most to 'cat'"))),
        ("figures/eq1_weights.png", "figures/masks.png"),
        explorer="masks"),
    Lesson(
        2, "02_why_scale_by_sqrt_dk", "Why divide by √d_k?",
        ("§3.2.1", "footnote 4"),
        ("derive footnote 4 (E[q·k] = 0, Var(q·k) = d_k, 1 after the scale) and name the assumption "
         "each step uses",
         "explain how large scores saturate the softmax and shrink its gradient, on two scores "
         "(w(1 - w)) and over 16 keys (largest weight, entropy)",
         "read a gradient table by its median and its root mean square, and say why they differ",
         "say why dot-product attention is faster and smaller than additive attention (counted "
         "operations, the (L, S, d_hidden) array, the tanh calls)"),
        ("lesson 1: Eq. (1), the softmax, the scores (L, S)",
         "the mean and variance of a sum of independent random variables",
         "derivatives, and what a gradient does in one step of gradient descent"),
        75, 60,
        "the one constant of Eq. (1): footnote 4, saturation, additive vs dot-product",
        (Q("derive",
           "Close the notebook. From footnote 4's assumptions (the components q_i and k_i "
           "independent, with mean 0 and variance 1), derive E[q·k] = 0 and Var(q·k) = d_k, then "
           "Var(q·k / √d_k) = 1. Name the assumption each step uses.",
           "E[q_i k_i] = E[q_i] E[k_i] = 0 (q_i and k_i independent, mean 0). Var(q_i k_i) = "
           "E[q_i² k_i²] - (E[q_i k_i])² = E[q_i²] E[k_i²] = 1 (independence; with mean 0, E[q_i²] is the "
           "variance, 1). The d_k terms are independent of each other, so means and variances add: "
           "E[q·k] = 0, Var(q·k) = d_k. Dividing by √d_k divides the variance by d_k: 1. The moments "
           "cell measures it: at d_k = 64 it prints var 63.28 and var_scaled 0.9887.",
           "1 pt: E[q_i k_i] = 0 and Var(q_i k_i) = 1, from the independence of q_i and k_i; 1 pt: the "
           "variances of the d_k independent terms add up to d_k; 1 pt: the scale divides the variance "
           "by d_k.",
           ("64 0.002979 63.28 0.9887 0.01023",)),
         Q("predict",
           "Predict the largest softmax weight of 16 keys when q and k have N(0, 1) entries, "
           "d_k = 256, without the 1/sqrt(d_k). Then with it. Then run the saturation cell "
           '("Consequence 1") and compare.',
           "An unscaled score q . k sums d_k products of unit variance: variance 256, standard deviation "
           "16, so scores of 16 keys differ by tens and the softmax is nearly one-hot (the mean largest "
           "weight is about 0.92). Scaled, the scores have variance 1 and the largest weight is about 0.25 "
           "(uniform would be 1/16 = 0.0625). The saturation cell prints, in its d_k = 256 row, "
           "max_weight_scaled 0.2473 and max_weight_unscaled 0.9196 "
           "(attention_np.studies.scaling.softmax_saturation(SCALING_D_KS, rng=SEED): 2 000 queries, "
           "16 keys each).",
           "1 pt: variance d_k (std 16); 1 pt: nearly one-hot unscaled (close to 1); 1 pt: scaled "
           "weights well below 1 (order 0.2).",
           ("256 0.2473 0.9196 2.353 0.1998",)),
         Q("break",
           "Break footnote 4's assumption: give q and k components of mean 1 (and variance 1), e.g. "
           "`q = 1 + rng.standard_normal((20000, 64))`, the same for k. Predict E[q·k] and Var(q·k) from "
           "your derivation, then measure them. Which step fails, and does dividing by √d_k still give "
           "variance 1?",
           "E[q_i k_i] = E[q_i] E[k_i] = 1, so E[q·k] = d_k (64). Var(q_i k_i) = E[q_i²] E[k_i²] - "
           "(E[q_i] E[k_i])² = 2 · 2 - 1 = 3, so Var(q·k) = 3 d_k (192); 20 000 pairs measure it within a "
           "few per cent. The step that fails is E[q_i k_i] = 0 (the mean-0 assumption), and with it "
           "E[q_i²] = 1. Divided by √d_k, the scores have mean √d_k (8) and variance 3, not 1: the scale "
           "no longer normalizes. (Within one query's row a common shift cancels in the softmax, but the "
           "spread over the keys, |q|² ≈ 2 d_k, still grows with d_k.)",
           "1 pt: E[q·k] = d_k; 1 pt: Var(q·k) = 3 d_k, from E[q_i²] = 2; 1 pt: names the failing step "
           "(mean 0) and the scaled variance, 3."),
         Q("explain",
           "In the gradient cell, at d_k = 1024 the unscaled gradient at the queries has a median of "
           "0.000664 but a root mean square of 16.15. How can the typical query get almost nothing while "
           "the RMS grows? What does the lesson measure here, and what does it only expect?",
           "The median describes a typical query: its softmax is nearly one-hot, so the gradient through "
           "it nearly vanishes (the one-hot argument of Consequence 2). The RMS is dominated by the "
           "largest values: a few queries still get large gradients, and the unscaled dq carries no "
           "1/√d_k factor. Both statistics are measured; that the large gradients belong to queries whose "
           "two best keys nearly tie is what the lesson expects, not what it measured.",
           "1 pt: the median is a typical, saturated query; 1 pt: the RMS is dominated by a few large "
           "gradients (no 1/√d_k in unscaled dq); 1 pt: the near-tie explanation is a hypothesis.",
           ("1024 1.063 0.000664 1.231 16.15",))),
        ("figures/scaling_variance.png", "figures/scaling_saturation.png", "figures/scaling_gradients.png"),
        explorer="eq1"),
    Lesson(
        3, "03_multi_head_attention", "Multi-head attention",
        ("§3.2.2", "Table 3 rows (A)"),
        ("follow the shapes through the five steps of MultiHead (project, split, attend, concat, project)",
         "split and merge heads with a reshape and a transpose, and say why a plain reshape is wrong",
         "check one head against head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)",
         "count the parameters and matrix-product FLOPs of h heads of d_model/h against one head of "
         "d_model (claim 8), and say what a FLOP count does not see",
         "explain the claim-9 experiment: why one head cannot serve two positions per query, and what "
         "the control task rules out"),
        ("lesson 1: Eq. (1), masks, learned projections",
         "lesson 2: what the 1/√d_k keeps the softmax from",
         "NumPy reshape and transpose (row-major order)",
         "the cost of a matrix product (m × n)(n × p): 2mnp FLOPs",
         "least squares, and the fraction of variance a fit leaves unexplained"),
        70, 120,
        "§3.2.2: heads, cost, and claim 9 measured",
        (Q("predict",
           "Before running the FLOP-count cell (n = 128, d_model = 512), predict for h = 8, d_k = 64 and "
           "for h = 1, d_k = 512 the FLOPs of q kᵀ and the number of attention weights stored. Then run it.",
           "q kᵀ costs 2 · h · n² · d_k = 2 · n² · d_model whatever h is: 2 · 128² · 512 = 16,777,216 for "
           "both. The weights number h · n²: 131,072 for eight heads, 16,384 for one. The cell prints "
           "`q k^T      16,777,216      16,777,216` and `weights stored         131,072          16,384`.",
           "1 pt: equal score FLOPs, 2 n² d_model; 1 pt: the number 16,777,216; 1 pt: the weights grow "
           "with h (8 n² against n²).",
           ("q k^T 16,777,216 16,777,216", "weights stored 131,072 16,384")),
         Q("derive",
           "With d_k = d_v = d_model/h, count the FLOPs of the four projections and of the two "
           "products of Eq. (1) for n positions. Show that h drops out, and check your total against the "
           "cell's for n = 128, d_model = 512.",
           "Each projection is (n × d_model)(d_model × d_model): 2 n d_model², four of them 8 n d_model². "
           "q kᵀ costs 2 n² d_k per head, 2 n² h d_k = 2 n² d_model for all heads, and the weighted sum "
           "of the values the same: 4 n² d_model. The total 8 n d_model² + 4 n² d_model has no h. For "
           "n = 128, d_model = 512: 268,435,456 + 33,554,432 = 301,989,888, the cell's "
           "`total     301,989,888     301,989,888`.",
           "1 pt: projections 8 n d_model²; 1 pt: the products 4 n² d_model, h cancelling because "
           "h d_k = d_model; 1 pt: the total matches the cell.",
           ("total 301,989,888 301,989,888",)),
         Q("break",
           "Cut the heads wrongly: in the split/concat cell, replace `paper.split_heads(cols, 2)` by "
           "`cols.reshape(2, 3, 4)`. Run it, say what 'head 0' now holds, and why the right shape does "
           "not make it a head.",
           "reshape keeps the row-major order of the 24 entries: head 0 becomes [[0 1 2 3] [4 5 6 7] "
           "[0 1 2 3]] and head 1 [[4 5 6 7] [0 1 2 3] [4 5 6 7]]. The second row of head 0 holds columns "
           "4-7 of position 0: positions and feature blocks are mixed, so the 'head' attends over pieces "
           "of different positions. Head i must be the columns [i d, (i+1) d) of every position: reshape "
           "to (L, h, d), which keeps positions apart, then swap the first two axes (split_heads' head 0 "
           "is [0 1 2 3] in every row).",
           "1 pt: what the wrong head holds; 1 pt: reshape keeps the memory order and mixes positions "
           "into a head; 1 pt: reshape to (L, h, d), then transpose."),
         Q("explain",
           "In the claim-9 study one head leaves 0.4377 of the target's variance on the two-position task "
           "and 0.0000 on the control, at the same width and parameter count as two heads. What does each "
           "comparison rule out, and what does the lesson not claim?",
           "h = 1, 2 and 4 have the same total width, parameters and FLOPs, so the gap is not capacity: "
           "one head gives each query one distribution over positions, and splitting it between two "
           "neighbours mixes their contents (the averaging of §3.2.2). The control, where one position "
           "suffices, shows one head is not simply worse: it solves that task. The lesson does not claim "
           "the size of the effect in a translation model (the task is a toy built to need two positions), "
           "and why the trained head gets below the bound of one half is a hypothesis, not measured.",
           "1 pt: equal width and parameters, so not capacity; 1 pt: the control shows one head is "
           "enough for one position; 1 pt: a toy, not the size in translation; below-half a hypothesis.",
           ("two positions 1 16 0.4377 [0.4343, 0.4422]",))),
        ("figures/multihead_heads.png",),
        explorer="heads"),
    Lesson(
        4, "04_backward_passes", "Backward passes, derived and checked live",
        ("Eq. (1) and §3.2.2, differentiated (the paper gives no backward)",),
        ("derive the softmax Jacobian p_i(δ_ij - p_j) and its vector-Jacobian product "
         "p ⊙ (dp - <dp, p>) without building the Jacobian",
         "write the backward of Eq. (1) by undoing the forward lines last to first, scale and mask included",
         "check a backward against central finite differences and PyTorch autograd, and say why the "
         "upstream gradient must be random",
         "derive the linear layer's backward (dx = dy Wᵀ; dW and db summed over every batch and position)",
         "derive the multi-head backward step by step, last step first, and check each stage: split and "
         "merge as each other's backward, the three input gradients of self-attention added, why "
         "dL/db_k = 0"),
        ("lesson 1: Eq. (1) and masks; lesson 3: the five steps of multi-head attention",
         "lesson 2: the gradient through the softmax, used there as a measurement",
         "the chain rule for vectors (Jacobians, vector-Jacobian products)",
         "central finite differences, (f(x + h) - f(x - h)) / 2h",
         "PyTorch basics (tensors, requires_grad, .backward()) to read the comparison cells"),
        70, 240,
        "the gradients training needs, checked, just before the first training",
        (Q("predict",
           "Before running the finite-difference cell of Eq. (1), predict the gradient of the fully masked "
           "query (query 2 of sequence 1). Then run it.",
           "Zero. The query may attend to no key, so its weights and its output are 0 whatever q is; "
           "nothing depends on that q, so dq is exactly 0, not NaN (no 0/0 is formed). The cell prints "
           "`gradient of the fully masked query: [0. 0. 0. 0. 0.]`.",
           "1 pt: zero; 1 pt: the output of an empty row does not depend on q; 1 pt: exactly 0, never NaN.",
           ("gradient of the fully masked query: [0. 0. 0. 0. 0.]",)),
         Q("derive",
           "From p_i = exp(x_i) / Σ_k exp(x_k), derive ∂p_i/∂x_j = p_i (δ_ij - p_j) with the "
           "quotient rule, then the vector-Jacobian product dx_j = p_j (dp_j - Σ_i dp_i p_i). Why is the "
           "n × n Jacobian never needed?",
           "∂p_i/∂x_j = (δ_ij e^{x_i} Σ - e^{x_i} e^{x_j}) / Σ² = p_i δ_ij - p_i p_j. Then "
           "dx_j = Σ_i dp_i p_i (δ_ij - p_j) = p_j dp_j - p_j Σ_i dp_i p_i. The sum Σ_i dp_i p_i is one "
           "number per row, so dx costs one row sum and two elementwise operations, O(n) per row instead "
           "of the n² entries of the Jacobian. The softmax cell checks the formula against J^T dp and "
           "against finite differences.",
           "1 pt: the quotient rule gives p_i (δ_ij - p_j); 1 pt: the sum over i collapses to "
           "p_j (dp_j - <dp, p>); 1 pt: one row sum, no n × n matrix."),
         Q("break",
           "Break the check: in the softmax cell, use `np.ones(5)` as the upstream gradient and a "
           "'backward' that returns zeros (`lambda dp, p: np.zeros_like(p)`). Compare it with the "
           "formula's answer. What does the comparison say, and why does the lesson use random upstream "
           "gradients everywhere?",
           "Both give zeros: the weights sum to 1 whatever x is, so the loss Σ_i p_i is constant and its "
           "gradient is 0 (the cell prints `upstream of ones ->  [-0. -0. -0. -0. -0.]`). A check with "
           "ones therefore passes a backward that returns zeros. With a random dp the true dx is not zero "
           "(the cell's `VJP formula` row) and the zero backward fails. A random upstream gradient has no "
           "structure for a mistake to hide in.",
           "1 pt: both give zeros; 1 pt: the weights' sum is constant, so its gradient is 0; 1 pt: a "
           "random upstream gradient exposes the broken backward.",
           ("upstream of ones -> [-0. -0. -0. -0. -0.]",))),
        (), explorer="eq1"),                  # the gradient norms through the softmax, by d_k
    Lesson(
        5, "05_attention_that_learns", "Attention that learns: training a Transformer encoder in NumPy",
        ("§3.1", "§3.3", "§3.4", "§3.5", "§5.3, Eq. (3)"),
        ("name every parameter array of a two-layer encoder and count them layer by layer",
         "explain why reversal can only be solved through attention, and read the learned anti-diagonal "
         "off the maps",
         "test a reading of the maps by ablation: silence heads through W_o and measure held-out accuracy",
         "describe how the maps form during training and what training does to footnote 4's assumption "
         "(Var(q·k)/d_k, entropy)"),
        ("lesson 3: multi-head attention; lesson 4: its backward (the gradients training uses)",
         "lesson 2: footnote 4 and the entropy of a softmax row",
         "cross-entropy, Adam, a learning-rate warm-up",
         "layer normalisation and a feed-forward layer, at the level of what they compute"),
        60, 120,
        "the first trained model (the encoder): the model printed layer by layer, then its maps",
        (Q("predict",
           "Before running the ablation cell, predict the held-out accuracy when one layer-1 head "
           "(head 0) is silenced, when all four layer-1 heads are, and when all layer-0 heads are. Then "
           "run it.",
           "One layer-1 head: no measurable loss, since the other three carry the same route (`silence one "
           "layer-1 head (head 0)    held-out accuracy 100.0%`). All four layer-1 heads: about chance for "
           "10 digits (`silence all layer-1 heads            held-out accuracy 11.6%`). All layer-0 heads: "
           "little or nothing (100.0% in this run): the routing is done by layer 1.",
           "1 pt: one head costs nothing (redundancy); 1 pt: all of layer 1 falls to about chance (0.1); "
           "1 pt: layer 0 costs little.",
           ("silence one layer-1 head (head 0) held-out accuracy 100.0%",
            "silence all layer-1 heads held-out accuracy 11.6%",
            "silence all layer-0 heads held-out accuracy 100.0%")),
         Q("derive",
           "A layer-1 head is nearly one-hot on the mirror key. If the mirror key's scaled score "
           "is s and the other 9 keys score 0, what s gives it the weight 0.99? With d_k = 16, what is that "
           "before the scale, and what does it say about the footnote-4 table after training?",
           "e^s / (e^s + 9) = 0.99 gives e^s = 0.99 · 9 / 0.01 = 891, s = ln 891 ≈ 6.79. Before the scale "
           "q·k = 6.79 · √16 ≈ 27.2, while footnote 4's assumption gives unscaled scores a standard "
           "deviation of √16 = 4. A nearly one-hot head needs scores several standard deviations apart, so "
           "training must grow and align q and k: the Var/d_k of hundreds of the layer-1 heads in the "
           "table (head 3 of layer 1: 1.20 at initialisation, 439.8 after training).",
           "1 pt: e^s / (e^s + 9) = 0.99, s ≈ 6.8; 1 pt: times √d_k = 4, about 27; 1 pt: connects it to "
           "the large trained Var/d_k.",
           ("1 3 1.20 -> 439.8 82.8 2.12 -> 0.05",)),
         Q("break",
           "Break the redundancy: silence three of the four layer-1 heads and keep one (edit `rows` in "
           "the ablation cell), for each choice of the head kept. Predict, run, and explain the "
           "differences with the anti-diagonal scores printed earlier.",
           "Each head alone keeps the accuracy far above chance, but not all of them at 100 %: the four "
           "heads carry the same route with different sharpness, and the sharper a head's anti-diagonal "
           "(its printed score), the more accuracy it keeps alone; the sharpest, head 3, keeps nearly all "
           "of it. Redundancy means the heads together survive the loss of one; it does not mean each "
           "alone is enough.",
           "1 pt: runs all four choices; 1 pt: each alone is far above chance, most below 100 %; 1 pt: "
           "relates what each keeps to its anti-diagonal score.")),
        ("the training loss", "every head's map", "the ablation bars", "the maps during training"),
        explorer="heads",
        project=("Train the reversal task (`RETRAIN = True`, or `python -m attention_np train`) with one "
                 "change (the number of heads, the 1/√d_k, the schedule, no positional encoding), "
                 "predict what will move, then report the held-out accuracy, the loss curve and the "
                 "layer-1 maps beside the committed run.",
                 "1 pt: one change, with its prediction written before the run; 1 pt: the lesson's "
                 "measurements (held-out accuracy, loss, anti-diagonal scores) beside the committed run, "
                 "seeds named; 1 pt: an explanation that separates what was measured from what is "
                 "guessed.")),
    Lesson(
        6, "06_positional_encoding", "Positional encoding: how order gets into attention",
        ("§3.5", "Table 3 row (E)", "§3.2.1's claim 6 (appendix)"),
        ("build the sinusoidal table and read its wavelengths (2π to 10000 · 2π, geometric) off the table",
         "show that PE(pos + k) = PE(pos) M_k with a rotation M_k that depends on k only, and what a head "
         "of width d_k can hold of it",
         "derive PE(i)·PE(j) = Σ_n cos((i - j) ω_n) and describe its profile against |i - j|",
         "show that attention without positions is permutation-equivariant, and what that costs on "
         "reversal (the exact position-blind bound)",
         "explain why RoPE's score depends on m - n only, and state what the extrapolation test measured",
         "state what the claim-6 experiment of the appendix measured (lesson 2's three scorers inside one "
         "trained encoder) and what it did not"),
        ("lesson 5: the encoder, the reversal task and its training",
         "lesson 3: heads and their projections (W_q W_kᵀ has rank at most d_k)",
         "the angle-addition formulas; rotations of the plane",
         "permutation matrices",
         "lesson 2: additive attention and §3.2.1's claim 6 (for the appendix)"),
        70, 75,
        "attention is blind to order (§3.5), measured on the task and training of lesson 5",
        (Q("predict",
           "Before running the permutation cell, predict max |f(P x) - P f(x)| for the self-attention "
           "call, for the encoder without positional encoding and for the encoder with it. Then run it.",
           "Self-attention and the encoder without PE are permutation-equivariant: the differences are "
           "float64 rounding (the cell prints values of order 1e-16 to 1e-15). With PE the outputs depend "
           "on where each token sits: `encoder, positional=True : max |f(P x) - P f(x)| = 1.3e+00`, of "
           "order one.",
           "1 pt: rounding-level for self-attention; 1 pt: rounding-level for the encoder without PE; "
           "1 pt: order one with PE.",
           ("encoder, positional=True : max |f(P x) - P f(x)| = 1.3e+00",)),
         Q("derive",
           "With sin a sin b + cos a cos b = cos(a - b), show that PE(i)·PE(j) = "
           "Σ_n cos((i - j) ω_n), a function of i - j only, and that PE(i)·PE(i) = d_model/2. Check it "
           "against the value printed for d_model = 128.",
           "Pair n contributes sin(i ω_n) sin(j ω_n) + cos(i ω_n) cos(j ω_n) = cos((i - j) ω_n); the sum "
           "over the d_model/2 pairs depends on i - j only (and, cos being even, on |i - j|). At i = j each "
           "term is cos 0 = 1: d_model/2 = 64. The cell prints `PE(i)·PE(i) = 64.0 (= d_model/2)`.",
           "1 pt: one pair gives cos((i - j) ω_n); 1 pt: the sum depends on i - j only; 1 pt: d_model/2 "
           "at i = j, 64.",
           ("PE(i)·PE(i) = 64.0 (= d_model/2)",)),
         Q("break",
           "Break RoPE's relative property: in the RoPE cell, rotate by the square of the position "
           "(`an.apply_rope(q[None], np.array([m**2]))`, and n**2 for the key) and rerun the shift loop. "
           "Is the score still constant? Then rotate the key by n + 1 instead. Explain both results.",
           "With squared positions the score changes with the shift: rotations by m² ω and n² ω leave "
           "the angle (m² - n²) ω = (m - n)(m + n) ω, which depends on m + n, the absolute positions. "
           "With the key at n + 1 the score stays constant over shifts (the angle is (m - n - 1) ω). What "
           "makes RoPE relative is an angle linear in the position: then only the difference survives, "
           "whatever constant offset is added.",
           "1 pt: squared positions: the score varies; 1 pt: n + 1: constant; 1 pt: only an angle linear "
           "in the position leaves a function of m - n."),
         Q("explain",
           "Section 6 trains on length 10 and tests at 20, 40 and 80. What did it measure, and why does "
           "its verdict not contradict the paper's 'may'?",
           "Beyond position 9 the accuracy is far below that of the trained positions (chance is 0.1), "
           "and longer inputs even hurt the trained positions (0.4204 at length 80, where the new "
           "positions score 0.1984): in this setting the sinusoids did not let the model extrapolate the "
           "copy-the-left-neighbour rule. The paper says 'may' and compared encodings at the trained "
           "lengths only (Table 3 row (E)): a hypothesis, which the lesson tested once, on one small "
           "model and task, without ruling it out elsewhere.",
           "1 pt: new positions far below trained ones; 1 pt: the trained positions degrade with length; "
           "1 pt: 'may' is a hypothesis, tested here in one setting only.",
           ("80 0.4204 0.1984",))),
        ("the sinusoids", "PE(i)·PE(j) against |i - j|", "training with and without PE",
         "the maps with and without PE", "figures/additive_vs_dot.png"),
        explorer="masks"),                 # ALiBi, the lesson's other way to put order into the scores
    Lesson(
        7, "07_tiling_and_kv_cache",
        "Beyond the paper: tiled attention, the KV cache, grouped-query attention",
        ("§3.2.3 (masked decoder self-attention)", "beyond the paper: FlashAttention, the KV cache, GQA"),
        ("choose the causal-mask alignment (top-left or bottom-right) when L ≠ S, and say what a query "
         "with no allowed key returns",
         "derive and run the online softmax: running max, running sum, the rescale e^(m_old - m_new)",
         "show that tiled attention gives the dense numbers for any block size, and measure how its "
         "memory grows against the dense path's",
         "decode with a KV cache (one position at a time, or chunks with bottom-right alignment) and "
         "reproduce full causal attention",
         "compute the size of the cache with grouped-query attention"),
        ("lesson 1: causal and padding masks; lesson 3: multi-head attention",
         "lesson 4: the backward of Eq. (1) (the tiled backward recomputes it block by block)",
         "log-sum-exp and the max-subtraction trick",
         "autoregressive decoding: one position at a time"),
        75, 180,
        "beyond the paper: mask alignment when L ≠ S, fully masked rows, tiling, the cache, grouped-query "
        "attention",
        (Q("predict",
           "Before running the memory cell, predict how the dense and the tiled peaks grow when L = S "
           "doubles from 2048 to 4096. Then run it and compare with 4× and 2×.",
           "The dense path holds (L, S) arrays, which grow 4× per doubling; the tiled path holds "
           "(L, block) tiles, 2×. The cell prints the peaks and their factor per doubling; these are "
           "measured (tracemalloc) and move by a few tenths from run to run, as the blocked dense path's "
           "threads allocate, so compare ranges: from 2048 to 4096 the dense factor (the last of "
           "`per doubling: dense x...`) lies between 2.5 and 4, and the tiled one between 1.7 and 2.3 (the "
           "cell asserts dense > 2.5 and tiled < 2.3). The dense factor is below 4 because not all of its "
           "peak is (L, S): one (L, S) float32 array is 4 · 2048² bytes = 16 MiB at 2048 and 64 MiB at "
           "4096 (the cell prints both), and the rest of the peak (arrays of size L · d, the blocked "
           "path's row blocks) grows about 2×.",
           "1 pt: tiled about 2×; 1 pt: dense between 2× and 4× (2.5 to 4 measured); 1 pt: why below 4: "
           "part of the peak is not (L, S).",
           (),
           ((r"per doubling: dense x[\d.]+, x[\d.]+, x[\d.]+, x([\d.]+);", 2.5, 4),
            (r"; tiled x[\d.]+, x[\d.]+, x[\d.]+, x([\d.]+)", 1.7, 2.3))),
         Q("derive",
           "Show by induction over the blocks that the update m_new = max(m, max of the block), "
           "l ← e^(m - m_new) l + Σ_(j in block) e^(s_j - m_new) keeps l = Σ_(j seen) e^(s_j - m) with m "
           "the largest score seen. Conclude that m + log l is the log-sum-exp of the row.",
           "Start: m = -inf, l = 0, the empty sum. Step: if l = Σ_(seen) e^(s_j - m), then "
           "e^(m - m_new) l = Σ_(seen) e^(s_j - m_new); adding the block's terms gives the sum over "
           "everything seen, shifted by the new maximum. After the last block l = Σ_j e^(s_j - m) with m "
           "the row's maximum, so m + log l = log Σ_j e^(s_j). Every exponent is <= 0 (no overflow) and "
           "the largest term is 1 (l >= 1). The cell prints the same value both ways: "
           "`online log-sum-exp 4.407393724179758`.",
           "1 pt: the invariant and its start; 1 pt: the rescale moves the old terms to the new shift; "
           "1 pt: m + log l = log Σ e^(s_j) at the end.",
           ("online log-sum-exp 4.407393724179758", "direct log-sum-exp 4.407393724179758")),
         Q("break",
           "Break the online softmax: in the 12-score cell, set alpha = 1 (never rescale). Predict which "
           "block makes the result wrong, run it, and explain the error.",
           "Block 1 raises the running maximum from 1.921 to 3.912 (the printed table). Without the "
           "rescale, block 0's sum stays on the old shift, each of its terms e^1.991 ≈ 7.3 times too large "
           "against the new maximum, and the result comes out too large: about 4.99 instead of 4.407. "
           "Block 2 does not raise the maximum, so its alpha was 1 anyway: forgetting the rescale costs "
           "nothing until a block raises the maximum.",
           "1 pt: block 1, which raises the maximum; 1 pt: block 0's terms stay on the old shift, too "
           "large; 1 pt: a too-large log-sum-exp (about 4.99).",
           ("1 3.912 3.912 0.137 1.6125",))),
        ("figures/masks.png", "the running log-sum-exp", "memory against L", "the KV-cache size"),
        explorer="masks"),
    Lesson(
        8, "08_encoder_decoder", "The paper's whole model: an encoder-decoder trained in NumPy",
        ("§3 (the encoder-decoder)", "§3.2.3", "§3.4", "§5.4 (label smoothing)"),
        ("name the parameters of the encoder-decoder layer by layer, with the shared embedding and the "
         "tied output projection (§3.4)",
         "compute the label-smoothing floor of the loss and read a training curve against it",
         "find §3.2.3's three kinds of attention in a trained model's maps, and say what a "
         "cross-attention map does and does not show",
         "run a causality probe: the causal mask makes earlier outputs independent of later target tokens",
         "judge the h = 1 against h = 4 comparison: what two seeds at one budget can and cannot show"),
        ("lessons 5 and 6: the encoder, its training, positional encoding",
         "lesson 7: the causal mask and the KV cache (greedy decoding uses it)",
         "lesson 3: claim 9 and its experiment",
         "entropy and cross-entropy; greedy and beam search"),
        60, 120,
        "the paper's whole model, §3.2.3's three uses trained, decoded with lesson 7's KV cache",
        (Q("predict",
           "Before running the causality probe, predict the largest change of the logits at positions 0-6 "
           "when target token 7 changes, with the causal mask and without it. Then run it.",
           "With the mask exactly 0: no position before 7 may attend to position 7, in any decoder layer "
           "(`is_causal=True : max change of the logits at positions 0..6 when token 7 changes: 0`). "
           "Without it, of order one (3.74 printed): every position sees every target token, so training "
           "on the whole target at once would let the model read the answer.",
           "1 pt: exactly 0 with the mask; 1 pt: of order one without; 1 pt: why it matters for "
           "training on the whole target at once.",
           ("is_causal=True : max change of the logits at positions 0..6 when token 7 changes: 0",
            "is_causal=False: max change of the logits at positions 0..6 when token 7 changes: 3.74")),
         Q("derive",
           "With label smoothing ε = 0.1 over V = 70 characters, the target puts 1 - ε + ε/V on "
           "the right character and ε/V on each other one. Compute its entropy, the least loss any model "
           "can reach, and compare it with the floor the training-loss cell prints.",
           "H = -(1 - ε + ε/V) ln(1 - ε + ε/V) - (V - 1)(ε/V) ln(ε/V). With ε/V = 0.0014286 and "
           "1 - ε + ε/V = 0.9014286: 0.9014 · 0.1038 = 0.0935 and 69 · 0.0014286 · 6.551 = 0.6458, so "
           "H ≈ 0.739. The cell prints `floor (entropy of the smoothed target): 0.7393`; the last 100 "
           "steps average 0.740, just above it.",
           "1 pt: the entropy formula of the smoothed target; 1 pt: the arithmetic, about 0.739; 1 pt: "
           "the loss sits just above the floor and cannot reach 0.",
           ("floor (entropy of the smoothed target): 0.7393",)),
         Q("break",
           "Break the probe: change a *source* character instead of a target token (for example the day's "
           "first digit, '25th' -> '35th', with `encode_text`), keep the target, and rerun both rows. "
           "Predict, run, and explain.",
           "The earlier positions change with the mask as well as without it: the causal mask acts only on "
           "the decoder's self-attention (target to target), while encoder-decoder attention lets every "
           "target position read every source position (§3.2.3's third use). With the mask the change at "
           "positions 0-6 is small (they write the year and the month, which did not change) but not zero.",
           "1 pt: nonzero with the mask; 1 pt: the causal mask is on the target's self-attention only; "
           "1 pt: cross-attention sees the whole source."),
         Q("explain",
           "What does the one-head-against-four table show about claim 9, and what does it not show? "
           "Compare with lesson 3's experiment.",
           "Both h = 4 runs reach 99 % held-out exact match at an earlier evaluation (step 1000) than "
           "either h = 1 run and end higher: at this budget four heads learned faster. It does not show "
           "that one head cannot learn the task (an h = 1 run ends above 99 %), and it rests on two seeds "
           "and one schedule, tuned on h = 4. Lesson 3's task needs two positions per query and there one "
           "head fails in every seed; here each output character needs one source position, so "
           "'averaging inhibits this' has little room.",
           "1 pt: four heads faster at the same budget; 1 pt: not 'one head cannot' (two seeds, a schedule "
           "tuned on h = 4); 1 pt: the contrast with lesson 3's two-position task.",
           ("4 0 171,974 100.00% 1000 0.740", "1 0 171,974 98.70% > 1200 0.744"))),
        ("the loss against its floor", "the three kinds of attention", "exact match during training, "
         "h = 1 against h = 4"),
        explorer="heads",
        project=("The dates task: train one variant with `python -m attention_np train --task dates` (a "
                 "change of heads, layers, label smoothing or schedule), or add a date format, and report "
                 "the held-out exact match, the loss against its floor and the cross-attention maps of one "
                 "date beside the committed h = 4 model.",
                 "1 pt: the change and a prediction, written before the run; 1 pt: held-out exact match "
                 "and the loss against the label-smoothing floor, seeds named; 1 pt: maps read with the "
                 "lesson's caution (a weight on source position j is the encoder's state at j, not the "
                 "character).")),
    Lesson(
        9, "09_real_model_attention", "Real attention of a real trained model: all-MiniLM-L6-v2 in NumPy",
        ("§3.1", "§3.2.2", "footnote 4"),
        ("run a real checkpoint in NumPy and say how its equality with `transformers` is established",
         "score heads by behaviour (previous token, next token, [CLS], same word) and find the "
         "recognizable ones",
         "check that padding gets weight exactly 0 in every head",
         "measure footnote 4 on trained weights and say what the 1/√d_k is for at initialisation "
         "against after training",
         "separate a measurement from a hypothesis when reading attention maps"),
        ("lessons 2 and 5: footnote 4, and its measurement on a trained encoder",
         "lessons 3 and 5: heads, and reading trained maps",
         "lesson 1: padding masks",
         "what BERT is (an encoder trained on text) and its tokens [CLS] and [SEP]"),
        45, 60,
        "a real trained model, read with what lessons 5 and 8 taught",
        (Q("predict",
           "Before running section 5, predict which head has the largest Var(q·k)/d_k: a head that sends "
           "its weight to [CLS], or the previous-token head? And what entropy will that head have?",
           "The previous-token head (layer 0, head 2): to put a weight of 1.00 on one key it needs one "
           "score far above the others, so its scores spread most, and its entropy is near 0. The cell "
           "prints `largest Var/d_k: layer 0, head 2` and `previous-token head (layer 0, head 2): Var/d_k "
           "113, entropy 0.002 nats`.",
           "1 pt: the previous-token head; 1 pt: because a one-hot row needs widely spread scores; 1 pt: "
           "entropy near 0.",
           ("largest Var/d_k: layer 0, head 2",
            "previous-token head (layer 0, head 2): Var/d_k 113, entropy 0.002 nats")),
         Q("derive",
           "Show that uniform weights over n keys have entropy log n and that no row of n weights "
           "has more. The section-5 table prints log S = 2.55 in every layer: with the sentences' lengths "
           "14, 15, 13 and 8 (section 4), show that 2.55 is the mean of log S over the 50 real query tokens.",
           "Uniform: H = -Σ (1/n) log(1/n) = log n. For any row, H = Σ_j w_j log(1/w_j) <= "
           "log Σ_j w_j (1/w_j) = log n (Jensen's inequality, log being concave), with equality only for "
           "uniform weights. Each real query of a sentence of length n may attend to its n real tokens: "
           "(14 ln 14 + 15 ln 15 + 13 ln 13 + 8 ln 8) / 50 = (36.95 + 40.62 + 33.34 + 16.64) / 50 = 2.55.",
           "1 pt: log n for uniform weights; 1 pt: the bound (Jensen or Lagrange); 1 pt: the weighted "
           "mean over the 50 real tokens, 2.55.",
           ("lengths: [14 15 13 8]",)),
         Q("break",
           "Break the scale in one layer: multiply layer 0's `W_q` and `b_q` by √32 (as if its 1/√d_k "
           "were removed: `model.params['layers.0.attn.W_q'] *= np.sqrt(32)`, the same for `b_q`), rerun "
           "the model, and compare each layer-0 head's mean entropy before and after. Which heads change "
           "most, and why does the previous-token head barely change?",
           "Multiplying every score of a head by √32 ≈ 5.7 sharpens its softmax. The heads whose rows "
           "were spread (layer 0's mean entropy is 1.91 nats in the section-5 table, near the random "
           "baseline's 2.15) become much sharper and their "
           "weights move a lot; the previous-token head was already one-hot (entropy 0.002 nats), and "
           "stretching scores that are already far apart leaves it one-hot. The scale matters where the "
           "weights are not yet decided: at initialisation, where footnote 4 applies, and in diffuse "
           "heads; a trained sharp head has moved its scores far past it.",
           "1 pt: the diffuse heads sharpen a lot; 1 pt: the previous-token head stays one-hot; 1 pt: "
           "the scale matters where weights are undecided (initialisation), not for a head already "
           "one-hot."),
         Q("explain",
           "Many heads put most of their weight on [CLS]. What does the lesson measure about them, what "
           "does it call a hypothesis, and what experiment would test it?",
           "Measured: the mean weight each head puts on [CLS] (up to 0.90, in layers 1-4) and on [SEP] "
           "(at most 0.17 in this checkpoint). The reading that such a head 'parks' its weight on a token "
           "whose value changes little, because the softmax must put its weight somewhere, is a "
           "hypothesis (Clark et al. 2019 for [SEP] in BERT-base). Testing it would take, for example, "
           "the size of what those heads add to the residual stream, or an ablation of them.",
           "1 pt: what is measured (mean weight on [CLS]); 1 pt: parking is a hypothesis; 1 pt: a test "
           "(the size of the heads' contribution, or an ablation).",
           ("[CLS] best: layer 4, head 5, mean weight 0.90",))),
        ("docs/img/minilm_heads.png", "every head of every layer", "Var(q·k)/d_k per head"),
        explorer="heads"),
)

#: the two-week unit: six 90-minute sessions; lessons 7-9 follow as its extension
SESSIONS = (
    Session((1,), (("questions 1-2 in pairs, then start `softmax`", 30),),
            "exercise 01 (`softmax`, `padding_mask`, `attention`) and lesson 1's questions 3-4"),
    Session((2,), (("question 1 (footnote 4's variance) at the board", 15),),
            "lesson 2's questions 2-4"),
    Session((3,), (("start `split_heads`, then question 3", 20),),
               "exercise 03 (`split_heads`, `merge_heads`, `mha_forward`) and lesson 3's questions"),
    Session((4,), (("question 2 (the softmax VJP) on paper", 20),),
            "exercise 04's `softmax_backward` and `attention_backward`, and lesson 4's questions",
            carry=(("exercise 04's `mha_backward` (lesson 4's step-by-step derivation of it)", 90, 6),)),
    Session((5,), (("plan the project: choose one change and write the prediction", 30),),
            "the project of lesson 5 and its questions"),
    Session((6,), (("questions 1-2, then a review of the unit", 20),),
            "exercise 06 (`sinusoidal`), lesson 6's questions 3-4 and its appendix (claim 6, read at home)"),
)
EXTENSION = (7, 8, 9)


#: points of each written question of an exercise notebook (graded by hand with its rubric)
QUESTION_POINTS = 3
#: the outputs the autograder scores one by one (a case's parts), where there is more than one
GRADED_OUTPUTS = {
    "attention_backward": ("dq", "dk", "dv"),
    "mha_backward": ("dquery", "dkey", "dvalue",
                     *(f"grads['{n}']" for n in ("W_k", "W_o", "W_q", "W_v", "b_k", "b_o", "b_q", "b_v"))),
    "decode_step": ("out", "k_cache", "v_cache"),
}


def exercise_points(name: str) -> int:
    """What an exercise asks, in points: one per clause of its contract (the stub's docstring,
    :data:`~attention_np.exercises.notebooks.CLAUSES`) and one per output graded on its own
    (:data:`GRADED_OUTPUTS`). The autograder spreads them evenly over the exercise's cases."""
    return len(CLAUSES[name][1]) + len(GRADED_OUTPUTS.get(name, ("output",)))


def _notebook_part(stem: str) -> str:
    in_unit = {lesson(n).stem for s in SESSIONS for n in s.lessons}
    return "two-week unit" if set(NOTEBOOKS[stem][1]) & in_unit else "extension"


def graded_parts() -> dict:
    """``{"two-week unit": {...}, "extension": {...}}``: each part's exercises (in course order),
    their points, and the exercise notebooks' written questions and their points."""
    out = {}
    for stem, (_, _, exercises) in NOTEBOOKS.items():
        part = out.setdefault(_notebook_part(stem), {"exercises": [], "points": 0, "questions": 0})
        part["exercises"] += list(exercises)
        part["points"] += sum(exercise_points(n) for n in exercises)
        part["questions"] += len(QUESTIONS.get(stem, ()))
    for part in out.values():
        part["question_points"] = QUESTION_POINTS * part["questions"]
    return out


def points_table(counts: dict | None = None) -> str:
    """Each exercise's part of the course, what it asks and its points; with ``counts`` (name ->
    (public cases, hidden cases)) the cases they are spread over."""
    head = "| Exercise | Notebook | Part | Contract clauses | Outputs graded | Points |"
    rows = [head + (" Public cases | Hidden cases |" if counts else ""),
            "|---|---|---|---|---|---|" + ("---|---|" if counts else "")]
    for stem, (_, _, exercises) in NOTEBOOKS.items():
        for name in exercises:
            row = (f"| `{name}` | `{stem}` | {_notebook_part(stem)} | {len(CLAUSES[name][1])} | "
                   f"{len(GRADED_OUTPUTS.get(name, ('output',)))} | {exercise_points(name)} |")
            rows.append(row + (f" {counts[name][0]} | {counts[name][1]} |" if counts else ""))
    return "\n".join(rows)


def _extension_lessons() -> str:
    """The lessons whose exercise notebooks are the extension's, e.g. "lesson 7"."""
    numbers = sorted(lesson(les).number for stem, (_, lessons, _) in NOTEBOOKS.items()
                     if _notebook_part(stem) == "extension" for les in lessons)
    return ("lesson " if len(numbers) == 1 else "lessons ") + ", ".join(map(str, numbers))


def points_sentences() -> list:
    """The totals, one sentence per part and one for both."""
    parts = graded_parts()
    unit, ext = parts["two-week unit"], parts["extension"]
    total = unit["points"] + ext["points"]
    return [f"The two-week unit: {len(unit['exercises'])} functions, {unit['points']} points, and "
            f"{unit['questions']} written questions, {unit['question_points']} points.",
            f"The extension ({_extension_lessons()}): {len(ext['exercises'])} functions, "
            f"{ext['points']} points, and "
            f"{ext['questions']} written questions, {ext['question_points']} points.",
            f"The autograder grades all {len(unit['exercises']) + len(ext['exercises'])} functions: "
            f"{total} points ({unit['points']} + {ext['points']}); the "
            f"{unit['questions'] + ext['questions']} written questions "
            f"({unit['question_points'] + ext['question_points']} points, {QUESTION_POINTS} each) "
            "are graded by hand."]


def points_section() -> str:
    """docs/instructors.md's points: the table, the totals and the cases they are spread over
    (drawn by :mod:`attention_np.exercises.generate`; imported here, at build time only)."""
    from attention_np.exercises import EXERCISES
    counts = {n: (len(e.cases()), len(e.hidden_cases())) for n, e in EXERCISES.items()}
    public, hidden = sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())
    return "\n".join([
        "Each exercise is worth one point per clause of its contract (the stub's docstring) and one "
        "per output graded on its own; the autograder spreads an exercise's points evenly over its "
        "public and hidden cases, and a case whose outputs are partly right earns that share of "
        "its points. Generated from `attention_np/exercises/syllabus.py` (`exercise_points`).", "",
        points_table(counts), "", *(f"- {t}" for t in points_sentences()),
        f"- {public} public and {hidden} hidden cases: a submission that loops in every case would "
        f"take about {public + hidden} × 5 s + {len(EXERCISES)} × 30 s without the time budget."])


def lesson(number_or_stem) -> Lesson:
    """The lesson with this number (1-9) or stem."""
    for les in LESSONS:
        if number_or_stem in (les.number, les.stem):
            return les
    raise ValueError(f"no lesson {number_or_stem!r}; expected 1-{len(LESSONS)} or one of "
                     f"{[les.stem for les in LESSONS]}")


# ---------------------------------------------------------------------------------------------
# generated text


def _exercise_cell(les: Lesson, link: bool = False) -> str:
    """The exercise of a lesson; ``link``: a link relative to the repository root (README)."""
    if les.exercise_notebook:
        names = ", ".join(f"`{n}`" for n in les.exercises)
        path = f"exercises/{les.exercise_notebook}.ipynb"
        return f"[`{path}`]({path}) ({names})" if link else f"`{path}` ({names})"
    if les.project:
        return "project (rubric in the solutions kit)"
    return "questions"


def _session_minutes(session: Session) -> int:
    return sum(lesson(n).minutes for n in session.lessons) + sum(m for _, m in session.in_class)


def _carried_in(number: int) -> list:
    """(what, minutes, from session) of the homework carried to session ``number`` (1-based)."""
    return [(what, m, i) for i, s in enumerate(SESSIONS, 1) for what, m, due in s.carry if due == number]


def session_homework(number: int) -> int:
    """Minutes of homework session ``number`` leaves: its lessons' homework, less what it carries to a
    later session, plus what an earlier one carried to it."""
    session = SESSIONS[number - 1]
    return (sum(lesson(n).homework_minutes for n in session.lessons) - sum(m for _, m, _ in session.carry)
            + sum(m for _, m, _ in _carried_in(number)))


def _check_plan() -> None:
    for i, session in enumerate(SESSIONS, 1):
        if _session_minutes(session) != SESSION_MINUTES:
            raise ValueError(f"session {i} takes {_session_minutes(session)} min, expected {SESSION_MINUTES}")
        if any(not i < due <= len(SESSIONS) for _, _, due in session.carry):
            raise ValueError(f"session {i} carries homework to {session.carry}: expected a later session")
        if session_homework(i) > MAX_HOMEWORK_MINUTES:
            raise ValueError(f"session {i} leaves {session_homework(i)} min of homework, more than "
                             f"{MAX_HOMEWORK_MINUTES}: carry part of it to a later session")


def two_week_plan() -> str:
    """The two-week unit: six 90-minute sessions plus homework, then the extension."""
    _check_plan()
    rows = ["| Session | Lesson | In class (90 min) | Homework | Questions |", "|---|---|---|---|---|"]
    for i, session in enumerate(SESSIONS, 1):
        week = 1 if i <= 3 else 2
        lessons = [lesson(n) for n in session.lessons]
        names = ", ".join(f"`notebooks/{les.stem}`" for les in lessons)
        parts = [f"lesson {les.number} ({les.minutes} min)" for les in lessons]
        parts += [f"{activity} ({m} min)" for activity, m in session.in_class]
        homework = "; ".join([session.homework]
                             + [f"{what}, carried from session {j} (about {m} min of it)"
                                for what, m, j in _carried_in(i)]
                             + [f"{what} is due at session {due}" for what, _, due in session.carry])
        nq = sum(len(les.questions) for les in lessons)
        rows.append(f"| week {week}, {i} | {names} | {'; '.join(parts)} | {homework} "
                    f"(about {session_homework(i)} min) | {nq} |")
    total_home = sum(session_homework(i) for i in range(1, len(SESSIONS) + 1))
    ext = [lesson(n) for n in EXTENSION]
    ext_names = ", ".join(f"`notebooks/{les.stem}`" for les in ext)
    return "\n".join(rows + [
        "",
        f"In class: {len(SESSIONS)} sessions × {SESSION_MINUTES} min = {len(SESSIONS) * SESSION_MINUTES} min "
        f"(each session's lesson minutes plus its activity add up to {SESSION_MINUTES}); homework about "
        f"{total_home} min ({total_home / 60:.0f} h) over the two weeks.",
        f"Extension (a third week, or a project for students who finish early): {ext_names}, "
        f"{sum(les.minutes for les in ext)} min in class and about "
        f"{sum(les.homework_minutes for les in ext)} min of homework.",
        "Times are planning estimates for a student who has the prerequisites, not measurements."])


def full_syllabus() -> str:
    """Every lesson, in course order: paper, time, exercise, questions, figures, explorer view."""
    rows = ["| # | Lesson | Paper | In class | Homework | Exercise | Questions | Figures | Explorer |",
            "|---|---|---|---|---|---|---|---|---|"]
    for les in LESSONS:
        figs = ", ".join(f"`{f}`" if f.endswith(".png") else f.replace("|", "\\|") for f in les.figures)
        figs = figs or "none"
        view = f"`#{les.explorer}`" if les.explorer else "none"
        rows.append(f"| {les.number} | `notebooks/{les.stem}` | {'; '.join(les.paper)} | {les.minutes} min "
                    f"| {les.homework_minutes} min | {_exercise_cell(les)} | {len(les.questions)} "
                    f"| {figs} | {view} |")
    return "\n".join(rows)


def objectives_section() -> str:
    """Each lesson's objectives and prerequisites (what the lesson's header cell says)."""
    out = []
    for les in LESSONS:
        out += [f"**Lesson {les.number}: {les.title}.** A student can "
                + "; ".join(les.objectives) + ". *Assumes:* " + "; ".join(les.prerequisites) + "."]
        if les.project:
            out += ["", f"*Project.* {les.project[0]}"]
        out += [""]
    return "\n".join(out).rstrip()


def course_order_table() -> str:
    """docs/teaching.md's course order."""
    rows = ["| step | lesson | why here | exercise |", "| ---: | --- | --- | --- |"]
    for les in LESSONS:
        rows.append(f"| {les.number} | `{les.stem}` | {les.why} | {_exercise_cell(les)} |")
    return "\n".join(rows)


def readme_lessons() -> str:
    """README.md's list of the lessons, with the exercise of each."""
    rows = ["| lesson | exercise | in the two-week unit |", "| --- | --- | --- |"]
    in_unit = {n for s in SESSIONS for n in s.lessons}
    for les in LESSONS:
        when = f"session {_session_of(les.number)}" if les.number in in_unit else "extension"
        rows.append(f"| [{les.number:02d} {les.title}](notebooks/{les.stem}.ipynb) | "
                    f"{_exercise_cell(les, link=True)} | {when} |")
    return "\n".join(rows)


def _session_of(number: int) -> int:
    return next(i for i, s in enumerate(SESSIONS, 1) if number in s.lessons)


def kit_table(ref=None) -> str:
    """The student kit's table: each lesson (read it first) and the exercise notebook that goes with
    it. ``ref(stem)`` writes a lesson's reference (a link to the course site, or its name)."""
    ref = ref or (lambda stem: f"`{stem}`")
    rows = ["| Lesson (read it first) | Exercise notebook | Functions |", "|---|---|---|"]
    for les in LESSONS:
        lesson = f"{les.number:02d} {les.title}: {ref(les.stem)}"
        if les.exercise_notebook:
            names = ", ".join(f"`{n}`" for n in les.exercises)
            rows.append(f"| {lesson} | `{les.exercise_notebook}.ipynb` | {names} |")
        else:
            kind = "a project" if les.project else "questions"
            rows.append(f"| {lesson} | none ({kind}) | |")
    return "\n".join(rows)


def header_markdown(les: Lesson) -> str:
    """The generated cell after a lesson's title: objectives, prerequisites, paper, explorer, time."""
    lines = ["<!-- generated from attention_np/exercises/syllabus.py: edit it there, then run "
             "python -m attention_np.exercises.syllabus --write -->",
             f"**What you will be able to do after lesson {les.number}:**", ""]
    lines += [f"- {o}" for o in les.objectives]
    lines += ["", "**What it assumes:** " + "; ".join(les.prerequisites) + ".", ""]
    links = f"**Paper:** [{PAPER_TITLE}]({PAPER}), {', '.join(les.paper)}."
    if les.explorer:
        links += f" **Explorer:** [{EXPLORER_VIEWS[les.explorer]}]({EXPLORER}#{les.explorer})."
    links += (f" **Time:** about {les.minutes} min in class and {les.homework_minutes} min of homework; "
              f"{len(les.questions)} questions at the end.")
    return "\n".join(lines + [links])


def questions_markdown(les: Lesson) -> str:
    """The generated last cell of a lesson: its questions (answers are in the solutions kit only)."""
    lines = ["<!-- generated from attention_np/exercises/syllabus.py: edit it there, then run "
             "python -m attention_np.exercises.syllabus --write -->",
             f"## Questions on lesson {les.number}", "",
             "Answer each in a few sentences; where a question says run, change a copy of the cell it "
             "names. Your instructor has the answers and rubrics."]
    for i, q in enumerate(les.questions, 1):
        lines += ["", f"{i}. **{KINDS[q.kind]}** {q.text}"]
    if les.project:
        lines += ["", f"**Project.** {les.project[0]}"]
    return "\n".join(lines)


def lesson_answers_markdown() -> str:
    """The answers and rubrics of every lesson's questions (the solutions kit's lesson_answers.md)."""
    lines = ["# Lesson questions: answers and rubrics", "",
             "The questions at the end of each lesson notebook (generated from "
             "`attention_np/exercises/syllabus.py`). Each is worth 3 points; the rubric says what earns "
             "each point. A predict-then-run answer quotes what the lesson's own cell prints.", ""]
    for les in LESSONS:
        lines += [f"## Lesson {les.number}: {les.title}", ""]
        for i, q in enumerate(les.questions, 1):
            lines += [f"**Question {i} ({KINDS[q.kind][:-1].lower()}).** {q.text}", "",
                      f"*Answer.* {q.answer}", "", f"*Rubric.* {q.rubric}", ""]
        if les.project:
            lines += [f"**Project.** {les.project[0]}", "", rubric_markdown(les.stem), ""]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# writing the documents and the notebooks

#: file -> {section name: function}; a section is between <!-- syllabus:NAME --> and <!-- /syllabus -->
SECTIONS = {
    "docs/teaching.md": {"course-order": course_order_table},
    "docs/instructors.md": {"two-week-plan": two_week_plan, "full-syllabus": full_syllabus,
                            "objectives": objectives_section, "points": points_section},
    "README.md": {"readme-lessons": readme_lessons},
}
HEADER_TAG, QUESTIONS_TAG = "syllabus-header", "syllabus-questions"


def replace_sections(text: str, sections: dict, name: str = "document") -> str:
    """``text`` with each marked section replaced by its generated content."""
    for key, make in sections.items():
        pattern = re.compile(rf"(<!-- syllabus:{re.escape(key)} -->\n).*?(\n<!-- /syllabus -->)", re.S)
        if not pattern.search(text):
            raise ValueError(f"{name} has no section <!-- syllabus:{key} --> ... <!-- /syllabus -->")
        content = make()
        text = pattern.sub(lambda m, content=content: m.group(1) + content + m.group(2), text, count=1)
    return text


def _md_cell(cell_id: str, tag: str, text: str) -> dict:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {"tags": [tag]},
            "source": text.splitlines(keepends=True)}


def update_notebook(nb: dict, les: Lesson) -> dict:
    """``nb`` with its generated header (after the title cell) and questions (last) cells; idempotent."""
    generated = {HEADER_TAG, QUESTIONS_TAG}
    cells = [c for c in nb["cells"] if not generated & set(c.get("metadata", {}).get("tags", []))]
    cells.insert(1, _md_cell(HEADER_TAG, HEADER_TAG, header_markdown(les)))
    cells.append(_md_cell(QUESTIONS_TAG, QUESTIONS_TAG, questions_markdown(les)))
    return {**nb, "cells": cells}


def _notebook_text(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def expected_files(root) -> dict:
    """path -> the text it should have, for every file the syllabus generates into."""
    root = pathlib.Path(root)
    out = {}
    for rel, sections in SECTIONS.items():
        out[root / rel] = replace_sections((root / rel).read_text(encoding="utf-8"), sections, rel)
    for les in LESSONS:
        path = root / "notebooks" / f"{les.stem}.ipynb"
        out[path] = _notebook_text(update_notebook(json.loads(path.read_text(encoding="utf-8")), les))
    return out


def stale_files(root) -> list:
    """The generated-into files whose text differs from what the syllabus generates."""
    return [p for p, text in expected_files(root).items() if p.read_text(encoding="utf-8") != text]


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    usage = "usage: python -m attention_np.exercises.syllabus (--write | --check) [ROOT]"
    if not argv or argv[0] not in ("--write", "--check") or len(argv) > 2:
        print(usage, file=sys.stderr)
        return 2
    root = pathlib.Path(argv[1] if len(argv) == 2 else ".")
    missing = [rel for rel in [*SECTIONS, *(f"notebooks/{les.stem}.ipynb" for les in LESSONS)]
               if not (root / rel).is_file()]
    if missing:
        print(f"error: ROOT {str(root)!r} is not the repository root (no {missing[0]}); run from the "
              "repository root or pass it", file=sys.stderr)
        return 2
    try:
        expected = expected_files(root)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    stale = [p for p, text in expected.items() if p.read_text(encoding="utf-8") != text]
    if argv[0] == "--check":
        for p in stale:
            print(f"differs from the syllabus: {p}")
        return 1 if stale else 0
    for p in stale:
        p.write_text(expected[p], encoding="utf-8")
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
