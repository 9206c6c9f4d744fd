"""Bad arguments above the kernels, generated from each parameter's kind.

Each public entry below has a fresh valid call (``valid()``, run once as it is by
``test_the_valid_call_runs``, so that no row passes because the call was broken anyway) and a
kind for each parameter. A kind has its bad values (``KINDS``: a bool or a float for a count, a
negative seed, NaN for a rate, ``1`` or ``"no"`` for a flag, an int dtype for a float one, ...);
``ROWS`` is every (entry, parameter, bad value). Each row must raise a ``ValueError`` or
``TypeError`` whose message names the parameter, leave every other argument as it was (arrays
and dicts compared before and after) and change no state (``AdamState.t``, the params).
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

import attention_np as an
import attention_np.exercises as ex
from attention_np import nn, training
from attention_np.nn.decoding import beam_search, greedy_decode
from attention_np.pretrained.minilm import MiniLM, encode, load_weights
from attention_np.studies import positions
from attention_np.training.dates import DatesTask
from attention_np.training.seq2seq_trainer import dates_config, train_seq2seq
from attention_np.training.tasks import ReversalTask

NAN, INF = float("nan"), float("inf")

#: kind -> [(label, bad value)]; every one must be refused by a ValueError or TypeError
KINDS = {
    "flag": [("int 1", 1), ("int 0", 0), ("str 'no'", "no"), ("float", 1.5), ("None", None)],
    "seed": [("negative", -1), ("float", 1.5), ("bool", True), ("str", "0")],
    "count": [("zero", 0), ("negative", -1), ("float", 2.0), ("bool", True), ("str", "3"),
              ("None", None), ("NaN", NAN)],
    "count0": [("negative", -1), ("float", 2.0), ("bool", True), ("str", "3"), ("None", None)],
    "count?": [("zero", 0), ("negative", -2), ("float", 1.5), ("bool", True), ("str", "3")],
    "positive": [("zero", 0.0), ("negative", -1.0), ("NaN", NAN), ("inf", INF), ("bool", True),
                 ("str", "1"), ("None", None), ("array", np.ones(2))],
    "nonnegative": [("negative", -1.0), ("NaN", NAN), ("inf", INF), ("bool", True), ("str", "1"),
                    ("None", None)],
    "real": [("NaN", NAN), ("inf", INF), ("bool", True), ("str", "1"), ("None", None)],
    "unit open": [("1", 1.0), ("above 1", 1.5), ("negative", -0.1), ("NaN", NAN), ("bool", False),
                  ("str", "0.5")],
    "callable?": [("int", 3), ("str", "print"), ("array", np.ones(2))],
    "float dtype": [("int32", np.int32), ("int8", np.int8), ("bool", np.bool_), ("complex", np.complex128),
                    ("str", "nonsense"), ("int", 3), ("None", None)],
    "choice": [("unknown", "nonsense"), ("int", 3), ("None", None), ("list", ["relu"])],
    "dict": [("str", "abc"), ("list", [1, 2]), ("None", None), ("entry not an array", {"W": "abc"}),
             ("empty", {})],
    "float array": [("str", "abc"), ("None", None), ("int dtype", np.ones((2, 3, 8), np.int64)),
                    ("bool dtype", np.ones((2, 3, 8), bool)), ("0-d", np.float64(1.0))],
}


def ids_kind(high: int, shape: tuple, *, one_d_ok: bool = False) -> list:
    """Token ids of ``shape`` in ``[0, high)``: past the end, negative, float, bool, wrong dims."""
    return [("id past the end", np.full(shape, high)), ("negative id", np.full(shape, -1)),
            ("float ids", np.zeros(shape)), ("bool ids", np.zeros(shape, bool)), ("str", "abc"),
            ("None", None)] + ([] if one_d_ok else [("1-d", np.zeros(shape[-1:], np.int64))])


@dataclasses.dataclass
class Entry:
    """A public callable, a fresh valid call, and the kind (or the bad values) of each parameter."""

    name: str
    fn: object
    valid: object                 # () -> dict of keyword arguments, fresh arrays each time
    kinds: dict                   # parameter -> kind name in KINDS, or [(label, bad value)]
    state: object = None          # kwargs -> what must not change (besides the arguments)


# --- valid calls ------------------------------------------------------------------------------------

TINY = nn.ModelConfig(vocab_size=5, max_len=4, d_model=8, num_heads=2, d_ff=16, num_layers=1)
TINY_PARAMS = nn.init_model(TINY, rng=0)
S2S = nn.Seq2SeqConfig(src_vocab=6, tgt_vocab=7, max_src_len=5, max_tgt_len=4, d_model=8,
                       num_heads=2, d_ff=16, num_encoder_layers=1, num_decoder_layers=1)
S2S_PARAMS = nn.init_seq2seq(S2S, rng=0)
DATES_TINY = dict(d_model=8, num_heads=2, d_ff=16, num_encoder_layers=1, num_decoder_layers=1)


def _adam_call():
    params = {"w": np.ones(3), "b": np.zeros(2)}
    return dict(params=params, grads={"w": np.full(3, 0.5), "b": np.ones(2)},
                state=training.adam_init(params), lr=0.1, beta1=0.9, beta2=0.98, eps=1e-9)


def _adam_state(kw):
    s = kw.get("state")
    return (s.t, copy.deepcopy(s.m), copy.deepcopy(s.v)) if isinstance(s, training.AdamState) else None


def _bert_params(vocab=11, positions=6, d=8, d_ff=12):
    """A one-layer BERT in :func:`load_weights`' layout (random, small): encode needs no checkpoint."""
    r = np.random.default_rng(0)
    p = {"embed.word": r.standard_normal((vocab, d)), "embed.position": r.standard_normal((positions, d)),
         "embed.token_type": r.standard_normal((2, d)), "embed.ln.gamma": np.ones(d),
         "embed.ln.beta": np.zeros(d)}
    p.update({f"layers.0.attn.{k}": v for k, v in an.init_mha_params(d, 2, rng=1).items()})
    p.update({f"layers.0.ffn.{k}": v for k, v in nn.init_ffn_params(d, d_ff, rng=2).items()})
    for ln in ("ln1", "ln2"):
        p[f"layers.0.{ln}.gamma"], p[f"layers.0.{ln}.beta"] = np.ones(d), np.zeros(d)
    return p


