#!/usr/bin/python3
"""A GGUF file laid out as llama.cpp's Q4_K_M of a Llama checkpoint's shapes,
for the cuda end-to-end test (cuda_e2e.sh --gguf-q4km).

  make_gguf_q4km.py --model DIR --out FILE.gguf [--seed N]

DIR is a make_llama_checkpoint.py checkpoint: its config and each tensor's
spread are used, its values are not. Every matrix whose rows are whole
256-value blocks is Q4_K, or Q6_K where llama.cpp's Q4_K_M recipe gives more
bits (the head; attn_v and ffn_down of the first and last eighth of the
layers and every third between: tests/ref/gguf_quant.py's format_of), as
random valid blocks of the tensor's spread (tests/ref/ggml_blocks.py); other
matrices F16, norms F32. Offline: no gguf-py (its quantizer has no k-quants,
and the test compares two backends on the same file, so no dequantized twin
is needed). The q/k rows are random blocks, so llama.cpp's row permutation,
which the loader undoes, is not applied: a permutation of random rows is
random rows.
"""
import argparse
import os
import sys

import numpy as np

REF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref")
sys.path.insert(0, REF)
import ggml_blocks as gb  # noqa: E402
import gguf_quant as gq  # noqa: E402
import gguf_write as gw  # noqa: E402
import make_llama_checkpoint as mlc  # noqa: E402

QK_K = 256


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    cfg, t = mlc.load_llama_checkpoint(a.model)
    rng = np.random.default_rng(a.seed)
    L = cfg["num_hidden_layers"]
    tensors, used = [], {}
    for hf in mlc.expected_shapes(cfg):
        x = t[hf].astype(np.float32)
        if x.ndim == 1:
            fmt, data = "F32", x
        elif x.shape[1] % QK_K:
            fmt, data = "F16", x
        else:
            fmt = gq.format_of("q4_k_m", hf, L)
            blk = gb._kquant_random(fmt, x.shape[0], x.shape[1] // QK_K, float(x.std()) or 0.02, rng)
            data = (blk.tobytes(), [x.shape[1], x.shape[0]])
        used[fmt] = used.get(fmt, 0) + 1
        tensors.append((gw.gguf_name(hf), fmt, data))
    eos = cfg.get("eos_token_id", 2)
    eos = eos[0] if isinstance(eos, list) else eos
    kvs = gw.model_kvs(cfg, "llama", "F16")
    kvs += gw.vocab_kvs("llama", cfg["vocab_size"], cfg.get("bos_token_id", 1), eos)
    for k, v in gq.GT.items():
        gw.GT.setdefault(k, v)
    gw.write_gguf(a.out, kvs, tensors)
    print(used)


if __name__ == "__main__":
    main()
