#!/usr/bin/python3
"""The int16 kernels for k-quant weights (kernels/fg_gemm_i16.h, through
gemm_tool) against the fp64 product of gguf-py's dequantized weights
(gguf-py/gguf/quants.py, llama.cpp's own package) with the same fp32
activations.

Weights: random valid blocks of Q4_K, Q5_K and Q6_K (ggml_blocks.random_blocks:
every code and 6- or 8-bit scale random, fp16 scales random finite, some
zero), shapes [out, in] with odd out and in from 256 to 4096. Activations:
256 rows of normal values, each row scaled by 10^U(-3, 2), 0.5% of the
values outliers 100x larger, one row all zero and one with a zero
super-block; and blocks with every code and scale at its largest against
constant rows (extreme_blocks: the int32 overflow case). Rows 1, 3, 4, 5, 32, 33, 256 (the few-rows and many-rows
paths and their tails) and single rows, each slice one fg_gemm_fmt call.

The bound. The kernel quantizes each super-block b of 256 activations to
int16 with s_b = amax_b / 32767 and q = round(x / s_b), so each value is
moved by at most s_b / 2, plus the fp32 rounding of s_b and of x / s_b
(32767 * 2^-23 < 0.004 of a step, and 2^-24 of s_b): under 0.51 s_b. The
integer part is exact, so in exact arithmetic the kernel computes W . x_hat
with |x_hat - x| <= 0.51 s_b elementwise (W the exact block values), and
  |y - W x| <= sum_b 0.51 s_b sum_{i in b} |w_i|                (quantization)
             + (8 + nb) 2^-24 sum_i (|d sc q|_i + |dmin m|_i) (|x_i| + s_b)
The second line is fp32 rounding (u = 2^-24; fg_gemm_i16.h's fp32 part):
each product term is rounded at most twice on its own (the int32 sum and
d s_b, or s_b sum(q)) and once in its chain's FMA, and each partial sum at
most nb times along its chain, 3 times in the minimum term's tree and once
in the final add, each step off by at most u times the magnitudes so far:
(nb + 6) u; one u more for gguf-py's own fp32 weight (one rounding of
d sc q - dmin m), one for the fp64 reference and the second-order terms.
|d sc q| + |dmin m| is taken from gguf-py as |w - w0| + |w0|, w0 the
dequantized block with its codes zeroed. Every output must lie within it.

The fp32 kernels that run where the CPU lacks AVX512-VNNI (fg_gemm_int16(0),
gemm_tool --fp32) are held to the same bound on the [*, 512] shapes.

Invariance: every row of every slice bit for bit equal to the same row of
the 256-row call, on 1 thread and on 2 (FLEXGEN_THREADS), and the two
thread counts equal. Where the CPU lacks AVX512-VNNI the tool reports
"fp32" (the fallback, fg_gemm_fmt's fp32 kernels): the bound still holds
(theirs is smaller) but rows at up to 4 and above 4 take different sums,
so the invariance check is skipped with a note.

Usage: gemm_check.py GEMM_TOOL GGUF_PY_DIR  (exit 0 = all good)
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
QK = 256
# the code bytes of each block (ggml-common.h): zeroed, a block dequantizes
# to its offset term alone (Q4_K/Q5_K: -dmin m; Q6_K: -32 d sc)
CODES = {"Q4_K": [(16, 144)], "Q5_K": [(16, 176)], "Q6_K": [(0, 192)]}
SHAPES = [(256, 1), (512, 33), (1024, 161), (1280, 7), (4096, 17)]   # (in, out)
ROWS = 256
SLICES = [(0, 1), (0, 3), (0, 4), (0, 5), (0, 32), (0, 33), (0, ROWS), (1, 1), (4, 1), (31, 1), (200, 1),
          (198, 5), (255, 1), (224, 32)]
fails = 0


def activations(rng, cols):
    x = rng.standard_normal((ROWS, cols)) * 10.0 ** rng.uniform(-3, 2, (ROWS, 1))
    out = rng.random((ROWS, cols)) < 0.005
    x[out] *= 100
    x[7] = 0
    x[9, QK:2 * QK] = 0 if cols >= 2 * QK else x[9, QK:2 * QK]
    return x.astype(np.float32)


def run(fmt, cols, out, wpath, xpath, ypath, threads, fp32=False):
    env = dict(os.environ, FLEXGEN_THREADS=str(threads))
    sl = ",".join(f"{a}:{n}" for a, n in SLICES)
    r = subprocess.run([TOOL, *(["--fp32"] if fp32 else []), fmt, str(cols), str(out), wpath, xpath, str(ROWS), sl,
                        ypath], check=True, capture_output=True, text=True, env=env)
    y = np.fromfile(ypath, np.float32)
    res, k = [], 0
    for _, n in SLICES:
        res.append(y[k:k + n * out].reshape(n, out))
        k += n * out
    return r.stdout.strip(), res


def extreme_blocks(fmt, n):
    """n blocks whose every code times its sub-block scale is the format's
    largest in magnitude (ggml-common.h's layouts): Q4_K/Q5_K codes 15/31,
    6-bit scales 63, dmin 0; Q6_K codes 0 (0 - 32 = -32), scales -128. With a
    constant activation row each int32 lane of the kernel meets its bound
    (fg_gemm_i16.c) and the super-block's sum is far beyond 2^31."""
    _, nbytes, _ = gb.LAYOUT[fmt]
    blk = np.zeros((n, nbytes), np.uint8)
    if fmt in ("Q4_K", "Q5_K"):
        blk[:, 0:2] = np.array([2.0 ** -10], np.float16).view(np.uint8)
        blk[:, 4:] = 0xFF                  # scales 63, mins 63 (times dmin 0), codes all ones
    else:
        blk[:, 192:208] = 0x80             # scales -128; ql, qh 0: codes 0
        blk[:, 208:210] = np.array([2.0 ** -10], np.float16).view(np.uint8)
    return blk


def check(fmt, cols, out, tmp, rng, extreme=False):
    global fails
    nb = cols // QK
    raw = (extreme_blocks(fmt, out * nb) if extreme else gb.random_blocks(fmt, out * nb, rng)).reshape(out, -1)
    w = gb.dequantize(fmt, raw, (out, cols), gguf).astype(np.float64)
    zero = raw.copy()
    for a, b in CODES[fmt]:
        zero[:, [k * gb.LAYOUT[fmt][1] + j for k in range(nb) for j in range(a, b)]] = 0
    w0 = gb.dequantize(fmt, zero, (out, cols), gguf).astype(np.float64)
    x = activations(rng, cols)
    if extreme:   # constant rows: every product of a lane at its largest, of one sign
        x[0], x[1], x[2] = 1, -1, 3e-3
    wpath, xpath, ypath = (os.path.join(tmp, f"{fmt}_{cols}_{out}.{e}") for e in ("raw", "x", "y"))
    raw.tofile(wpath)
    x.tofile(xpath)

    x64 = x.astype(np.float64)
    ref = x64 @ w.T
    s = np.abs(x64).reshape(ROWS, nb, QK).max(axis=2) / 32767 * (1 + 2.0 ** -23)   # [rows, nb]
    absw_b = np.abs(w).reshape(out, nb, QK).sum(axis=2)                            # [out, nb]
    mag = np.abs(w - w0) + np.abs(w0)
    mag_b = mag.reshape(out, nb, QK).sum(axis=2)
    gamma = (8 + nb) * 2.0 ** -24
    bound = 0.51 * s @ absw_b.T + gamma * (np.abs(x64) @ mag.T + s @ mag_b.T)
    bound += 1e-30   # the all-zero row: y and ref are both exactly 0

    def outside(ys):
        worst, bad = 0.0, 0
        for (a, n), y in zip(SLICES, ys):
            err = np.abs(y.astype(np.float64) - ref[a:a + n])
            worst = max(worst, float((err / bound[a:a + n]).max()))
            bad += int((err > bound[a:a + n]).sum())
        return worst, bad

    if cols == 512:   # the fp32 kernels a CPU without VNNI runs: their error is smaller, the same bound holds
        worst, bad = outside(run(fmt, cols, out, wpath, xpath, ypath, 2, fp32=True)[1])
        print(f"{'FAIL' if bad else 'ok  '} {fmt} [{out}, {cols}] (fp32 fallback): {bad} outputs outside the bound "
              f"(worst err/bound {worst:.3f})")
        fails += bad > 0
    path, ys = run(fmt, cols, out, wpath, xpath, ypath, 1)
    _, ys2 = run(fmt, cols, out, wpath, xpath, ypath, 2)
    worst, bad = outside(ys)
    full = ys[SLICES.index((0, ROWS))]
    rel = float(np.abs(full - ref).max() / np.abs(ref).max())
    what = f"{fmt} [{out}, {cols}]{' saturated' if extreme else ''} ({path})"
    if bad:
        print(f"FAIL {what}: {bad} outputs outside the bound (worst err/bound {worst:.3g})")
        fails += 1
    else:
        print(f"ok   {what}: every output within the int16 bound (worst err/bound {worst:.3f}, "
              f"max err / max |y| {rel:.2e})")
    if path != "int16":
        print(f"note {what}: no AVX512-VNNI, the fp32 kernels ran; invariance across paths not checked")
        return
    diff = []
    for (a, n), y1, y2 in zip(SLICES, ys, ys2):
        if not np.array_equal(y1.view(np.uint32), y2.view(np.uint32)):
            diff.append(f"{a}:{n} differs between 1 and 2 threads")
        if not np.array_equal(y1.view(np.uint32), full[a:a + n].view(np.uint32)):
            diff.append(f"rows {a}:{n} differ from the same rows in the {ROWS}-row call")
    if diff:
        print(f"FAIL {what}: " + "; ".join(diff))
        fails += 1
    else:
        print(f"ok   {what}: each row bit for bit the same alone and in batches of 3-256, on 1 and 2 threads")


def main():
    rng = np.random.default_rng(16)
    with tempfile.TemporaryDirectory() as tmp:
        for fmt in ("Q4_K", "Q5_K", "Q6_K"):
            for cols, out in SHAPES:
                check(fmt, cols, out, tmp, rng)
            check(fmt, 512, 5, tmp, rng, extreme=True)
    print("gemm_check:", "FAILED" if fails else "all within the bound")
    return 1 if fails else 0


sys.exit(main())
