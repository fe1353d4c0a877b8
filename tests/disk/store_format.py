#!/usr/bin/python3
"""Check a tier store against the format written at the top of
store/fg_store.h, independently of the C code: parse every file with struct,
recompute the header checksum and each tensor's XXH3_64bits (seed 0) with
the reference libxxhash (ctypes), check alignment and sizes, and compare every
tensor with the checkpoint it was built from (loaded by
tests/ref/make_checkpoint.py). libxxhash is a build dependency, so a missing
one fails the check rather than skipping the checksums.

  store_format.py STORE_MODEL_DIR CHECKPOINT_DIR

Exact comparison: the store holds the checkpoint's fp16 values bit for bit
(make_checkpoint writes fp16-exact values whatever its storage dtype).
"""
import ctypes
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
from make_checkpoint import load_checkpoint  # noqa: E402


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


try:
    _xxh = ctypes.CDLL("libxxhash.so.0")
    _xxh.XXH3_64bits.restype = ctypes.c_uint64
    _xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
except (OSError, AttributeError) as e:
    fail("cannot load XXH3_64bits from libxxhash.so.0 (apt-get install libxxhash0): %s" % e)


def xxh3(b):
    return _xxh.XXH3_64bits(b, len(b))


def check_file(path, cfg, tensors, expect_layer):
    data = open(path, "rb").read()
    if data[:8] != b"FGSTORE\0":
        fail("%s: magic" % path)
    (version, hbytes, kind, layer, n_layers, n_t, comp, _res, ident, fbytes, doff, dbytes,
     hsum) = struct.unpack_from("<IIIIIII I QQQQQ", data, 8)
    if version != 3 or comp != 0:
        fail("%s: version %d compression %d" % (path, version, comp))
    if hbytes % 4096 or doff != hbytes or fbytes != len(data) or dbytes != fbytes - hbytes:
        fail("%s: sizes: header %d data_offset %d file %d (actual %d) data %d"
             % (path, hbytes, doff, fbytes, len(data), dbytes))
    if n_layers != cfg["num_hidden_layers"]:
        fail("%s: n_layers %d" % (path, n_layers))
    if (kind, layer) != ((0, 0xFFFFFFFF) if expect_layer is None else (1, expect_layer)):
        fail("%s: kind %d layer %d" % (path, kind, layer))
    hdr = bytearray(data[:hbytes])
    hdr[72:80] = b"\0" * 8
    if xxh3(bytes(hdr)) != hsum:
        fail("%s: header checksum" % path)
    prev_end = hbytes
    names = []
    for i in range(n_t):
        e = 320 + 160 * i
        name = data[e:e + 96].split(b"\0")[0].decode()
        spec, dtype, ndim, expert, d0, d1, off, nb, csum = struct.unpack_from("<iIII QQQQQ", data, e + 96)
        names.append(name)
        if dtype != 1 or expert != 0 or off % 4096 or off < prev_end or off + nb > fbytes:   # OPT: no experts
            fail("%s: %s: dtype %d offset %d nbytes %d" % (path, name, dtype, off, nb))
        if any(data[prev_end:off]):
            fail("%s: padding before %s is not zero" % (path, name))
        prev_end = off + nb
        blob = data[off:off + nb]
        if xxh3(blob) != csum:
            fail("%s: %s: checksum" % (path, name))
        want = tensors[name]
        shape = (d0,) if ndim == 1 else (d0, d1)
        if tuple(want.shape) != shape or nb != want.size * 2:
            fail("%s: %s: shape %s, checkpoint %s" % (path, name, shape, want.shape))
        got = np.frombuffer(blob, dtype="<f2").astype(np.float32).reshape(shape)
        if not np.array_equal(got, want):
            fail("%s: %s differs from the checkpoint" % (path, name))
    if fbytes % 4096 or any(data[prev_end:]):
        fail("%s: tail padding" % path)
    if any(data[320 + 160 * n_t:hbytes]):
        fail("%s: header padding is not zero" % path)
    return ident, names


def main():
    store, ckpt = sys.argv[1], sys.argv[2]
    cfg, tensors = load_checkpoint(ckpt)
    L = cfg["num_hidden_layers"]
    ident, names = check_file(os.path.join(store, "globals.bin"), cfg, tensors, None)
    seen = set(names)
    for i in range(L):
        ident_i, names_i = check_file(os.path.join(store, "layer-%03d.bin" % i), cfg, tensors, i)
        if ident_i != ident:
            fail("layer %d: identity differs from globals.bin" % i)
        if names_i != ["decoder.layers.%d.%s" % (i, s) for s in (
                "self_attn.q_proj.weight", "self_attn.q_proj.bias", "self_attn.k_proj.weight",
                "self_attn.k_proj.bias", "self_attn.v_proj.weight", "self_attn.v_proj.bias",
                "self_attn.out_proj.weight", "self_attn.out_proj.bias", "self_attn_layer_norm.weight",
                "self_attn_layer_norm.bias", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias",
                "final_layer_norm.weight", "final_layer_norm.bias")]:
            fail("layer %d: tensor order %s" % (i, names_i))
        seen.update(names_i)
    missing = set(tensors) - seen - {"lm_head.weight"}
    if missing:
        fail("tensors missing from the store: %s" % sorted(missing))
    print("store_format: %d files, %d tensors match the checkpoint, XXH3 checksums recomputed"
          % (L + 1, len(seen)))


if __name__ == "__main__":
    main()
