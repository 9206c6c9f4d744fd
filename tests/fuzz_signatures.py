"""A fuzzer of the public API, generated from the signatures and the numpydoc "Parameters".

For every public callable (``attention_np.__all__``, each public subpackage's and module's
``__all__``, the public classes' constructors, methods and settable attributes) each parameter
gets a **kind** from its annotation, its numpydoc type and its default (a float array of a
shape, a bool flag, an int count, a seed, a rate, a callable, a tuple, a dtype, a string
choice, a config object, a cache, ...). A kind has **bad values** (a wrong type, a bool for a
number, NaN, inf, negative, zero, a wrong shape, a wrong dtype, a read-only array where the
function writes, a non-callable). A **valid call** is built from the numpydoc shapes with small
sizes (``SIZES``), or taken from ``FACTORIES`` where the docstring cannot tell; then one
parameter at a time is replaced by each bad value and the call must raise a ``ValueError`` or
``TypeError`` whose message names that parameter, with no input modified and no state changed.

A parameter the fuzzer cannot type is a failure of the callable (document it so that it can be
fuzzed). ``python -m tests.fuzz_signatures`` prints the failures grouped by module, and
``--write-docs`` regenerates the table in ``docs/fuzz.md``.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import pkgutil
import re
import signal
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import attention_np as an

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "fuzz.md"
BEGIN, END = "<!-- fuzz table: begin (python -m tests.fuzz_signatures --write-docs) -->", \
    "<!-- fuzz table: end -->"

#: the public subpackages walked (viz and cli are drawn and parsed elsewhere: tests/cli)
SUBPACKAGES = ("paper", "variants", "kernels", "compose", "nn", "training", "studies",
               "pretrained", "interop", "exercises")

#: small sizes for the numpydoc shape letters; every array of a valid call is built from these
SIZES = {"B": 2, "L": 3, "S": 5, "T": 1, "d_k": 4, "d_v": 6, "d": 4, "d_model": 8, "kdim": 8,
         "vdim": 8, "h": 2, "H": 2, "H_kv": 2, "h_kv": 2, "n": 4, "N": 4, "V": 7, "d_ff": 6, "m": 3,
         "d_q": 4, "d_hidden": 5, "num_buckets": 8, "in": 8, "out": 5, "d_in": 8, "d_out": 5,
         "F": 8, "E": 8, "D": 8, "K": 4, "M": 3, "C": 3, "length": 6, "P": 2}


# --- the parameters of a callable ------------------------------------------------------------------

@dataclasses.dataclass
class Param:
    """One parameter: its name, its numpydoc type (the text after ``name :``), its description,
    the annotation and default of the signature, and the kind the fuzzer gave it."""

    name: str
    doc_type: str
    doc_text: str
    annotation: str
    default: object
    kind: str | None = None
    shape: tuple | None = None          # shape tokens, e.g. ("...", "L", "d_k")

    @property
    def optional(self) -> bool:
        return self.default is None or "optional" in self.doc_type


def numpydoc_params(doc: str | None, section: str = "Parameters") -> dict:
    """``{name: (type, description)}`` of a numpydoc "Parameters" section (``a, b : int`` gives
    both names the type); a class's "Attributes" too (a dataclass's fields are its parameters)."""
    if not doc:
        return {}
    out = numpydoc_params(doc, "Attributes") if section == "Parameters" else {}
    lines = inspect.cleandoc(doc).splitlines()
    i = 0
    while i < len(lines) and not (lines[i].strip() == section and i + 1 < len(lines)
                                  and set(lines[i + 1].strip()) == {"-"}):
        i += 1
    i += 2
    current = None
    while i < len(lines):
        line = lines[i]
        if i + 1 < len(lines) and line.strip() and set(lines[i + 1].strip()) == {"-"}:
            break                                    # the next section
        if line and not line[0].isspace():
            names, _, kind = line.partition(" : ") if " : " in line else (line, "", "")
            current = [n.strip() for n in names.split(",")]
            for which, n in enumerate(current):
                out[n.lstrip("*")] = [alternative(kind.strip(), which), ""]
        elif current and line.strip():
            for n in current:
                out[n.lstrip("*")][1] += " " + line.strip()
        i += 1
    return {n: (t, d.strip()) if isinstance(d, str) else (t, d) for n, (t, d) in out.items()}


SHAPE = re.compile(r"\(((?:\.\.\.|[A-Za-z_][\w]*|\d+|[\w\s*/+-]+)(?:,\s*(?:\.\.\.|[\w\s*/+-]+))*,?)\)")


def alternative(text: str, which: int) -> str:
    """``k, v : (..., S, d_k | d_v)``: the type of the ``which``-th name (``d_k`` for ``k``)."""
    return re.sub(r"([\w.]+(?:\s*\|\s*[\w.]+)+)",
                  lambda m: [a.strip() for a in m.group(1).split("|")][min(which, m.group(1).count("|"))],
                  text)


def shape_tokens(text: str):
    """The first ``(..., L, d_k)``-like shape in ``text``, as tokens; None if there is none."""
    for match in SHAPE.finditer(text):
        tokens = tuple(t.strip() for t in match.group(1).split(",") if t.strip())
        if tokens and all(t == "..." or re.fullmatch(r"[\w\s*/+-]+", t) for t in tokens) and \
                not any(t in ("optional", "default") for t in tokens):
            if all(t == "..." or _size(t) is not None for t in tokens):
                return tokens
    return None


def _size(token: str):
    if token.isdigit():
        return int(token)
    try:
        value = eval(token, {"__builtins__": {}}, dict(SIZES))
    except Exception:
        return None
    return value if isinstance(value, int) and value >= 0 else None


def shape_of(tokens) -> tuple:
    """The shape the tokens stand for (``...`` is one batch dim of 2)."""
    return tuple(x for t in tokens for x in ((SIZES["B"],) if t == "..." else (_size(t),)))


# --- kinds ---------------------------------------------------------------------------------------------

#: the ints that are sizes of arrays (a step counter or a seed may be as large as it likes)
SIZE_NAMES = (r"d|d_\w+|L|S|T|h|num_\w+|n_\w+|\w+_size|max_\w*len\w*|kdim|vdim|length|\w*vocab\w*|"
              r"fan_in|fan_out|rotary_dim|\w+_dim")

#: counts of positions (or window sides) for which 0 is a valid size: an empty sequence
ZERO_OK = {"L", "S", "T", "left", "right", "start", "offset"}
NONNEGATIVE_REALS = {"atol", "rtol", "weight_decay", "label_smoothing"}
POSITIVE_REALS = {"eps", "theta", "lr", "softcap", "temperature", "peak", "lr_factor",
                  "factor", "max_lr", "warmup"}
RATES = {"dropout_p", "p", "label_smoothing", "beta1", "beta2", "smoothing", "target"}
SEEDS = {"seed", "rng"}
AXES = {"axis", "dim"}


def _class_named(doc_type: str, owner):
    """The package class a numpydoc type names first (``ModelConfig``, ``RoPE, optional``)."""
    m = re.match(r"~?((?:[a-z_]\w*\.)*[A-Z]\w*)\b", doc_type.strip())   # Plan, attention_np.x.Spec
    if not m:
        return None
    obj = resolve(m.group(1), owner) if owner is not None else None
    return obj if inspect.isclass(obj) and obj.__module__.startswith("attention_np") else None


def kind_of(p: Param, owner=None) -> str | None:
    """The kind of ``p``: from its numpydoc type first, then its annotation, then its default."""
    t, a, name = p.doc_type.lower(), p.annotation.lower(), p.name
    text = f"{t} {p.doc_text.lower()}"
    p.shape = shape_tokens(p.doc_type) if p.doc_type else None
    if name in SEEDS or re.match(r"(int )?seed", t):
        return "seed"
    if name in AXES and ("int" in t or "int" in a or isinstance(p.default, int)):
        return "axis"
    if re.match(r"callable", t) or "callable" in a:
        return "callable"
    if "cache" in t and re.search(r"[A-Z]\w*Cache", p.doc_type) and name != "kv_cache":
        return "cache"
    if name == "kv_cache" or re.match(r"kvcache", t):
        return "kv_cache"
    if re.match(r"(np\.)?dtype|the dtype", t) or name == "dtype":
        return "dtype"
    if re.match(r"attentionspec", t) or (name == "spec" and not re.match(r"layerspec", t)):
        return "spec"
    if re.match(r"bool\b", t) and (p.shape or "broadcastable" in t or "array" in t) or \
            re.match(r"bool (array|mask)", t):
        return "bool_array"
    if re.match(r"bool\b", t) or a == "bool" or isinstance(p.default, bool):
        return "flag"
    if re.match(r"(sequence|list|iterable) of int", t):
        return "int_list"
    m = re.match(r"list of ([A-Z]\w*)", p.doc_type)
    if m and _class_named(m.group(1), owner) is not None:
        p.cls = _class_named(m.group(1), owner)
        return "object_list"                            # "list of Mistake"
    if re.match(r"output tree", t):
        return "tree"                                   # an array, a number, or containers of them
    if re.match(r"\(\w+, \w+\)", t) and not p.shape:
        return "tuple"                                  # a pair like (left, right)
    if re.match(r"(torch|flax)\.|an attention layer|a (torch|transformers|flax) ", t):
        return "module"                                 # a framework's module (torch, flax)
    cls = _class_named(p.doc_type, owner)
    if cls is not None:
        p.cls = cls
        return "object"
    if "any dtype" in t:
        return "any_array"
    if re.match(r"tuple", t):
        return "tuple"
    if re.match(r"dict", t) or a.startswith("dict") or name == "params":
        return "dict"
    if re.match(r"(\{|\"|')", t) or re.match(r"str, one of|one of", t):
        return "choice"
    if re.match(r"int (array|ndarray)|int \(|int64 array", t) or (p.shape and re.match(r"int\b", t)) or \
            (p.shape and re.search(r"\) int\b(?! or float)", t)):                 # "(B, L) int"
        return "int_array"
    if p.shape or re.match(r"(float )?(nd)?array|float (array|ndarray)", t):
        return "float_array"
    if re.match(r"int\b", t) or a in ("int", "int | none") or (isinstance(p.default, int)
                                                             and not isinstance(p.default, bool)):
        return "count"
    if re.match(r"float\b|real|number", t) or a in ("float", "float | none") or \
            isinstance(p.default, float):
        if name in RATES or re.search(r"in \[0, 1[\])]", text):
            return "rate"
        if name in NONNEGATIVE_REALS or re.search(r">= ?0\b|non-negative", text):
            return "nonnegative"
        if name in POSITIVE_REALS or re.search(r"> ?0\b|positive", text):
            return "positive"
        return "real"
    if re.match(r"str\b|path", t) or a.startswith("str"):
        return "str"
    if re.match(r"sequence of str|list of str", t):
        return "str_list"
    return None


class _Obj:
    """An object of no kind the API takes."""

    def __repr__(self):
        return "<object>"


def bad_values(p: Param, good, call: dict) -> list:
    """``[(label, value)]``: the bad values of ``p``'s kind, made from its good value ``good``."""
    kind, bad = p.kind, []
    zero_ok = p.name in ZERO_OK or p.default == 0 or re.search(
        r">= ?0|non-negative|0 means|0 for|may be 0|zero", p.doc_text + p.doc_type)
    broadcastable = "broadcast" in p.doc_type + p.doc_text
    if kind in ("float_array", "int_array", "bool_array"):
        if good is None:             # an optional array not given: bad values of its documented shape
            shape = shape_of(p.shape) if p.shape else (SIZES["B"], SIZES["L"], SIZES["S"])
            good = np.ones(shape, {"float_array": float, "int_array": np.int64}.get(kind, bool))
        g = np.asarray(good)
        bad += [("str", "abc"), ("object", _Obj())]
        if not p.optional:
            bad.append(("None", None))
        if kind != "bool_array":
            bad.append(("bool dtype", g > 0 if g.dtype != bool else g))
        if kind == "float_array":
            if not re.search(r"int or float|float or int", p.doc_type):     # a float array takes no ints
                bad.append(("int dtype", np.ones(g.shape, np.int64)))
            bad.append(("complex", g.astype(np.complex128)))
            others = [v for n, v in call.items() if n != p.name and _is_float_array(v) and v.ndim >= 2
                      and v.dtype == np.float64]
            data = p.shape and len([t for t in p.shape if t != "..."]) >= 2 and not broadcastable
            if others and data and g.dtype == np.float64:
                bad.append(("float32 among float64", g.astype(np.float32)))
        if kind == "int_array":
            bad.append(("float dtype", g.astype(np.float64) + 0.5))
        if kind == "bool_array":
            bad.append(("float dtype", np.ones(g.shape)))
            if re.search(r"0/1", p.doc_type):         # "bool or 0/1 int": an int other than 0 and 1
                bad.append(("int not 0/1", np.full(g.shape, 2, np.int64)))
            else:
                bad.append(("int dtype", np.ones(g.shape, np.int64)))
        if p.shape and len([t for t in p.shape if t != "..."]) >= 2 and g.ndim >= 1 and not broadcastable:
            bad.append(("0-d", g.reshape(-1)[0] if g.size else np.float64(0)))
        wrong = _wrong_shape(p, g, call)
        if wrong is not None:
            bad.append(("wrong shape", wrong))
        if re.search(r"in place|nudged", p.doc_text):
            ro = g.copy()
            ro.flags.writeable = False
            bad.append(("read-only", ro))
    elif kind == "flag":
        bad += [("int 1", 1), ("int 0", 0), ("str 'no'", "no"), ("float", 1.5), ("array", np.ones(2, bool))]
        if p.default is not None:
            bad.append(("None", None))
    elif kind == "count":
        any_sign = re.search(r"any sign", p.doc_type + " " + p.doc_text) is not None
        bad += [("bool", True), ("float", 1.5), ("str", "3"), ("NaN", float("nan")), ("inf", float("inf"))]
        if not any_sign:                   # "k : int of any sign": negative and zero are valid
            bad.append(("negative", -1))
        if re.fullmatch(SIZE_NAMES, p.name):          # a size beyond any array NumPy can make
            bad.append(("huge", 2**64))
        if not (zero_ok or any_sign):
            bad.append(("zero", 0))
        if not p.optional:
            bad.append(("None", None))
    elif kind == "module":
        bad += [("str", "abc"), ("int", 3), ("object", _Obj()), ("array", np.ones(2))]
        if not p.optional:
            bad.append(("None", None))
    elif kind == "axis":
        bad += [("bool", True), ("float", 1.5), ("str", "x"), ("out of range", 99)]
    elif kind == "seed":
        bad += [("str", "x"), ("float", 1.5), ("bool", True), ("negative", -1)]
    elif kind in ("real", "positive", "rate", "nonnegative"):
        bad += [("str", "x"), ("bool", True), ("NaN", float("nan")), ("inf", float("inf")),
                ("list", [1.0]), ("array", np.ones(2))]
        if not p.optional:
            bad.append(("None", None))
        if kind == "positive":
            bad += [("zero", 0.0), ("negative", -1.0)]
        if kind == "nonnegative":
            bad.append(("negative", -1.0))
        if kind == "rate":
            bad += [("above 1", 1.5), ("negative", -0.1)]
    elif kind == "callable":
        if not p.optional:                 # an optional callable's None is documented as valid
            bad.append(("None", None))
        bad += [("int", 3), ("str", "f"), ("array", np.ones(2))]
    elif kind == "tuple":
        if isinstance(good, tuple) and not re.search(r"\ba list\b|\blist or\b", p.doc_text):
            # (a tuple whose docs say "a list or range is taken too" takes a list)
            bad.append(("list", list(good)))
        bad += [("str", "abc"), ("int", 3)]
        if not p.optional:
            bad.append(("None", None))
    elif kind == "object":
        bad += [("str", "abc"), ("int", 3), ("object", _Obj())]
        if not p.optional:
            bad.append(("None", None))
    elif kind == "any_array":
        bad += [("str", "abc"), ("object", _Obj())]
        if not p.optional:
            bad.append(("None", None))
        if p.shape and len([t for t in p.shape if t != "..."]) >= 2 and np.ndim(good) >= 1:
            bad.append(("0-d", np.asarray(good).reshape(-1)[0]))
    elif kind == "dtype":
        bad += [("int32", np.int32), ("bool", np.bool_), ("complex", np.complex128), ("str", "nonsense"),
                ("int", 3)]
    elif kind == "choice":
        bad += [("unknown", "nonsense"), ("int", 3), ("list", ["a"])]
        if p.default is not None and not re.search(r"\bNone\b", p.doc_type):    # {"a", "b", None}
            bad.append(("None", None))
    elif kind == "object_list":
        bad += [("str", "abc"), ("tuple", tuple(good or ())), ("list of object", [_Obj()]),
                ("list of int", [3])]
        if not p.optional:
            bad.append(("None", None))
    elif kind == "tree":
        bad += [("str", "abc"), ("object", _Obj()), ("tuple with a str", (np.ones(2), "abc"))]
        if not p.optional:
            bad.append(("None", None))
    elif kind == "spec":
        bad += [("str", "abc"), ("dict", {"window": 2}), ("int", 3)]
    elif kind in ("cache", "kv_cache"):
        bad += [("str", "abc"), ("None", None), ("object", _Obj()), ("dict", {})]
    elif kind == "dict":
        bad += [("str", "abc"), ("list", [1, 2]), ("int", 3)]
        if not p.optional:
            bad.append(("None", None))
        if isinstance(good, dict) and good and all(isinstance(x, np.ndarray) for x in good.values()):
            key = next(iter(good))
            bad.append(("entry not an array", {**good, key: "abc"}))
    elif kind == "str":
        bad.append(("int", 3))
        if re.search(r"list of str", p.doc_type):     # "str or list of str": a list of others
            bad += [("list of int", [1, 2]), ("empty list", [])]
        else:
            bad.append(("list", ["a"]))
        if not p.optional and re.search(r"list of str", p.doc_type):
            bad.append(("None", None))
    elif kind == "int_list":
        bad += [("str", "ab"), ("int", 3), ("zero", [0]), ("negative", [-1]), ("float", [1.5]),
                ("bool", [True]), ("empty", [])]
    elif kind == "str_list":
        bad += [("int", 3), ("list of int", [1, 2])]
    return bad


