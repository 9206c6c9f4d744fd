"""Counterfactual inputs: a wrong use of an input (one weight for another, a weight transposed,
a bias left out or negated, the mask inverted or ignored, keys and values exchanged) measured
by the reference's output on the changed input, stored at build time.

NumPy only and no import of ``attention_np`` (copied into the student kit and the autograder, see
probes.py). A submission whose output on the base input is exactly the stored output of one
change, and not the base's, does what that change does; the kit holds those stored outputs, not
the reference. :data:`COUNTERFACTUALS` maps an exercise to its base input and changes, each
``(label, name, hint, change(args) -> args, what the change does in words)``.
"""

from __future__ import annotations

import numpy as np

from .engine import Finding, Raised, call, same


def _subsets(items):
    """Every non-empty subset of ``items``, smallest first, each in the order of ``items``."""
    items = list(items)
    masks = sorted(range(1, 2 ** len(items)), key=lambda m: (bin(m).count("1"), m))
    return [tuple(x for i, x in enumerate(items) if m >> i & 1) for m in masks]


def _param_changes(at, backward=False):
    """Changes of the parameter dict at position ``at`` of the arguments: one projection's weight
    (and bias) used for another's, a square weight transposed, biases left out. ``backward``: the
    function returns gradients, where a transposed weight is a transpose missing or added in
    the backward as often as in the forward. Each change is ``(label, name, hint, change,
    what the change does in words)``."""
    def sub(f):
        def change(args):
            args = list(args)
            args[at] = f(dict(args[at]))
            return tuple(args)
        return change
    out = []
    for a, b in ((a, b) for a in "qkvo" for b in "qkvo" if a != b):
        hint = f"The {_ROLE[a]} projection is x W_{a} + b_{a}: check which weight each line uses."
        out.append((f"W_{b}+b_{b}->{a}", f"the {_ROLE[a]} projected with W_{b} and b_{b}", hint,
                    sub(lambda p, a=a, b=b: {**p, f"W_{a}": p[f"W_{b}"], f"b_{a}": p[f"b_{b}"]}),
                    f"W_{a} and b_{a} are replaced by W_{b} and b_{b}"))
        out.append((f"W_{b}->{a}", f"the {_ROLE[a]} projected with W_{b}", hint,
                    sub(lambda p, a=a, b=b: {**p, f"W_{a}": p[f"W_{b}"]}), f"W_{a} is replaced by W_{b}"))
        out.append((f"b_{b}->{a}", f"b_{b} added where b_{a} belongs", hint,
                    sub(lambda p, a=a, b=b: {**p, f"b_{a}": p[f"b_{b}"]}), f"b_{a} is replaced by b_{b}"))
    for n in "qkvo":
        if backward:
            name, hint = (f"W_{n} where W_{n}^T belongs, or the reverse",
                          f"For y = x W_{n} the forward multiplies by W_{n} and the backward by its "
                          f"transpose, dx = dy @ W_{n}.T: check each place W_{n} appears.")
        else:
            name, hint = (f"W_{n} used transposed", f"params['W_{n}'] has shape (d_in, d_out) and "
                          "multiplies from the right, x @ W, as the paper writes Q W^Q: no .T (that is "
                          "PyTorch's nn.Linear layout, not this one).")
        out.append((f"W_{n}.T", name, hint, sub(lambda p, n=n: {**p, f"W_{n}": p[f"W_{n}"].T}),
                    f"W_{n} is replaced by its transpose"))
    for n in "qkvo":
        out.append((f"-b_{n}", f"b_{n} subtracted instead of added", "Each projection is x W + b: "
                    "check the sign in front of each bias.",
                    sub(lambda p, n=n: {**p, f"b_{n}": -p[f"b_{n}"]}), f"b_{n} is negated"))
    for subset in _subsets("qkvo"):
        names = ", ".join(f"b_{n}" for n in subset)
        out.append((f"no {names}", f"{names} not added", "params holds b_q, b_k, b_v, b_o: each "
                    "projection is x W + b, the output one included.",
                    sub(lambda p, s=subset: {**p, **{f"b_{n}": np.zeros_like(p[f"b_{n}"]) for n in s}}),
                    f"{names} {'is' if len(subset) == 1 else 'are'} set to 0"))
    return out


_ROLE = {"q": "queries", "k": "keys", "v": "values", "o": "heads' output"}


