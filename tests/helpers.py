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