def _is_float_array(v) -> bool:
    return isinstance(v, np.ndarray) and np.issubdtype(v.dtype, np.floating)


def _wrong_shape(p: Param, g: np.ndarray, call: dict):
    """``g`` with one dim that another argument fixes made one longer (None: no such dim)."""
    if not p.shape or g.ndim == 0:
        return None
    tokens = [t for t in p.shape if t != "..."]
    shared = {t for t, names in getattr(p, "token_params", {}).items()
              if any(call.get(n) is not None for n in names if n != p.name)}
    for i in range(len(tokens) - 1, -1, -1):
        if tokens[i] in shared:
            axis = g.ndim - len(tokens) + i
            if axis < 0:
                return None
            widths = [(0, 0)] * g.ndim
            widths[axis] = (0, 1)
            return np.pad(g, widths, mode="edge" if g.size else "constant")
    return None


# --- the public callables ------------------------------------------------------------------------------

def _module_names(module) -> list:
    names = getattr(module, "__all__", None)
    return list(names) if names is not None else []


def public_modules():
    """The public modules walked: each public subpackage and its non-underscore modules."""
    out = [an]
    for sub in SUBPACKAGES:
        pkg = importlib.import_module(f"attention_np.{sub}")
        out.append(pkg)
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if any(part.startswith("_") for part in info.name.split(".")):
                continue
            out.append(importlib.import_module(info.name))
    return out


