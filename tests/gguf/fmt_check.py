#!/usr/bin/python3
"""The engine's dequantizers (common/fg_fmt.h, through gguf_tool) against
gguf-py's numpy `dequantize` (llama.cpp's own package; scripts/fetch-gguf-py.sh
puts it in the cache), bit for bit in fp32:
  1. blocks: for every format the engine keeps, 4096 random blocks (every code
     random; fp16 scales random finite values, some zero; MXFP4 exponents over
     their range and the e < 2 subnormals), dequantized by both: equal bits,
     for the engine's AVX-512 forms (fg_fmt_x86.c, used where the CPU has
     AVX-512) and its portable ones;
  2. tensors in a GGUF file (written with gguf-py's GGUFWriter): for every
     format a Llama model's attn_q / attn_k (un-permuted by the engine's
     fg_gguf_read_raw with the head counts, numpy un-permutes gguf-py's
     output) and matrices with odd row counts (7 rows, 1 row): equal bits.
Exact equality is the claim (fg_fmt.h: same fp32 operations in the same
order), so the tolerance is zero.
Usage: fmt_check.py GGUF_TOOL GGUF_PY_DIR  (exit 0 = all good)
"""
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "ref"))
sys.path.insert(0, sys.argv[2])
import gguf  # noqa: E402
import ggml_blocks as gb  # noqa: E402

TOOL = sys.argv[1]
fails = 0


def check(what, ours, ref):
    global fails
    a, b = ours.view(np.uint32), np.ascontiguousarray(ref, np.float32).view(np.uint32)
    if a.shape != b.shape or not np.array_equal(a, b):
        bad = np.flatnonzero(a.ravel() != b.ravel()) if a.shape == b.shape else []
        i = bad[0] if len(bad) else 0
        print(f"FAIL {what}: {len(bad)} of {b.size} values differ (first at {i}: "
              f"{ours.ravel()[i] if a.shape == b.shape else ours.shape} vs {ref.ravel()[i] if a.shape == b.shape else ref.shape})")
        fails += 1
    else:
        print(f"ok   {what}: {b.size} values equal bit for bit")


def blocks(tmp, rng):
    for fmt in gb.FORMATS:
        raw = gb.random_blocks(fmt, 4096, rng)
        inp, out = os.path.join(tmp, fmt + ".raw"), os.path.join(tmp, fmt + ".f32")
        raw.tofile(inp)
        vals = gb.LAYOUT[fmt][0]
        ref = gb.dequantize(fmt, raw.reshape(1, -1), (1, raw.shape[0] * vals), gguf)
        for form in ("fast", "portable"):   # the AVX-512 forms where there are, and the portable ones
            subprocess.run([TOOL, *(["--portable"] if form == "portable" else []), "blocks", fmt, inp, out], check=True)
            check(f"{fmt} random blocks ({form})", np.fromfile(out, np.float32).reshape(ref.shape), ref)


def unpermute(w, heads):
    """llama.cpp's converter permutes HF rows r = h*d + s*d/2 + i to h*d + 2i + s; undo."""
    rows = w.shape[0]
    d = rows // heads
    return w.reshape(heads, d // 2, 2, -1).swapaxes(1, 2).reshape(rows, -1)


def tensors(tmp, rng):
    H, heads, kv, cols = 4, 4, 2, 512       # head_dim 16: 64 q rows, 32 k rows
    for fmt in gb.FORMATS:
        path = os.path.join(tmp, f"t_{fmt}.gguf")
        w = gguf.GGUFWriter(path, "llama")
        w.add_uint32("llama.attention.head_count", heads)
        w.add_uint32("llama.attention.head_count_kv", kv)
        shapes = {"blk.0.attn_q.weight": 64, "blk.0.attn_k.weight": 32, "odd7.weight": 7, "one.weight": 1}
        raws = {}
        for name, rows in shapes.items():
            x = (rng.standard_normal((rows, cols)) * 0.05).astype(np.float32)
            if fmt in ("F32", "F16"):   # gguf-py takes these typed, not as bytes
                typed = x.astype(np.float32 if fmt == "F32" else np.float16)
                w.add_tensor(name, typed)
                raw = typed.view(np.uint8)
            else:
                raw = gb.weight_blocks(fmt, x, rng, gguf)
                qt = getattr(gguf.GGMLQuantizationType, fmt)
                w.add_tensor(name, np.ascontiguousarray(raw), raw_dtype=qt)   # byte shape
            raws[name] = raw
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        out = os.path.join(tmp, f"deq_{fmt}")
        os.makedirs(out)
        subprocess.run([TOOL, "dequant", path, out], check=True)
        for name, rows in shapes.items():
            ref = gb.dequantize(fmt, raws[name], (rows, cols), gguf)
            if "attn_q" in name: ref = unpermute(ref, heads)
            if "attn_k" in name: ref = unpermute(ref, kv)
            ours = np.fromfile(os.path.join(out, name + ".f32"), np.float32).reshape(rows, cols)
            check(f"{fmt} {name} [{rows}, {cols}]", ours, ref)


def main():
    rng = np.random.default_rng(33)
    with tempfile.TemporaryDirectory() as tmp:
        blocks(tmp, rng)
        tensors(tmp, rng)
    print("fmt_check:", "FAILED" if fails else "all equal")
    return 1 if fails else 0


sys.exit(main())
