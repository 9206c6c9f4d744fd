"""What 0.2 deprecated "for one release" is gone in 0.3 (CHANGELOG.md, 0.3.0, has the migration
table): the module paths ``attention_np.core`` and ``attention_np.efficient``, the 0.1 module
attributes (``attention_np.plot``, ...) and the 0.1 keywords of every entry point.

A removed module attribute says where it went; a removed keyword is a ``TypeError`` naming it,
and naming its home when the option lives on elsewhere (``window=`` -> the spec)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import attention_np as an

ROOT = Path(__file__).resolve().parents[2]
R = np.random.default_rng(0)
X = R.standard_normal((2, 4, 8))
Q = R.standard_normal((2, 2, 4, 4))
P = an.init_mha_params(8, 2, rng=0)


@pytest.mark.parametrize("module", ["attention_np.core", "attention_np.efficient",
                                    "attention_np.core.masks", "attention_np.efficient.flash"])
def test_the_0_1_module_paths_do_not_import(module):
    code = f"import {module}"
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1 and "ModuleNotFoundError: No module named 'attention_np." in run.stderr
    assert not (ROOT / "attention_np" / module.split(".")[1]).exists()


# attribute -> where it went (each a module that imports)
MOVED_ATTRIBUTES = {
    "attention": "attention_np.paper.attention", "masks": "attention_np.paper.masks",
    "heads": "attention_np.paper.heads", "linear": "attention_np.paper.linear",
    "multihead": "attention_np.compose.mha", "gqa": "attention_np.variants.gqa",
    "flash": "attention_np.kernels.tiled", "kv_cache": "attention_np.compose.decode",
    "scaling": "attention_np.studies.scaling", "additive": "attention_np.studies.additive",
    "compare_scoring": "attention_np.studies.compare_scoring", "plot": "attention_np.viz.plot",
    "figures": "attention_np.cli.figures", "train": "attention_np.cli.train",
    "tour": "attention_np.cli.tour",
}


@pytest.mark.parametrize("name", list(MOVED_ATTRIBUTES))
def test_a_removed_module_attribute_says_where_it_went(name):
    with pytest.raises(AttributeError, match=f"has no attribute '{name}': attention_np.{name} was "
                                             f"removed in 0.3, use {MOVED_ATTRIBUTES[name]}"):
        getattr(an, name)
    importlib.import_module(MOVED_ATTRIBUTES[name])          # and the new home is real
    assert name not in dir(an)


@pytest.mark.parametrize("name", ["core", "efficient"])
def test_the_removed_subpackages_name_their_successors(name):
    with pytest.raises(AttributeError, match=f"attention_np.{name} was removed in 0.3, use attention_np."):
        getattr(an, name)


def _mha(**kw):
    return an.mha_forward(X, X, X, P, num_heads=2, **kw)


def _decode(**kw):
    return an.mha_decode_step(X, P, an.KVCache(4), num_heads=2, **kw)


def _cross(**kw):
    return an.cross_kv_cache(X, P, num_heads=2, **kw)


CALLS = {"mha_forward": _mha, "mha_decode_step": _decode, "cross_kv_cache": _cross,
         "sdpa_forward": lambda **kw: an.sdpa_forward(Q, Q, Q, **kw),
         "flash_attention_forward": lambda **kw: an.flash_attention_forward(Q, Q, Q, **kw)}
LENGTHS = np.array([4, 2])
# (entry point, 0.1 keyword and a value, what the TypeError says after "got ")
SPEC = "which is not taken here: {0} is a field of the spec (spec=AttentionSpec({0}=...))"
PLAIN = "an unexpected keyword argument '{0}'"
REMOVED = [(e, kw, v, SPEC) for e in ("mha_forward", "mha_decode_step")
           for kw, v in (("window", (2, 0)), ("rope", True), ("softcap", 0.5), ("qk_norm_eps", 0.5),
                         ("qk_norm", True))] + [
    (e, kw, v, PLAIN) for e in ("mha_forward", "mha_decode_step")
    for kw, v in (("path", "reference"), ("sinks", True), ("q_lengths", LENGTHS),
                  ("kv_lengths", LENGTHS))] + [
    ("mha_forward", "dropout_p", 0.1, SPEC), ("mha_forward", "kv_positions", np.arange(4), PLAIN),
    ("mha_decode_step", "cache", an.KVCache(4), PLAIN),
    ("cross_kv_cache", "softcap", 0.5, SPEC), ("cross_kv_cache", "qk_norm_eps", 0.5, SPEC),
] + [(e, kw, v, SPEC) for e in ("sdpa_forward", "flash_attention_forward")
     for kw, v in (("window", (2, 0)), ("softcap", 0.5))] + [
    (e, kw, LENGTHS, PLAIN) for e in ("sdpa_forward", "flash_attention_forward")
    for kw in ("q_lengths", "kv_lengths")]


@pytest.mark.parametrize("entry, keyword, value, says", REMOVED,
                         ids=[f"{e}-{k}" for e, k, _, _ in REMOVED])
def test_a_0_1_keyword_is_a_type_error_naming_it(entry, keyword, value, says):
    with pytest.raises(TypeError) as info:
        CALLS[entry](**{keyword: value})
    assert str(info.value) == f"{entry}() got " + (
        f"{keyword}=, " + says.format(keyword) if says is SPEC else says.format(keyword))


@pytest.mark.parametrize("entry", ["mha_forward", "mha_decode_step", "cross_kv_cache"])
def test_num_kv_heads_names_params_as_its_home(entry):
    with pytest.raises(TypeError, match=r"got num_kv_heads=, which is not taken here: in multi-head "
                                        r"attention the width of params\['W_k'\] decides it"):
        CALLS[entry](num_kv_heads=2)


def test_init_additive_params_d_k_is_gone():
    with pytest.raises(TypeError, match="unexpected keyword argument 'd_k'"):
        an.init_additive_params(4, d_k=3)
