"""The 0.1 API kept for one release (CHANGELOG.md, 0.2.0): every 0.1 keyword and module path still
works, gives the numbers of its 0.2 spelling, and warns with a DeprecationWarning that names its
new home and points at the caller's line (where Python's default filters show it).

This file is the 0.1 mapping's own test. The rest of the suite uses the 0.2 API: pyproject.toml
turns attention_np's DeprecationWarnings into errors, so a 0.1 spelling elsewhere fails."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attention_np as an
from attention_np.compose import layer_spec
from attention_np.kernels import plan
from tests.helpers import randn

ROOT = Path(__file__).resolve().parents[2]
R = np.random.default_rng(2201)
E, H, B, L, S = 16, 4, 2, 6, 5
X, MEMORY = randn(R, B, L, E), randn(R, B, S, E)
QL, KL = np.array([6, 3]), np.array([4, 6])


def _noisy(params):
    return {n: w + 0.1 * randn(R, *w.shape) for n, w in params.items()}


PARAMS = {
    "plain": _noisy(an.init_mha_params(E, H, rng=0)),
    "gqa": _noisy(an.init_mha_params(E, H, num_kv_heads=2, rng=0)),
    "qk_norm": _noisy(an.init_mha_params(E, H, qk_norm=True, rng=0)),
    "sinks": _noisy(an.init_mha_params(E, H, sinks=True, rng=0)),
}


def _mha(params, **kw):
    return an.mha_forward(X, X, X, params, num_heads=H, is_causal=True, **kw)[0]


def _decode(params, **kw):
    """A prompt of 4 positions, then two steps of one."""
    kv = an.KVCache(L)
    return np.concatenate([an.mha_decode_step(X[:, a:b], params, kv, num_heads=H, **kw)
                           for a, b in ((0, 4), (4, 5), (5, 6))], axis=1)


def _cross(params, **kw):
    cache = an.cross_kv_cache(MEMORY, params, num_heads=H, **kw)
    return an.mha_cross_decode_step(X, params, cache, num_heads=H, **kw)


def _kernel(forward):
    q, k, v = (randn(np.random.default_rng(5), B, 2, n, 4) for n in (L, L, L))
    return lambda params, **kw: forward(q, k, v, **kw)[0]


CALLERS = {"mha_forward": _mha, "mha_decode_step": _decode, "cross_kv_cache": _cross,
           "sdpa_forward": _kernel(an.sdpa_forward),
           "flash_attention_forward": _kernel(an.flash_attention_forward)}
Spec = an.AttentionSpec
LENGTHS = "pass mask=attention_np.lengths_mask(q_lengths, kv_lengths, L, S){}, ANDed with any other mask"
MHA_KW = [   # (keyword, params, 0.1 keywords, 0.2 keywords, what the warning says after "0.2.0: ")
    ("window", "plain", dict(window=(2, 0)), dict(spec=Spec(window=(2, 0))),
     "pass spec=AttentionSpec(window=...)"),
    ("rope", "plain", dict(rope={"theta": 500.0}), dict(spec=Spec(rope=an.RoPE(theta=500.0))),
     "pass spec=AttentionSpec(rope=...)"),
    ("softcap", "plain", dict(softcap=0.5), dict(spec=Spec(softcap=0.5)),
     "pass spec=AttentionSpec(softcap=...)"),
    ("qk_norm_eps", "qk_norm", dict(qk_norm_eps=0.5), dict(spec=Spec(qk_norm_eps=0.5)),
     "pass spec=AttentionSpec(qk_norm_eps=...)"),
    ("num_kv_heads", "gqa", dict(num_kv_heads=2), dict(), "the width of params['W_k'] decides it"),
    ("qk_norm", "qk_norm", dict(qk_norm=True), dict(),
     "params['q_norm'] and params['k_norm'] being there decides it"),
    ("sinks", "sinks", dict(sinks=True), dict(), "params['sinks'] being there decides it"),
]
CASES = [("mha_forward", *case) for case in MHA_KW] + [
    ("mha_forward", "dropout_p", "plain", dict(dropout_p=0.3, rng=1), dict(spec=Spec(dropout_p=0.3), rng=1),
     "pass spec=AttentionSpec(dropout_p=...)"),
    ("mha_forward", "path", "plain", dict(path="textbook"), dict(spec=Spec(kernel="reference")),
     "pass spec=AttentionSpec(kernel=...)"),
    ("mha_forward", "q_lengths", "plain", dict(q_lengths=QL, kv_lengths=KL),
     dict(mask=an.lengths_mask(QL, KL, L, L)[:, None]), LENGTHS.format("[:, None]")),
] + [("mha_decode_step", *case) for case in MHA_KW] + [
    ("cross_kv_cache", *case) for case in MHA_KW
    if case[0] in ("softcap", "qk_norm_eps", "num_kv_heads", "qk_norm")
] + [(kernel, *case) for kernel in ("sdpa_forward", "flash_attention_forward") for case in (
    ("window", "plain", dict(window=(2, 1)), dict(spec=Spec(window=(2, 1))),
     "pass spec=AttentionSpec(window=...)"),
    ("softcap", "plain", dict(softcap=0.5), dict(spec=Spec(softcap=0.5)),
     "pass spec=AttentionSpec(softcap=...)"),
    ("q_lengths", "plain", dict(q_lengths=QL, kv_lengths=KL),
     dict(mask=an.lengths_mask(QL, KL, L, L)[:, None]), LENGTHS.format("")),
)]


@pytest.mark.parametrize("caller, keyword, params, old, new, says", CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_0_1_keyword_warns_from_the_callers_line_and_gives_the_0_2_numbers(
        caller, keyword, params, old, new, says):
    run, params = CALLERS[caller], PARAMS[params]
    spelled = "q_lengths=..., kv_lengths=..." if keyword == "q_lengths" else f"{keyword}=..."
    with pytest.warns(DeprecationWarning) as record:
        got = run(params, **old)
    # each function of the call warns for itself (cross decoding: the cache and the step)
    callers = {caller} | ({"mha_cross_decode_step"} if caller == "cross_kv_cache" else set())
    assert {str(w.message) for w in record} == {
        f"{c}({spelled}) is deprecated since 0.2.0: {says}" for c in callers}
    # the user's line, not a line inside attention_np (hidden by Python's default filters)
    assert {w.filename for w in record} == {__file__}
    want = run(params, **new)
    np.testing.assert_array_equal(got, want)
    if keyword not in ("num_kv_heads", "qk_norm", "sinks", "path"):     # the option changes it
        assert np.abs(run(params) - want).max() > 1e-6


def test_every_0_1_keyword_is_in_the_table():
    tested = {(c, k) for c, k, *_ in CASES}
    for caller in ("mha_forward", "mha_decode_step"):
        for keyword in (*layer_spec.MOVED_TO_SPEC, *layer_spec.ANSWERED_BY_PARAMS):
            assert (caller, keyword) in tested or (caller, keyword) in (
                ("mha_decode_step", "dropout_p"), ("mha_decode_step", "path")), (caller, keyword)
    for caller in ("sdpa_forward", "flash_attention_forward"):
        assert {(caller, k) for k in (*plan.MOVED_TO_SPEC, "q_lengths")} <= tested


def test_decode_step_refuses_the_0_1_dropout_and_keeps_path():
    """Decoding has no dropout, whichever way it is asked; path= maps onto spec.kernel."""
    with pytest.raises(ValueError, match="no attention dropout"), \
            pytest.warns(DeprecationWarning, match=r"mha_decode_step\(dropout_p=\.\.\.\)"):
        _decode(PARAMS["plain"], dropout_p=0.1)
    with pytest.warns(DeprecationWarning, match=r"mha_decode_step\(path=\.\.\.\) is deprecated"):
        got = _decode(PARAMS["plain"], path="textbook")
    np.testing.assert_array_equal(got, _decode(PARAMS["plain"], spec=Spec(kernel="reference")))


def test_kv_positions_is_the_second_of_the_positions_pair():
    params, rope = PARAMS["plain"], Spec(rope=an.RoPE())
    q_pos, kv_pos = np.arange(3, 3 + L), np.arange(S)
    with pytest.warns(DeprecationWarning, match=re.escape(
            "mha_forward(kv_positions=...) is deprecated since 0.2.0: pass "
            "positions=(q_positions, kv_positions)")) as record:
        old, _ = an.mha_forward(X, MEMORY, MEMORY, params, num_heads=H, spec=rope, positions=q_pos,
                                kv_positions=kv_pos)
    assert record[0].filename == __file__
    new, _ = an.mha_forward(X, MEMORY, MEMORY, params, num_heads=H, spec=rope, positions=(q_pos, kv_pos))
    np.testing.assert_array_equal(old, new)
    shifted, _ = an.mha_forward(X, MEMORY, MEMORY, params, num_heads=H, spec=rope,
                                positions=(q_pos, kv_pos + 1))
    assert np.abs(shifted - new).max() > 1e-6


def _import_afresh(monkeypatch, old: str, names: list | None = None):
    """``from old import names``, with ``old`` imported again (as a first import warns); without
    ``names``, the lazy attribute ``attention_np.X``."""
    for name in [n for n in sys.modules if n == old or n.startswith(old + ".")]:
        monkeypatch.delitem(sys.modules, name)        # restored after the test
    monkeypatch.delitem(vars(an), old.split(".")[1], raising=False)   # (getattr would import it)
    with pytest.warns(DeprecationWarning, match=re.escape(f"{old} is deprecated since 0.2.0")) as record:
        module = (__import__(old, fromlist=names) if names is not None
                  else getattr(an, old.split(".")[1]))
    return module, record


@pytest.mark.parametrize("package, moved", [
    ("core", {"multihead": "attention_np.compose.mha", "rope": "attention_np.variants.rope",
              "fused": "attention_np.kernels.fused"}),
    ("efficient", {"flash": "attention_np.kernels.tiled", "kv_cache": "attention_np.compose.decode"}),
])
def test_the_0_1_module_paths_warn_from_the_importer_and_alias_the_moved_modules(monkeypatch, package,
                                                                                 moved):
    old = f"attention_np.{package}"
    module, record = _import_afresh(monkeypatch, old, list(moved))
    assert record[0].filename == __file__                  # the importer's line
    assert module is sys.modules[old] is an.__getattr__(package)
    lazily, record = _import_afresh(monkeypatch, old)      # an.core: imported on first use, warns
    assert lazily is sys.modules[old] and package in dir(an)
    assert record[0].filename == __file__                  # this line, not importlib's
    for name, new in moved.items():
        assert getattr(module, name) is sys.modules[new] is sys.modules[f"{old}.{name}"]


def test_a_script_sees_the_warnings_under_pythons_default_filters():
    """Python shows a DeprecationWarning by default only when it is attributed to ``__main__``:
    a script using a 0.1 keyword or module path sees each warning, at its own line."""
    code = ("import numpy as np\n"
            "import attention_np as an\n"
            "x = np.ones((3, 8)); p = an.init_mha_params(8, 2, rng=0, sinks=True)\n"
            "an.mha_forward(x, x, x, p, num_heads=2, sinks=True)\n"
            "an.cross_kv_cache(x, p, num_heads=2, num_kv_heads=2)\n"
            "an.efficient.kv_cache\n")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                            timeout=120, check=True)
    lines = [line for line in result.stderr.splitlines() if "DeprecationWarning" in line]
    assert [line.split(": DeprecationWarning: ")[0] for line in lines] == [
        "<string>:4", "<string>:5", "<string>:6"], result.stderr
    assert "mha_forward(sinks=...)" in lines[0] and "cross_kv_cache(num_kv_heads=...)" in lines[1]
    assert "attention_np.efficient is deprecated" in lines[2]


def test_the_0_1_module_paths_keep_every_name_of_a_module_0_2_split(monkeypatch):
    core, _ = _import_afresh(monkeypatch, "attention_np.core", ["linear", "masks", "scores", "softmax"])
    linear, masks, scores, softmax = core.linear, core.masks, core.scores, core.softmax
    assert masks.sliding_window_mask is an.sliding_window_mask and masks.causal_mask is an.causal_mask
    assert callable(masks.with_lengths) and callable(masks.masked_matmul)
    assert callable(scores.softcap_forward) and callable(scores.scaled_scores)
    assert callable(softmax.softmax_) and softmax.softmax is an.softmax
    assert linear.glorot_uniform is an.glorot_uniform and linear.linear_forward is an.linear_forward