BERT = _bert_params()
R = np.random.default_rng(3)
X = R.standard_normal((2, 3, 8))

ENTRIES = [
    Entry("training.adam_step", training.adam_step, _adam_call,
          {"lr": "positive", "beta1": "unit open", "beta2": "unit open", "eps": "positive",
           "params": [("str", "abc"), ("list", [1]), ("missing a moment", {"w": np.ones(3), "b": np.zeros(2),
                                                                          "c": np.ones(1)})],
           "grads": [("wrong shape", {"w": np.ones(4), "b": np.ones(2)}), ("missing", {"w": np.ones(3)}),
                     ("float32", {"w": np.ones(3, np.float32), "b": np.ones(2, np.float32)}),
                     ("str entry", {"w": "abc", "b": np.ones(2)}), ("list", [1])],
           "state": [("None", None), ("dict", {"t": 0}), ("str", "abc")]},
          state=_adam_state),
    Entry("training.transformer_lr", training.transformer_lr,
          lambda: dict(step=3, d_model=8, warmup=4, factor=1.0),
          {"step": "count", "d_model": "count", "warmup": "count", "factor": "positive"}),
    Entry("training.adam.cooldown_lr", training.adam.cooldown_lr,
          lambda: dict(step=3, steps=10, cooldown=2, d_model=8, warmup=4, factor=1.0),
          {"step": "count", "steps": "count", "cooldown": "count0", "d_model": "count",
           "warmup": "count", "factor": "positive"}),
    Entry("training.train", training.train,
          lambda: dict(config=TINY, steps=1, batch_size=2, warmup=2, lr_factor=1.0, cooldown=0, seed=0,
                       snapshot_at=(), on_step=None, dtype=np.float64, eval_every=None),
          {"steps": "count0", "batch_size": "count", "warmup": "count", "lr_factor": "positive",
           "cooldown": "count0", "seed": "seed", "on_step": "callable?", "dtype": "float dtype",
           "eval_every": "count?",
           "config": [("dict", {"vocab_size": 5}), ("str", "tiny")],
           "task": [("str", "reverse"), ("Seq2SeqConfig", S2S)],
           "snapshot_at": [("str", "0"), ("negative step", (-1,)), ("past the end", (5,)),
                           ("float step", (0.5,))]}),
    Entry("training.train_seq2seq", train_seq2seq,
          lambda: dict(config=dates_config(**DATES_TINY), task=DatesTask(heldout_size=3), steps=1,
                       batch_size=2, warmup=2, lr_factor=1.0, cooldown=0, label_smoothing=0.1, seed=0,
                       dtype=np.float64, eval_every=None, on_step=None),
          {"steps": "count0", "batch_size": "count", "warmup": "count", "lr_factor": "positive",
           "cooldown": "count0", "seed": "seed", "on_step": "callable?", "dtype": "float dtype",
           "eval_every": "count?", "label_smoothing": "unit open",
           "config": [("ModelConfig", TINY), ("str", "dates")], "task": [("ReversalTask", ReversalTask())]}),
    Entry("training.evaluate", training.evaluate,
          lambda: dict(params=copy.deepcopy(TINY_PARAMS), config=TINY, tokens=np.zeros((3, 4), np.int64),
                       targets=np.ones((3, 4), np.int64), batch_size=2),
          {"batch_size": "count", "tokens": ids_kind(5, (3, 4)), "targets": ids_kind(5, (3, 4)),
           "config": [("other vocab", dataclasses.replace(TINY, vocab_size=6)), ("str", "tiny")],
           "params": "dict"}),
    Entry("training.ReversalTask", ReversalTask, lambda: dict(length=3, vocab_size=4),
          {"length": "count", "vocab_size": "count"}),
    Entry("training.dates.DatesTask", DatesTask, lambda: dict(heldout_size=3, seed=0),
          {"heldout_size": "count", "seed": "seed"}),
    Entry("nn.ModelConfig", nn.ModelConfig, lambda: dataclasses.asdict(TINY),
          {"vocab_size": "count", "max_len": "count", "d_model": "count", "num_heads": "count",
           "d_ff": "count", "num_layers": "count", "activation": "choice", "positional": "flag"}),
    Entry("nn.Seq2SeqConfig", nn.Seq2SeqConfig, lambda: dataclasses.asdict(S2S),
          {"src_vocab": "count", "tgt_vocab": "count", "max_src_len": "count", "max_tgt_len": "count",
           "d_model": "count", "num_heads": "count", "d_ff": "count", "num_encoder_layers": "count",
           "num_decoder_layers": "count", "share_embeddings": "flag", "tie_output": "flag",
           "dropout_p": "unit open", "activation": "choice"}),
    Entry("nn.init_model", nn.init_model, lambda: dict(config=TINY, rng=0, dtype=np.float32),
          {"dtype": "float dtype", "rng": [("negative", -1), ("float", 1.5), ("bool", True)],
           "config": [("dict", {}), ("Seq2SeqConfig", S2S)]}),
    Entry("nn.model_forward", nn.model_forward,
          lambda: dict(params=copy.deepcopy(TINY_PARAMS), tokens=np.zeros((2, 4), np.int64), config=TINY),
          {"tokens": ids_kind(5, (2, 4), one_d_ok=True) + [("past max_len", np.zeros((2, 5), np.int64))],
           "config": [("other vocab", dataclasses.replace(TINY, vocab_size=6)),
                      ("more layers", dataclasses.replace(TINY, num_layers=2)),
                      ("other d_ff", dataclasses.replace(TINY, d_ff=32)), ("None", None)],
           "params": "dict"}),
    Entry("nn.seq2seq_forward", nn.seq2seq_forward,
          lambda: dict(params=copy.deepcopy(S2S_PARAMS), src=np.ones((2, 5), np.int64),
                       tgt_in=np.ones((2, 3), np.int64), config=S2S, src_mask=np.ones((2, 5), bool),
                       is_causal=True, rng=None),
          {"src": ids_kind(6, (2, 5)), "tgt_in": ids_kind(7, (2, 3)), "is_causal": "flag",
           "src_mask": [("float", np.ones((2, 5))), ("wrong shape", np.ones((2, 4), bool))],
           "config": [("other tgt_vocab", dataclasses.replace(S2S, tgt_vocab=9)), ("str", "s2s")],
           "params": "dict", "rng": [("negative", -1), ("str", "x")]}),
    Entry("nn.decoding.greedy_decode", greedy_decode,
          lambda: dict(params=copy.deepcopy(S2S_PARAMS), config=S2S, src=np.ones((2, 5), np.int64),
                       bos=1, steps=3, cached=True),
          {"bos": [("past the vocabulary", 7), ("negative", -1), ("bool", True)], "steps": "count",
           "cached": "flag", "src": ids_kind(6, (2, 5))}),
    Entry("nn.decoding.beam_search", beam_search,
          lambda: dict(params=copy.deepcopy(S2S_PARAMS), config=S2S, src=np.ones((2, 5), np.int64),
                       bos=1, eos=2, steps=3, beam_size=2, alpha=0.6),
          {"beam_size": "count", "alpha": "nonnegative", "steps": "count",
           "eos": [("past the vocabulary", 7), ("float", 2.0)]}),
    Entry("nn.sinusoidal_encoding", nn.sinusoidal_encoding,
          lambda: dict(length=4, d_model=6, dtype=np.float64),
          {"length": "count", "d_model": "count", "dtype": "float dtype"}),
    Entry("nn.layernorm_forward", nn.layernorm_forward,
          lambda: dict(x=X.copy(), gamma=np.ones(8), beta=np.zeros(8), eps=1e-5),
          {"eps": "nonnegative", "x": "float array",
           "gamma": [("wrong width", np.ones(5)), ("int", np.ones(8, int)),
                     ("float32", np.ones(8, np.float32))],
           "beta": [("wrong width", np.zeros(9)), ("str", "abc")]}),
    Entry("nn.cross_entropy_forward", nn.cross_entropy_forward,
          lambda: dict(logits=X.copy(), targets=np.zeros((2, 3), np.int64), label_smoothing=0.1),
          {"label_smoothing": [("NaN", NAN), ("above 1", 1.5), ("negative", -0.1), ("bool", True)],
           "targets": ids_kind(8, (2, 3)), "logits": "float array"}),
    Entry("nn.embedding_forward", nn.embedding_forward,
          lambda: dict(tokens=np.array([[0, 4]]), W_emb=np.ones((5, 8)), scale=2.0),
          {"tokens": ids_kind(5, (1, 2))[:5], "scale": "real",
           "W_emb": [("1-d", np.ones(5)), ("int", np.ones((5, 8), int)), ("str", "abc")]}),
    Entry("nn.ffn_forward", nn.ffn_forward,
          lambda: dict(x=X.copy(), params=nn.init_ffn_params(8, 6, rng=0), activation="relu"),
          {"x": "float array", "activation": "choice", "params": "dict"}),
    Entry("nn.init_ffn_params", nn.init_ffn_params, lambda: dict(d_model=8, d_ff=6, rng=0, dtype=np.float64),
          {"d_model": "count", "d_ff": "count", "dtype": "float dtype"}),
    Entry("nn.relu_forward", nn.relu_forward, lambda: dict(x=X.copy()),
          {"x": KINDS["float array"][:-1]}),                        # (a 0-d x is an element)
    Entry("nn.gelu_backward", nn.gelu_backward, lambda: dict(dy=X.copy(), x=X.copy()),
          {"x": "float array",
           "dy": [("wrong shape", np.ones((2, 3, 7))), ("float32", X.astype(np.float32))]}),
    Entry("pretrained.encode", encode,
          lambda: dict(params=copy.deepcopy(BERT), input_ids=np.array([[1, 5, 2]]),
                       attention_mask=np.ones((1, 3), bool), token_type_ids=np.zeros((1, 3), np.int64),
                       num_heads=2, eps=1e-12),
          {"input_ids": ids_kind(11, (1, 3)) + [("too long", np.ones((1, 7), np.int64))],
           "token_type_ids": [r for r in ids_kind(2, (1, 3)) if r[0] != "None"],   # None: all 0
           "attention_mask": [("float", np.ones((1, 3))), ("wrong shape", np.ones((1, 2), bool)),
                              ("values 0/1/2", np.array([[1, 2, 0]]))],
           "num_heads": "count", "eps": "nonnegative",
           "params": [("empty", {}), ("str", "abc"), ("missing a layer norm",
                                                      {k: v for k, v in BERT.items() if "ln2" not in k})]}),
    Entry("pretrained.load_weights", load_weights, lambda: dict(path="/nonexistent", dtype=np.float32),
          {"dtype": "float dtype", "path": [("int", 3), ("list", ["a"])]}),
    Entry("pretrained.MiniLM", MiniLM, lambda: dict(path="/nonexistent", dtype=np.float32),
          {"dtype": "float dtype"}),
    Entry("studies.positions.shift_matrix", positions.shift_matrix, lambda: dict(k=2, d_model=8),
          {"k": [("bool", True), ("float", 1.0), ("str", "1")]}),
    Entry("studies.positions.position_blind_guesses", positions.position_blind_guesses,
          lambda: dict(tokens=np.array([[0, 1, 1]]), vocab_size=3),
          {"tokens": ids_kind(3, (1, 3)), "vocab_size": "count"}),
    Entry("exercises.check", ex.check, lambda: dict(name="softmax", student_fn=an.softmax),
          {"name": [("unknown", "sofmax"), ("int", 3), ("None", None)],
           "student_fn": [("int", 3), ("str", "softmax"), ("None", None)]}),
]