#: modules with no ``__all__`` whose public functions are public API all the same (the
#: paper's kernels by their names, the variants' standalone forward/backward pairs)
ALL_PUBLIC_FUNCTIONS = ("attention_np.kernels.reference",)


def public_callables() -> dict:
    """``{qualified name: object}``: every public function and class, once (its home module)."""
    found = {}
    for module in public_modules():
        names = _module_names(module)
        if module.__name__ in ALL_PUBLIC_FUNCTIONS:
            names += [n for n, o in vars(module).items() if not n.startswith("_") and callable(o)
                      and getattr(o, "__module__", None) == module.__name__]
        for name in names:
            obj = getattr(module, name, None)
            if not (inspect.isfunction(obj) or inspect.isclass(obj)):
                continue
            home = f"{obj.__module__}.{obj.__qualname__}"
            found.setdefault(home, obj)
    return dict(sorted(found.items()))


def returned(cls) -> bool:
    """A class whose instances the API returns and never takes from a caller's hands: a cache
    (its backward checks it), a result, a report (their constructors are not fuzzed)."""
    return dataclasses.is_dataclass(cls) and re.search(
        r"(Cache|Result|Report|Output|Check|Row|Tokenized|Batch|Finding|Fingerprint|Raised|Spec)$",
        cls.__name__) is not None and cls.__name__ not in ("AttentionSpec",)


