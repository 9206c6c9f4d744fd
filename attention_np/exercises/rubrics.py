"""The two projects' rubrics: criteria a TA applies to a report, each with its points.

Lesson 5 (the reversal task) and lesson 8 (the dates task) end with a project instead of
functions to write (their tasks are in :mod:`.syllabus`). Each criterion is one thing a TA can
see in the report or not, so two TAs give the same mark. ``lesson_answers.md`` of the solutions
kit prints them (:func:`rubric_markdown`). Standard library only.
"""

from __future__ import annotations

#: lesson stem -> ((points, criterion), ...)
PROJECT_RUBRICS = {
    "05_attention_that_learns": (
        (1, "Exactly one change from the committed run (the number of heads, the 1/√d_k, the schedule, or "
            "no positional encoding), named with its value; everything else as committed."),
        (2, "A prediction written before the run: which measurement moves (1) and in which direction (1)."),
        (2, "The held-out accuracy of the changed run and of the committed run, on the same held-out set, "
            "side by side (1 each)."),
        (2, "The training loss of both runs on one plot: axes labelled (step, loss) (1), a legend that names "
            "the runs (1)."),
        (1, "The layer-1 attention maps of the changed run beside the committed run's, for the same input."),
        (1, "The seeds (initialisation and data) named; with one seed, the report says a single run is "
            "one sample."),
        (2, "Measured and guessed kept apart: every cause is either backed by a number in the report or "
            "called a hypothesis (1); the prediction is compared with the outcome as written, right or "
            "wrong (1)."),
        (1, "The exact command or notebook cell that produced the run, so the TA can rerun it."),
    ),
    "08_encoder_decoder": (
        (1, "Exactly one change (heads, layers, label smoothing or schedule), named with its value, or a "
            "new date format with three examples of it."),
        (2, "A prediction written before the run: which measurement moves (1) and in which direction (1)."),
        (2, "The held-out exact match of the changed model and of the committed h = 4 model, on the same "
            "held-out dates (1 each)."),
        (2, "The loss against its floor: the label-smoothing floor computed for the ε used (1), and the "
            "loss curve drawn against it (1)."),
        (2, "The cross-attention maps of one date for both models, the same date (1), axes labelled with "
            "the output and source characters (1)."),
        (1, "The maps read with the lesson's caution: a weight on source position j is the encoder's "
            "state at j, not the character there."),
        (1, "The seeds named; with one seed, the report says a single run is one sample."),
        (1, "The exact command (`python -m attention_np train --task dates ...`) or cell that produced it."),
    ),
}


def rubric_points(stem: str) -> int:
    return sum(p for p, _ in PROJECT_RUBRICS[stem])


def rubric_markdown(stem: str) -> str:
    """The rubric of a lesson's project as a Markdown table, with its total."""
    rows = [f"*Rubric ({rubric_points(stem)} points).*", "", "| Points | Criterion |", "|---:|---|"]
    rows += [f"| {p} | {c} |" for p, c in PROJECT_RUBRICS[stem]]
    return "\n".join(rows)
