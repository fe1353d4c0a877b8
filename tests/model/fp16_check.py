#!/usr/bin/python3
"""Checks fg_fp16 against numpy's float16 conversions (IEEE round to nearest
even), bit for bit, on every half and on floats chosen to hit every rounding
case: ties, subnormals, overflow to inf, NaN, signed zero."""
import os, subprocess, sys, tempfile
import numpy as np

exe = sys.argv[1]
rng = np.random.default_rng(0)
halves = np.arange(65536, dtype=np.uint16).view(np.float16)
fin = halves[np.isfinite(halves)].astype(np.float32)
# exact halves, midpoints between neighbours (ties), and a hair either side
mid = ((fin[:-1].astype(np.float64) + fin[1:]) / 2).astype(np.float32)
vals = np.concatenate([
    fin, mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf)),
    rng.standard_normal(200000).astype(np.float32) * np.float32(10) ** rng.integers(-9, 6, 200000).astype(np.float32),
    np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504, 65519.99, 65520, 1e-8, 5.96e-8, 2.98e-8, 2.99e-8, 1e30],
             dtype=np.float32),
]).astype(np.float32)
with tempfile.TemporaryDirectory() as d:
    vals.tofile(os.path.join(d, "in"))
    subprocess.run([exe, os.path.join(d, "in"), os.path.join(d, "out")], check=True)
    raw = np.fromfile(os.path.join(d, "out"), dtype=np.uint8)
n = len(vals)
w = raw[:2 * 65536 * 4].view(np.float32).reshape(2, 65536)
h = raw[2 * 65536 * 4:].view(np.uint16).reshape(2, n)
want_w = halves.astype(np.float32)
want_h = vals.astype(np.float16).view(np.uint16)
ok = True
for i, name in enumerate(["f16c", "portable"]):
    same_w = (w[i].view(np.uint32) == want_w.view(np.uint32)) | (np.isnan(w[i]) & np.isnan(want_w))
    nan = np.isnan(vals)
    same_h = (h[i] == want_h) | (nan & ((h[i] & 0x7c00) == 0x7c00) & ((h[i] & 0x3ff) != 0))
    if not same_w.all():
        j = np.flatnonzero(~same_w)[0]
        print(f"{name}: half {j:#06x} -> {w[i][j]!r}, numpy {want_w[j]!r}"); ok = False
    if not same_h.all():
        j = np.flatnonzero(~same_h)[0]
        print(f"{name}: float {vals[j]!r} -> {h[i][j]:#06x}, numpy {want_h[j]:#06x}"); ok = False
print(f"fp16: {65536} halves widened, {n} floats narrowed, both paths: {'OK' if ok else 'MISMATCH'}")
sys.exit(0 if ok else 1)