def _snapshot(kwargs: dict) -> dict:
    """A deep copy of every argument that can be compared afterwards."""
    return {n: copy.deepcopy(v) for n, v in kwargs.items()
            if isinstance(v, (np.ndarray, dict, list, tuple, training.AdamState))}


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, training.AdamState):
        return a.t == b.t and _same(a.m, b.m) and _same(a.v, b.v)
    return a == b


def _rows():
    rows = []
    for e in ENTRIES:
        for param, kind in e.kinds.items():
            for label, bad in (KINDS[kind] if isinstance(kind, str) else kind):
                rows.append(pytest.param(e, param, bad, id=f"{e.name}-{param}-{label}"))
    return rows


ROWS = _rows()


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_the_valid_call_runs(entry):
    """The call every row spoils runs as it is (a row cannot pass on an already-broken call)."""
    if entry.name.startswith("pretrained.") and entry.name != "pretrained.encode":
        with pytest.raises((FileNotFoundError, ModuleNotFoundError)):   # /nonexistent: past the checks
            entry.fn(**entry.valid())
        return
    entry.fn(**entry.valid())


@pytest.mark.parametrize("entry, param, bad", ROWS)
def test_bad_argument_is_refused_by_name_before_any_change(entry, param, bad):
    kwargs = entry.valid()
    kwargs[param] = bad
    before = _snapshot({n: v for n, v in kwargs.items() if n != param})
    state = entry.state(kwargs) if entry.state else None
    with pytest.raises((ValueError, TypeError)) as err:
        entry.fn(**kwargs)
    assert param in str(err.value), f"{entry.name}({param}=...) refused without naming {param}: {err.value}"
    for name, value in before.items():
        assert _same(kwargs[name], value), f"{entry.name}: {name} changed by a refused call"
    if entry.state:
        after = entry.state(kwargs)
        assert (state is None) == (after is None) and (state is None or _same(list(state), list(after))), \
            f"{entry.name}: the state changed by a refused call"


