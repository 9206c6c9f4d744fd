"""The lessons' example data, shared by the notebooks and ``python -m attention_np figures``.

The sentence of notebook 1 and the d_k sweeps of notebook 2 live here (not in the CLI) so that
a notebook and the figure it matches show the same numbers.
"""

from __future__ import annotations

import os

import numpy as np

from attention_np._checks import check_count, check_params_dict, check_path, check_saved, check_seed

# The sweeps behind the figures, shared with notebook 2 so the numbers agree.
SCALING_D_KS = (1, 4, 16, 64, 256, 1024)
COMPARE_D_KS = (4, 16, 64, 256)
SEED = 0

TOKENS = ["the", "cat", "sat", "on", "the", "mat"]
_FEATURES = ["determiner", "animal", "verb", "preposition", "object"]
_ROLE = {"the": "determiner", "cat": "animal", "sat": "verb", "on": "preposition",
         "mat": "object"}


def example_sentence(d_k: int = 8, seed: int = SEED):
    """The toy sentence of notebook 1: tokens and one embedding per token, ``(L, d_k)``.

    Each word gets a strong feature for its role (determiner, animal, verb, preposition,
    object) plus a little seeded noise in every dimension; the same word gets the same
    vector, so its two occurrences attend identically. Hand-made on purpose: a student can
    predict which dot products are large.

    Parameters
    ----------
    d_k : int
        At least one dim per role.
    seed : int
    """
    check_count(d_k, "d_k")
    check_seed(seed)
    if d_k < len(_FEATURES):
        raise ValueError(f"d_k must be at least {len(_FEATURES)} (one dim per role), got {d_k}")
    rng = np.random.default_rng(seed)
    vocab = sorted(set(TOKENS))
    table = {w: 0.3 * rng.standard_normal(d_k) for w in vocab}
    for w in vocab:
        table[w][_FEATURES.index(_ROLE[w])] += 2.0
    # "cat" and "mat" share an object-like feature: a noun that the verb and "on" relate to
    table["cat"][_FEATURES.index("object")] += 1.0
    table["sat"][_FEATURES.index("animal")] += 1.0    # a verb that looks for its subject
    return list(TOKENS), np.stack([table[w] for w in TOKENS])          # (L, d_k)


def describe_params(params: dict) -> str:
    """The model a lesson trains, layer by layer: one line per layer with its arrays' shapes.

    ``params`` is a flat dict whose names are dotted paths (``encoder.0.attn.W_q``); the arrays of
    one layer (everything before the last name) share a line, with their parameter count.
    """
    check_params_dict(params)
    layers: dict[str, list[str]] = {}
    counts: dict[str, int] = {}
    for name, p in params.items():
        layer, _, leaf = name.rpartition(".")
        layer = layer or "(embedding, output)"
        layers.setdefault(layer, []).append(f"{leaf} {tuple(p.shape)}")
        counts[layer] = counts.get(layer, 0) + int(np.size(p))
    width = max(map(len, layers))
    lines = [f"{layer:<{width}}  {counts[layer]:>7,}  " + ", ".join(leaves)
             for layer, leaves in layers.items()]
    lines.append(f"{'total':<{width}}  {sum(counts.values()):>7,}")
    return "\n".join(lines)


# Notebook 5's training run, committed so the notebook runs in seconds. Made by
#     python -m attention_np.lessons.examples notebooks/weights/reversal_seed0.npz
REVERSAL_RUN = dict(steps=600, batch_size=64, seed=0, snapshot_at=range(0, 601, 20))


def save_reversal_run(path: str) -> None:
    """Train notebook 5's model (:data:`REVERSAL_RUN`, one BLAS thread) and save it to ``path``."""
    check_path(path)
    from attention_np.kernels.threads import blas_threads
    from attention_np.nn import ModelConfig
    from attention_np.training import ReversalTask, train

    with blas_threads(1):
        r = train(config=ModelConfig(max_len=10), task=ReversalTask(length=10), **REVERSAL_RUN)
    steps = sorted(r.snapshots)
    partial = f"{path}.partial.npz"          # a complete file or none: written aside, then renamed
    np.savez_compressed(
        partial, losses=r.losses, accuracy=r.accuracy, sequence_accuracy=r.sequence_accuracy,
        probe=r.probe, heldout_size=r.heldout_size, snapshot_steps=np.array(steps),
        snapshots=np.array([r.snapshots[s] for s in steps]),          # (steps, layers, h, L, L)
        **{f"params.{k}": v for k, v in r.params.items()})
    os.replace(partial, path)


def load_reversal_run(path: str):
    """The :class:`attention_np.training.TrainResult` saved by :func:`save_reversal_run`."""
    check_path(path)
    from attention_np.nn import ModelConfig
    from attention_np.training import TrainResult

    with np.load(path) as f:
        check_saved(f.files, path, ("snapshot_steps", "snapshots", "losses", "accuracy", "sequence_accuracy",
                                    "probe", "heldout_size"), maker="save_reversal_run")
        params = {k.removeprefix("params."): f[k] for k in f.files if k.startswith("params.")}
        snapshots = {int(s): list(w) for s, w in zip(f["snapshot_steps"], f["snapshots"], strict=True)}
        return TrainResult(params, ModelConfig(max_len=10), f["losses"], float(f["accuracy"]),
                           float(f["sequence_accuracy"]), snapshots, f["probe"],
                           heldout_size=int(f["heldout_size"]))


def main(argv=None) -> int:
    """``python -m attention_np.lessons.examples PATH``: train notebook 5's model, save it to PATH."""
    import argparse

    from attention_np._args import output_file

    parser = argparse.ArgumentParser(prog="python -m attention_np.lessons.examples",
                                     description=save_reversal_run.__doc__.splitlines()[0])
    parser.add_argument("path", type=output_file(".npz"), metavar="OUT.npz",
                        help="the .npz to write, e.g. notebooks/weights/reversal_seed0.npz")
    save_reversal_run(parser.parse_args(argv).path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