def _mask_changes(at):
    def flip(args):
        args = list(args)
        args[at] = ~args[at]
        return tuple(args)

    def drop(args):
        return tuple(args[:at])
    return [("~mask", "mask polarity flipped (True taken as blocked)", "True = may attend: the entries to "
             "set to -inf are where the mask is False.", flip, "the mask is inverted (~mask)"),
            ("no mask", "the mask is ignored", "Where the mask is False the score must become -inf "
             "before the softmax.", drop, "no mask is given")]


def _mha_base():
    rng = np.random.default_rng(424242)
    d, h = 4, 2
    p = {f"W_{n}": rng.normal(size=(d, d)) / 2 for n in "qkvo"}
    p.update({f"b_{n}": 0.3 * rng.normal(size=(d,)) for n in "qkvo"})
    q, k, v = (rng.normal(size=(2, n, d)) for n in (3, 5, 5))
    mask = rng.random((3, 5)) < 0.6
    mask[:, 0] = True
    mask[1, 0] = False
    return q, k, v, p, h, mask


def _attention_base():
    rng = np.random.default_rng(424243)
    q, k, v = rng.normal(size=(3, 4)), rng.normal(size=(5, 4)), rng.normal(size=(5, 2))
    mask = rng.random((3, 5)) < 0.6
    mask[:, 0] = True
    mask[:, 1] = False
    return q, k, v, mask


def _decode_base():
    rng = np.random.default_rng(424244)
    d, h = 4, 2
    p = {f"W_{n}": rng.normal(size=(d, d)) / 2 for n in "qkvo"}
    p.update({f"b_{n}": 0.3 * rng.normal(size=(d,)) for n in "qkvo"})
    return (rng.normal(size=(2, 1, d)), rng.normal(size=(2, h, 3, d // h)),
            rng.normal(size=(2, h, 3, d // h)), p, h)


def _swap_key_value(args):
    """Key and value exchanged, with their projections: the reference then attends over the
    values' projections as keys and averages the keys' projections, as a function that passes
    (q, v, k) to its attention does."""
    query, key, value, p, *rest = args
    p = {**p, "W_k": p["W_v"], "W_v": p["W_k"], "b_k": p["b_v"], "b_v": p["b_k"]}
    return (query, value, key, p, *rest)


#: exercise -> (base arguments, their changes)
COUNTERFACTUALS = {
    "mha_forward": lambda: (_mha_base(), _param_changes(3) + _mask_changes(5) + [
        ("k<->v", "keys and values exchanged", "attention(q, k, v): the keys set the weights, the values "
         "are averaged; check the order of the arguments.", _swap_key_value,
         "the key and value inputs and their projections are exchanged")]),
    "decode_step": lambda: (_decode_base(), _param_changes(3)),   # its scale: probes_heads._decode_scale
    "mha_backward": lambda: ((np.random.default_rng(424246).normal(size=(2, 3, 4)), *_mha_base()[:5]),
                             _param_changes(4, backward=True)),
    "attention": lambda: (_attention_base(), _mask_changes(3)),
    "attention_backward": lambda: ((np.random.default_rng(424245).normal(size=(3, 2)), *_attention_base()),
                                   _mask_changes(4)),
}


def counterfactual_inputs(exercise):
    """``{probe_id: (args, {})}``: the base input and each change of it (for the build to store)."""
    if exercise not in COUNTERFACTUALS:
        return {}
    base, changes = COUNTERFACTUALS[exercise]()
    out = {"cf:base": (base, {})}
    out.update({f"cf:{label}": (change(base), {}) for label, _, _, change, _ in changes})
    return out


def counterfactual_probe(exercise):
    """A probe: the submission's output on the base input equals the stored output of one change
    (and not the base's) -> that change is what it does."""
    def probe(fn, expected):
        if exercise not in COUNTERFACTUALS or "cf:base" not in expected:
            return None
        base, changes = COUNTERFACTUALS[exercise]()
        got = call(fn, base).out
        if isinstance(got, Raised) or same(got, expected["cf:base"]):
            return None
        hits = [(label, name, hint, words) for label, name, hint, _, words in changes
                if f"cf:{label}" in expected and same(got, expected[f"cf:{label}"])]
        if not hits or not all(same(expected[f"cf:{h[0]}"], expected[f"cf:{hits[0][0]}"]) for h in hits):
            return None                 # none, or changes with different answers: a coincidence
        _, name, hint, words = min(hits, key=lambda h: len(h[1]))   # equivalent changes: the simplest
        return Finding(name, f"on a stored {exercise} input your result is exactly what the right "
                       f"{exercise} returns when {words}", hint)
    return probe