def entries() -> dict:
    """``{label: (callable, kind)}`` with kind "function", "class", "method" or "attribute":
    every function, every constructor, every public method and every settable attribute of a
    class the fuzzer can build an instance of."""
    out = {}
    for home, obj in public_callables().items():
        if inspect.isclass(obj):
            if issubclass(obj, BaseException):
                continue
            if not returned(obj):
                out[home] = (obj, "class")
            for name, member in vars(obj).items():
                if name.startswith("_"):
                    continue
                if inspect.isfunction(member) and numpydoc_params(member.__doc__):
                    out[f"{home}.{name}"] = ((obj, name), "method")
        else:
            out[home] = (obj, "function")
    return out


def signature_params(fn, doc_owner=None) -> list:
    """The fuzzable parameters of ``fn`` (no ``self``, no ``*args``/``**kwargs``)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    owner = doc_owner or fn
    doc = numpydoc_params(owner.__doc__)
    params = []
    for name, prm in sig.parameters.items():
        if name == "self" or prm.kind in (prm.VAR_POSITIONAL, prm.VAR_KEYWORD):
            continue
        t, d = doc.get(name, ("", ""))
        if not t or re.match(r"as (in|given to|for) ", t) or re.match(r"as (in|given to) ", d):
            t, d = inherited(owner, name, t or (owner.__doc__ or "")) or (t, d)
        ann = prm.annotation
        ann = "" if ann is prm.empty else (ann if isinstance(ann, str)
                                            else getattr(ann, "__name__", str(ann)))
        default = None if prm.default is prm.empty else prm.default
        p = Param(name, t, d, str(ann), default)
        p.required = prm.default is prm.empty or (prm.default is None and re.search(
            r"\bRequired\b", d) is not None)
        p.positional = prm.kind in (prm.POSITIONAL_ONLY, prm.POSITIONAL_OR_KEYWORD)
        p.kind = kind_of(p, owner)
        params.append(p)
    tokens = {}
    for p in params:
        for t in set(p.shape or ()) - {"..."}:
            tokens.setdefault(t, []).append(p.name)
    for p in params:
        p.token_params = {t: tokens[t] for t in set(p.shape or ()) - {"..."}}
    return params


REF = re.compile(r":(?:func|class|meth):`~?([\w.]+)`")


def resolve(name: str, near):
    """The object ``name`` (``sdpa_forward``, ``attention_np.sdpa_forward``, ``.rope.apply_rope``)
    refers to from ``near``'s module."""
    module = sys.modules.get(getattr(near, "__module__", ""), an)
    parts = name.lstrip(".").split(".")
    for start in (module, an):
        obj = start
        for part in parts[1:] if parts[0] == "attention_np" and start is an else parts:
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            return obj
    return None


