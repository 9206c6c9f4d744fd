"""Lesson 3: ``notebooks/03_multi_head_attention.ipynb`` (the records of :mod:`.records`)."""

from attention_np.exercises.syllabus_data.records import Lesson, Question

LESSON = Lesson(
    number=3,
    stem="03_multi_head_attention",
    title="Multi-head attention",
    paper=("§3.2.2", "Table 3 rows (A)"),
    objectives=(
        "follow the shapes through the five steps of MultiHead (project, split, attend, concat, project)",
        "split and merge heads with a reshape and a transpose, and say why a plain reshape is wrong",
        "check one head against head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)",
        "count the parameters and matrix-product FLOPs of h heads of d_model/h against one head of d_model "
        "(claim 8), and say what a FLOP count does not see",
        "explain the claim-9 experiment: why one head cannot serve two positions per query, and what the "
        "control task rules out",
    ),
    prerequisites=(
        "lesson 1: Eq. (1), masks, learned projections",
        "lesson 2: what the 1/√d_k keeps the softmax from",
        "NumPy reshape and transpose (row-major order)",
        "the cost of a matrix product (m × n)(n × p): 2mnp FLOPs",
        "least squares, and the fraction of variance a fit leaves unexplained",
    ),
    minutes=70,
    homework_minutes=120,
    why="§3.2.2: heads, cost, and claim 9 measured",
    questions=(
        Question(
            kind="predict",
            text="Before running the FLOP-count cell (n = 128, d_model = 512), predict for h = 8, d_k = 64 "
                 "and for h = 1, d_k = 512 the FLOPs of q kᵀ and the number of attention weights stored. "
                 "Then run it.",
            answer="q kᵀ costs 2 · h · n² · d_k = 2 · n² · d_model whatever h is: 2 · 128² · 512 = "
                   "16,777,216 for both. The weights number h · n²: 131,072 for eight heads, 16,384 for "
                   "one. The cell prints `q k^T      16,777,216      16,777,216` and `weights stored       "
                   "  131,072          16,384`.",
            rubric="1 pt: equal score FLOPs, 2 n² d_model; 1 pt: the number 16,777,216; 1 pt: the weights "
                   "grow with h (8 n² against n²).",
            quotes=("q k^T 16,777,216 16,777,216", "weights stored 131,072 16,384"),
        ),
        Question(
            kind="derive",
            text="With d_k = d_v = d_model/h, count the FLOPs of the four projections and of the two "
                 "products of Eq. (1) for n positions. Show that h drops out, and check your total against "
                 "the cell's for n = 128, d_model = 512.",
            answer="Each projection is (n × d_model)(d_model × d_model): 2 n d_model², four of them 8 n "
                   "d_model². q kᵀ costs 2 n² d_k per head, 2 n² h d_k = 2 n² d_model for all heads, and "
                   "the weighted sum of the values the same: 4 n² d_model. The total 8 n d_model² + 4 n² "
                   "d_model has no h. For n = 128, d_model = 512: 268,435,456 + 33,554,432 = 301,989,888, "
                   "the cell's `total     301,989,888     301,989,888`.",
            rubric="1 pt: projections 8 n d_model²; 1 pt: the products 4 n² d_model, h cancelling because "
                   "h d_k = d_model; 1 pt: the total matches the cell.",
            quotes=("total 301,989,888 301,989,888",),
        ),
        Question(
            kind="break",
            text="Cut the heads wrongly: in the split/concat cell, replace `paper.split_heads(cols, 2)` by "
                 "`cols.reshape(2, 3, 4)`. Run it, say what 'head 0' now holds, and why the right shape "
                 "does not make it a head.",
            answer="reshape keeps the row-major order of the 24 entries: head 0 becomes [[0 1 2 3] [4 5 6 "
                   "7] [0 1 2 3]] and head 1 [[4 5 6 7] [0 1 2 3] [4 5 6 7]]. The second row of head 0 "
                   "holds columns 4-7 of position 0: positions and feature blocks are mixed, so the 'head' "
                   "attends over pieces of different positions. Head i must be the columns [i d, (i+1) d) "
                   "of every position: reshape to (L, h, d), which keeps positions apart, then swap the "
                   "first two axes (split_heads' head 0 is [0 1 2 3] in every row).",
            rubric="1 pt: what the wrong head holds; 1 pt: reshape keeps the memory order and mixes "
                   "positions into a head; 1 pt: reshape to (L, h, d), then transpose.",
        ),
        Question(
            kind="explain",
            text="In the claim-9 study one head leaves 0.4377 of the target's variance on the two-position "
                 "task and 0.0000 on the control, at the same width and parameter count as two heads. What "
                 "does each comparison rule out, and what does the lesson not claim?",
            answer="h = 1, 2 and 4 have the same total width, parameters and FLOPs, so the gap is not "
                   "capacity: one head gives each query one distribution over positions, and splitting it "
                   "between two neighbours mixes their contents (the averaging of §3.2.2). The control, "
                   "where one position suffices, shows one head is not simply worse: it solves that task. "
                   "The lesson does not claim the size of the effect in a translation model (the task is a "
                   "toy built to need two positions), and why the trained head gets below the bound of one "
                   "half is a hypothesis, not measured.",
            rubric="1 pt: equal width and parameters, so not capacity; 1 pt: the control shows one head is "
                   "enough for one position; 1 pt: a toy, not the size in translation; below-half a "
                   "hypothesis.",
            quotes=("two positions 1 16 0.4377 [0.4343, 0.4422]",),
        ),
    ),
    figures=("figures/multihead_heads.png",),
    explorer="heads",
)
