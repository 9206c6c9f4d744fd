"""Toy tasks where attention must route information from one position to another.

Reversal: the target at position ``i`` is the input token at position ``L - 1 - i``. Each
output depends on exactly one input position, chosen by position alone, so a model that
solves it must learn attention weights that form the anti-diagonal.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attention_np._checks import as_generator, check_array, check_count, check_fields, check_rng, check_seed


@dataclass(frozen=True)
class ReversalTask:
    """Reverse a sequence of ``length`` digits in ``[0, vocab_size)``.

    Held-out sequences are drawn once from their own seed, and every training batch drops
    any sequence that is in the held-out set, so held-out accuracy measures generalization
    to sequences never seen in training (there are ``vocab_size ** length`` of them).
    Each sequence's id must fit in an int64, so ``vocab_size ** length <= 2**63``
    (at most 18 digits of base 10).
    """

    length: int = 10
    vocab_size: int = 10

    def __post_init__(self):
        check_fields(self, {"length": check_count,
                            "vocab_size": lambda n, name: check_count(n, name, minimum=2)})
        if self.length < 1 or self.vocab_size < 2:
            raise ValueError(f"need length >= 1 and vocab_size >= 2, got length {self.length}, "
                             f"vocab_size {self.vocab_size}")
        if self.vocab_size ** self.length > 2 ** 63:        # Python ints: exact
            raise ValueError(f"{self.vocab_size} ** {self.length} sequences do not fit the "
                             f"int64 ids of ReversalTask.ids; use a shorter length")

    def _check_tokens(self, tokens) -> np.ndarray:
        """``tokens (..., length)`` ids in ``[0, vocab_size)``."""
        tokens = check_array(tokens, "tokens", kind="int", min_ndim=1, layout="(..., length)")
        if tokens.shape[-1] != self.length:
            raise ValueError(f"tokens must be (..., length={self.length}), got shape {tokens.shape}")
        if tokens.size and (tokens.min() < 0 or tokens.max() >= self.vocab_size):
            raise ValueError(f"tokens must be in [0, {self.vocab_size}), got values in "
                             f"[{tokens.min()}, {tokens.max()}]")
        return tokens

    @property
    def num_sequences(self) -> int:
        """How many distinct sequences there are: ``vocab_size ** length``."""
        return self.vocab_size ** self.length

    def targets(self, tokens: np.ndarray) -> np.ndarray:
        """``(B, L) -> (B, L)``: the reversed sequences."""
        tokens = self._check_tokens(tokens)
        return tokens[..., ::-1].copy()

    def sample(self, rng, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``n`` random sequences and their targets, ``(n, length)`` int each."""
        check_rng(rng)
        check_count(n, "n", minimum=0)
        tokens = as_generator(rng).integers(0, self.vocab_size, size=(n, self.length))
        return tokens, self.targets(tokens)

    def ids(self, tokens: np.ndarray) -> np.ndarray:
        """Each sequence as one integer (its digits in base ``vocab_size``), for set lookups."""
        tokens = self._check_tokens(tokens)
        powers = self.vocab_size ** np.arange(self.length - 1, -1, -1, dtype=np.int64)
        return tokens.astype(np.int64) @ powers

    def heldout(self, n: int | None = None, seed: int = 12345) -> tuple[np.ndarray, np.ndarray]:
        """A fixed held-out set of up to ``n`` distinct sequences.

        By default ``n = min(2000, num_sequences // 10)``: at most a tenth of all sequences,
        so training batches (which drop held-out sequences) keep about 90% of their draws.
        ``2 n`` draws are deduplicated, so a set close to the whole space can come out smaller
        than ``n``.
        """
        check_count(n, "n", optional=True)
        check_seed(seed)
        if n is None:
            n = max(1, min(2000, self.num_sequences // 10))
        tokens, _ = self.sample(seed, 2 * n)
        _, first = np.unique(self.ids(tokens), return_index=True)
        tokens = tokens[np.sort(first)[:n]]
        return tokens, self.targets(tokens)

    def train_batch(self, rng, n: int, heldout_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A batch of at most ``n`` sequences, none of them in the held-out set.

        ``heldout_ids`` (``ids`` of the held-out sequences) is sorted here unless it already is:
        pass it sorted to save the sort on every batch, as :func:`attention_np.training.train` does.
        """
        check_rng(rng)
        check_count(n, "n", minimum=0)
        heldout_ids = check_array(heldout_ids, "heldout_ids", kind="int")
        tokens, _ = self.sample(rng, n)
        tokens = tokens[~_member(self.ids(tokens), heldout_ids)]
        return tokens, self.targets(tokens)


def _member(ids: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """``np.isin(ids, pool)`` by binary search in the sorted ``pool``: a batch of 64 against
    2000 held-out ids costs microseconds, where ``np.isin`` sorts both arrays on every call."""
    pool = np.asarray(pool).reshape(-1)
    if pool.size == 0:
        return np.zeros(ids.shape, bool)
    if np.any(pool[1:] < pool[:-1]):
        pool = np.sort(pool)
    at = np.minimum(np.searchsorted(pool, ids), pool.size - 1)       # (n,) where each id would go
    return pool[at] == ids