def inherited(owner, name: str, text: str, depth: int = 0):
    """``(type, description)`` of ``name`` in a function ``text`` refers to ("as in
    :func:`mha_forward`", "Same arguments as :func:`sdpa_forward`")."""
    if depth > 2:
        return None
    for ref in REF.findall(text):
        target = resolve(ref, owner)
        if target is None or target is owner:
            continue
        doc = numpydoc_params(getattr(target, "__doc__", None))
        if name in doc:
            t, d = doc[name]
            if re.match(r"as (in|given to|for) ", t):
                return inherited(target, name, t, depth + 1)
            return t, d
    return None


# --- valid calls ---------------------------------------------------------------------------------------

def good_value(p: Param, rng: np.random.Generator, label: str = ""):
    """A valid value of ``p`` from its kind and shape (None: the kind cannot say)."""
    from tests.fuzz_factories import CACHES, PARAMS, _cache_for
    if not p.required:
        return p.default
    kind = p.kind
    if kind == "dict":
        for ref in REF.findall(p.doc_type):
            make = PARAMS.get(ref.rsplit(".", 1)[-1])
            if make:
                return make()
        return None
    if kind == "cache":
        make = _cache_for(label) or CACHES.get(re.search(r"([A-Z]\w*Cache)", p.doc_type).group(1))
        return make() if make else None
    if kind == "int_list":
        return [2, 4]
    if kind == "choice":               # the first option the numpydoc type lists
        m = re.search(r"[\"']([^\"']+)[\"']", p.doc_type)
        return m.group(1) if m else None
    if kind == "object_list":
        from tests.fuzz_factories import INSTANCES
        make = INSTANCES.get(p.cls.__name__)
        return [make()] if make else None
    if kind == "object":
        from tests.fuzz_factories import INSTANCES
        make = INSTANCES.get(p.cls.__name__)
        return make() if make else None
    if kind in ("float_array", "int_array", "bool_array", "any_array"):
        shape = shape_of(p.shape) if p.shape else (SIZES["B"], SIZES["L"], SIZES["d_k"])
        if kind in ("float_array", "any_array"):
            x = rng.standard_normal(shape)
            return np.abs(x) if re.search(r">= ?0\b|non-negative", p.doc_text) else x
        if kind == "int_array":
            return np.arange(int(np.prod(shape))).reshape(shape) % 2     # ids of any vocabulary >= 2
        return np.ones(shape, bool)
    return {"flag": False, "count": 2, "seed": 0, "real": 0.5, "positive": 0.5, "rate": 0.1,
            "axis": -1, "dtype": np.float64}.get(kind)


