"""A generated sequence-to-sequence task whose alignment is not the identity: dates written in
many formats -> ISO 8601.

    "3rd of March 1999"            -> "1999-03-03"
    "March 3, 99"                  -> "1999-03-03"
    "Wednesday, March 3, 1999"     -> "1999-03-03"
    "03.03.1999"                   -> "1999-03-03"

Day, month and year move between formats, so each output character must find its source in a
different place: the encoder-decoder attention has an alignment to learn and to show.
Character level, one vocabulary for source and target (so the embeddings can be shared, §3.4).
Dates run from 1950-01-01 to 2049-12-31; a two-digit year ``yy`` means 19yy when ``yy >= 50``.
Held-out *dates* are never seen in training, in any format.
"""

from __future__ import annotations

import datetime as dt
import functools
from dataclasses import dataclass, field

import numpy as np

from attention_np._checks import (
    as_generator,
    check_array,
    check_count,
    check_fields,
    check_rng,
    check_seed,
    check_str,
)

PAD, BOS, EOS = 0, 1, 2
SPECIALS = ("<pad>", "<bos>", "<eos>")
CHARS = " ,./-0123456789" + "abcdefghijklmnopqrstuvwxyz" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
VOCAB = SPECIALS + tuple(CHARS)
CHAR_ID = {c: i + len(SPECIALS) for i, c in enumerate(CHARS)}
FIRST, LAST = dt.date(1950, 1, 1), dt.date(2049, 12, 31)
NUM_DATES = (LAST - FIRST).days + 1
ISO_LEN = 10                          # "1999-03-03"
MAX_SRC_LEN = 32


def ordinal(n: int) -> str:
    """``1 -> "1st"``, ``2 -> "2nd"``, ``11 -> "11th"``, ``23 -> "23rd"``."""
    n = check_count(n, "n", minimum=0)
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _month(d):
    return d.strftime("%B")


FORMATS = (                           # each a function of a datetime.date
    lambda d: f"{ordinal(d.day)} of {_month(d)} {d.year}",            # 3rd of March 1999
    lambda d: f"{_month(d)} {d.day}, {d.year % 100:02d}",              # March 3, 99
    lambda d: f"{_month(d)} {d.day}, {d.year}",                        # March 3, 1999
    lambda d: f"{d.strftime('%A')}, {_month(d)} {d.day}, {d.year}",    # Wednesday, March 3, 1999
    lambda d: f"{d.day:02d}.{d.month:02d}.{d.year}",                   # 03.03.1999
    lambda d: f"{d.day}.{d.month}.{d.year % 100:02d}",                 # 3.3.99
    lambda d: f"{d.month:02d}/{d.day:02d}/{d.year}",                   # 03/03/1999 (US order)
    lambda d: f"{d.day} {_month(d)[:3]} {d.year}",                     # 3 Mar 1999
    lambda d: f"{d.day:02d} {_month(d)[:3].upper()} {d.year % 100:02d}",  # 03 MAR 99
    lambda d: f"{_month(d).lower()} {ordinal(d.day)}, {d.year}",       # march 3rd, 1999
    lambda d: f"{d.year}/{d.month:02d}/{d.day:02d}",                   # 1999/03/03
    lambda d: f"{d.year}{d.month:02d}{d.day:02d}",                     # 19990303
)


def date_of(index: int) -> dt.date:
    """The ``index``-th date from 1950-01-01 (``0 <= index < NUM_DATES``, up to 2049-12-31)."""
    index = check_count(index, "index", minimum=0, maximum=NUM_DATES - 1)
    return FIRST + dt.timedelta(days=int(index))


def encode_text(text: str) -> list[int]:
    """The token ids of ``text``'s characters (each one of :data:`CHARS`)."""
    check_str(text, "text")
    bad = sorted(set(text) - set(CHAR_ID))
    if bad:
        raise ValueError(f"text has characters outside the task's vocabulary: {bad} (in {text!r})")
    return [CHAR_ID[c] for c in text]


def decode_ids(ids) -> str:
    """Token ids -> text, stopping at ``<eos>``, skipping ``<pad>`` and ``<bos>``."""
    ids = check_array(ids, "ids", kind="int", ndim=1, layout="(L,)")
    if ids.size and (ids.min() < 0 or ids.max() >= len(VOCAB)):
        raise ValueError(f"ids must be in [0, {len(VOCAB)}) (the task's vocabulary), got values in "
                         f"[{ids.min()}, {ids.max()}]")
    out = []
    for i in ids.tolist():
        if i == EOS:
            break
        if i >= len(SPECIALS):
            out.append(VOCAB[i])
    return "".join(out)