def test_every_kind_is_used_and_the_table_is_large():
    used = {k for e in ENTRIES for k in e.kinds.values() if isinstance(k, str)}
    assert used == set(KINDS), f"kinds without a parameter: {set(KINDS) - used}"
    assert len(ROWS) > 300


@pytest.mark.parametrize("what", ["grads of the wrong shape", "lr=nan", "beta2=1.0", "read-only param"])
def test_a_refused_adam_step_changes_neither_params_nor_state(what):
    kw = _adam_call()
    if what == "grads of the wrong shape":
        kw["grads"]["b"] = np.ones(3)              # the second parameter: the first is checked too
    elif what == "lr=nan":
        kw["lr"] = NAN
    elif what == "beta2=1.0":
        kw["beta2"] = 1.0
    else:
        kw["params"]["b"].flags.writeable = False
    params, m = copy.deepcopy(kw["params"]), copy.deepcopy(kw["state"].m)
    with pytest.raises((ValueError, TypeError)):
        training.adam_step(**kw)
    assert kw["state"].t == 0 and _same(kw["state"].m, m) and _same(kw["params"], params)


@pytest.mark.parametrize("t", [-1, 1.5, True, "3", None])
def test_adam_state_t_is_a_count(t):
    state = training.adam_init({"w": np.ones(2)})
    with pytest.raises((ValueError, TypeError), match="AdamState.t"):
        state.t = t
    assert state.t == 0


