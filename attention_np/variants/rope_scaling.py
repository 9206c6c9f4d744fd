r"""RoPE scaling: the frequencies of rotary embeddings stretched beyond the trained length.

A model trained on sequences up to ``L`` (``original_max_position_embeddings``) has seen the angles
``p * w_m`` for ``p < L`` only, with the frequencies (``inv_freq``) ``w_m = theta^(-2m/d)``,
``m = 0 .. d/2 - 1``. To run it on longer sequences, later models change the frequencies, and
some multiply cos and sin by an *attention factor* (which scales every score ``q_rot · k_rot`` by
its square). Each ``rope_type`` of transformers' ``modeling_rope_utils.ROPE_INIT_FUNCTIONS`` is a
rule for ``(inv_freq, attention_factor)``; :func:`rope_frequencies` computes them in float64.

``scaling`` is a dict in transformers' ``rope_parameters`` form without ``rope_theta`` (theta is
its own argument): ``{"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings":
32}``. Two types depend on the length ``seq_len`` being run, ``1 + max(positions)``
(transformers' ``dynamic_rope_update`` recomputes them in every forward, decode steps included):
``"dynamic"`` and ``"longrope"``. Keys already in a KV cache keep the rotation they got when they
were appended, in transformers as here. transformers keeps the dynamic frequencies as state (it
recomputes them when the length grows past the longest seen, resets them below ``L``); this
function is stateless, the same while lengths only grow, as in ``generate()``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from attention_np._checks import is_integer, is_number
from attention_np.paper._validate import check_even_width

# rope_type -> (required parameters, optional parameters with their defaults)
ROPE_TYPES = {
    "default": ((), {}),
    "linear": (("factor",), {}),
    "dynamic": (("factor", "original_max_position_embeddings"), {}),
    "yarn": (("factor", "original_max_position_embeddings"),
             {"attention_factor": None, "beta_fast": 32.0, "beta_slow": 1.0, "mscale": None,
              "mscale_all_dim": None, "truncate": True}),
    "longrope": (("short_factor", "long_factor", "original_max_position_embeddings", "factor"),
                 {"attention_factor": None}),
    "llama3": (("factor", "low_freq_factor", "high_freq_factor",
                "original_max_position_embeddings"), {}),
    "proportional": ((), {"factor": 1.0, "partial_rotary_factor": 1.0}),
}
_LISTS = ("short_factor", "long_factor")
_INTS = ("original_max_position_embeddings",)


def _real(value, name: str, rope_type: str | None, *, positive: bool = True) -> float:
    if not is_number(value) or not np.isfinite(value) or (positive and value <= 0):
        where = "" if rope_type is None else f"rope_type {rope_type!r}: "
        raise ValueError(f"{where}{name} must be a {'positive ' * positive}finite number, "
                         f"got {value!r}")
    return float(value)


class FrozenMapping(Mapping):
    """A read-only copy of a dict (its lists as tuples): what a frozen spec holds, so that the
    caller editing its dict afterwards changes nothing. Equal to a dict with the same items;
    hashable."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping):
        self._items = {k: tuple(v) if isinstance(v, (list, tuple, np.ndarray)) else v
                       for k, v in items.items()}

    def __getitem__(self, key):
        return self._items[key]

    def __iter__(self):
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __repr__(self) -> str:
        return repr(self._items)

    def __reduce__(self):
        return FrozenMapping, (self._items,)


def freeze_scaling(scaling) -> FrozenMapping | None:
    """``scaling`` checked (:func:`check_scaling`) and copied into a :class:`FrozenMapping`."""
    check_scaling(scaling)
    return None if scaling is None else FrozenMapping(scaling)


def check_scaling(scaling) -> dict | None:
    """Validate a ``scaling`` dict: its ``rope_type`` one of :data:`ROPE_TYPES`, every required
    parameter there, none unknown. Returns it with the defaults filled in (None for None)."""
    if scaling is None:
        return None
    t = _rope_type(scaling)
    out = {**ROPE_TYPES[t][1], **scaling}
    for k, v in out.items():
        if k not in ("rope_type", "truncate") and v is not None:
            _check_parameter(t, k, v)
    if t == "llama3" and not out["high_freq_factor"] > out["low_freq_factor"]:
        raise ValueError(f"rope_type 'llama3': high_freq_factor must exceed low_freq_factor, "
                         f"got {out['high_freq_factor']!r} <= {out['low_freq_factor']!r}")
    return out


