r"""Positional encoding, §3.5, measured: the sinusoids, their shift matrices, their dot products,
and what attention can do without them.

    PE(pos, 2i) = sin(pos · ω_i),  PE(pos, 2i+1) = cos(pos · ω_i),  ω_i = 10000^(-2i/d_model)

- pair ``i`` is a sinusoid of wavelength ``2π / ω_i = 2π · 10000^(2i/d_model)``
  (:func:`sinusoid_wavelengths`; :func:`measured_wavelengths` reads them off the table);
- ``PE(pos + k) = PE(pos) @ M_k`` for every ``pos``, with ``M_k`` a block-diagonal rotation that
  depends on ``k`` only (:func:`shift_matrix`): the paper's reason for choosing sinusoids;
- ``PE(i) · PE(j) = Σ_n cos((i - j) ω_n)`` (sum over the pairs ``n``) depends on ``|i - j|``
  only (:func:`dot_by_distance`, :func:`dot_closed_form`);
- without positions, self-attention is permutation-equivariant, so the prediction at a position
  can depend only on its own token and on the multiset of tokens in the sequence.
  :func:`position_blind_accuracy` is the best held-out token accuracy any such predictor can
  expect on the reversal task, :func:`position_blind_predict` a predictor that reaches it
  (:func:`position_blind_guesses`: every guess that does).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from itertools import combinations
from math import comb

import numpy as np

from attention_np._checks import check_array, check_count, check_ids, check_instance, check_seed, check_tuple
from attention_np.kernels.threads import blas_threads
from attention_np.nn.model import ModelConfig, model_forward
from attention_np.training.tasks import ReversalTask
from attention_np.training.trainer import train

__all__ = [
    "sinusoid_wavelengths", "measured_wavelengths", "shift_matrix", "dot_by_distance",
    "dot_closed_form", "position_blind_accuracy", "position_blind_guesses", "position_blind_predict",
    "train_with_and_without_positions", "POSITIONS_CONFIG", "POSITIONS_STEPS",
]

# The lesson's small model: one encoder layer is enough to reverse 10 digits when it sees positions.
POSITIONS_CONFIG = ModelConfig(max_len=10, vocab_size=10, d_model=32, num_heads=2, d_ff=64,
                               num_layers=1)
POSITIONS_STEPS = 300


def _inv_freq(d_model: int) -> np.ndarray:
    """``ω_i = 10000^(-2i/d_model)``, ``(d_model/2,)``: the angular frequency of pair ``i``."""
    if check_count(d_model, "d_model") % 2:
        raise ValueError(f"d_model must be a positive even int, got {d_model!r}")
    return 10000.0 ** (-np.arange(0, d_model, 2) / d_model)


def sinusoid_wavelengths(d_model: int) -> np.ndarray:
    """``(d_model/2,)``: the wavelength of pair ``i``, ``2π · 10000^(2i/d_model)`` (from 2π up to
    nearly 10000 · 2π, a geometric progression)."""
    return 2 * np.pi / _inv_freq(d_model)


def measured_wavelengths(pe: np.ndarray, pairs) -> np.ndarray:
    """The period of the sine column ``2i`` of a PE table, read off its rising zero crossings.

    Each crossing between two integer positions is located by linear interpolation; the period is
    (last crossing - first crossing) / (number of crossings - 1). NaN where the table holds fewer
    than two rising crossings (a wavelength longer than the table).

    Parameters
    ----------
    pe : (length, d_model) float array
        The table of :func:`attention_np.nn.sinusoidal_encoding`.
    pairs : int array (P,)
        The pair indices ``i`` to measure, in ``[0, d_model / 2)``.

    Returns
    -------
    (P,) float, the measured wavelengths in positions
    """
    pe = check_array(pe, "pe", ndim=2, layout="(length, d_model)").astype(np.float64)
    pairs = check_array(pairs, "pairs", kind="int", ndim=1, layout="(P,)")
    if pe.ndim != 2 or pe.shape[1] % 2:
        raise ValueError(f"pe must be (length, d_model) with d_model even, got shape {pe.shape}")
    if pairs.ndim != 1 or np.any(pairs < 0) or np.any(pairs >= pe.shape[1] // 2):
        raise ValueError(f"pairs must be a 1-d array of ints in [0, {pe.shape[1] // 2}), got {pairs}")
    s = pe[:, 2 * pairs]                                         # (length, P) the sine columns
    a, b = s[:-1], s[1:]                                         # values at p and p + 1
    rising = (a <= 0) & (b > 0)                                  # (length-1, P)
    frac = np.divide(a, a - b, out=np.zeros_like(a), where=rising)   # sin is ~linear at its zeros
    t = np.where(rising, np.arange(len(a))[:, None] + frac, np.nan)  # crossing positions
    n = rising.sum(axis=0)                                       # (P,)
    with np.errstate(invalid="ignore", divide="ignore"):
        span = np.nanmax(np.where(n >= 2, t, 0.0), axis=0) - np.nanmin(np.where(n >= 2, t, 0.0), axis=0)
        return np.where(n >= 2, span / (n - 1), np.nan)


def shift_matrix(k: int, d_model: int) -> np.ndarray:
    """``M_k``, ``(d_model, d_model)``: ``PE(pos + k) = PE(pos) @ M_k`` for every ``pos``.

    Block-diagonal: pair ``i`` (columns ``2i, 2i+1`` = ``sin a, cos a`` with ``a = pos ω_i``) is
    rotated by the angle ``k ω_i``, since ``sin(a + kω) = sin a cos kω + cos a sin kω`` and
    ``cos(a + kω) = cos a cos kω - sin a sin kω``. It depends on ``k``, never on ``pos``.

    Parameters
    ----------
    k : int
        The offset, of any sign (a negative one shifts back; zero gives the identity).
    d_model : int
        Even.
    """
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an int offset (any sign), got {k!r} of type {type(k).__name__}")
    theta = k * _inv_freq(d_model)                               # (d_model/2,)
    c, s = np.cos(theta), np.sin(theta)
    m = np.zeros((d_model, d_model))
    even = np.arange(0, d_model, 2)
    m[even, even], m[even, even + 1] = c, -s                     # row sin a
    m[even + 1, even], m[even + 1, even + 1] = s, c              # row cos a
    return m


def dot_by_distance(pe: np.ndarray) -> tuple[np.ndarray, float]:
    """``PE(i) · PE(j)`` averaged over every pair at each distance ``|i - j|``.

    Parameters
    ----------
    pe : (length, d_model) float array

    Returns
    -------
    mean : (length,) the mean dot product at distance 0, 1, ..., length - 1
    deviation : the largest ``|PE(i) · PE(j) - mean[|i - j|]|`` over all pairs (0 if the dot
        product depends on the distance only)
    """
    pe = check_array(pe, "pe", ndim=2, layout="(length, d_model)").astype(np.float64)
    gram = pe @ pe.T                                             # (L, L) every PE(i) · PE(j)
    pos = np.arange(len(pe))
    dist = np.abs(pos[:, None] - pos[None, :])                   # (L, L) |i - j|
    mean = np.bincount(dist.ravel(), gram.ravel()) / np.bincount(dist.ravel())
    return mean, float(np.abs(gram - mean[dist]).max())


def dot_closed_form(distance, d_model: int) -> np.ndarray:
    """``PE(i) · PE(j) = Σ_n cos(|i - j| ω_n)``, summed over the pairs ``n``
    (``sin a sin b + cos a cos b = cos(a - b)``); ``distance`` of any shape ``S``, returns ``S``.

    Parameters
    ----------
    distance : (n,) int or float array
        Distances ``|i - j|`` (>= 0; any shape).
    d_model : int
        Even.
    """
    distance = check_array(distance, "distance", kind="number", finite=True).astype(np.float64)
    if distance.size and distance.min() < 0:
        raise ValueError(f"distance must be >= 0 (a distance |i - j|), got a minimum of {distance.min()}")
    return np.cos(distance[..., None] * _inv_freq(d_model)).sum(axis=-1)


def _multisets(length: int, vocab_size: int) -> np.ndarray:
    """Every count vector ``c`` with ``sum(c) = length``, ``(n, vocab_size)`` (stars and bars)."""
    bars = np.array(list(combinations(range(length + vocab_size - 1), vocab_size - 1)),
                    dtype=np.int64).reshape(-1, vocab_size - 1)
    edges = np.concatenate([np.full((len(bars), 1), -1), bars,
                            np.full((len(bars), 1), length + vocab_size - 1)], axis=1)
    return np.diff(edges, axis=1) - 1                            # (n, V) stars between bars


def _best_scores(counts: np.ndarray, length: int) -> np.ndarray:
    """``(..., V, V)``: for own token ``a`` (axis -2) and guess ``b`` (axis -1), how many of the
    positions holding ``a`` expect target ``b``, times ``L - even`` (the same argmax).

    For even ``L`` position ``i`` pairs with ``L-1-i ≠ i``: the other position holds ``b`` with
    probability ``(c_b - [a = b]) / (L - 1)``. For odd ``L`` the middle position is its own target,
    and the two cases add up to ``c_b / L`` for every ``b``.
    """
    v = counts.shape[-1]
    even = 1 - length % 2
    return counts[..., None, :] - even * np.eye(v, dtype=counts.dtype)


def position_blind_accuracy(length: int, vocab_size: int) -> float:
    """The best expected token accuracy on :class:`ReversalTask` of any predictor that, at each
    position, sees only its own token and the multiset of the sequence's tokens (what a
    Transformer without positional encoding sees: it is permutation-equivariant).

    Exact: a sum over every multiset of ``length`` tokens, weighted by its multinomial
    probability; given the multiset, the sequence is a uniformly random arrangement of it, and the
    best guess for a position holding ``a`` is the token most likely at its mirror position.
    """
    task = ReversalTask(length=length, vocab_size=vocab_size)            # validates both
    L, V = task.length, task.vocab_size
    if comb(L + V - 1, V - 1) > 5_000_000:
        raise ValueError(f"length {L}, vocab_size {V}: {comb(L + V - 1, V - 1)} multisets to sum "
                         f"over, more than the 5 000 000 this exact sum allows")
    counts = _multisets(L, V)                                            # (n, V)
    log_fact = np.concatenate([[0.0], np.cumsum(np.log(np.arange(1, L + 1)))])
    prob = np.exp(log_fact[L] - log_fact[counts].sum(axis=1) - L * np.log(V))   # (n,) multinomial
    denom = L - (1 - L % 2)
    best = _best_scores(counts, L).max(axis=-1)                          # (n, V) per own token a
    right = (counts * best).sum(axis=1) / denom                          # expected right tokens
    return float(prob @ right / L)


def position_blind_guesses(tokens, vocab_size: int) -> np.ndarray:
    """``(B, L) -> (B, L, vocab_size)`` bool: the guesses that score best without positions.

    Position ``i`` holding token ``a`` should guess a most frequent token of the sequence, with one
    copy of ``a`` (itself) removed when ``L`` is even; ties give several equally good guesses.

    Parameters
    ----------
    tokens : int array (B, L)
        Ids in ``[0, vocab_size)``.
    vocab_size : int
    """
    vocab_size = check_count(vocab_size, "vocab_size")
    tokens = check_ids(tokens, "tokens", vocab_size, ndim=2, layout="(B, L)")
    counts = (tokens[..., None] == np.arange(vocab_size)).sum(axis=1)   # (B, V)
    scores = _best_scores(counts, tokens.shape[1])                       # (B, V own, V guess)
    best = scores == scores.max(axis=-1, keepdims=True)                  # (B, V, V)
    return np.take_along_axis(best, tokens[..., None], axis=1)           # (B, L, V)


def position_blind_predict(tokens, vocab_size: int) -> np.ndarray:
    """``(B, L) -> (B, L)``: one best position-blind guess per position (ties: the lowest token).

    Parameters
    ----------
    tokens : int array (B, L)
        Ids in ``[0, vocab_size)``.
    vocab_size : int
    """
    return position_blind_guesses(tokens, vocab_size).argmax(axis=-1)


def train_with_and_without_positions(seeds=(0,), *, config: ModelConfig = POSITIONS_CONFIG,
                                     steps: int = POSITIONS_STEPS, batch_size: int = 64,
                                     snapshot_at=()) -> dict:
    """Train the same model on :class:`ReversalTask` with and without positional encoding.

    Same seeds, same initial params, same batches, same budget; only ``config.positional``
    differs. Runs on one BLAS thread (see :mod:`attention_np.kernels.threads`).

    Parameters
    ----------
    seeds : tuple of int
        Seeds >= 0, one run each (with and without positions).
    config : ModelConfig
    steps : int >= 0
        Adam steps (0: the initial params, evaluated).
    batch_size : int
    snapshot_at : tuple of int
        Steps after which to record the attention weights (as :func:`attention_np.training.train`).

    Returns
    -------
    dict ``{True: {seed: TrainResult}, False: {seed: TrainResult}}`` keyed by ``positional``
    """
    check_tuple(seeds, "seeds", item=check_seed, nonempty=True)
    check_tuple(snapshot_at, "snapshot_at")
    check_instance(config, ModelConfig, "config")
    task = ReversalTask(length=config.max_len, vocab_size=config.vocab_size)
    out = {}
    with blas_threads(1):
        for positional in (True, False):
            cfg = replace(config, positional=positional)
            out[positional] = {s: train(config=cfg, task=task, steps=steps, batch_size=batch_size,
                                        seed=s, snapshot_at=snapshot_at) for s in seeds}
    return out


@dataclass(frozen=True)
class ShiftTask(ReversalTask):
    """Copy the left neighbour: ``y_i = x_{i-1}`` (``y_0 = x_0``), a fixed relative offset.

    Unlike reversal (whose target position ``L - 1 - i`` depends on the length), the rule is the
    same at every length, so a model trained on short sequences can be scored on longer ones.
    """

    def targets(self, tokens: np.ndarray) -> np.ndarray:
        out = tokens.copy()
        out[..., 1:] = tokens[..., :-1]
        return out


def extrapolation(seed: int = 0, *, config: ModelConfig = POSITIONS_CONFIG, steps: int = POSITIONS_STEPS,
                  test_lengths=(10, 20, 40, 80), n: int = 500) -> dict:
    """§3.5's "may allow the model to extrapolate to sequence lengths longer than the ones encountered
    during training", measured: train :class:`ShiftTask` at ``config.max_len``, score longer sequences.

    The same parameters run at every length (only the sinusoid table grows). Token accuracy is
    reported separately at the positions seen in training (``i < max_len``) and beyond them.

    Parameters
    ----------
    seed : int >= 0
    config : ModelConfig
    steps : int >= 0
    test_lengths : tuple of int >= 1
        The lengths scored (a list or range is taken too).
    n : int >= 1
        Sequences scored at each length.

    Returns
    -------
    dict with ``train_length``, ``heldout_accuracy`` (at the training length) and ``by_length``:
    ``{L: (accuracy at i < train_length, accuracy at i >= train_length or nan)}``
    """
    check_seed(seed)
    check_instance(config, ModelConfig, "config")
    check_count(steps, "steps", minimum=0)
    test_lengths = check_tuple(test_lengths, "test_lengths", item=check_count, nonempty=True, sequence=True)
    check_count(n, "n")
    task = ShiftTask(length=config.max_len, vocab_size=config.vocab_size)
    with blas_threads(1):
        r = train(config=config, task=task, steps=steps, batch_size=64, seed=seed)
        rng = np.random.default_rng(10_000 + seed)
        by_length = {}
        for length in test_lengths:
            tokens = rng.integers(0, config.vocab_size, size=(n, length))
            targets = ShiftTask(length=1, vocab_size=config.vocab_size).targets(tokens)
            logits, _ = model_forward(r.params, tokens, replace(config, max_len=length))
            right = logits.argmax(-1) == targets                          # (n, length)
            seen = config.max_len
            by_length[length] = (float(right[:, :seen].mean()),
                                 float(right[:, seen:].mean()) if length > seen else float("nan"))
    return {"train_length": config.max_len, "heldout_accuracy": r.accuracy, "by_length": by_length}
