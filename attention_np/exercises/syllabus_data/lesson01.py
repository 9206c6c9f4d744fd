"""Lesson 1: ``notebooks/01_scaled_dot_product_attention.ipynb`` (the records of :mod:`.records`)."""

from attention_np.exercises.syllabus_data.records import Lesson, Question

LESSON = Lesson(
    number=1,
    stem="01_scaled_dot_product_attention",
    title="Scaled dot-product attention, step by step",
    paper=("§3.2.1, Eq. (1)", "§3.2.3"),
    objectives=(
        "compute Eq. (1) by hand on a few keys and name what each step (scores, softmax, weighted sum) "
        "produces, with its shape",
        "predict the weights of a query that matches one key, two keys, or none better than another "
        "(attention as a soft dictionary lookup)",
        "say what a learned query projection W^Q changes: what a word looks for can differ from what it is",
        "build a padding mask (B, 1, S) and a causal mask, and check that masked keys get weight exactly 0",
        "name §3.2.3's three uses of attention and the inputs and mask of each",
    ),
    prerequisites=(
        "NumPy: arrays, `@`, broadcasting, `axis=` arguments",
        "the dot product and what it measures",
        "exp and log; a probability distribution (positive, sums to 1)",
    ),
    minutes=60,
    homework_minutes=120,
    why="attention as a soft dictionary lookup, Eq. (1), learned projections by hand, padding and causal "
        "masks, §3.2.3's three uses",
    questions=(
        Question(
            kind="predict",
            text='Before running the first cell ("Attention is a soft dictionary lookup"), predict the '
                 "weights and the output for the query [0, 0], which matches no key better than another. "
                 "Then run it.",
            answer="Every score is 0 (the query is the zero vector), and the softmax of equal scores is "
                   "uniform: 1/3 each. The output is the plain average of the values 10, 20 and 30: 20. "
                   "The cell prints `query [0.0, 0.0]: weights [0.333 0.333 0.333] -> output 20.00`.",
            rubric="1 pt: every score is 0; 1 pt: uniform weights, 1/3 each; 1 pt: the output is 20, the "
                   "mean of the values.",
            quotes=("query [0.0, 0.0]: weights [0.333 0.333 0.333] -> output 20.00",),
        ),
        Question(
            kind="derive",
            text="The same cell prints the output 20.00 for the query [0, 4], although its weights are not "
                 "uniform. Show that the output is exactly 20 for every query [0, a].",
            answer="The keys [1, 0] and [-1, 0] both score 0 against [0, a], so they get the same weight "
                   "w, and the key [0, 1] gets 1 - 2w. The output is 10 w + 20 (1 - 2w) + 30 w = 20 for "
                   "every w. The cell prints `query [0.0, 4.0]: weights [0.053 0.894 0.053] -> output "
                   "20.00`.",
            rubric="1 pt: the first and third keys score the same; 1 pt: weights w, 1 - 2w, w; 1 pt: 10 w "
                   "+ 20 (1 - 2w) + 30 w = 20 for every w.",
            quotes=("query [0.0, 4.0]: weights [0.053 0.894 0.053] -> output 20.00",),
        ),
        Question(
            kind="break",
            text="Break the padding mask: in the padding cell, pass `pad.transpose(0, 2, 1)` (shape (B, S, "
                 "1): it masks the padded *queries* instead of the padded keys) to `paper.sdpa_forward` "
                 "and print `cache.weights[1].round(3)`. What goes wrong, and why does the lesson mask "
                 "keys?",
            answer="The mask now says which queries may attend, not which keys may be read. The three real "
                   "words of sentence 2 attend to all six keys, padding included: the padded keys are zero "
                   "vectors, score 0, and each takes a share of the weight (about a tenth here), so "
                   "padding leaks into the real words' outputs. The three padded queries get no key at "
                   "all, so their weights are all 0 (and their outputs 0: the section on a query with no "
                   "allowed key). Padding must be removed from what every query reads, which is the keys' "
                   "axis; the padded queries' own outputs are ignored by the loss anyway.",
            rubric="1 pt: the real words now put weight on padded keys; 1 pt: the padded queries get no "
                   "key (all weights 0); 1 pt: a mask must remove padding from the keys every query reads.",
        ),
        Question(
            kind="predict",
            text='Before running "What learned projections add", predict which word *sat* attends to most '
                 "without and with the hand-made W_q. Then run it.",
            answer="Without W_q the query is *sat*'s own vector, which matches itself best; W_q turns the "
                   "verb feature into the animal feature, so the query looks for an animal and finds "
                   "*cat*. The cell prints `-> attends most to 'sat'` without and `-> attends most to "
                   "'cat'` with W_q (weight 0.69).",
            rubric="1 pt: itself without W_q; 1 pt: *cat* with W_q; 1 pt: because W_q maps the verb "
                   "feature to the animal feature.",
            quotes=(
                "'sat' without W_q: [0.12 0.19 0.44 0.08 0.12 0.07] -> attends most to 'sat'",
                "'sat' with W_q: [0.05 0.69 0.18 0.02 0.05 0.02] -> attends most to 'cat'",
            ),
        ),
    ),
    figures=("figures/eq1_weights.png", "figures/masks.png"),
    explorer="masks",
)
