"""Throw bad values at every public function and every CLI subcommand; list what is not refused by name.

For each name in ``attention_np.__all__`` a valid call is written below (``CALLS``); the fuzzer
replaces one argument at a time by bad values of its kind (a string, a bool where a number is
meant, a negative or zero size, NaN and inf where a size or a scale is meant, an array of the
wrong rank, of mismatched shape, of an integer or bool dtype) and sorts each call into

- **named**: a ``ValueError`` or ``TypeError`` whose message names the argument (the wanted outcome);
- **unnamed**: any other exception (``ZeroDivisionError``, ``IndexError``, a NumPy broadcasting
  error, ...), or a ValueError/TypeError that does not name the argument;
- **accepted**: no error, for a value that is never valid.

The CLI part runs each subcommand's parser (``python -m attention_np SUB ...``) with bad flag
values and expects exit status 2 with a one-line message naming the flag, and no traceback.

Usage (from the repository root)::

    PYTHONPATH=. python tools/fuzz_calls.py            # prints the findings, exit 1 if any
    PYTHONPATH=. python tools/fuzz_calls.py --cli      # also the CLI flags (slower: subprocesses)

``tests/api/test_bad_inputs.py`` holds the cases this found, as tests.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import warnings

import numpy as np

import attention_np as an

R = np.random.default_rng(0)
Q, K, V = R.standard_normal((2, 3, 4)), R.standard_normal((2, 5, 4)), R.standard_normal((2, 5, 6))
DOUT = R.standard_normal((2, 3, 6))
X = R.standard_normal((2, 3, 8))
P = an.init_mha_params(8, 2, rng=0)
AP = an.init_additive_params(4, rng=0)

# kinds of argument -> bad values (label, value). Every one is never valid for that kind.
BAD = {
    "array": [
        ("str", "abc"),
        ("None", None),
        ("int dtype", "INT"),
        ("bool dtype", "BOOL"),
        ("0-d", "0D"),
        ("NaN scalar", float("nan")),
    ],
    # an array whose last dim must match another argument's
    "array_w": [
        ("str", "abc"),
        ("None", None),
        ("int dtype", "INT"),
        ("bool dtype", "BOOL"),
        ("0-d", "0D"),
        ("wrong last dim", "LAST"),
    ],
    # a reshape (split_heads, merge_heads): any dtype is fine, the rank is not
    "any_array": [("str", "abc"), ("None", None), ("0-d", "0D")],
    "count": [
        ("bool", True),
        ("negative", -1),
        ("zero", 0),
        ("float", 1.5),
        ("NaN", float("nan")),
        ("inf", float("inf")),
        ("str", "3"),
    ],
    "size0": [("bool", True), ("negative", -1), ("float", 1.5), ("NaN", float("nan")), ("str", "3")],
    "axis": [("bool", True), ("float", 1.5), ("str", "3"), ("out of range", 7)],
    "real": [("NaN", float("nan")), ("inf", float("inf")), ("str", "x"), ("bool", True)],
    "positive": [
        ("NaN", float("nan")),
        ("inf", float("inf")),
        ("zero", 0.0),
        ("negative", -1.0),
        ("str", "x"),
        ("bool", True),
    ],
    "flag": [("str", "no"), ("int", 1), ("float", 1.5)],
    "choice": [("unknown", "nonsense"), ("int", 3), ("None", None)],
    "d_ks": [("negative", [-1]), ("zero", [0]), ("float", [1.5]), ("bool", [True]), ("str", "ab")],
    "rng": [("str", "seed"), ("float", 1.5)],
    "dict": [("str", "abc"), ("list", [1, 2])],
    "cache": [("str", "abc"), ("None", None)],
}


def mutate(good, marker):
    """The bad value ``marker`` made from the good array ``good`` where it depends on it."""
    if not isinstance(marker, str) or marker not in ("INT", "BOOL", "0D", "LAST"):
        return marker
    g = np.asarray(good)
    return {
        "INT": lambda: g.astype(np.int64) + 1,
        "BOOL": lambda: g > 0,
        "0D": lambda: g.reshape(-1)[0],
        "LAST": lambda: np.concatenate([g, g[..., :1]], -1),
    }[marker]()


def _sdpa_cache():
    return an.sdpa_forward(Q, K, V)[1]


def _mha_cache():
    return an.mha_forward(X, X, X, P, num_heads=2)[1]


def _tiled_cache():
    return an.flash_attention_forward(Q, K, V, block_size=2)[1]


def _sinks_cache():
    return an.sdpa_sinks_forward(Q[:, None], K[:, None], V[:, None], np.zeros(1))[1]


def _add_cache():
    return an.additive_attention_forward(Q, K, V, AP)[1]


def _kv():
    c = an.KVCache(8)
    return c


# name -> (callable, args dict in order, kinds of args to fuzz {name: kind}); positional args are
# the dict's first entries up to "*", keywords after.
CALLS = {
    "AttentionSpec": (
        an.AttentionSpec,
        {"*": 0, "window": (2, 0), "softcap": 30.0, "dropout_p": 0.1, "enable_gqa": False},
        {"softcap": "positive", "enable_gqa": "flag"},
    ),
    "RoPE": (
        an.RoPE,
        {"*": 0, "theta": 10000.0, "rotary_dim": 4},
        {"theta": "positive", "rotary_dim": "count"},
    ),
    "lengths_mask": (
        an.lengths_mask,
        {"*": 0, "q_lengths": [2, 3], "kv_lengths": [4, 5], "L": 3, "S": 5},
        {"L": "size0", "S": "size0"},
    ),
    "softmax": (an.softmax, {"x": Q, "*": 0, "axis": -1}, {"x": "array", "axis": "axis"}),
    "softmax_backward": (an.softmax_backward, {"dp": Q, "p": an.softmax(Q)}, {"dp": "array", "p": "array"}),
    "causal_mask": (an.causal_mask, {"L": 3, "S": 5}, {"L": "size0", "S": "size0"}),
    "padding_mask": (an.padding_mask, {"lengths": np.array([2, 3]), "S": 5}, {"S": "size0"}),
    "mask_from_blocked": (an.mask_from_blocked, {"blocked": np.eye(3, dtype=bool)}, {}),
    "sliding_window_mask": (
        an.sliding_window_mask,
        {"L": 4, "S": 4, "*": 0, "left": 1, "right": 0},
        {"L": "size0", "S": "size0", "left": "size0", "right": "size0"},
    ),
    "scaled_dot_product_attention": (
        an.scaled_dot_product_attention,
        {"q": Q, "k": K, "v": V, "*": 0, "is_causal": False, "scale": 0.5},
        {"q": "array_w", "k": "array_w", "v": "array", "is_causal": "flag", "scale": "real"},
    ),
    "sdpa_forward": (
        an.sdpa_forward,
        {"q": Q, "k": K, "v": V, "*": 0, "is_causal": False, "scale": 0.5},
        {"q": "array_w", "k": "array_w", "v": "array", "is_causal": "flag", "scale": "real", "rng": "rng"},
    ),
    "sdpa_backward": (an.sdpa_backward, {"dout": DOUT, "cache": "SDPA"}, {"dout": "array", "cache": "cache"}),
    "split_heads": (an.split_heads, {"x": X, "num_heads": 2}, {"x": "any_array", "num_heads": "count"}),
    "merge_heads": (an.merge_heads, {"x": an.split_heads(X, 2)}, {"x": "any_array"}),
    "linear_forward": (
        an.linear_forward,
        {"x": X, "W": P["W_q"], "b": P.get("b_q")},
        {"x": "array_w", "W": "array"},
    ),
    "linear_backward": (
        an.linear_backward,
        {"dy": X, "x": X, "W": P["W_q"], "has_bias": True},
        {"dy": "array_w", "x": "array_w", "W": "array", "has_bias": "flag"},
    ),
    "glorot_uniform": (
        an.glorot_uniform,
        {"rng": np.random.default_rng(0), "fan_in": 3, "fan_out": 4},
        {"fan_in": "count", "fan_out": "count"},
    ),
    "init_mha_params": (
        an.init_mha_params,
        {"d_model": 8, "num_heads": 2, "*": 0, "d_k": 4, "d_v": 4, "rng": 0},
        {"d_model": "count", "num_heads": "count", "d_k": "count", "d_v": "count", "rng": "rng"},
    ),
    "mha_forward": (
        an.mha_forward,
        {
            "query": X,
            "key": X,
            "value": X,
            "params": P,
            "*": 0,
            "num_heads": 2,
            "is_causal": False,
            "scale": 0.5,
        },
        {
            "query": "array_w",
            "key": "array_w",
            "value": "array_w",
            "params": "dict",
            "num_heads": "count",
            "is_causal": "flag",
            "scale": "real",
        },
    ),
    "mha_backward": (an.mha_backward, {"dout": X, "cache": "MHA"}, {"dout": "array", "cache": "cache"}),
    "numerical_gradient": (
        an.numerical_gradient,
        {"loss": lambda: float((Q**2).sum()), "x": Q, "eps": 1e-6},
        {"x": "array", "eps": "positive"},
    ),
    "rope_angles": (
        an.rope_angles,
        {"positions": np.arange(3), "d": 4, "*": 0, "theta": 100.0},
        {"d": "count", "theta": "positive"},
    ),
    "rope_frequencies": (
        an.rope_frequencies,
        {"d": 4, "*": 0, "theta": 100.0},
        {"d": "count", "theta": "positive"},
    ),
    "apply_rope": (
        an.apply_rope,
        {"x": Q, "positions": np.arange(3), "*": 0, "theta": 100.0},
        {"x": "array", "theta": "positive", "layout": "choice"},
    ),
    "apply_rope_backward": (
        an.apply_rope_backward,
        {"dx_rot": Q, "positions": np.arange(3), "*": 0, "theta": 100.0},
        {"dx_rot": "array", "theta": "positive", "layout": "choice"},
    ),
    "relative_positions": (
        an.relative_positions,
        {"L": 3, "S": 4},
        {"L": "size0", "S": "size0", "align": "choice"},
    ),
    "alibi_slopes": (an.alibi_slopes, {"num_heads": 4}, {"num_heads": "count"}),
    "alibi_bias": (
        an.alibi_bias,
        {"slopes": an.alibi_slopes(2), "L": 3, "S": 4},
        {"slopes": "array", "L": "size0", "S": "size0", "align": "choice"},
    ),
    "t5_relative_buckets": (
        an.t5_relative_buckets,
        {"relative_position": an.relative_positions(3, 4), "*": 0, "num_buckets": 8, "max_distance": 16},
        {"num_buckets": "count", "max_distance": "count", "bidirectional": "flag"},
    ),
    "relative_position_bias": (
        an.relative_position_bias,
        {
            "table": R.standard_normal((8, 2)),
            "buckets": an.t5_relative_buckets(an.relative_positions(3, 4), num_buckets=8),
        },
        {"table": "array"},
    ),
    "relative_position_bias_backward": (
        an.relative_position_bias_backward,
        {
            "dbias": R.standard_normal((2, 3, 4)),
            "buckets": an.t5_relative_buckets(an.relative_positions(3, 4), num_buckets=8),
            "num_buckets": 8,
        },
        {"dbias": "array", "num_buckets": "count"},
    ),
    "sdpa_sinks_forward": (
        an.sdpa_sinks_forward,
        {"q": Q[:, None], "k": K[:, None], "v": V[:, None], "sinks": np.zeros(1), "*": 0, "is_causal": False},
        {"q": "array_w", "k": "array_w", "v": "array", "sinks": "array", "is_causal": "flag"},
    ),
    "sdpa_sinks_backward": (
        an.sdpa_sinks_backward,
        {"dout": DOUT[:, None], "cache": "SINKS"},
        {"dout": "array", "cache": "cache"},
    ),
    "flash_attention_forward": (
        an.flash_attention_forward,
        {"q": Q, "k": K, "v": V, "*": 0, "is_causal": False, "block_size": 2},
        {
            "q": "array_w",
            "k": "array_w",
            "v": "array",
            "is_causal": "flag",
            "block_size": "count",
            "scale": "real",
        },
    ),
    "flash_attention_backward": (
        an.flash_attention_backward,
        {"dout": DOUT, "cache": "TILED"},
        {"dout": "array", "cache": "cache"},
    ),
    "KVCache": (an.KVCache, {"max_len": 8}, {"max_len": "count"}),
    "mha_decode_step": (
        an.mha_decode_step,
        {"x": X[:, :1], "params": P, "kv_cache": "KV", "*": 0, "num_heads": 2},
        {"x": "array_w", "params": "dict", "num_heads": "count", "scale": "real"},
    ),
    "cross_kv_cache": (
        an.cross_kv_cache,
        {"memory": X, "params": P, "*": 0, "num_heads": 2},
        {"memory": "array_w", "params": "dict", "num_heads": "count"},
    ),
    "mha_cross_decode_step": (
        an.mha_cross_decode_step,
        {"x": X[:, :1], "params": P, "kv_cache": "CROSS", "*": 0, "num_heads": 2},
        {"x": "array_w", "params": "dict", "num_heads": "count", "scale": "real", "kv_cache": "cache"},
    ),
    "additive_attention": (
        an.additive_attention,
        {"q": Q, "k": K, "v": V, "params": AP},
        {"q": "array_w", "k": "array_w", "v": "array", "params": "dict", "is_causal": "flag"},
    ),
    "additive_attention_forward": (
        an.additive_attention_forward,
        {"q": Q, "k": K, "v": V, "params": AP},
        {"q": "array_w", "k": "array_w", "v": "array", "params": "dict", "is_causal": "flag"},
    ),
    "additive_attention_backward": (
        an.additive_attention_backward,
        {"dout": DOUT, "cache": "ADD"},
        {"dout": "array", "cache": "cache"},
    ),
    "init_additive_params": (
        an.init_additive_params,
        {"d_q": 4, "kdim": 4, "d_hidden": 5, "*": 0, "rng": 0},
        {"d_q": "count", "kdim": "count", "d_hidden": "count", "rng": "rng"},
    ),
    "dot_product_moments": (
        an.dot_product_moments,
        {"d_ks": [2, 4], "*": 0, "n_samples": 50, "rng": 0},
        {"d_ks": "d_ks", "n_samples": "count", "rng": "rng"},
    ),
    "softmax_saturation": (
        an.softmax_saturation,
        {"d_ks": [2, 4], "*": 0, "n_keys": 4, "n_queries": 20, "rng": 0},
        {"d_ks": "d_ks", "n_keys": "count", "n_queries": "count", "rng": "rng"},
    ),
    "softmax_gradients": (
        an.softmax_gradients,
        {"d_ks": [2, 4], "*": 0, "n_keys": 4, "d_v": 3, "n_queries": 20, "rng": 0},
        {"d_ks": "d_ks", "n_keys": "count", "d_v": "count", "n_queries": "count", "rng": "rng"},
    ),
    "init_scoring_mha_params": (
        an.init_scoring_mha_params,
        {"d_model": 8, "num_heads": 2, "d_k": 4, "scoring": "scaled", "*": 0, "rng": 0},
        {"d_model": "count", "num_heads": "count", "d_k": "count", "scoring": "choice", "rng": "rng"},
    ),
}
CACHES = {
    "SDPA": _sdpa_cache,
    "MHA": _mha_cache,
    "TILED": _tiled_cache,
    "SINKS": _sinks_cache,
    "ADD": _add_cache,
    "KV": _kv,
    "CROSS": lambda: an.cross_kv_cache(X, P, num_heads=2),
}


def call(name, args: dict):
    fn = CALLS[name][0]
    pos, kw, keyword = [], {}, False
    for a, value in args.items():
        if a == "*":
            keyword = True
            continue
        if isinstance(value, str) and value in CACHES:
            value = CACHES[value]()
        (kw.__setitem__(a, value) if keyword else pos.append(value))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return fn(*pos, **kw)


def names_argument(message: str, arg: str) -> bool:
    """Whether an error message names ``arg`` (or, for q/k/v style, the quantity it carries)."""
    aliases = {arg, arg.replace("_", " ")}
    return any(re.search(rf"(?<![A-Za-z0-9_]){re.escape(a)}(?![A-Za-z0-9])", message) for a in aliases)


def fuzz_api():
    findings, tried = [], 0
    for name, (_, args, kinds) in CALLS.items():
        try:
            call(name, args)
        except Exception as e:  # the baseline must run
            findings.append((name, "(valid call)", "baseline", f"{type(e).__name__}: {e}"))
            continue
        for arg, kind in kinds.items():
            for label, bad in BAD[kind]:
                value = mutate(args.get(arg), bad) if "array" in kind else bad
                if kind == "cache" and label == "None":
                    value = None
                trial = dict(args)
                if arg not in trial:
                    trial["*"] = 0
                trial[arg] = value
                tried += 1
                try:
                    call(name, trial)
                except (ValueError, TypeError) as e:
                    if not names_argument(str(e), arg):
                        findings.append((name, arg, label, f"{type(e).__name__} not naming it: {e}"))
                except Exception as e:
                    findings.append((name, arg, label, f"{type(e).__name__}: {e}"))
                else:
                    findings.append((name, arg, label, "accepted"))
    return findings, tried


# subcommand -> (valid argv tail that keeps an accepted call short, {flag: [bad values]})
CLI = {
    "train": (
        ["--task", "reverse", "--steps", "1"],
        {
            "--length": ["0", "-1", "x", "nan"],
            "--steps": ["0", "-1", "1.5", "x"],
            "--batch-size": ["0", "-1", "x"],
            "--layers": ["0", "-1"],
            "--heads": ["0", "-1", "3"],
            "--d-model": ["0", "-1"],
            "--seed": ["-1", "x"],
            "--target": ["nan", "-0.5", "1.5", "x"],
            "--blas-threads": ["-1", "x"],
            "--label-smoothing": ["nan", "-0.1", "1", "x"],
            "--warmup": ["-1", "nan", "x"],
            "--cooldown": ["-1", "nan", "x"],
            "--lr-factor": ["0", "-1", "nan", "inf"],
        },
    ),
    "figures": (["--out", "/nonexistent-dir/x"], {"--dpi": ["0", "-5", "nan", "x"]}),
    "tour": ([], {"--seed": ["-1", "x", "1.5"]}),
    "diff": (["--framework", "jax"], {"--seed": ["-1", "x"], "--dtype": ["float16"]}),
    "check": ([], {"--function": ["nonsense"]}),
}


def fuzz_cli():
    findings, tried = [], 0
    for sub, (tail, flags) in CLI.items():
        help_text = subprocess.run(
            [sys.executable, "-m", "attention_np", sub, "--help"], capture_output=True, text=True
        ).stdout
        for flag, values in flags.items():
            if flag not in help_text:
                continue
            for value in values:
                tried += 1
                argv = [sys.executable, "-m", "attention_np", sub, *tail, flag, value]
                try:
                    p = subprocess.run(argv, capture_output=True, text=True, timeout=90)
                except subprocess.TimeoutExpired:
                    findings.append((sub, flag, value, "accepted (still running after 90 s)"))
                    continue
                err = p.stderr.strip().splitlines()
                if p.returncode == 0:
                    findings.append((sub, flag, value, "accepted"))
                elif "Traceback" in p.stderr:
                    findings.append((sub, flag, value, f"traceback: {err[-1] if err else ''}"))
                elif p.returncode != 2 or flag.lstrip("-") not in p.stderr.replace("_", "-"):
                    findings.append((sub, flag, value, f"exit {p.returncode}: {err[-1] if err else ''}"))
    return findings, tried


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cli", action="store_true", help="also fuzz the CLI subcommands' flags")
    args = parser.parse_args(argv)
    missing = sorted(
        set(an.__all__)
        - set(CALLS)
        - {
            "SDPACache",
            "MHACache",
            "FlashCache",
            "SinksCache",
            "AdditiveCache",
            "GradcheckResult",
            "gradcheck",
            "train_retrieval",
            "scoring_mha_forward",
            "scoring_mha_backward",
        }
    )
    findings, tried = fuzz_api()
    if args.cli:
        f, t = fuzz_cli()
        findings += f
        tried += t
    for row in findings:
        print(" | ".join(map(str, row))[:300])
    print(
        f"{tried} bad calls tried, {len(findings)} not refused by name"
        + (f"; no valid call written for {missing}" if missing else "")
    )
    return 1 if findings else 0


if __name__ == "__main__":
    raise SystemExit(main())
