"""Lesson 8: ``notebooks/08_encoder_decoder.ipynb`` (the records of :mod:`.records`)."""

from attention_np.exercises.syllabus_data.records import Lesson, Question

LESSON = Lesson(
    number=8,
    stem="08_encoder_decoder",
    title="The paper's whole model: an encoder-decoder trained in NumPy",
    paper=("§3 (the encoder-decoder)", "§3.2.3", "§3.4", "§5.4 (label smoothing)"),
    objectives=(
        "name the parameters of the encoder-decoder layer by layer, with the shared embedding and the tied "
        "output projection (§3.4)",
        "compute the label-smoothing floor of the loss and read a training curve against it",
        "find §3.2.3's three kinds of attention in a trained model's maps, and say what a cross-attention "
        "map does and does not show",
        "run a causality probe: the causal mask makes earlier outputs independent of later target tokens",
        "judge the h = 1 against h = 4 comparison: what two seeds at one budget can and cannot show",
    ),
    prerequisites=(
        "lessons 5 and 6: the encoder, its training, positional encoding",
        "lesson 7: the causal mask and the KV cache (greedy decoding uses it)",
        "lesson 3: claim 9 and its experiment",
        "entropy and cross-entropy; greedy and beam search",
    ),
    minutes=60,
    homework_minutes=120,
    why="the paper's whole model, §3.2.3's three uses trained, decoded with lesson 7's KV cache",
    questions=(
        Question(
            kind="predict",
            text="Before running the causality probe, predict the largest change of the logits at "
                 "positions 0-6 when target token 7 changes, with the causal mask and without it. Then run "
                 "it.",
            answer="With the mask exactly 0: no position before 7 may attend to position 7, in any decoder "
                   "layer (`is_causal=True : max change of the logits at positions 0..6 when token 7 "
                   "changes: 0`). Without it, of order one (3.74 printed): every position sees every "
                   "target token, so training on the whole target at once would let the model read the "
                   "answer.",
            rubric="1 pt: exactly 0 with the mask; 1 pt: of order one without; 1 pt: why it matters for "
                   "training on the whole target at once.",
            quotes=(
                "is_causal=True : max change of the logits at positions 0..6 when token 7 changes: 0",
                "is_causal=False: max change of the logits at positions 0..6 when token 7 changes: 3.74",
            ),
        ),
        Question(
            kind="derive",
            text="With label smoothing ε = 0.1 over V = 70 characters, the target puts 1 - ε + ε/V on the "
                 "right character and ε/V on each other one. Compute its entropy, the least loss any model "
                 "can reach, and compare it with the floor the training-loss cell prints.",
            answer="H = -(1 - ε + ε/V) ln(1 - ε + ε/V) - (V - 1)(ε/V) ln(ε/V). With ε/V = 0.0014286 and 1 "
                   "- ε + ε/V = 0.9014286: 0.9014 · 0.1038 = 0.0935 and 69 · 0.0014286 · 6.551 = 0.6458, "
                   "so H ≈ 0.739. The cell prints `floor (entropy of the smoothed target): 0.7393`; the "
                   "last 100 steps average 0.740, just above it.",
            rubric="1 pt: the entropy formula of the smoothed target; 1 pt: the arithmetic, about 0.739; 1 "
                   "pt: the loss sits just above the floor and cannot reach 0.",
            quotes=("floor (entropy of the smoothed target): 0.7393",),
        ),
        Question(
            kind="break",
            text="Break the probe: change a *source* character instead of a target token (for example the "
                 "day's first digit, '25th' -> '35th', with `encode_text`), keep the target, and rerun "
                 "both rows. Predict, run, and explain.",
            answer="The earlier positions change with the mask as well as without it: the causal mask acts "
                   "only on the decoder's self-attention (target to target), while encoder-decoder "
                   "attention lets every target position read every source position (§3.2.3's third use). "
                   "With the mask the change at positions 0-6 is small (they write the year and the month, "
                   "which did not change) but not zero.",
            rubric="1 pt: nonzero with the mask; 1 pt: the causal mask is on the target's self-attention "
                   "only; 1 pt: cross-attention sees the whole source.",
        ),
        Question(
            kind="explain",
            text="What does the one-head-against-four table show about claim 9, and what does it not show? "
                 "Compare with lesson 3's experiment.",
            answer="Both h = 4 runs reach 99 % held-out exact match at an earlier evaluation (step 1000) "
                   "than either h = 1 run and end higher: at this budget four heads learned faster. It "
                   "does not show that one head cannot learn the task (an h = 1 run ends above 99 %), and "
                   "it rests on two seeds and one schedule, tuned on h = 4. Lesson 3's task needs two "
                   "positions per query and there one head fails in every seed; here each output character "
                   "needs one source position, so 'averaging inhibits this' has little room.",
            rubric="1 pt: four heads faster at the same budget; 1 pt: not 'one head cannot' (two seeds, a "
                   "schedule tuned on h = 4); 1 pt: the contrast with lesson 3's two-position task.",
            quotes=("4 0 171,974 100.00% 1000 0.740", "1 0 171,974 98.70% > 1200 0.744"),
        ),
    ),
    figures=(
        "the loss against its floor",
        "the three kinds of attention",
        "exact match during training, h = 1 against h = 4",
    ),
    explorer="heads",
    project="The dates task: train one variant with `python -m attention_np train --task dates` (a change "
            "of heads, layers, label smoothing or schedule), or add a date format, and report the held-out "
            "exact match, the loss against its floor and the cross-attention maps of one date beside the "
            "committed h = 4 model.",
)