def test_beam_search_does_not_write_into_the_kv_caches_it_reads():
    """Reordering the beams makes new caches (KVCache's arrays may be read-only views)."""
    tokens, scores = beam_search(S2S_PARAMS, S2S, np.ones((2, 5), np.int64), bos=1, eos=2, steps=3,
                                 beam_size=2, alpha=0.6)
    greedy, _ = greedy_decode(S2S_PARAMS, S2S, np.ones((2, 5), np.int64), bos=1, steps=3)
    assert tokens.shape == greedy.shape == (2, 3) and np.isfinite(scores).all()


@pytest.mark.parametrize("seed, exc", [(True, TypeError), (-1, ValueError), (1.5, TypeError),
                                       ("0", TypeError)])
@pytest.mark.parametrize("which", ["compare_mha", "compare_transformers_attention"])
def test_every_compare_function_refuses_the_same_bad_seed(which, seed, exc):
    """``seed=True`` is refused by every compare function alike (one was found taking it)."""
    torch = pytest.importorskip("torch")
    from attention_np import interop

    if which == "compare_mha":
        module = torch.nn.MultiheadAttention(8, 2, batch_first=True).double()
    else:
        pytest.importorskip("transformers")
        from transformers import BertConfig
        from transformers.models.bert.modeling_bert import BertSelfAttention

        module = BertSelfAttention(BertConfig(hidden_size=8, num_attention_heads=2))
    with pytest.raises(exc, match="seed"):
        getattr(interop, which)(module, X, seed=seed)


@pytest.mark.parametrize("module", ["not a module", 3, None, np.ones(2)])
def test_the_transformers_diff_names_a_non_module(module):
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from attention_np import interop

    with pytest.raises(TypeError, match="module must be"):
        interop.compare_transformers_attention(module, X)