def build_call(label: str, params: list):
    """``(args, kwargs)`` of a valid call: from ``FACTORIES`` when it has the label, else from
    the kinds and shapes."""
    from tests.fuzz_factories import FACTORIES
    if label in FACTORIES:
        return FACTORIES[label]()
    rng = np.random.default_rng(0)
    args, kwargs = [], {}
    for p in params:
        value = good_value(p, rng, label)
        if p.required and value is None:
            raise LookupError(f"no valid value for {p.name} ({p.kind}): add {label} to FACTORIES")
        if p.required and p.positional:
            args.append(value)
        elif p.required:
            kwargs[p.name] = value
    return args, kwargs


# --- one case ------------------------------------------------------------------------------------------

def names_argument(message: str, arg: str) -> bool:
    """Whether ``message`` names ``arg`` as a word (``x`` in ``x must be``, not in ``max``)."""
    return re.search(rf"(?<![A-Za-z0-9_]){re.escape(arg)}(?![A-Za-z0-9_])", message) is not None


def snapshot(value):
    """A deep copy of everything a call could modify (arrays, dicts, objects' ``__dict__``)."""
    try:
        return copy.deepcopy(value)
    except Exception:
        return value


def same(a, b) -> bool:
    """Equal values, arrays compared bit for bit (NaN equal to NaN), objects by ``__dict__``."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape
                and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    if _torch_kind(a) == "module" and type(a) is type(b):     # a torch module: its tensors and mode
        return a.training == b.training and same(dict(a.state_dict()), dict(b.state_dict()))
    if _torch_kind(a) == "tensor" and _torch_kind(b) == "tensor":
        import torch
        return a.dtype == b.dtype and a.shape == b.shape and bool(torch.equal(a, b))
    if isinstance(a, np.random.Generator) and isinstance(b, np.random.Generator):
        return a.bit_generator.state == b.bit_generator.state
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if hasattr(a, "__dict__") and hasattr(b, "__dict__") and type(a) is type(b) and \
            not inspect.isclass(a) and not callable(a):
        return same(vars(a), vars(b))
    try:
        return bool(a == b) or a is b
    except Exception:
        return a is b


def _torch_kind(x) -> str | None:
    """"module" or "tensor" for a torch object (torch only imported when the caller did)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    return "module" if isinstance(x, torch.nn.Module) else "tensor" if isinstance(x, torch.Tensor) else None


def run_case(fn, args, kwargs, arg: str, watch=()) -> str | None:
    """None when ``fn(*args, **kwargs)`` is refused as it must be; else what went wrong."""
    before = [snapshot(x) for x in (*args, *kwargs.values(), *watch)]
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with np.errstate(all="ignore"):
                fn(*args, **kwargs)
    except (ValueError, TypeError) as e:
        if not names_argument(str(e), arg):
            return f"{type(e).__name__} not naming {arg}: {str(e)[:160]}"
        problem = None
    except AttributeError as e:                          # a read-only attribute: refused by Python
        problem = None if names_argument(str(e), arg) else f"AttributeError: {str(e)[:160]}"
    except Exception as e:
        return f"{type(e).__name__}: {str(e)[:160]}"
    else:
        return "accepted"
    after = [*args, *kwargs.values(), *watch]
    for x, y in zip(before, after, strict=True):
        if not same(x, y):
            return "refused, but an input or the state changed"
    return problem


