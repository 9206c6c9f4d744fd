"""Behaviour probes: call a wrong submission on inputs built to expose one property, measure it
and name what is wrong.

NumPy only and no import of ``attention_np`` (the course build copies this file into the
student kit and the autograder). A probe never holds a solution: it measures (which axis sums to
one, the scale actually applied, where a mask lets weight through, what a fully masked row
returns) or compares with values stored at build time (``expected[probe_id]``, computed by the
library's references from :data:`INPUTS`).

``PROBES[exercise]`` lists functions ``probe(fn, expected) -> Finding | None``, tried in order
after a case failed; the first finding names the mistake. The probes themselves are in
:mod:`probes_basics`, :mod:`probes_attention` and :mod:`probes_heads`, each written as data: ordered
steps, each a measure of one crafted input and a rule table on what it measured, run by one loop;
the measures they share (which known wrong answer, which output is wrong, the scale applied, a
parameter moved) and the loop are in :mod:`probing`.
"""

from __future__ import annotations

import numpy as np

from .counterfactuals import COUNTERFACTUALS, counterfactual_inputs, counterfactual_probe
from .probes_attention import (
    attention_backward_probe,
    attention_broadcast_mask,
    attention_full_row,
    attention_masks,
    attention_scale_axis,
    attention_shapes,
    attention_shared_max,
    attention_stability,
    backward_inputs,
    tiled_inputs,
    tiled_probe,
    tiled_shared_max,
)
from .probes_basics import (
    causal_probe,
    padding_probe,
    sinusoidal_probe,
    softmax_axis,
    softmax_backward_probe,
    softmax_stability,
)
from .probes_heads import (
    decode_inputs,
    decode_probe,
    merge_probe,
    mha_backward_inputs,
    mha_backward_probe,
    mha_inputs,
    mha_mask,
    mha_probe,
    split_probe,
)

# ======================================================================== the table
#: exercise -> {probe_id: ((args), {kwargs})}: the inputs whose reference outputs the build stores
INPUTS = {
    "split_heads": lambda: {"split": ((np.arange(24, dtype=float).reshape(4, 6), 2), {})},
    "merge_heads": lambda: {"merge": ((np.arange(24, dtype=float).reshape(2, 4, 3),), {})},
    "attention_backward": backward_inputs,
    "tiled_attention": lambda: {"blocks": ((*(tiled_inputs()[n] for n in "qkv"), 4), {})},
    "mha_backward": mha_backward_inputs,
    "decode_step": decode_inputs,
    "mha_forward": lambda: {"one_head": ((*mha_inputs()[:2], mha_inputs()[1], mha_inputs()[2], 1), {})},
}


def _with_counterfactuals(name, own):
    return lambda: {**own(), **counterfactual_inputs(name)}


INPUTS.update({name: _with_counterfactuals(name, INPUTS.get(name, lambda: {}))
               for name in COUNTERFACTUALS})

#: exercise -> probes tried in order
PROBES = {
    "softmax": [softmax_axis, softmax_stability],
    "softmax_backward": [softmax_backward_probe],
    "causal_mask": [causal_probe],
    "padding_mask": [padding_probe],
    "attention": [attention_shapes, attention_scale_axis, attention_stability, attention_shared_max,
                  attention_masks, attention_full_row, attention_broadcast_mask],
    "attention_backward": [attention_backward_probe],
    "split_heads": [split_probe],
    "merge_heads": [merge_probe],
    "mha_forward": [mha_probe, mha_mask],
    "mha_backward": [mha_backward_probe],
    "tiled_attention": [tiled_probe, tiled_shared_max],
    "decode_step": [decode_probe],
    "sinusoidal": [sinusoidal_probe],
}


def bound(name, expected):
    """The probes of exercise ``name`` as ``probe(fn)``, with their stored expected values; the
    counterfactual probe first."""
    return [lambda fn, p=p: p(fn, expected) for p in [counterfactual_probe(name), *PROBES.get(name, [])]]


def check_record(name, rec, fn, cases=None):
    """The verdict on ``fn`` for exercise ``name`` from its stored record (see engine.verdict)."""
    from .engine import verdict
    return verdict(name, fn, rec["cases"] if cases is None else cases, rec["fingerprints"],
                   bound(name, rec["probe_expected"]), rec["arg_names"], rec["signature"])
