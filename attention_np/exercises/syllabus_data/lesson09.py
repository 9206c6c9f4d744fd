"""Lesson 9: ``notebooks/09_real_model_attention.ipynb`` (the records of :mod:`.records`)."""

from attention_np.exercises.syllabus_data.records import Lesson, Question

LESSON = Lesson(
    number=9,
    stem="09_real_model_attention",
    title="Real attention of a real trained model: all-MiniLM-L6-v2 in NumPy",
    paper=("§3.1", "§3.2.2", "footnote 4"),
    objectives=(
        "run a real checkpoint in NumPy and say how its equality with `transformers` is established",
        "score heads by behaviour (previous token, next token, [CLS], same word) and find the recognizable "
        "ones",
        "check that padding gets weight exactly 0 in every head",
        "measure footnote 4 on trained weights and say what the 1/√d_k is for at initialisation against "
        "after training",
        "separate a measurement from a hypothesis when reading attention maps",
    ),
    prerequisites=(
        "lessons 2 and 5: footnote 4, and its measurement on a trained encoder",
        "lessons 3 and 5: heads, and reading trained maps",
        "lesson 1: padding masks",
        "what BERT is (an encoder trained on text) and its tokens [CLS] and [SEP]",
    ),
    minutes=45,
    homework_minutes=60,
    why="a real trained model, read with what lessons 5 and 8 taught",
    questions=(
        Question(
            kind="predict",
            text="Before running section 5, predict which head has the largest Var(q·k)/d_k: a head that "
                 "sends its weight to [CLS], or the previous-token head? And what entropy will that head "
                 "have?",
            answer="The previous-token head (layer 0, head 2): to put a weight of 1.00 on one key it needs "
                   "one score far above the others, so its scores spread most, and its entropy is near 0. "
                   "The cell prints `largest Var/d_k: layer 0, head 2` and `previous-token head (layer 0, "
                   "head 2): Var/d_k 113, entropy 0.002 nats`.",
            rubric="1 pt: the previous-token head; 1 pt: because a one-hot row needs widely spread scores; "
                   "1 pt: entropy near 0.",
            quotes=(
                "largest Var/d_k: layer 0, head 2",
                "previous-token head (layer 0, head 2): Var/d_k 113, entropy 0.002 nats",
            ),
        ),
        Question(
            kind="derive",
            text="Show that uniform weights over n keys have entropy log n and that no row of n weights "
                 "has more. The section-5 table prints log S = 2.55 in every layer: with the sentences' "
                 "lengths 14, 15, 13 and 8 (section 4), show that 2.55 is the mean of log S over the 50 "
                 "real query tokens.",
            answer="Uniform: H = -Σ (1/n) log(1/n) = log n. For any row, H = Σ_j w_j log(1/w_j) <= log Σ_j "
                   "w_j (1/w_j) = log n (Jensen's inequality, log being concave), with equality only for "
                   "uniform weights. Each real query of a sentence of length n may attend to its n real "
                   "tokens: (14 ln 14 + 15 ln 15 + 13 ln 13 + 8 ln 8) / 50 = (36.95 + 40.62 + 33.34 + "
                   "16.64) / 50 = 2.55.",
            rubric="1 pt: log n for uniform weights; 1 pt: the bound (Jensen or Lagrange); 1 pt: the "
                   "weighted mean over the 50 real tokens, 2.55.",
            quotes=("lengths: [14 15 13 8]",),
        ),
        Question(
            kind="break",
            text="Break the scale in one layer: multiply layer 0's `W_q` and `b_q` by √32 (as if its "
                 "1/√d_k were removed: `model.params['layers.0.attn.W_q'] *= np.sqrt(32)`, the same for "
                 "`b_q`), rerun the model, and compare each layer-0 head's mean entropy before and after. "
                 "Which heads change most, and why does the previous-token head barely change?",
            answer="Multiplying every score of a head by √32 ≈ 5.7 sharpens its softmax. The heads whose "
                   "rows were spread (layer 0's mean entropy is 1.91 nats in the section-5 table, near the "
                   "random baseline's 2.15) become much sharper and their weights move a lot; the "
                   "previous-token head was already one-hot (entropy 0.002 nats), and stretching scores "
                   "that are already far apart leaves it one-hot. The scale matters where the weights are "
                   "not yet decided: at initialisation, where footnote 4 applies, and in diffuse heads; a "
                   "trained sharp head has moved its scores far past it.",
            rubric="1 pt: the diffuse heads sharpen a lot; 1 pt: the previous-token head stays one-hot; 1 "
                   "pt: the scale matters where weights are undecided (initialisation), not for a head "
                   "already one-hot.",
        ),
        Question(
            kind="explain",
            text="Many heads put most of their weight on [CLS]. What does the lesson measure about them, "
                 "what does it call a hypothesis, and what experiment would test it?",
            answer="Measured: the mean weight each head puts on [CLS] (up to 0.90, in layers 1-4) and on "
                   "[SEP] (at most 0.17 in this checkpoint). The reading that such a head 'parks' its "
                   "weight on a token whose value changes little, because the softmax must put its weight "
                   "somewhere, is a hypothesis (Clark et al. 2019 for [SEP] in BERT-base). Testing it "
                   "would take, for example, the size of what those heads add to the residual stream, or "
                   "an ablation of them.",
            rubric="1 pt: what is measured (mean weight on [CLS]); 1 pt: parking is a hypothesis; 1 pt: a "
                   "test (the size of the heads' contribution, or an ablation).",
            quotes=("[CLS] best: layer 4, head 5, mean weight 0.90",),
        ),
    ),
    figures=("docs/img/minilm_heads.png", "every head of every layer", "Var(q·k)/d_k per head"),
    explorer="heads",
)
