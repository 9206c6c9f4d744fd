"""Lesson 7: ``notebooks/07_tiling_and_kv_cache.ipynb`` (the records of :mod:`.records`)."""

from attention_np.exercises.syllabus_data.records import Lesson, Question

LESSON = Lesson(
    number=7,
    stem="07_tiling_and_kv_cache",
    title="Beyond the paper: tiled attention, the KV cache, grouped-query attention",
    paper=("§3.2.3 (masked decoder self-attention)", "beyond the paper: FlashAttention, the KV cache, GQA"),
    objectives=(
        "choose the causal-mask alignment (top-left or bottom-right) when L ≠ S, and say what a query with "
        "no allowed key returns",
        "derive and run the online softmax: running max, running sum, the rescale e^(m_old - m_new)",
        "show that tiled attention gives the dense numbers for any block size, and measure how its memory "
        "grows against the dense path's",
        "decode with a KV cache (one position at a time, or chunks with bottom-right alignment) and "
        "reproduce full causal attention",
        "compute the size of the cache with grouped-query attention",
    ),
    prerequisites=(
        "lesson 1: causal and padding masks; lesson 3: multi-head attention",
        "lesson 4: the backward of Eq. (1) (the tiled backward recomputes it block by block)",
        "log-sum-exp and the max-subtraction trick",
        "autoregressive decoding: one position at a time",
    ),
    minutes=75,
    homework_minutes=180,
    why="beyond the paper: mask alignment when L ≠ S, fully masked rows, tiling, the cache, grouped-query "
        "attention",
    questions=(
        Question(
            kind="predict",
            text="Before running the memory cell, predict how the dense and the tiled peaks grow when L = "
                 "S doubles from 2048 to 4096. Then run it and compare with 4× and 2×.",
            answer="The dense path holds (L, S) arrays, which grow 4× per doubling; the tiled path holds "
                   "(L, block) tiles, 2×. The cell prints the peaks and their factor per doubling; these "
                   "are measured (tracemalloc) and move by a few tenths from run to run, as the blocked "
                   "dense path's threads allocate, so compare ranges: from 2048 to 4096 the dense factor "
                   "(the last of `per doubling: dense x...`) lies between 2.5 and 4, and the tiled one "
                   "between 1.7 and 2.3 (the cell asserts dense > 2.5 and tiled < 2.3). The dense factor "
                   "is below 4 because not all of its peak is (L, S): one (L, S) float32 array is 4 · "
                   "2048² bytes = 16 MiB at 2048 and 64 MiB at 4096 (the cell prints both), and the rest "
                   "of the peak (arrays of size L · d, the blocked path's row blocks) grows about 2×.",
            rubric="1 pt: tiled about 2×; 1 pt: dense between 2× and 4× (2.5 to 4 measured); 1 pt: why "
                   "below 4: part of the peak is not (L, S).",
            ranges=(
                (r"per doubling: dense x[\d.]+, x[\d.]+, x[\d.]+, x([\d.]+);", 2.5, 4),
                (r"; tiled x[\d.]+, x[\d.]+, x[\d.]+, x([\d.]+)", 1.7, 2.3),
            ),
        ),
        Question(
            kind="derive",
            text="Show by induction over the blocks that the update m_new = max(m, max of the block), l ← "
                 "e^(m - m_new) l + Σ_(j in block) e^(s_j - m_new) keeps l = Σ_(j seen) e^(s_j - m) with m "
                 "the largest score seen. Conclude that m + log l is the log-sum-exp of the row.",
            answer="Start: m = -inf, l = 0, the empty sum. Step: if l = Σ_(seen) e^(s_j - m), then e^(m - "
                   "m_new) l = Σ_(seen) e^(s_j - m_new); adding the block's terms gives the sum over "
                   "everything seen, shifted by the new maximum. After the last block l = Σ_j e^(s_j - m) "
                   "with m the row's maximum, so m + log l = log Σ_j e^(s_j). Every exponent is <= 0 (no "
                   "overflow) and the largest term is 1 (l >= 1). The cell prints the same value both "
                   "ways: `online log-sum-exp 4.407393724179758`.",
            rubric="1 pt: the invariant and its start; 1 pt: the rescale moves the old terms to the new "
                   "shift; 1 pt: m + log l = log Σ e^(s_j) at the end.",
            quotes=("online log-sum-exp 4.407393724179758", "direct log-sum-exp 4.407393724179758"),
        ),
        Question(
            kind="break",
            text="Break the online softmax: in the 12-score cell, set alpha = 1 (never rescale). Predict "
                 "which block makes the result wrong, run it, and explain the error.",
            answer="Block 1 raises the running maximum from 1.921 to 3.912 (the printed table). Without "
                   "the rescale, block 0's sum stays on the old shift, each of its terms e^1.991 ≈ 7.3 "
                   "times too large against the new maximum, and the result comes out too large: about "
                   "4.99 instead of 4.407. Block 2 does not raise the maximum, so its alpha was 1 anyway: "
                   "forgetting the rescale costs nothing until a block raises the maximum.",
            rubric="1 pt: block 1, which raises the maximum; 1 pt: block 0's terms stay on the old shift, "
                   "too large; 1 pt: a too-large log-sum-exp (about 4.99).",
            quotes=("1 3.912 3.912 0.137 1.6125",),
        ),
    ),
    figures=("figures/masks.png", "the running log-sum-exp", "memory against L", "the KV-cache size"),
    explorer="masks",
)
