"""The oldest transformers pyproject declares: the sweep (interop/transformers/sweep.py) of a named
set of families, each whole and each attention class's first layer alone, with the 1e-6 change
caught. .ci/run runs it in a venv with the declared floor (``ATTENTION_NP_OLDEST=1``: the installed
version must then be the floor); on the newest the default run diffs the layers alone (the whole
sweep has the rows). No row may be a false verdict (MISMATCH, a change not caught, an error)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.helpers import require

torch = require("torch")
transformers = require("transformers")

from attention_np.interop.transformers import sweep as sw  # noqa: E402
from attention_np.interop.transformers import tiny_models as tm  # noqa: E402
from attention_np.interop.transformers.model_diff import attention_layers  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# the families of families.py and family_cases.py by their model_type, the two that broke on
# 5.15.1 (GPT-J: RoPE from the layer's own table; Qwen2-VL's text model: multimodal sections the
# layer interleaves), and the layers that score in their own methods (MPT, BLOOM, CTRL, GPT-1, XLM)
FAMILIES = ("albert", "bart", "beit", "bert", "bloom", "clip_text_model", "codegen", "cohere",
            "cohere2", "ctrl", "data2vec-vision", "distilbert", "falcon", "gemma", "gemma2",
            "gemma3_text", "gpt2", "gpt_neo", "gpt_neox", "gpt_oss", "gptj", "granite", "llama",
            "mistral", "mixtral", "modernbert", "mpt", "olmo", "olmo2", "openai-gpt", "opt", "phi",
            "phi3", "qwen2", "qwen2_5_vl_text", "qwen2_vl_text", "qwen3", "roberta", "smollm3",
            "stablelm", "swin", "t5", "vit", "whisper", "xlm")
# what every transformers the project declares must agree on (the rest may refuse by name)
MUST_AGREE = ("bert", "gpt2", "gptj", "llama", "qwen2_vl_text", "t5", "vit")
FALSE = ("MISMATCH", "not caught", "error")


def floor() -> str:
    """The oldest transformers pyproject.toml declares (its test extra's ``transformers>=X``)."""
    text = (ROOT / "pyproject.toml").read_text()
    return re.search(r'"transformers>=([0-9.]+)"', text).group(1)


OLDEST = pytest.mark.skipif(
    os.environ.get("ATTENTION_NP_OLDEST") != "1",
    reason="the named families' sweep rows on the declared floor: .ci/run sets "
           "ATTENTION_NP_OLDEST=1 in a venv of it (on the newest the whole sweep has them)")


@pytest.fixture(scope="module")
def rows():
    return {r.family: r for r in sw.sweep(list(FAMILIES), workers=2)}


@OLDEST
def test_the_oldest_run_runs_the_declared_floor():
    assert transformers.__version__.startswith(floor() + "."), \
        (transformers.__version__, floor())


@OLDEST
def test_every_named_family_agrees_with_the_change_caught_or_refuses_by_name(rows):
    assert sorted(rows) == sorted(FAMILIES)
    bad = [(r.family, r.verdict, r.reason) for r in rows.values() if r.verdict in FALSE]
    assert not bad, bad
    for name in MUST_AGREE:
        assert rows[name].verdict == "AGREE", rows[name]
    for r in rows.values():
        if r.verdict == "AGREE":
            assert "+1e-06 caught" in r.reason, r
        else:
            assert len(r.reason) > 20, r                # the feature or the build error, named


@pytest.mark.parametrize("model_type", MUST_AGREE)
def test_each_attention_class_alone_agrees_with_the_change_caught(model_type):
    """The whole-model rows above compare a text model's layers inside the model: each layer
    class is diffed alone too (GPT-J's layer alone crashed while its model agreed)."""
    found, refused = attention_layers(tm.build(model_type))
    assert found and not refused
    verdict, _, why = sw.diff_layers(found)
    assert verdict == "AGREE", why
