"""Lesson 5: ``notebooks/05_attention_that_learns.ipynb`` (the records of :mod:`.records`)."""

from attention_np.exercises.syllabus_data.records import Lesson, Question

LESSON = Lesson(
    number=5,
    stem="05_attention_that_learns",
    title="Attention that learns: training a Transformer encoder in NumPy",
    paper=("§3.1", "§3.3", "§3.4", "§3.5", "§5.3, Eq. (3)"),
    objectives=(
        "name every parameter array of a two-layer encoder and count them layer by layer",
        "explain why reversal can only be solved through attention, and read the learned anti-diagonal off "
        "the maps",
        "test a reading of the maps by ablation: silence heads through W_o and measure held-out accuracy",
        "describe how the maps form during training and what training does to footnote 4's assumption "
        "(Var(q·k)/d_k, entropy)",
    ),
    prerequisites=(
        "lesson 3: multi-head attention; lesson 4: its backward (the gradients training uses)",
        "lesson 2: footnote 4 and the entropy of a softmax row",
        "cross-entropy, Adam, a learning-rate warm-up",
        "layer normalisation and a feed-forward layer, at the level of what they compute",
    ),
    minutes=60,
    homework_minutes=120,
    why="the first trained model (the encoder): the model printed layer by layer, then its maps",
    questions=(
        Question(
            kind="predict",
            text="Before running the ablation cell, predict the held-out accuracy when one layer-1 head "
                 "(head 0) is silenced, when all four layer-1 heads are, and when all layer-0 heads are. "
                 "Then run it.",
            answer="One layer-1 head: no measurable loss, since the other three carry the same route "
                   "(`silence one layer-1 head (head 0)    held-out accuracy 100.0%`). All four layer-1 "
                   "heads: about chance for 10 digits (`silence all layer-1 heads            held-out "
                   "accuracy 11.6%`). All layer-0 heads: little or nothing (100.0% in this run): the "
                   "routing is done by layer 1.",
            rubric="1 pt: one head costs nothing (redundancy); 1 pt: all of layer 1 falls to about chance "
                   "(0.1); 1 pt: layer 0 costs little.",
            quotes=(
                "silence one layer-1 head (head 0) held-out accuracy 100.0%",
                "silence all layer-1 heads held-out accuracy 11.6%",
                "silence all layer-0 heads held-out accuracy 100.0%",
            ),
        ),
        Question(
            kind="derive",
            text="A layer-1 head is nearly one-hot on the mirror key. If the mirror key's scaled score is "
                 "s and the other 9 keys score 0, what s gives it the weight 0.99? With d_k = 16, what is "
                 "that before the scale, and what does it say about the footnote-4 table after training?",
            answer="e^s / (e^s + 9) = 0.99 gives e^s = 0.99 · 9 / 0.01 = 891, s = ln 891 ≈ 6.79. Before "
                   "the scale q·k = 6.79 · √16 ≈ 27.2, while footnote 4's assumption gives unscaled scores "
                   "a standard deviation of √16 = 4. A nearly one-hot head needs scores several standard "
                   "deviations apart, so training must grow and align q and k: the Var/d_k of hundreds of "
                   "the layer-1 heads in the table (head 3 of layer 1: 1.20 at initialisation, 439.8 after "
                   "training).",
            rubric="1 pt: e^s / (e^s + 9) = 0.99, s ≈ 6.8; 1 pt: times √d_k = 4, about 27; 1 pt: connects "
                   "it to the large trained Var/d_k.",
            quotes=("1 3 1.20 -> 439.8 82.8 2.12 -> 0.05",),
        ),
        Question(
            kind="break",
            text="Break the redundancy: silence three of the four layer-1 heads and keep one (edit `rows` "
                 "in the ablation cell), for each choice of the head kept. Predict, run, and explain the "
                 "differences with the anti-diagonal scores printed earlier.",
            answer="Each head alone keeps the accuracy far above chance, but not all of them at 100 %: the "
                   "four heads carry the same route with different sharpness, and the sharper a head's "
                   "anti-diagonal (its printed score), the more accuracy it keeps alone; the sharpest, "
                   "head 3, keeps nearly all of it. Redundancy means the heads together survive the loss "
                   "of one; it does not mean each alone is enough.",
            rubric="1 pt: runs all four choices; 1 pt: each alone is far above chance, most below 100 %; 1 "
                   "pt: relates what each keeps to its anti-diagonal score.",
        ),
    ),
    figures=("the training loss", "every head's map", "the ablation bars", "the maps during training"),
    explorer="heads",
    project="Train the reversal task (`RETRAIN = True`, or `python -m attention_np train`) with one change "
            "(the number of heads, the 1/√d_k, the schedule, no positional encoding), predict what will "
            "move, then report the held-out accuracy, the loss curve and the layer-1 maps beside the "
            "committed run.",
)