def _rope_type(scaling) -> str:
    """``scaling["rope_type"]``, a key of :data:`ROPE_TYPES` whose required parameters are all
    given and nothing else but its optional ones."""
    if not isinstance(scaling, Mapping) or "rope_type" not in scaling:
        raise ValueError(f"scaling must be None or a dict with a 'rope_type' among "
                         f"{sorted(ROPE_TYPES)}, got {scaling!r}")
    t = scaling["rope_type"]
    if t not in ROPE_TYPES:
        raise ValueError(f"unknown rope_type {t!r}: the known ones are {sorted(ROPE_TYPES)}")
    required, optional = ROPE_TYPES[t]
    given = set(scaling) - {"rope_type"}
    missing = [k for k in required if k not in given]
    unknown = sorted(given - set(required) - set(optional))
    if missing or unknown:
        raise ValueError(f"rope_type {t!r} needs the parameters {list(required)} (optional: "
                         f"{sorted(optional)}); missing {missing}, unknown {unknown}")
    return t


def _check_parameter(t: str, k: str, v) -> None:
    """One parameter ``k`` of rope_type ``t``: a list of positive numbers (``short_factor``,
    ``long_factor``), a positive int (``original_max_position_embeddings``), or a finite number
    (positive but for YaRN's ``mscale`` and ``mscale_all_dim``)."""
    if k in _LISTS:
        a = np.asarray(v) if np.ndim(v) == 1 else None
        if a is None or a.dtype.kind not in "iuf" or not (np.all(np.isfinite(a)) and np.all(a > 0)):
            raise ValueError(f"rope_type {t!r}: {k} must be a list of positive numbers (one "
                             f"per frequency), got {v!r}")
    elif k in _INTS:
        if not is_integer(v) or v < 1:
            raise ValueError(f"rope_type {t!r}: {k} must be a positive int, got {v!r}")
    else:
        _real(v, k, t, positive=k not in ("mscale", "mscale_all_dim"))


def _yarn_mscale(factor: float, mscale: float = 1.0) -> float:
    """YaRN's ``sqrt(1/t) = 0.1 ln(s) + 1`` (Peng et al. 2023, Eq. 22), times ``mscale``."""
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def rope_frequencies(d: int, *, theta=10000.0, scaling=None, seq_len=None):
    r"""The rotary frequencies ``inv_freq`` and the attention factor of a RoPE scaling type.

    With ``w_m = theta^(-2m/d)`` (``m = 0 .. d/2 - 1``), ``s`` = ``factor`` and ``L`` =
    ``original_max_position_embeddings``:

    - ``"default"`` (RoFormer, Su et al. 2021): ``inv_freq = w``, factor 1.
    - ``"linear"``, Position Interpolation (Chen et al. 2023; kaiokendev): positions squeezed by
      ``s``, ``inv_freq = w / s``.
    - ``"dynamic"``, dynamic NTK-aware scaling (bloc97, emozilla 2023; Peng et al. 2023 §3.3): a
      larger base for the length ``n = max(seq_len, L)`` being run,
      ``theta' = theta * (s n / L - (s - 1))^(d / (d - 2))``, ``inv_freq = theta'^(-2m/d)``;
      ``theta' = theta`` up to ``n = L``. transformers reads ``L`` from the config's
      ``max_position_embeddings``.
    - ``"yarn"`` (Peng et al. 2023, "YaRN"): NTK-by-parts, interpolate the frequencies that
      turn less than ``beta_slow`` times over ``L`` and keep those that turn more than
      ``beta_fast`` times: with the pair index where ``L w_m / 2pi = beta``,
      ``m(beta) = d ln(L / (2 pi beta)) / (2 ln theta)``, ``lo = floor(m(beta_fast))``,
      ``hi = ceil(m(beta_slow))`` (unrounded if ``truncate=False``), clipped to ``[0, d - 1]``,
      and the ramp ``g_m = clip((m - lo) / (hi - lo), 0, 1)``:
      ``inv_freq = (1 - g) w + g w / s``. Attention factor ``0.1 ln s + 1`` (Eq. 22), or
      ``mscale(s, mscale) / mscale(s, mscale_all_dim)`` (DeepSeek) with
      ``mscale(s, a) = 0.1 a ln s + 1``, or ``attention_factor`` if given.
    - ``"longrope"`` (Ding et al. 2024, "LongRoPE"; Phi-3): a searched rescale per frequency,
      ``inv_freq = w / lambda`` with ``lambda = long_factor`` when ``seq_len > L`` and
      ``short_factor`` otherwise. Attention factor ``sqrt(1 + ln s / ln L)`` (1 for ``s <= 1``),
      or ``attention_factor`` if given.
    - ``"llama3"`` (Meta, Llama 3.1): by wavelength ``lambda_m = 2 pi / w_m``: kept where
      ``lambda < L / high_freq_factor``, divided by ``s`` where ``lambda > L / low_freq_factor``,
      in between ``(1 - a) w / s + a w`` with ``a = (L / lambda - low_freq_factor) /
      (high_freq_factor - low_freq_factor)``. Factor 1.
    - ``"proportional"`` (transformers' Gemma 4): only the first ``r = int(partial_rotary_factor
      * d) // 2`` frequencies turn, with the exponent over the full ``d`` (``w_m`` as above); the
      rest are 0 (cos 1, sin 0); all divided by ``s`` (``factor``, default 1). Factor 1.

    Parameters
    ----------
    d : int
        The rotated width (even): there are ``d // 2`` frequencies.
    theta : float
        The base.
    scaling : dict, optional
        ``{"rope_type": ..., **parameters}`` (:data:`ROPE_TYPES` lists each type's required and
        optional parameters); None is ``"default"``.
    seq_len : int, optional
        The length being run, ``1 + max(positions)`` (``"dynamic"`` and ``"longrope"`` depend
        on it); None: at most ``L``.

    Returns
    -------
    inv_freq : (d // 2,) float64
    attention_factor : float
        cos and sin are multiplied by it.
    """
    check_even_width(d, "d")
    theta = _real(theta, "theta", None)
    if seq_len is not None and (not is_integer(seq_len) or seq_len < 1):
        raise ValueError(f"seq_len must be None or an int >= 1 (1 + the largest position), "
                         f"got {seq_len!r}")
    p = check_scaling(scaling) or {"rope_type": "default"}
    w = theta ** (-2 * _pairs(d) / d)                                         # (d/2,)
    return FREQUENCIES[p["rope_type"]](w, p, d, theta, seq_len)


