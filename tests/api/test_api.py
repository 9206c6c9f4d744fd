"""The public API's shape: the README's table importable, one version, renamed arguments, the mask rule."""

import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import attention_np as an
from tests.helpers import randn

ROOT = Path(__file__).resolve().parents[2]


def readme_table_names() -> list[str]:
    """The backticked function names of the functions column of README.md's package table."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    table = text[text.index("## What is in the package"):text.index("Every operation is a pair")]
    names = []
    for row in re.findall(r"^\|(.*)\|$", table, flags=re.M):
        cells = [c.strip() for c in row.split("|")]
        if len(cells) != 3 or cells[0] in ("concept", "---"):
            continue
        for item in re.findall(r"`([^`]+)`", cells[2]):
            if not item.startswith("python -m"):
                names.append(item.split("(")[0])
    return names


def test_the_readme_table_lists_the_public_functions():
    names = readme_table_names()
    assert len(names) >= 30 and "linear_forward" in names and "train_retrieval" in names
    # every exported function of the paper's layers is in the table
    exported = {n for n in an.__all__ if inspect.isfunction(getattr(an, n))} - {"glorot_uniform"}
    assert exported - set(names) == set()


@pytest.mark.parametrize("name", readme_table_names())
def test_every_function_in_the_readme_table_is_importable(name):
    if "." in name:                       # relative to attention_np: an.training.train, as a reader writes it
        obj = an
        for part in name.split("."):
            obj = getattr(obj, part)
    else:                                            # plain: from attention_np import name
        assert name in an.__all__, f"{name} is in README's table but not in attention_np.__all__"
        obj = getattr(an, name)
    assert callable(obj)


def test_the_version_has_one_source_pyproject():
    # tomllib is Python 3.11+; the project supports 3.10, so read the one line
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    version = re.search(r'^version = "([^"]+)"$', pyproject, flags=re.M).group(1)
    assert an.__version__ == version
    package_files = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "attention_np").rglob("*.py"))
    # the version is read, never written down; "deprecated since 0.2.0" dates a change instead
    assert version not in re.findall(r"(?<!since )(?<!Deprecated in )\d+\.\d+\.\d+", package_files)


def test_changelog_has_a_section_for_the_version():
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {an.__version__}" in changelog


# --- renamed arguments: the new name; the old one (deprecated in 0.2) removed in 0.3 -----------

def test_init_additive_params_kdim_is_the_key_input_width():
    params = an.init_additive_params(4, kdim=3, d_hidden=5, rng=0)
    assert params["W_q"].shape == (4, 5) and params["W_k"].shape == (3, 5)


def test_init_additive_params_positional_second_argument_still_means_kdim():
    with warnings.catch_warnings():
        warnings.simplefilter("error")               # the old positional call gives no warning
        old = an.init_additive_params(4, 3, 5, rng=0)
    new = an.init_additive_params(4, kdim=3, d_hidden=5, rng=0)
    for key in new:
        np.testing.assert_array_equal(old[key], new[key])


def test_init_additive_params_d_k_removed_in_0_3_is_a_plain_type_error():
    with pytest.raises(TypeError, match="unexpected keyword argument 'd_k'"):
        an.init_additive_params(4, d_k=3, d_hidden=5, rng=0)


def test_mha_decode_step_kv_cache_by_name_and_by_position_agree(rng):
    params = an.init_mha_params(8, 2, rng=1)
    x = randn(rng, 2, 5, 8)
    by_name = an.mha_decode_step(x, params, kv_cache=an.KVCache(5), num_heads=2)
    by_position = an.mha_decode_step(x, params, an.KVCache(5), num_heads=2)
    want, _ = an.mha_forward(x, x, x, params, num_heads=2, is_causal=True)
    np.testing.assert_allclose(by_name, want, rtol=1e-12, atol=1e-13)
    np.testing.assert_array_equal(by_name, by_position)


def test_mha_decode_step_needs_a_kv_cache(rng):
    params = an.init_mha_params(8, 2, rng=1)
    x = randn(rng, 2, 1, 8)
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'kv_cache'"):
        an.mha_decode_step(x, params, num_heads=2)
    with pytest.raises(TypeError, match="kv_cache must be a KVCache, got NoneType"):
        an.mha_decode_step(x, params, None, num_heads=2)
    with pytest.raises(TypeError, match="unexpected keyword argument 'cache'"):     # removed in 0.3
        an.mha_decode_step(x, params, an.KVCache(2), cache=an.KVCache(2), num_heads=2)


# --- one rule for options: data positional, then mask, then keyword-only ----------------------

FORWARDS = {
    "sdpa_forward": 3, "scaled_dot_product_attention": 3, "flash_attention_forward": 3,
    "additive_attention_forward": 4, "additive_attention": 4, "mha_forward": 4,
}


@pytest.mark.parametrize("name,n_data", FORWARDS.items())
def test_mask_follows_the_data_and_every_other_option_is_keyword_only(name, n_data):
    params = list(inspect.signature(getattr(an, name)).parameters.values())
    assert all(p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in params[:n_data])
    assert params[n_data].name == "mask" and params[n_data].kind is params[n_data].POSITIONAL_OR_KEYWORD
    named = [p for p in params[n_data + 1:] if p.kind is not p.VAR_KEYWORD]
    assert all(p.kind is p.KEYWORD_ONLY for p in named)
    # a ``**elsewhere`` catch-all, if any, is last and only names the home of a misplaced option
    assert all(p.name == "elsewhere" for p in params if p.kind is p.VAR_KEYWORD)


# Drivers and framework comparisons take every knob of a study; everything else stays narrow.
WIDE_BY_DESIGN = {"train", "train_retrieval", "compare_attention", "compare_mha", "compare_jax",
                  "compare_flax", "compare_transformers_attention", "replay_generate", "gradcheck"}


def test_no_public_function_takes_more_than_twelve_parameters():
    """The 0.1 API had mha_forward with 23 parameters; variants now go in the spec
    (a ``**elsewhere`` catch-all is not counted: it only refuses)."""
    wide = {}
    for name in an.__all__:
        obj = getattr(an, name)
        if not inspect.isfunction(obj) or name in WIDE_BY_DESIGN:
            continue
        params = [p for p in inspect.signature(obj).parameters.values() if p.kind is not p.VAR_KEYWORD]
        if len(params) > 12:
            wide[name] = len(params)
    assert wide == {}
    for name in ("mha_forward", "mha_decode_step", "sdpa_forward", "flash_attention_forward"):
        assert len([p for p in inspect.signature(getattr(an, name)).parameters.values()
                    if p.kind is not p.VAR_KEYWORD]) <= 12


def test_mha_forward_takes_mask_by_position_or_by_name(rng):
    params = an.init_mha_params(8, 2, rng=1)
    x, mask = randn(rng, 2, 4, 8), rng.random((4, 4)) > 0.3
    by_position, _ = an.mha_forward(x, x, x, params, mask, num_heads=2)
    by_name, _ = an.mha_forward(x, x, x, params, num_heads=2, mask=mask)
    unmasked, _ = an.mha_forward(x, x, x, params, num_heads=2)
    np.testing.assert_array_equal(by_position, by_name)
    assert not np.allclose(by_position, unmasked)
