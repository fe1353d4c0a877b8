"""Random valid ggml blocks of every format the engine keeps (common/fg_fmt.h),
for the format tests and for writing quantized test models.

Two kinds:
  random_blocks(fmt, n, rng)           every bit random except the fp16 scale
                                       fields, which are random finite values
                                       (tests of the dequantizers: every code,
                                       every scale bit pattern)
  weight_blocks(fmt, x, rng, gguf)     a matrix x [rows, in] (float32) as blocks
                                       whose values approximate x: gguf-py's own
                                       quantize where it has one (Q8_0, Q4_0,
                                       Q4_1, Q5_0, Q5_1, MXFP4, BF16, F16), else
                                       (the k-quants, which gguf-py only
                                       dequantizes) random codes with scales
                                       chosen so the values have x's spread and
                                       zero mean: a random weight, not x itself.
Block layouts are ggml's (ggml-common.h); sizes from gguf-py's
GGML_QUANT_SIZES. Nothing here is the engine's code.
"""
import numpy as np

# name -> (values per block, bytes per block, offsets of fp16 scale fields)
LAYOUT = {
    "F32": (1, 4, ()),
    "F16": (1, 2, ()),
    "BF16": (1, 2, ()),
    "Q8_0": (32, 34, (0,)),
    "Q4_0": (32, 18, (0,)),
    "Q4_1": (32, 20, (0, 2)),
    "Q5_0": (32, 22, (0,)),
    "Q5_1": (32, 24, (0, 2)),
    "Q2_K": (256, 84, (80, 82)),
    "Q3_K": (256, 110, (108,)),
    "Q4_K": (256, 144, (0, 2)),
    "Q5_K": (256, 176, (0, 2)),
    "Q6_K": (256, 210, (208,)),
    "MXFP4": (32, 17, ()),
}
FORMATS = list(LAYOUT)


def _put_f16(blk, off, vals):
    blk[:, off:off + 2] = np.asarray(vals, np.float16).reshape(-1, 1).view(np.uint8).reshape(-1, 2)


def random_blocks(fmt, n, rng):
    """n blocks of fmt: random bytes, finite random fp16 scales (normal,
    std 0.01, some negative, a few zero)."""
    vals, nbytes, scales = LAYOUT[fmt]
    blk = rng.integers(0, 256, size=(n, nbytes), dtype=np.uint8)
    if fmt == "F32":
        return rng.standard_normal((n, 1)).astype(np.float32).view(np.uint8)
    if fmt == "F16":
        return rng.standard_normal((n, 1)).astype(np.float16).view(np.uint8)
    if fmt == "BF16":   # any pattern but NaN (exponent all ones)
        b = blk.view(np.uint16).copy()
        b[(b & 0x7F80) == 0x7F80] &= 0xBFFF
        return b.view(np.uint8)
    for off in scales:
        s = (rng.standard_normal(n) * 0.01).astype(np.float32)
        s[rng.random(n) < 0.02] = 0
        _put_f16(blk, off, s)
    if fmt == "MXFP4":   # exponents over the whole range but the overflowing top, and the e < 2 subnormals
        e = rng.integers(0, 200, size=n).astype(np.uint8)
        e[:4] = [0, 1, 2, 127][: min(4, n)]
        blk[:, 0] = e
    return blk


def _kquant_random(fmt, rows, nb, std, rng):
    """rows x nb k-quant blocks with codes random and scales set so a value
    has about `std` spread and zero mean."""
    _, nbytes, _ = LAYOUT[fmt]
    blk = rng.integers(0, 256, size=(rows * nb, nbytes), dtype=np.uint8)
    n = rows * nb
    if fmt in ("Q4_K", "Q5_K"):
        top = 15 if fmt == "Q4_K" else 31
        sc = rng.integers(32, 64, size=(n, 8))
        d = np.full(n, 2 * std * np.sqrt(3) / (top * 48), np.float32)
        _put_f16(blk, 0, d)
        _put_f16(blk, 2, d * top / 2)      # dmin * m = d * sc * top / 2 with m = sc: centred
        s = np.zeros((n, 12), np.uint8)
        s[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
        s[:, 4:8] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
        s[:, 8:12] = (sc[:, 4:8] & 15) | ((sc[:, 4:8] & 15) << 4)
        blk[:, 4:16] = s
    elif fmt == "Q6_K":
        _put_f16(blk, 208, np.full(n, std * np.sqrt(3) / (32 * 96), np.float32))
        blk[:, 192:208] = rng.integers(64, 128, size=(n, 16)).astype(np.int8).view(np.uint8)
    elif fmt == "Q3_K":
        _put_f16(blk, 108, np.full(n, std * np.sqrt(3) / (4 * 24), np.float32))
        sc = rng.integers(16 + 32, 32 + 32, size=(n, 16))      # stored scale - 32 in 16..31
        s = np.zeros((n, 12), np.uint8)
        s[:, 0:8] = (sc[:, 0:8] & 15) | ((sc[:, 8:16] & 15) << 4)
        for i in range(16):
            s[:, 8 + i % 4] |= (((sc[:, i] >> 4) & 3) << (2 * (i // 4))).astype(np.uint8)
        blk[:, 96:108] = s
    elif fmt == "Q2_K":
        sc = rng.integers(8, 16, size=(n, 16))
        d = np.full(n, 2 * std * np.sqrt(3) / (3 * 12), np.float32)
        _put_f16(blk, 80, d)
        _put_f16(blk, 82, d * 1.5)         # dmin * m = d * sc * 1.5 with m = sc
        blk[:, 0:16] = (sc | (sc << 4)).astype(np.uint8)
    return blk


def weight_blocks(fmt, x, rng, gguf):
    """x [rows, in] float32 as fmt bytes [rows, in / block * bytes]."""
    from gguf import quants
    x = np.asarray(x, np.float32)
    rows, cols = x.shape
    vals, nbytes, _ = LAYOUT[fmt]
    assert cols % vals == 0, (fmt, x.shape)
    qt = getattr(gguf.GGMLQuantizationType, fmt)
    if fmt in ("Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"):
        blk = _kquant_random(fmt, rows, cols // vals, float(x.std()) or 0.02, rng)
        return blk.reshape(rows, -1)
    if fmt == "F32":
        return x.view(np.uint8).reshape(rows, -1)
    return np.ascontiguousarray(quants.quantize(x, qt)).view(np.uint8).reshape(rows, -1)


def dequantize(fmt, raw, shape, gguf):
    """gguf-py's dequantize of raw bytes [rows, row_bytes] -> float32 shape."""
    from gguf import quants
    qt = getattr(gguf.GGMLQuantizationType, fmt)
    return np.asarray(quants.dequantize(np.ascontiguousarray(raw), qt), np.float32).reshape(shape)