def _pairs(d: int) -> np.ndarray:
    """The pair index ``m = 0 .. d/2 - 1`` of the rotated features, float64."""
    return np.arange(d // 2, dtype=np.float64)                                # (d/2,)


# One rule per rope_type: (w, parameters, d, theta, seq_len) -> (inv_freq, attention_factor),
# ``w = theta^(-2m/d)``; the formulas are :func:`rope_frequencies`'s docstring's.

def _default(w, p, d, theta, seq_len):
    return w, 1.0


def _linear(w, p, d, theta, seq_len):
    return w / p["factor"], 1.0


def _dynamic(w, p, d, theta, seq_len):
    s, L = p["factor"], p["original_max_position_embeddings"]
    n = L if seq_len is None else max(int(seq_len), L)
    base = theta * (s * n / L - (s - 1)) ** (d / (d - 2))
    return base ** (-2 * _pairs(d) / d), 1.0


def _yarn(w, p, d, theta, seq_len):
    s, L = p["factor"], p["original_max_position_embeddings"]

    def pair_index(beta):
        return d * math.log(L / (2 * math.pi * beta)) / (2 * math.log(theta))
    lo, hi = pair_index(p["beta_fast"]), pair_index(p["beta_slow"])
    if p["truncate"]:
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, d - 1)
    ramp = np.clip((_pairs(d) - lo) / ((hi - lo) or 0.001), 0, 1)            # 0: keep, 1: / s
    inv_freq = (1 - ramp) * w + ramp * w / s
    a = p["attention_factor"]
    if a is None:
        a = (_yarn_mscale(s, p["mscale"]) / _yarn_mscale(s, p["mscale_all_dim"])
             if p["mscale"] and p["mscale_all_dim"] else _yarn_mscale(s))
    return inv_freq, float(a)


def _longrope(w, p, d, theta, seq_len):
    s, L = p["factor"], p["original_max_position_embeddings"]
    key = "long_factor" if seq_len is not None and seq_len > L else "short_factor"
    lam = np.asarray(p[key], dtype=np.float64)
    if lam.shape != w.shape:
        raise ValueError(f"rope_type 'longrope': {key} must have d // 2 = {d // 2} entries, "
                         f"got {lam.shape[0]}")
    a = p["attention_factor"]
    if a is None:
        a = 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(L))
    return w / lam, float(a)


def _llama3(w, p, d, theta, seq_len):
    s, L = p["factor"], p["original_max_position_embeddings"]
    lo_f, hi_f = p["low_freq_factor"], p["high_freq_factor"]
    wavelen = 2 * math.pi / w                                                 # (d/2,)
    a = (L / wavelen - lo_f) / (hi_f - lo_f)                                  # the blend weight
    inv_freq = np.where(wavelen > L / lo_f, w / s, (1 - a) * w / s + a * w)
    return np.where(wavelen < L / hi_f, w, inv_freq), 1.0


def _proportional(w, p, d, theta, seq_len):
    r = int(p["partial_rotary_factor"] * d) // 2
    return np.where(_pairs(d) < r, w, 0.0) / p["factor"], 1.0


FREQUENCIES = {"default": _default, "linear": _linear, "dynamic": _dynamic, "yarn": _yarn,
               "longrope": _longrope, "llama3": _llama3, "proportional": _proportional}