@dataclass(frozen=True)
class DateBatch:
    """``src (B, S)`` padded with ``<pad>``, ``src_mask (B, S)`` True at characters,
    ``tgt_in (B, 11)`` = ``<bos>`` + ISO, ``tgt_out (B, 11)`` = ISO + ``<eos>``, and the texts."""

    src: np.ndarray
    src_mask: np.ndarray
    tgt_in: np.ndarray
    tgt_out: np.ndarray
    texts: list = field(default_factory=list)
    isos: list = field(default_factory=list)


def make_batch(dates, formats) -> DateBatch:
    """The batch of ``dates[i]`` written in format ``formats[i]`` (at least one date)."""
    if isinstance(dates, (str, dt.date)) or not hasattr(dates, "__len__") or len(dates) == 0:
        raise TypeError(f"dates must be a non-empty sequence of datetime.date, got {dates!r:.60}")
    for i, d in enumerate(dates):
        if not isinstance(d, dt.date) or not FIRST <= d <= LAST:
            raise ValueError(f"dates[{i}] must be a datetime.date from {FIRST} to {LAST}, got {d!r}")
    formats = check_array(formats, "formats", kind="int", shape=(len(dates),), layout="(len(dates),)")
    if formats.min() < 0 or formats.max() >= len(FORMATS):
        raise ValueError(f"formats must be in [0, {len(FORMATS)}) (indices of FORMATS), got values in "
                         f"[{formats.min()}, {formats.max()}]")
    texts = [FORMATS[f](d) for d, f in zip(dates, formats, strict=True)]
    isos = [d.isoformat() for d in dates]
    src = np.full((len(texts), MAX_SRC_LEN), PAD, dtype=np.int64)
    for i, t in enumerate(texts):      # building strings is Python; the model is vectorized
        src[i, :len(t)] = encode_text(t)
    width = max(len(t) for t in texts)
    src = src[:, :width]
    iso = np.array([encode_text(s) for s in isos], dtype=np.int64).reshape(-1, ISO_LEN)
    B = len(texts)
    tgt_in = np.concatenate([np.full((B, 1), BOS), iso], axis=1)
    tgt_out = np.concatenate([iso, np.full((B, 1), EOS)], axis=1)
    return DateBatch(src, src != PAD, tgt_in, tgt_out, texts, isos)


@functools.lru_cache(maxsize=8)
def _split(heldout_size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(seed).permutation(NUM_DATES)
    train, held = np.sort(perm[heldout_size:]), np.sort(perm[:heldout_size])
    train.flags.writeable = held.flags.writeable = False
    return train, held


@dataclass(frozen=True)
class DatesTask:
    """Dates in ``len(FORMATS)`` formats -> ISO; ``heldout_size`` dates kept out of training.

    The held-out dates are drawn from ``seed``; every training batch draws its dates from the
    others, so held-out accuracy measures dates never seen in training.
    """

    heldout_size: int = 1000
    seed: int = 12345

    def __post_init__(self):
        check_fields(self, {"heldout_size": check_count, "seed": check_seed})
        if not 1 <= self.heldout_size < NUM_DATES:
            raise ValueError(f"heldout_size must be in [1, {NUM_DATES}), got {self.heldout_size}")

    @property
    def vocab_size(self) -> int:
        return len(VOCAB)

    def split(self) -> tuple[np.ndarray, np.ndarray]:
        """``(train_indices, heldout_indices)``: disjoint date indices, together all dates
        (read-only arrays, computed once per ``(heldout_size, seed)``: every batch needs them)."""
        return _split(self.heldout_size, self.seed)

    def heldout(self) -> DateBatch:
        """Every held-out date, each in a format drawn from ``seed``."""
        _, held = self.split()
        formats = np.random.default_rng(self.seed + 1).integers(0, len(FORMATS), len(held))
        return make_batch([date_of(i) for i in held], formats)

    def train_batch(self, rng, n: int) -> DateBatch:
        """``n`` training dates (never held out), each in a random format (``n >= 1``)."""
        check_rng(rng)
        check_count(n, "n")
        rng = as_generator(rng)
        train, _ = self.split()
        idx = train[rng.integers(0, len(train), n)]
        return make_batch([date_of(i) for i in idx], rng.integers(0, len(FORMATS), n))
