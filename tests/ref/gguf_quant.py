#!/usr/bin/python3
"""Quantized GGUF test models, and their reference twins.

  gguf_quant.py --model DIR --mix MIX --out FILE.gguf --ref-dir REF [--seed N]
                --gguf-py DIR

DIR is a Hugging Face Llama checkpoint (make_llama_checkpoint.py). Every
matrix is written in the format MIX gives it, as llama.cpp lays GGUF files
out (gguf_write.py: architecture llama, q/k rows permuted, norms F32); the
blocks come from tests/ref/ggml_blocks.py (gguf-py's quantize where it has
one, else random valid k-quant blocks of the weight's spread). REF is a
Hugging Face directory of float32 safetensors holding gguf-py's dequantize of
exactly those blocks, un-permuted: the numpy reference (llama_ref.py) run on
REF computes what the engine must compute on FILE.gguf.

MIX: F16, or one format for every matrix (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K,
Q3_K, Q4_K, Q5_K, Q6_K, MXFP4), or q4_k_m: llama.cpp's Q4_K_M recipe
(llama-quant.cpp): Q4_K everywhere, Q6_K for the output head and for attn_v
and ffn_down of the layers it gives more bits (the first and last eighth and
every third between), F32 norms. A matrix whose rows are not whole blocks
falls back to F16 (as llama.cpp's quantizer does).

Mixtures of experts (Mixtral, Qwen3-MoE checkpoints) are laid out as
gguf_write.py lays them out (architecture llama or qwen3moe, each role's
experts one 3-D tensor) and quantized as llama.cpp quantizes them: a stack's
rows are its experts' rows, so it is quantized row by row like a matrix; the
router (ffn_gate_inp) is never quantized (F32); ffn_down_exps follows
ffn_down's rule; and for 8 experts (Mixtral) q4_k_m gives attn_k and attn_v
Q8_0 and attn_output Q5_K, as llama-quant.cpp does for n_expert == 8.
"""
import argparse
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import ggml_blocks as gb  # noqa: E402
import gguf_write as gw  # noqa: E402
import make_checkpoint as mc  # noqa: E402
import make_llama_checkpoint as mlc  # noqa: E402

GT = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q2_K": 10, "Q3_K": 11,
      "Q4_K": 12, "Q5_K": 13, "Q6_K": 14, "BF16": 30, "MXFP4": 39}


def more_bits(layer, n):
    """llama.cpp's use_more_bits(i_layer, n_layers)."""
    return layer < n // 8 or layer >= 7 * n // 8 or (layer - n // 8) % 3 == 2


def format_of(mix, name, n_layers, n_experts=0):
    """The format of GGUF tensor `name` under MIX."""
    if mix != "q4_k_m":
        return mix
    if name == "output.weight":
        return "Q6_K"
    layer = int(name.split(".")[1]) if name.startswith("blk.") else -1
    if n_experts == 8 and (".attn_k." in name or ".attn_v." in name):
        return "Q8_0"
    if n_experts == 8 and ".attn_output." in name:
        return "Q5_K"
    if ".attn_v." in name or ".ffn_down" in name:
        return "Q6_K" if more_bits(layer, n_layers) else "Q4_K"
    return "Q4_K"


def build(model_dir, mix, out, ref_dir, seed, gguf):
    cfg, t = mlc.load_llama_checkpoint(model_dir)
    rng = np.random.default_rng(seed)
    arch, L, E = gw.arch_of(cfg), cfg["num_hidden_layers"], mlc.n_experts(cfg)
    tensors, deqs, used = [], {}, {}
    for name, a in gw.gguf_tensors(cfg, {k: v.astype(np.float32) for k, v in t.items()}, arch):
        fmt = "F32" if a.ndim == 1 or name.endswith("ffn_gate_inp.weight") else format_of(mix, name, L, E)
        if a.ndim > 1 and a.shape[-1] % gb.LAYOUT[fmt][0]:
            fmt = "F16"
        if fmt in ("F32", "F16"):
            raw = a.astype("<f4" if fmt == "F32" else "<f2")
            deq = raw.astype(np.float32)
            raw = raw.tobytes()
        else:   # a stack of experts: its rows, expert after expert
            rows = a.reshape(-1, a.shape[-1])
            blocks = gb.weight_blocks(fmt, rows, rng, gguf)
            deq = gb.dequantize(fmt, blocks, rows.shape, gguf).reshape(a.shape)
            raw = blocks.tobytes()
        used[fmt] = used.get(fmt, 0) + 1
        tensors.append((name, fmt, (raw, list(reversed(a.shape)))))
        deqs[name] = deq
    ref = {("model." + hf if hf != "lm_head.weight" else hf): a for hf, a in gw.hf_tensors(cfg, arch, deqs).items()}
    eos = cfg.get("eos_token_id", 2)
    eos = eos[0] if isinstance(eos, list) else eos
    kvs = gw.model_kvs(cfg, arch, "F16")
    kvs += gw.vocab_kvs("llama", cfg["vocab_size"], cfg.get("bos_token_id", 1), eos)
    for k, v in GT.items():
        gw.GT.setdefault(k, v)
    gw.write_gguf(out, kvs, tensors)
    if os.path.isdir(ref_dir):
        shutil.rmtree(ref_dir)
    os.makedirs(ref_dir)
    with open(os.path.join(model_dir, "config.json")) as f:
        c = json.load(f)
    with open(os.path.join(ref_dir, "config.json"), "w") as f:
        json.dump(c, f)
    mc.write_safetensors(os.path.join(ref_dir, "model.safetensors"), list(ref.items()), "F32")
    return used


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--mix", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ref-dir", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gguf-py", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import gguf
    used = build(a.model, a.mix, a.out, a.ref_dir, a.seed, gguf)
    print(json.dumps(used))


if __name__ == "__main__":
    main()
