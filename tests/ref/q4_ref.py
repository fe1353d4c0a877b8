#!/usr/bin/python3
"""FlexGen's 4-bit group-wise compression in numpy: the oracle for
common/fg_q4.c, written from the scheme's description (docs/ARCHITECTURE.md,
"Compression"), not from the C.

A tensor (N, C) is grouped along N in groups of 64 rows of one column; the
last group is padded with +0.0 rows, which take part in min and max. Per
group, in float32 from the fp16 values:
    mn = min, mx = max, d = mx - mn, s = 15 / d (inf when d == 0)
    q  = rint(clip((x - mn) * s, 0, 15))   (half to even; 0 when d == 0)
stored: min = fp16(mn), scale = fp16(s). Expanded: fp16(fp16(q / scale) + min).
Slice layout: packed (G, 32, C) uint8 (row 2j of a group in the high nibble,
2j+1 in the low), then mins (G, C) fp16, then scales (G, C) fp16.
"""
import numpy as np

GROUP = 64


def groups(n):
    return (n + GROUP - 1) // GROUP


def quantize(x16):
    """x16 (N, C) float16 -> (q (G, 64, C) uint8, mins (G, C) f16, scales (G, C) f16)."""
    N, C = x16.shape
    G = groups(N)
    v = np.zeros((G * GROUP, C), np.float32)
    v[:N] = x16.astype(np.float32)
    v = v.reshape(G, GROUP, C)
    # the first element attaining the minimum (only the sign of a zero depends on it)
    mn = np.take_along_axis(v, v.argmin(axis=1)[:, None, :], axis=1)[:, 0, :]
    mx = v.max(axis=1)
    d = (mx - mn).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = (np.float32(15) / d).astype(np.float32)
        t = ((v - mn[:, None, :]).astype(np.float32) * s[:, None, :]).astype(np.float32)
    t = np.where(d[:, None, :] == 0, np.float32(0), t)
    t = np.clip(t, np.float32(0), np.float32(15))
    q = np.rint(t).astype(np.uint8)
    with np.errstate(over="ignore"):   # a scale over 65504 is stored as inf
        return q, mn.astype(np.float16), s.astype(np.float16)


def pack(x16):
    """The slice's bytes for x16 (N, C) float16."""
    q, mins, scales = quantize(x16)
    packed = (q[:, 0::2, :] << 4) | q[:, 1::2, :]   # (G, 32, C)
    return packed.astype(np.uint8).tobytes() + mins.astype("<f2").tobytes() + scales.astype("<f2").tobytes()


def unpack(buf, N, C):
    """(q (G, 64, C), mins, scales) from a slice's bytes."""
    G = groups(N)
    b = np.frombuffer(buf, np.uint8)
    assert b.size == 36 * G * C, (b.size, N, C)
    packed = b[:G * 32 * C].reshape(G, 32, C)
    mins = np.frombuffer(b[G * 32 * C:G * 34 * C].tobytes(), "<f2").reshape(G, C)
    scales = np.frombuffer(b[G * 34 * C:].tobytes(), "<f2").reshape(G, C)
    q = np.empty((G, GROUP, C), np.uint8)
    q[:, 0::2, :] = packed >> 4
    q[:, 1::2, :] = packed & 15
    return q, mins, scales


def expand(buf, N, C):
    """x (N, C) float16 from a slice's bytes: fp16(fp16(q / scale) + min)."""
    q, mins, scales = unpack(buf, N, C)
    with np.errstate(divide="ignore", over="ignore"):
        y = (q.astype(np.float32) / scales.astype(np.float32)[:, None, :]).astype(np.float16)
    with np.errstate(over="ignore", invalid="ignore"):
        y = (y.astype(np.float32) + mins.astype(np.float32)[:, None, :]).astype(np.float16)
    return y.reshape(-1, C)[:N]


def roundtrip(x16, axis=0):
    """x16 compressed and expanded along `axis` of a 2-D array (what the engine computes with)."""
    if axis == 1:
        return roundtrip(x16.T, 0).T
    return expand(pack(x16), *x16.shape)


def roundtrip_heads(x16, head_dim):
    """A cache block (..., H) compressed per head along head_dim (the KV cache's grouping):
    each head's vector is a (head_dim, 1) slice, so all of them side by side are one
    (head_dim, M) tensor grouped along head_dim."""
    flat = x16.reshape(-1, head_dim)
    return roundtrip(flat, axis=1).reshape(x16.shape)
