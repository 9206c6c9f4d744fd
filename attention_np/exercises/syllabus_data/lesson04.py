"""Lesson 4: ``notebooks/04_backward_passes.ipynb`` (the records of :mod:`.records`)."""

from attention_np.exercises.syllabus_data.records import Lesson, Question

LESSON = Lesson(
    number=4,
    stem="04_backward_passes",
    title="Backward passes, derived and checked live",
    paper=("Eq. (1) and §3.2.2, differentiated (the paper gives no backward)",),
    objectives=(
        "derive the softmax Jacobian p_i(δ_ij - p_j) and its vector-Jacobian product p ⊙ (dp - <dp, p>) "
        "without building the Jacobian",
        "write the backward of Eq. (1) by undoing the forward lines last to first, scale and mask included",
        "check a backward against central finite differences and PyTorch autograd, and say why the "
        "upstream gradient must be random",
        "derive the linear layer's backward (dx = dy Wᵀ; dW and db summed over every batch and position)",
        "derive the multi-head backward step by step, last step first, and check each stage: split and "
        "merge as each other's backward, the three input gradients of self-attention added, why dL/db_k = 0",
    ),
    prerequisites=(
        "lesson 1: Eq. (1) and masks; lesson 3: the five steps of multi-head attention",
        "lesson 2: the gradient through the softmax, used there as a measurement",
        "the chain rule for vectors (Jacobians, vector-Jacobian products)",
        "central finite differences, (f(x + h) - f(x - h)) / 2h",
        "PyTorch basics (tensors, requires_grad, .backward()) to read the comparison cells",
    ),
    minutes=70,
    homework_minutes=240,
    why="the gradients training needs, checked, just before the first training",
    questions=(
        Question(
            kind="predict",
            text="Before running the finite-difference cell of Eq. (1), predict the gradient of the fully "
                 "masked query (query 2 of sequence 1). Then run it.",
            answer="Zero. The query may attend to no key, so its weights and its output are 0 whatever q "
                   "is; nothing depends on that q, so dq is exactly 0, not NaN (no 0/0 is formed). The "
                   "cell prints `gradient of the fully masked query: [0. 0. 0. 0. 0.]`.",
            rubric="1 pt: zero; 1 pt: the output of an empty row does not depend on q; 1 pt: exactly 0, "
                   "never NaN.",
            quotes=("gradient of the fully masked query: [0. 0. 0. 0. 0.]",),
        ),
        Question(
            kind="derive",
            text="From p_i = exp(x_i) / Σ_k exp(x_k), derive ∂p_i/∂x_j = p_i (δ_ij - p_j) with the "
                 "quotient rule, then the vector-Jacobian product dx_j = p_j (dp_j - Σ_i dp_i p_i). Why is "
                 "the n × n Jacobian never needed?",
            answer="∂p_i/∂x_j = (δ_ij e^{x_i} Σ - e^{x_i} e^{x_j}) / Σ² = p_i δ_ij - p_i p_j. Then dx_j = "
                   "Σ_i dp_i p_i (δ_ij - p_j) = p_j dp_j - p_j Σ_i dp_i p_i. The sum Σ_i dp_i p_i is one "
                   "number per row, so dx costs one row sum and two elementwise operations, O(n) per row "
                   "instead of the n² entries of the Jacobian. The softmax cell checks the formula against "
                   "J^T dp and against finite differences.",
            rubric="1 pt: the quotient rule gives p_i (δ_ij - p_j); 1 pt: the sum over i collapses to p_j "
                   "(dp_j - <dp, p>); 1 pt: one row sum, no n × n matrix.",
        ),
        Question(
            kind="break",
            text="Break the check: in the softmax cell, use `np.ones(5)` as the upstream gradient and a "
                 "'backward' that returns zeros (`lambda dp, p: np.zeros_like(p)`). Compare it with the "
                 "formula's answer. What does the comparison say, and why does the lesson use random "
                 "upstream gradients everywhere?",
            answer="Both give zeros: the weights sum to 1 whatever x is, so the loss Σ_i p_i is constant "
                   "and its gradient is 0 (the cell prints `upstream of ones ->  [-0. -0. -0. -0. -0.]`). "
                   "A check with ones therefore passes a backward that returns zeros. With a random dp the "
                   "true dx is not zero (the cell's `VJP formula` row) and the zero backward fails. A "
                   "random upstream gradient has no structure for a mistake to hide in.",
            rubric="1 pt: both give zeros; 1 pt: the weights' sum is constant, so its gradient is 0; 1 pt: "
                   "a random upstream gradient exposes the broken backward.",
            quotes=("upstream of ones -> [-0. -0. -0. -0. -0.]",),
        ),
    ),
    figures=(),
    explorer="eq1",                         # the gradient norms through the softmax, by d_k
)
