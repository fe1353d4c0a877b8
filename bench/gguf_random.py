#!/usr/bin/python3
"""Write a GGUF file of random weights with a named Llama size's shapes, for
bench/bench_llamacpp.sh and bench/bench_quant.sh: the same file for llama.cpp
and for `flexgen run --model FILE.gguf`.

  gguf_random.py --size tinyllama-1.1b|llama-2-13b|llama-2-70b --out FILE.gguf
                 [--seed 26] [--mix F16|Q8_0|Q4_0|Q4_K|Q6_K|q4_k_m|...] [--layers N]

--mix: every matrix in one ggml format, or q4_k_m, llama.cpp's Q4_K_M recipe
(tests/ref/gguf_quant.py: Q4_K, Q6_K for the head and for attn_v / ffn_down
of the layers it gives more bits). Quantized tensors are cut from a 64 MiB
pool of valid random blocks of their format (tests/ref/ggml_blocks.py:
gguf-py's quantize of N(0, 0.02) values where it has one, else random codes
with scales of that spread; needs gguf-py: scripts/fetch-gguf-py.sh), at
whole-block offsets. --layers: the first N decoder layers only (the size's
shapes, fewer of them: a file that fits the disk twice, with its tier store).

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
}
BLOCK = 64 << 20


def pool(fmt, rng):
    """About 64 MiB of valid random blocks of fmt, whole blocks."""
    vals, nbytes, _ = gb.LAYOUT[fmt]
    rows = BLOCK // nbytes // 256
    sys.path.insert(0, os.environ.get("GGUF_PY", os.path.expanduser("~/.cache/flexgen/gguf-py")))
    import gguf
    x = (rng.standard_normal((rows, 256 * vals), dtype=np.float32) * 0.02)
    return np.ascontiguousarray(gb.weight_blocks(fmt, x, rng, gguf)).view(np.uint8).reshape(-1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", required=True, choices=sorted(SIZES))
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=26)
    ap.add_argument("--mix", default="F16")
    ap.add_argument("--layers", type=int, default=0)
    a = ap.parse_args()
    cfg = dict(SIZES[a.size], model_type="llama", rms_norm_eps=1e-5, rope_theta=10000.0, bos_token_id=1,
               eos_token_id=2, tie_word_embeddings=False)
    if a.layers:
        cfg["num_hidden_layers"] = a.layers
    rng = np.random.default_rng(a.seed)
    pools = {"F16": (rng.standard_normal(BLOCK // 2, dtype=np.float32) * 0.02).astype("<f2").view(np.uint8)}
    infos, off, align = [], 0, 32
    for hf, shape in mlc.expected_shapes(cfg).items():
        gt = "F32" if len(shape) == 1 else gq.format_of(a.mix, gw.gguf_name(hf), cfg["num_hidden_layers"])
        if gt not in pools:
            pools[gt] = pool(gt, rng)
        vals, nbytes, _ = gb.LAYOUT[gt]
        n = int(np.prod(shape)) // vals * nbytes
        off += -off % align
        infos.append((gw.gguf_name(hf), gt, list(reversed(shape)), off, n))
        off += n
    for k, v in gq.GT.items():
        gw.GT.setdefault(k, v)
    kvs = gw.model_kvs(cfg, "llama", "F16") + gw.vocab_kvs("llama", cfg["vocab_size"], 1, 2)
    head = [b"GGUF", struct.pack("<IQQ", 3, len(infos), len(kvs))]
    for key, vt, v in kvs:
        head += [gw.enc_str(key), struct.pack("<I", gw.VT[vt]), gw.enc_value(vt, v)]
    for name, gt, ne, o, _ in infos:
        head += [gw.enc_str(name), struct.pack("<I", len(ne)), struct.pack("<%dQ" % len(ne), *ne),
                 struct.pack("<IQ", gw.GT[gt], o)]
    head = b"".join(head)
    head += b"\0" * (-len(head) % align)
    with open(a.out + ".partial", "wb", buffering=0) as f:
        f.write(head)
        pos = 0
        for i, (name, gt, ne, o, n) in enumerate(infos):
            if o > pos:
                f.write(b"\0" * (o - pos))
            if gt == "F32":
                f.write(np.ones(n // 4, "<f4").tobytes())
            else:
                mv, bb = memoryview(pools[gt]), gb.LAYOUT[gt][1]
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
