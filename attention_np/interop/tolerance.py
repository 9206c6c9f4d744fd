"""When do two attention implementations agree? The tolerance policy of every diff.

- **float64**: both sides compute in true float64, so they agree to rounding:
  ``max|a - b| <= RTOL64 * max(1, max|b|)`` with ``RTOL64 = 1e-10`` (measured errors are ~1e-15).
- **float32**: compare each side with a float64 *oracle* (attention_np in float64 on the same,
  float32-rounded, inputs) instead of with each other. Float32 error grows with the size of the
  scores and the length of the sums, so no fixed number is fair; instead each float32
  implementation is held to the other's error against the oracle: ``err <= FACTOR32 *
  max(peer_err, floor)`` with ``floor = FLOOR_ULPS * eps32 * max(1, max|oracle|)``, the error
  of rounding a few times. A bug shows as an error orders of magnitude above its peer's;
  summation-order noise stays within the factor.

Non-finite entries: a NaN on either side is a mismatch, even NaN against NaN (``err`` is NaN,
which is not ``<= tol``); an infinite reference entry agrees only with the same infinity. The size
of the reference, which scales the tolerance, is taken over its finite entries, so one ``inf``
cannot make the tolerance infinite.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

RTOL64 = 1e-10
FACTOR32 = 10.0
FLOOR_ULPS = 4.0
EPS32 = float(np.finfo(np.float32).eps)


def max_abs_error(got, ref) -> float:
    """``max|got - ref|`` in float64.

    NaN (a failure) when either side has a NaN, or when a non-finite ``ref`` entry differs from
    ``got``'s; equal infinities count as no error.
    """
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    if got.shape != ref.shape:
        raise ValueError(f"cannot compare shapes {got.shape} and {ref.shape}")
    with np.errstate(invalid="ignore"):                      # inf - inf is NaN, on purpose
        diff = np.abs(got - ref)
    non_finite = ~np.isfinite(ref)
    diff[non_finite & (got == ref)] = 0.0                    # the same infinity on both sides
    diff[non_finite & (got != ref)] = np.nan                 # also catches NaN in ref
    return float(np.nan) if np.isnan(diff).any() else float(np.max(diff, initial=0.0))


def reference_size(ref) -> float:
    """``max|ref|`` over the finite entries (0 for none): the scale the tolerances grow with."""
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.max(np.abs(ref[np.isfinite(ref)]), initial=0.0))


@dataclass(frozen=True)
class Check:
    """One compared array: its error against the reference and the tolerance it is held to.

    ``peer_err`` is the other float32 implementation's error against the oracle (float32 rule
    only; None under the float64 rule).
    """

    name: str
    err: float
    size: float
    tol: float
    rule: str
    peer_err: float | None = None

    @property
    def rel(self) -> float:
        """The error relative to the largest reference entry (normwise, robust near zero)."""
        return self.err / self.size if self.size else self.err

    @property
    def ok(self) -> bool:
        return bool(self.err <= self.tol)

    @property
    def ratio(self) -> float:
        """``err / tol``: below 1 passes; how much headroom is left."""
        return self.err / self.tol if self.tol else (0.0 if self.err == 0 else np.inf)


def check_float64(name: str, got, ref) -> Check:
    """``got`` against a float64 reference ``ref``: ``max|got - ref| <= RTOL64 * max(1, max|ref|)``."""
    size = reference_size(ref)
    return Check(name, max_abs_error(got, ref), size, RTOL64 * max(1.0, size), "float64")


def float32_floor(oracle) -> float:
    """The error of rounding a few times at the oracle's scale: ``FLOOR_ULPS * eps32 * max(1, size)``."""
    return FLOOR_ULPS * EPS32 * max(1.0, reference_size(oracle))


def check_float32(name: str, got, oracle, peer) -> Check:
    """``got`` (float32-accurate) against the float64 ``oracle``, held to ``peer``'s error.

    ``peer`` is another float32 computation of the same thing (ours when judging a framework,
    the framework's when judging ours).
    """
    size = reference_size(oracle)
    peer_err = max_abs_error(peer, oracle)
    # A peer with NaNs has no error to lend: fall back to the floor (it fails its own check).
    tol = FACTOR32 * max(peer_err if np.isfinite(peer_err) else 0.0, float32_floor(oracle))
    return Check(name, max_abs_error(got, oracle), size, tol, "float32", peer_err)


def judge(got: dict, oracle: dict, ours32: dict | None = None, *, judge_ours: bool = True) -> list:
    """Every array of ``got`` against the float64 ``oracle``, one :class:`Check` each.

    Without ``ours32`` the float64 rule applies. With it (attention_np's own float32 run) the
    float32 rule: ``got`` is held to ``ours32``'s error and, if ``judge_ours``, ``ours32`` to
    ``got``'s in turn (checks named ``"ours <name>"``).
    """
    if ours32 is None:
        return [check_float64(n, got[n], oracle[n]) for n in oracle]
    checks = [check_float32(n, got[n], oracle[n], ours32[n]) for n in oracle]
    if judge_ours:
        checks += [check_float32(f"ours {n}", ours32[n], oracle[n], got[n]) for n in oracle]
    return checks