@dataclasses.dataclass
class Row:
    """What the fuzzer did with one callable."""

    label: str
    params: list                        # names fuzzed
    cases: int = 0
    failures: list = dataclasses.field(default_factory=list)     # (param, bad label, what)

    @property
    def module(self) -> str:
        return self.label.rsplit(".", 1)[0] if self.label.count(".") else self.label


def fuzz_entry(label: str, obj, kind: str) -> Row:
    """Fuzz one callable (or a class's settable attributes); every failure in ``Row.failures``."""
    from tests.fuzz_factories import ATTRIBUTES, INSTANCES, instance
    if kind == "method":
        cls, name = obj
        fn_for_sig = getattr(cls, name)
        params = signature_params(fn_for_sig)
    else:
        params = signature_params(obj, obj if kind == "function" else obj)
        if kind == "class" and not params:
            params = signature_params(obj.__init__, obj)
    row = Row(label, [p.name for p in params])
    untyped = [p.name for p in params if p.kind is None]
    for name in untyped:
        row.failures.append((name, "(untyped)", "the fuzzer cannot type it: document its type"))
    try:
        if kind == "method":
            make = lambda: instance(cls)                          # noqa: E731
            inst = make()
            args, kwargs = build_call(label, params)
            getattr(inst, name)(*args, **kwargs)                  # the valid call runs
        else:
            args, kwargs = build_call(label, params)
            before = [snapshot(x) for x in (*args, *kwargs.values())]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _valid_call(obj, args, kwargs)
            # a valid call changes no input either, but what it is documented to change: an array
            # it updates "in place", the KV cache it appends to, the Generator it draws from
            in_place = re.search(r"in place", obj.__doc__ or "") is not None
            if not in_place and not all(same(x, y) or isinstance(y, (np.random.Generator, an.KVCache))
                                        for x, y in zip(before, (*args, *kwargs.values()), strict=True)):
                row.failures.append(("(valid call)", "", "modified an input its docs do not say it "
                                     "modifies (in place)"))
            if not in_place:           # read-only arrays (a KVCache's views, a memory map) work too
                ro_args = [read_only(x) for x in args]
                ro_kwargs = {k: read_only(v) for k, v in kwargs.items()}
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        _valid_call(obj, ro_args, ro_kwargs)
                except Exception as e:
                    row.failures.append(("(read-only inputs)", "", f"{type(e).__name__}: {str(e)[:160]}"))
    except Exception as e:
        row.failures.append(("(valid call)", "", f"{type(e).__name__}: {str(e)[:200]}"))
        return row
    sig = inspect.signature(getattr(cls, name) if kind == "method" else obj)
    names = [n for n in sig.parameters if n != "self"]
    for p in params:
        if p.kind is None:
            continue
        good = _current(p, args, kwargs, names)
        call_values = dict(zip(names, args, strict=False)) | kwargs
        for bad_label, bad in bad_values(p, good, call_values):
            a, kw = _replace(p, bad, args, kwargs, names)
            row.cases += 1
            if kind == "method":
                inst = make()
                problem = run_case(getattr(inst, name), a, kw, p.name, watch=(inst,))
            else:
                problem = run_case(obj, a, kw, p.name)
            if problem:
                row.failures.append((p.name, bad_label, problem))
    if kind == "class" and obj.__name__ in INSTANCES:
        for prop in writable_views(instance(obj)):
            row.cases += 1
            row.failures.append((f".{prop}", "write into it", "returns a writable view of the object's "
                                 "storage: a caller's edit changes the object"))
    if kind == "class":
        for attr, good in ATTRIBUTES.get(label, {}).items():
            ap = Param(attr, "", "", "", None, kind=good)
            ap.required = True
            for bad_label, bad in bad_values(ap, None, {}):
                inst = instance(obj)
                row.cases += 1
                row.params.append(f".{attr}") if f".{attr}" not in row.params else None
                problem = run_case(setattr, [inst, attr, bad], {}, attr, watch=(inst,))
                if problem:
                    row.failures.append((f".{attr}", bad_label, problem))
    return row


def always_raises(fn) -> tuple:
    """The exceptions a function's numpydoc "Raises" section says it raises "Always" (a function
    whose job is to refuse: its valid call ends in that exception, and nothing else)."""
    return tuple(n for n, (_, d) in numpydoc_params(getattr(fn, "__doc__", None), "Raises").items()
                 if d.startswith("Always"))


