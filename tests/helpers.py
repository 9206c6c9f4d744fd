"""Shared test helpers: random arrays, framework imports that must not skip in CI."""

from __future__ import annotations

import importlib
import os

import numpy as np
import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def require(module: str):
    """Import an optional test dependency: skip locally when missing, fail in CI."""
    if IN_CI:
        return importlib.import_module(module)
    return pytest.importorskip(module)


def randn(rng: np.random.Generator, *shape, dtype=np.float64) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


def max_abs_diff(a, b) -> float:
    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64)), initial=0.0))


def assert_float32_within_framework(ours32, theirs32, oracle64, *, factor=2.0, name="value"):
    """FlashAttention's fair float32 rule: our error against a float64 oracle is no larger than
    ``factor`` times the framework's own float32 error against the same oracle, plus a floor of a
    few float32 ulps at the array's scale (both errors can be ~0 on easy entries)."""
    oracle = np.asarray(oracle64, np.float64)
    scale = max(1.0, float(np.max(np.abs(oracle), initial=0.0)))
    ours, theirs = max_abs_diff(ours32, oracle), max_abs_diff(theirs32, oracle)
    floor = 4 * np.finfo(np.float32).eps * scale
    assert ours <= factor * theirs + floor, (
        f"{name}: our float32 error {ours:.3e} exceeds {factor} x the framework's "
        f"{theirs:.3e} + {floor:.1e}")
