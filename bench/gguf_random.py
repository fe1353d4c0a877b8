#!/usr/bin/python3
"""Write a GGUF file of random weights with a named Llama size's shapes, for
bench/bench_llamacpp.sh, bench/bench_quant.sh and bench/bench_moe.sh: the
same file for llama.cpp and for `flexgen run --model FILE.gguf`.

  gguf_random.py --size tinyllama-1.1b|llama-2-13b|llama-2-70b|qwen3-30b-a3b|mixtral-8x7b
                 --out FILE.gguf [--seed 26] [--mix F16|Q8_0|Q4_0|Q4_K|Q6_K|q4_k_m|...]
                 [--layers N]

--mix: every matrix in one ggml format, or q4_k_m, llama.cpp's Q4_K_M recipe
(tests/ref/gguf_quant.py: Q4_K, Q6_K for the head and for attn_v / ffn_down
of the layers it gives more bits). Quantized tensors are cut from a 64 MiB
pool of valid random blocks of their format (tests/ref/ggml_blocks.py:
gguf-py's quantize of N(0, 0.02) values where it has one, else random codes
with scales of that spread; needs gguf-py: scripts/fetch-gguf-py.sh), at
whole-block offsets. --layers: the first N decoder layers only (the size's
shapes, fewer of them: a file that fits the disk twice, with its tier store).
Under q4_k_m each layer keeps the format it has in the whole model's file
(the recipe's layer count is the size's, not N), so N layers are the first
N of the full file, byte for byte in size.

Mixtures of experts (qwen3-30b-a3b: architecture qwen3moe, 128 experts, top
8 renormalised, q/k norms; mixtral-8x7b: architecture llama with
expert_count 8, top 2), laid out as llama.cpp's converter lays them out
(tests/ref/gguf_write.py): a role's experts merged into one 3-D tensor,
blk.N.ffn_{gate,up,down}_exps.weight, and the router blk.N.ffn_gate_inp.weight
F32 ([E, H], never quantized), drawn from N(0, 0.02) so that tokens spread
over the experts (ones, as the norms get, would tie every logit and route
every token to experts 0..k-1). q4_k_m is llama-quant.cpp's recipe for
them (node-llama-cpp 3.21.1's llama.cpp, llama_tensor_get_type_impl):
ffn_gate_exps and ffn_up_exps Q4_K; ffn_down_exps Q6_K in the layers
use_more_bits picks (the first and last eighth and every third between; the
layer read from the tensor's name, as it does for n_expert > 1), else Q4_K;
attn_v likewise; the head Q6_K and the token embedding Q4_K; and for 8
experts (Mixtral) attn_k and attn_v Q8_0 and attn_output Q5_K.

Streams: the header first (metadata and tensor infos through
tests/ref/gguf_write.py's encoders, its SPM vocabulary of the size's 32000
tokens), then each tensor's bytes cut from one 64 MiB block of fp16 values
drawn once from N(0, 0.02) (finite and small, as a trained model's), each
tensor starting at another offset of the block; norm weights F32 ones. A
26 GB file is written at the disk's speed, not numpy's. q and k are random,
so llama.cpp's row permutation is not applied (both engines read the same
bytes; the engine undoes the permutation on read, which only reorders
random rows)."""
import argparse
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import ggml_blocks as gb  # noqa: E402
import gguf_quant as gq  # noqa: E402
import gguf_write as gw  # noqa: E402
import make_llama_checkpoint as mlc  # noqa: E402

SIZES = {   # Hugging Face config.json fields of the published models
    "tinyllama-1.1b": dict(vocab_size=32000, hidden_size=2048, num_hidden_layers=22, num_attention_heads=32,
                           num_key_value_heads=4, intermediate_size=5632, max_position_embeddings=2048),
    "llama-2-13b": dict(vocab_size=32000, hidden_size=5120, num_hidden_layers=40, num_attention_heads=40,
                        num_key_value_heads=40, intermediate_size=13824, max_position_embeddings=4096),
    "llama-2-70b": dict(vocab_size=32000, hidden_size=8192, num_hidden_layers=80, num_attention_heads=64,
                        num_key_value_heads=8, intermediate_size=28672, max_position_embeddings=4096),
    # mixtures of experts (model/fg_family_llama.c's --dummy sizes)
    "qwen3-30b-a3b": dict(model_type="qwen3_moe", vocab_size=151936, hidden_size=2048, num_hidden_layers=48,
                          num_attention_heads=32, num_key_value_heads=4, head_dim=128, intermediate_size=6144,
                          moe_intermediate_size=768, num_experts=128, num_experts_per_tok=8, norm_topk_prob=True,
                          decoder_sparse_step=1, mlp_only_layers=[], max_position_embeddings=40960,
                          rope_theta=1000000.0, rms_norm_eps=1e-6),
    "mixtral-8x7b": dict(model_type="mixtral", vocab_size=32000, hidden_size=4096, num_hidden_layers=32,
                         num_attention_heads=32, num_key_value_heads=8, intermediate_size=14336,
                         num_local_experts=8, num_experts_per_tok=2, max_position_embeddings=32768,
                         rope_theta=1000000.0),
}
BLOCK = 64 << 20
FILE_TYPE = {"F16": 1, "Q8_0": 7, "Q4_0": 2, "q4_k_m": 15}   # llama_ftype