def _valid_call(fn, args, kwargs):
    """``fn(*args, **kwargs)``; a documented "Always" exception is its valid outcome."""
    try:
        fn(*args, **kwargs)
    except Exception as e:
        if type(e).__name__ not in always_raises(fn):
            raise


def read_only(x):
    """A read-only copy of an array, or of each array in a dict or tuple; anything else as it is."""
    if isinstance(x, np.ndarray):
        y = x.copy()
        y.flags.writeable = False
        return y
    if isinstance(x, dict) and all(isinstance(v, np.ndarray) for v in x.values()):
        return {k: read_only(v) for k, v in x.items()}
    if isinstance(x, tuple) and not hasattr(x, "_fields"):
        return tuple(read_only(v) for v in x)
    return x


def writable_views(inst) -> list:
    """The public properties of ``inst`` that return a writable array sharing memory with the
    arrays it holds (an edit of what a caller receives would change the object)."""
    held = [x for x in vars(inst).values() if isinstance(x, np.ndarray)]
    out = []
    for name, _ in inspect.getmembers(type(inst), lambda m: isinstance(m, property)):
        if name.startswith("_"):
            continue
        try:
            value = getattr(inst, name)
        except Exception:
            continue
        if isinstance(value, np.ndarray) and value.flags.writeable and \
                any(np.shares_memory(value, x) for x in held):
            out.append(name)
    return out


def _current(p, args, kwargs, names):
    if p.name in kwargs:
        return kwargs[p.name]
    i = names.index(p.name)
    return args[i] if i < len(args) else p.default


def _replace(p, bad, args, kwargs, names):
    args, kwargs = list(args), dict(kwargs)
    i = names.index(p.name)
    if p.name not in kwargs and i < len(args):
        args[i] = bad
    else:
        kwargs[p.name] = bad
    # values a call must not modify: fresh copies, so that one case cannot leak into the next
    return [snapshot(x) for x in args], {k: snapshot(v) for k, v in kwargs.items()}


class TooSlow(BaseException):
    """A callable's fuzzing ran past ``LIMIT`` seconds: give it tiny inputs in ``FACTORIES``."""


LIMIT = 300.0    # seconds per callable: a guard against a hung call, not a time budget (a busy CI
#                  machine takes ~5 s for the slowest, MiniLM; the guard is 60x that)


def _alarm(signum, frame):
    raise TooSlow(f"ran past {LIMIT} s: give it a tiny valid call in tests/fuzz_factories.py")


def fuzz_limited(label, obj, kind) -> Row:
    """``fuzz_entry`` stopped after ``LIMIT`` seconds (a failure of that callable)."""
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, LIMIT)
    try:
        return fuzz_entry(label, obj, kind)
    except TooSlow as e:
        return Row(label, [], 0, [("(all)", "", str(e))])
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def fuzz_all(labels=None, verbose=False) -> list:
    rows = []
    for label, (obj, kind) in entries().items():
        if labels is not None and label not in labels:
            continue
        start = time.perf_counter()
        rows.append(fuzz_limited(label, obj, kind))
        if verbose:
            print(f"{time.perf_counter() - start:7.2f} s  {label}", file=sys.stderr, flush=True)
    return rows


# --- the docs table ---------------------------------------------------------------------------------------

def table(rows) -> str:
    lines = ["| callable | parameters | cases | all refused |", "| --- | --- | --- | --- |"]
    for r in rows:
        params = ", ".join(f"`{p}`" for p in r.params) or "(none)"
        lines.append(f"| `{r.label.removeprefix('attention_np.')}` | {params} | {r.cases} | "
                     f"{'yes' if not r.failures else f'no ({len(r.failures)})'} |")
    total, failed = sum(r.cases for r in rows), sum(len(r.failures) for r in rows)
    lines.append("")
    lines.append(f"{len(rows)} callables, {total} bad calls, {total - failed if failed <= total else 0} "
                 f"refused by name, {failed} failures.")
    return "\n".join(lines)


def docs_section(rows) -> str:
    return f"{BEGIN}\n{table(rows)}\n{END}"


def report(rows) -> str:
    by_module: dict = {}
    for r in rows:
        for f in r.failures:
            by_module.setdefault(r.module, []).append((r.label, *f))
    out = []
    for module, fails in sorted(by_module.items()):
        out.append(f"\n### {module} ({len(fails)})\n")
        for label, param, bad, what in fails:
            out.append(f"- `{label.rsplit('.', 1)[-1]}({param}=<{bad}>)`: {what}")
    return "\n".join(out)


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    rows = fuzz_all(verbose="-v" in argv)
    if "--write-docs" in argv:
        text = DOCS.read_text(encoding="utf-8")
        start, end = text.index(BEGIN), text.index(END) + len(END)
        DOCS.write_text(text[:start] + docs_section(rows) + text[end:], encoding="utf-8")
    print(report(rows))
    total, failed = sum(r.cases for r in rows), sum(len(r.failures) for r in rows)
    print(f"\n{len(rows)} callables, {total} cases, {failed} failures")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
