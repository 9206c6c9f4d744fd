"""Storing a bank of cases: a JSON tree with the arrays in an .npz beside it.

NumPy only and no import of ``attention_np`` (copied into the course kits). An array that appears
twice in a case (self-attention: query is key is value) is stored once and loaded as one array.
"""

from __future__ import annotations

import json

import numpy as np

from .engine import Case, Fingerprint, Raised


def encode(x, arrays):
    """A JSON-able tree; arrays go into ``arrays`` (saved as .npz)."""
    if isinstance(x, np.ndarray) or isinstance(x, np.generic):
        for key, a in arrays.items():       # the same array stored once: aliasing survives
            if a is x:
                return {"array": key}
        key = f"a{len(arrays)}"
        arrays[key] = x if isinstance(x, np.ndarray) else np.asarray(x)
        return {"array": key}
    if isinstance(x, Raised):
        return {"raised": x.text}
    if x is None or isinstance(x, (int, str)):           # bools too: JSON keeps true/false
        return x
    if isinstance(x, float):
        return {"float": repr(x)}
    if isinstance(x, tuple):
        return {"tuple": [encode(v, arrays) for v in x]}
    if isinstance(x, list):
        return [encode(v, arrays) for v in x]
    if isinstance(x, dict):
        return {"dict": {k: encode(v, arrays) for k, v in x.items()}}
    raise TypeError(f"cannot store {type(x).__name__}")


def decode(x, arrays):
    if isinstance(x, list):
        return [decode(v, arrays) for v in x]
    if not isinstance(x, dict):
        return x
    if "array" in x:
        return arrays[x["array"]]
    if "raised" in x:
        r = Raised.__new__(Raised)
        r.text, r.type = x["raised"], x["raised"].split(":")[0]
        return r
    if "float" in x:
        return float(x["float"])
    if "tuple" in x:
        return tuple(decode(v, arrays) for v in x["tuple"])
    return {k: decode(v, arrays) for k, v in x["dict"].items()}


def save_bank(bank: dict, stem) -> None:
    """Write ``bank`` (exercise -> record) as ``stem.json`` and ``stem.npz``."""
    arrays = {}
    data = {}
    for name, rec in bank.items():
        data[name] = {
            "signature": rec["signature"], "function": rec["function"], "arg_names": rec["arg_names"],
            "cases": [{"label": c.label, "args": encode(tuple(c.args), arrays),
                       "kwargs": encode(dict(c.kwargs), arrays), "expected": encode(c.expected, arrays),
                       "dtype": c.dtype, "tol": list(c.tol) if c.tol else None, "points": c.points,
                       "hidden": c.hidden, "outputs": list(c.outputs) if c.outputs else None}
                      for c in rec["cases"]],
            "fingerprints": [{"name": f.name, "hint": f.hint,
                              "outputs": [encode(o, arrays) for o in f.outputs]}
                             for f in rec["fingerprints"]],
            "probe_expected": {k: encode(v, arrays) for k, v in rec.get("probe_expected", {}).items()},
        }
    with open(f"{stem}.json", "w") as f:
        json.dump(data, f, indent=1)
    np.savez_compressed(f"{stem}.npz", **arrays)


def load_bank(stem, names=None) -> dict:
    """The bank stored at ``stem`` (.json + .npz); only the exercises ``names`` when given (the
    autograder's worker reads one: the arrays of the others are never decompressed)."""
    with open(f"{stem}.json") as f:
        data = json.load(f)
    if names is not None:
        data = {name: data[name] for name in names}
    with np.load(f"{stem}.npz", allow_pickle=False) as z:
        return _decode_bank(data, _Arrays(z))


class _Arrays(dict):
    """The .npz's arrays, each read when first asked for and then kept: an array stored once
    (query is key is value) decodes to one array object."""

    def __init__(self, npz):
        super().__init__()
        self.npz = npz

    def __missing__(self, key):
        self[key] = self.npz[key]
        return self[key]


def _decode_bank(data, arrays) -> dict:
    bank = {}
    for name, rec in data.items():
        bank[name] = {
            "signature": rec["signature"], "function": rec["function"], "arg_names": rec["arg_names"],
            "cases": [Case(c["label"], decode(c["args"], arrays), decode(c["kwargs"], arrays),
                           decode(c["expected"], arrays), c["dtype"], tuple(c["tol"]) if c["tol"] else None,
                           c["points"], c["hidden"],
                           tuple(c["outputs"]) if c.get("outputs") else None) for c in rec["cases"]],
            "fingerprints": [Fingerprint(f["name"], f["hint"], [decode(o, arrays) for o in f["outputs"]])
                             for f in rec["fingerprints"]],
            "probe_expected": {k: decode(v, arrays) for k, v in rec["probe_expected"].items()},
        }
    return bank