def pool(fmt, rng):
    """About 64 MiB of valid random blocks of fmt, whole blocks."""
    vals, nbytes, _ = gb.LAYOUT[fmt]
    rows = BLOCK // nbytes // 256
    sys.path.insert(0, os.environ.get("GGUF_PY", os.path.expanduser("~/.cache/flexgen/gguf-py")))
    import gguf
    x = (rng.standard_normal((rows, 256 * vals), dtype=np.float32) * 0.02)
    return np.ascontiguousarray(gb.weight_blocks(fmt, x, rng, gguf)).view(np.uint8).reshape(-1)


def tensor_shapes(cfg):
    """[(GGUF name, numpy shape)] in the converter's order: a sparse layer's
    experts merged per role into one [E, rows, in] stack (gw.gguf_tensors'
    layout, without the arrays), emitted where its last expert is listed."""
    out, count = [], {}
    for hf, shape in mlc.expected_shapes(cfg).items():
        ex = gw.expert_of(cfg, hf)
        if ex is None:
            out.append((gw.gguf_name(hf), shape))
            continue
        count[ex[:2]] = count.get(ex[:2], 0) + 1
        if count[ex[:2]] == mlc.n_experts(cfg):
            out.append(("blk.%d.ffn_%s_exps.weight" % ex[:2], (mlc.n_experts(cfg),) + tuple(shape)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", required=True, choices=sorted(SIZES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--mix", default="F16")
    ap.add_argument("--layers", type=int, default=0)
    a = ap.parse_args()
    cfg = dict(dict(model_type="llama", rms_norm_eps=1e-5, rope_theta=10000.0), **SIZES[a.size], bos_token_id=1,
               eos_token_id=2, tie_word_embeddings=False)
    n_layers, E = cfg["num_hidden_layers"], mlc.n_experts(cfg)   # the recipe's: the whole model's
    if a.layers:
        cfg["num_hidden_layers"] = a.layers
    arch = gw.arch_of(cfg)
    rng = np.random.default_rng(a.seed)
    pools = {"F16": (rng.standard_normal(BLOCK // 2, dtype=np.float32) * 0.02).astype("<f2").view(np.uint8),
             "router": (rng.standard_normal(BLOCK // 4, dtype=np.float32) * 0.02).astype("<f4").view(np.uint8)}
    infos, off, align = [], 0, 32
    for name, shape in tensor_shapes(cfg):
        if name.endswith("ffn_gate_inp.weight"):
            gt, src = "F32", "router"
        elif len(shape) == 1:
            gt, src = "F32", None   # norms: ones
        else:
            gt = src = gq.format_of(a.mix, name, n_layers, E)
        if src and src not in pools:
            pools[src] = pool(src, rng)
        vals, nbytes, _ = gb.LAYOUT[gt]
        n = int(np.prod(shape)) // vals * nbytes
        off += -off % align
        infos.append((name, gt, src, list(reversed(shape)), off, n))
        off += n
    for k, v in gq.GT.items():
        gw.GT.setdefault(k, v)
    kvs = gw.model_kvs(cfg, arch, "F16") + gw.vocab_kvs("llama", cfg["vocab_size"], 1, 2)
    if a.mix in FILE_TYPE:   # general.file_type: what llama.cpp prints as the file's type
        kvs = [(k, t, FILE_TYPE[a.mix] if k == "general.file_type" else v) for k, t, v in kvs]
    head = [b"GGUF", struct.pack("<IQQ", 3, len(infos), len(kvs))]
    for key, vt, v in kvs:
        head += [gw.enc_str(key), struct.pack("<I", gw.VT[vt]), gw.enc_value(vt, v)]
    for name, gt, _, ne, o, _ in infos:
        head += [gw.enc_str(name), struct.pack("<I", len(ne)), struct.pack("<%dQ" % len(ne), *ne),
                 struct.pack("<IQ", gw.GT[gt], o)]
    head = b"".join(head)
    head += b"\0" * (-len(head) % align)
    with open(a.out + ".partial", "wb", buffering=0) as f:
        f.write(head)
        pos = 0
        for i, (name, gt, src, ne, o, n) in enumerate(infos):
            if o > pos:
                f.write(b"\0" * (o - pos))
            if src is None:
                f.write(np.ones(n // 4, "<f4").tobytes())
            else:
                mv, bb = memoryview(pools[src]), gb.LAYOUT[gt][1]
                size = len(mv)
                start, left = (i * 7919 * bb) % size, n
                while left:
                    k = min(left, size - start)
                    f.write(mv[start:start + k])
                    left -= k
                    start = 0
            pos = o + n
    os.rename(a.out + ".partial", a.out)
    print("gguf_random: %s, %d tensors, %.2f GB" % (a.out, len(infos), (len(head) + pos) / 1e9))


if __name__ == "__main__":
    main()
