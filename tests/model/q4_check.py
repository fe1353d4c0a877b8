#!/usr/bin/python3
"""fg_q4 (C) against tests/ref/q4_ref.py (numpy, written from the scheme's
description): identical packed bytes, minimums and scales, and identical
expanded fp16 values, on random groups and adversarial ones: constant
groups, one outlier, all negative, fp16 extremes (+-65504, subnormals,
signed zeros), a range so small its scale overflows fp16, ties at .5 after
scaling, and shapes whose last group is padded. No tolerance: the scheme is
defined bit for bit. Usage: q4_check.py Q4_TOOL"""
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import q4_ref  # noqa: E402


def cases():
    r = np.random.default_rng(14)
    f16 = np.float16
    yield "random normal (768, 96)", r.normal(0, 0.02, (768, 96)).astype(f16)
    yield "random wide range (200, 33), padded", (r.normal(0, 1, (200, 33)) * 10 ** r.uniform(-4, 4, (200, 33))).astype(f16)
    yield "one head (64, 1)", r.normal(0, 1, (64, 1)).astype(f16)
    yield "head 128 (128, 1)", r.normal(0, 1, (128, 1)).astype(f16)
    yield "short (5, 7): one padded group", r.normal(1, 1, (5, 7)).astype(f16)
    x = np.full((64, 4), 0.75, f16); x[:, 1] = 0; x[:, 2] = -3.5; x[:, 3] = 65504
    yield "constant groups", x
    x = np.full((64, 3), 0.001, f16); x[17, 0] = 60000; x[0, 1] = -60000; x[63, 2] = 1e-7
    yield "one outlier", x
    yield "all negative", (-np.abs(r.normal(0, 5, (130, 9))) - 0.5).astype(f16)
    x = np.zeros((64, 6), f16)
    x[::2, 0] = 65504; x[1::2, 0] = -65504                           # the widest range
    x[:, 1] = np.float16(6e-8) * np.arange(64)                      # subnormals
    x[::3, 2] = -0.0; x[1::3, 2] = 0.0                              # signed zeros only
    x[0, 3] = 1.0; x[1:, 3] = np.float16(1.0) + np.float16(2 ** -10)  # d one ulp: scale overflows fp16
    x[:, 4] = (np.arange(64) % 15) + 0.5; x[0, 4] = 0; x[1, 4] = 15  # d = 15, s = 1: exact .5 ties (half to even)
    x[:, 5] = np.where(np.arange(64) % 2, 6.1e-5, -6.1e-5)          # around the smallest normal
    yield "fp16 extremes and ties", x
    x = np.zeros((70, 2), f16); x[:, 0] = 5 + np.arange(70) / 100; x[:, 1] = -(5 + np.arange(70) / 100)
    yield "padding takes part in min/max", x


def run(tool, mode, N, C, data, d):
    i, o = os.path.join(d, "in"), os.path.join(d, "out")
    with open(i, "wb") as f:
        f.write(data)
    subprocess.run([tool, mode, str(N), str(C), i, o], check=True)
    with open(o, "rb") as f:
        return f.read()


def main():
    tool = sys.argv[1]
    fails = 0
    with tempfile.TemporaryDirectory() as d:
        for name, x in cases():
            N, C = x.shape
            want = q4_ref.pack(x)
            got = run(tool, "pack", N, C, x.astype("<f2").tobytes(), d)
            G = q4_ref.groups(N)
            parts = [("packed", 0, 32 * G * C), ("mins", 32 * G * C, 34 * G * C), ("scales", 34 * G * C, 36 * G * C)]
            bad = [p for p, a, b in parts if got[a:b] != want[a:b]]
            y_c = np.frombuffer(run(tool, "expand", N, C, want, d), "<f2").reshape(N, C)
            y_r = q4_ref.expand(want, N, C)
            if y_c.view(np.uint16).tolist() != y_r.view(np.uint16).tolist():
                bad.append("expanded values")
            with np.errstate(invalid="ignore"):   # a range over 65504 expands to inf, as FlexGen's fp16 does
                err = np.abs(y_r.astype(np.float64) - x.astype(np.float64)).max()
            if bad:
                fails += 1
                print("FAIL %s: %s differ" % (name, ", ".join(bad)))
            else:
                print("ok   %s: %d bytes identical, expansion identical (max |x - expanded| %.3g)"
                      % (name, len(want), err))
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
