"""Weights in any dtype: every tensor read into NumPy (interop/torch.py ``to_numpy``) of every
kind (bfloat16, float16, float32, float64; a view, a tensor that requires grad), and bfloat16 and
float16 checkpoints (``from_pretrained(dir, dtype=...)``) of every family diffed layer by layer
and whole, in float64 on the stored values upcast exactly, the report saying so."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers import require

torch = require("torch")
require("transformers")

from attention_np.interop.torch import to_numpy  # noqa: E402
from attention_np.interop.transformers import families as fam  # noqa: E402
from attention_np.interop.transformers import family_cases as cases  # noqa: E402
from attention_np.interop.transformers import layer_diff as itf  # noqa: E402
from attention_np.interop.transformers.layer_reading import params_from_transformers  # noqa: E402
from attention_np.interop.transformers.model_diff import (  # noqa: E402
    attention_layers,
    compare_transformers_model,
)
from attention_np.interop.transformers.sweep import _change  # noqa: E402

DTYPES = (torch.bfloat16, torch.float16, torch.float32, torch.float64)
LOW = (torch.bfloat16, torch.float16)
NP = {torch.float16: np.float16, torch.float32: np.float32, torch.float64: np.float64}


@pytest.fixture(autouse=True)
def _quiet():
    import transformers
    transformers.logging.set_verbosity_error()


def _kinds(dtype):
    """One tensor of each kind a reader meets, in ``dtype``: contiguous, a transposed view, a
    strided slice, a parameter that requires grad, a tensor with a negative bit, a 0-d one."""
    g = torch.Generator().manual_seed(0)
    base = torch.randn((3, 5), generator=g).to(dtype)
    return {"contiguous": base, "transposed": base.T, "strided": base[:, ::2],
            "requires_grad": torch.nn.Parameter(base.clone()), "neg view": base._neg_view(),
            "0-d": base[1, 2]}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_to_numpy_reads_every_kind_of_tensor_exactly_in_float64_and_in_its_own_dtype(dtype):
    for kind, t in _kinds(dtype).items():
        exact = t.detach().double().resolve_neg()                    # torch's own upcast
        got = to_numpy(t, np.float64)
        assert got.dtype == np.float64 and got.shape == tuple(t.shape), kind
        np.testing.assert_array_equal(got, exact.numpy(), err_msg=kind)
        own = to_numpy(t)                                        # bf16: float32, exactly
        assert own.dtype == NP.get(dtype, np.float32), kind
        np.testing.assert_array_equal(own.astype(np.float64), exact.numpy(), err_msg=kind)
        as32 = to_numpy(t, np.float32)
        np.testing.assert_array_equal(as32, t.detach().float().resolve_neg().numpy(),
                                      err_msg=kind)


def test_to_numpy_reads_a_sparse_tensor_densely_and_leaves_arrays_and_none_alone():
    dense = torch.tensor([[0.0, 1.5], [2.25, 0.0]], dtype=torch.bfloat16)
    np.testing.assert_array_equal(to_numpy(dense.to_sparse(), np.float64),
                                  [[0.0, 1.5], [2.25, 0.0]])
    a = np.arange(3.0)
    assert to_numpy(a) is a and to_numpy(None) is None
    assert to_numpy([1, 2], np.float64).dtype == np.float64


def _checkpoint(model, dtype, tmp_path):
    """``model`` saved and loaded back with ``from_pretrained(dir, dtype=dtype)``: as a user
    loads a half-precision checkpoint (transformers keeps its float32 buffers float32)."""
    model.save_pretrained(tmp_path)
    return type(model).from_pretrained(tmp_path, dtype=dtype).eval()


def _assert_float64_verdict(report, dtype):
    assert report.ok, str(report)
    assert report.weights.startswith(f"weights: {str(dtype).removeprefix('torch.')}"), report.weights
    assert "ran in float64" in report.weights
    # the float64 rule (not a looser one): the half-precision rounding is in both sides' weights
    assert all(c.rule != "float64" or c.err <= 1e-12 * max(1.0, c.size) for c in report.checks), \
        str(report)


@pytest.mark.parametrize("dtype", LOW, ids=str)
@pytest.mark.parametrize("family", cases.FAMILIES)
def test_every_family_layer_of_a_half_precision_checkpoint_agrees_in_float64(family, dtype,
                                                                            tmp_path):
    """The 19 layer kinds of family_cases, each from a bf16 / fp16 checkpoint: the weights read are
    the stored ones upcast exactly (not the float32 ones they were saved from), the diff agrees
    to float64 rounding, its report names the dtype, and 1e-6 added to the output is caught."""
    _, inputs = cases.case(family, seed=1)
    model = _checkpoint(cases.tiny_model(cases.MODELS.get(family, family), seed=1), dtype, tmp_path)
    layer = cases.attention_layer(family, model)
    params, _ = params_from_transformers(layer)
    stored = layer.k_proj.weight if hasattr(layer, "k_proj") else None
    if stored is not None:
        assert stored.dtype == dtype
        np.testing.assert_array_equal(params["W_k"], stored.detach().double().numpy().T)
    report = itf.compare_transformers_attention(layer, **inputs, seed=2)
    _assert_float64_verdict(report, dtype)
    assert all(p.dtype == dtype for p in layer.parameters())        # the layer is left alone
    handle = _change(layer)
    try:
        changed = itf.compare_transformers_attention(layer, **inputs, seed=2)
    finally:
        handle.remove()
    out = next(c for c in changed.checks if c.name == "out")
    assert not changed.ok and 5e-7 < out.err < 2e-6, str(changed)


# every family family_model builds whose layers all agree (DeBERTa-v2: refused by name)
MODEL_FAMILIES = sorted(set(fam.KNOWN) - {"deberta-v2"})


# bfloat16 for every family; float16 (the same reader path, other rounding; its layers above) for
# an encoder, a decoder with RoPE, GPT-2's fused Conv1D and T5's bias table
MODEL_CASES = [(f, torch.bfloat16) for f in MODEL_FAMILIES] + \
    [(f, torch.float16) for f in ("bert", "llama", "gpt2", "t5")]


@pytest.mark.parametrize("family, dtype", MODEL_CASES, ids=lambda v: str(v).removeprefix("torch."))
def test_every_family_model_of_a_half_precision_checkpoint_agrees_layer_by_layer(family, dtype,
                                                                                tmp_path):
    model = _checkpoint(fam.family_model(family, seed=1), dtype, tmp_path)
    inputs = fam.model_inputs(family, model, seed=1)
    report = compare_transformers_model(model, **inputs, seed=2)
    assert report.verdict == "AGREE", str(report)
    assert report.weights.startswith(f"weights: {str(dtype).removeprefix('torch.')}")
    assert report.attention


@pytest.mark.parametrize("dtype", LOW, ids=str)
def test_a_half_precision_model_cast_with_to_keeps_its_rounded_frequencies_and_says_so(dtype):
    """``model.to(bfloat16)`` rounds the rotary embedding's ``inv_freq`` buffer too (unlike
    ``from_pretrained(dtype=)``): the model's cos and sin are then those of the rounded
    frequencies, a real difference from the config's, shown on the rotary row and named in a
    note; the attention layers still agree."""
    model = fam.family_model("llama", seed=1).to(dtype)
    report = compare_transformers_model(model, **fam.model_inputs("llama", model, seed=1))
    rotary = next(r for r in report.layers if r.kind == "rotary")
    assert not rotary.ok                  # bf16: ~2e-3, fp16: ~5e-5, beyond float32's angles
    assert all(r.ok for r in report.attention)
    assert any(f"rotary_emb.inv_freq is stored in {str(dtype).removeprefix('torch.')}" in n
               for n in report.notes), report.notes


def test_every_layer_of_the_other_families_from_a_bf16_checkpoint_agrees(tmp_path):
    """The families of families.py beyond family_cases, every attention layer alone."""
    dtype = torch.bfloat16
    x = np.random.default_rng(0).standard_normal((2, 6, 32))
    pad = np.ones((2, 6), dtype=np.int64)
    pad[1, -2:] = 0
    for family in sorted(set(fam.NEW) - {"deberta-v2", "data2vec-vision", "swin", "beit"}):
        model = _checkpoint(fam.family_model(family, seed=1), dtype, tmp_path / family)
        layers, refused = attention_layers(model)
        assert layers and not refused, family
        for _, module, spec in layers:
            kv = x if spec.cross else None
            report = itf.compare_transformers_attention(module, x, key_value_states=kv,
                                                        attention_mask=pad, seed=3)
            _assert_float64_verdict(report, dtype)


def test_a_low_precision_layer_is_read_from_its_float64_copy_probes_included():
    """The kind probes (a QK-norm's formula within 1e-4, a measured scale within 1e-5) would
    fail on bf16 rounding: a bf16 layer reads as its float32 original does."""
    from attention_np.interop.transformers.layer_reading import layer_spec
    for family in ("qwen3", "gemma3", "cohere", "gpt_neo", "phi"):
        model = (fam.family_model(family, seed=1) if family in fam.NEW
                 else cases.tiny_model(family, seed=1))
        layers, _ = attention_layers(model)
        spec32 = layer_spec(layers[0][1])
        spec16 = layer_spec(layers[0][1].to(torch.bfloat16))
        assert spec16 == spec32, family


def _tensors(module) -> list:
    """Every parameter and buffer of ``module`` and every parameter's ``.grad``, as NumPy views
    of their memory (a bfloat16 one has none NumPy can share: skipped)."""
    out = []
    for t in [*module.parameters(), *module.buffers()]:
        for x in (t, t.grad):
            if x is not None and x.dtype in NP:
                out.append(x.detach().numpy())
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("family", cases.FAMILIES)
def test_the_params_read_from_a_layer_own_their_memory_in_every_dtype(family, dtype):
    """``params_from_transformers`` copies: a float64 tensor's ``.numpy()`` is a view of the
    layer, and an array of it (a bias, a norm's scale, GPT-2's Conv1D weight, a sink) would
    change the layer when trained in place. Each array read, values and ``.grad``, is writeable
    and shares no memory with any tensor of the layer; writing into it leaves the layer alone."""
    _, inputs = cases.case(family, seed=1)
    model = cases.tiny_model(cases.MODELS.get(family, family), seed=1).to(dtype)
    layer = cases.attention_layer(family, model)
    for p in layer.parameters():
        p.grad = torch.ones_like(p)
    before = [t.detach().clone() for t in layer.parameters()]
    for grads in (False, True):
        params, _ = params_from_transformers(layer, grads=grads)
        theirs = _tensors(layer)
        for name, a in params.items():
            assert a.flags.writeable, name
            assert not any(np.shares_memory(a, t) for t in theirs), (name, grads)
            a[...] = 7.0
    assert all(torch.equal(a, b) for a, b in zip(before, layer.parameters(), strict=True))
    assert all(torch.equal(p.grad, torch.ones_like(p)) for p in layer.parameters())
