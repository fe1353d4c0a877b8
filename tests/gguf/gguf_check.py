#!/usr/bin/python3
"""The C GGUF reader (model/fg_gguf.h, through gguf_tool) against numpy on
files tests/ref/gguf_write.py writes:
  1. tensors: F16 and F32 files read back bit for bit as the checkpoint's fp16
     values; BF16 as fp16(bf16(x)); Q8_0 as fp16(fp16(d) * q) from numpy's
     quantize_row_q8_0_ref; 1-D tensors (F32) exactly; attn_q / attn_k of
     architecture llama un-permuted to the Hugging Face rows, qwen2 as stored;
     alignment 64 and sharded BF16 checkpoints too; mixtures of experts' 3-D
     stacks (ne [in, rows, E]) as the experts' matrices one after another;
  2. metadata: every key, value type and value (arrays of every element type,
     strings with non-ASCII bytes) as numpy reads them; tensor infos
     (type, ne, absolute offset) likewise;
  3. bad files: exit 2 and a message naming the problem, for truncations at
     every byte of the header region, bad magic, version, big-endian, Q4_K
     (refused naming it), values overflowing fp16 (refused with the count;
     counted with --allow-nonfinite), misaligned and out-of-range offsets,
     duplicate keys and tensors, nested arrays, bad alignment, bad ne[0] for
     Q8_0, a wrong head count for the un-permutation.
Usage: gguf_check.py GGUF_TOOL   (exit 0 = all good)
"""
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "ref"))
import gguf_write as gw  # noqa: E402
import make_checkpoint as mc  # noqa: E402
import make_llama_checkpoint as mlc  # noqa: E402

TOOL = sys.argv[1] if len(sys.argv) > 1 else None


def tool(*args, ok=True):
    r = subprocess.run([TOOL, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if ok and r.returncode != 0:
        raise AssertionError("gguf_tool %s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r


def expect_bad(path, *words, args=("meta",)):
    r = tool(args[0], path, *args[1:], ok=False)
    assert r.returncode == 2, (path, r.returncode, r.stderr)
    assert r.stderr.count(path) >= 1, r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)
    return r.stderr.strip()


def expected_f16(a, gt):
    """What the reader must produce from float32 values `a` stored as ggml type gt."""
    if gt == gw.GT["BF16"]:
        a = mc.bf16_bits_to_f32(mc.f32_to_bf16_bits(a))
    elif gt == gw.GT["Q8_0"]:
        d, q = gw.quantize_q8_0(a.reshape(-1, a.shape[-1]))
        a = (np.repeat(d.astype(np.float32), 32, axis=-1) * q.astype(np.float32)).reshape(a.shape)
    return a.astype(np.float16)


def check_tensors(tmp, case, wtype, align=32, arch="auto"):
    ck = os.path.join(tmp, case)
    if not os.path.exists(ck):
        mlc.write(mlc.parse_args(["--out", ck, "--case", case]))
    cfg, t = mlc.load_llama_checkpoint(ck)
    path = os.path.join(tmp, "%s-%s-%d-%s.gguf" % (case, wtype, align, arch))
    gw.from_checkpoint(ck, path, wtype, alignment=align, arch=arch)
    _, _, infos, _ = gw.read_gguf(path)
    out = os.path.join(tmp, "dump")
    os.makedirs(out, exist_ok=True)
    tool("dump", path, out)
    n = 0
    for name, a in gw.gguf_tensors(cfg, t, gw.arch_of(cfg, arch)):   # a stack of experts: 3-D
        if a.ndim == 3:
            got = np.fromfile(os.path.join(out, name + ".f16"), dtype="<u2").reshape(a.shape)
            assert np.array_equal(got, expected_f16(a, infos[name][0]).view(np.uint16)), (case, wtype, name)
            n += 1
    for hf, a in t.items():
        if gw.expert_of(cfg, hf) is not None:
            continue
        name = gw.gguf_name(hf)
        got = np.fromfile(os.path.join(out, name + ".f16"), dtype="<u2").reshape(a.shape)
        want = expected_f16(a, infos[name][0]).view(np.uint16)
        assert np.array_equal(got, want), (case, wtype, name, int((got != want).sum()))
        n += 1
    if "rope_freqs.weight" in infos:
        got = np.fromfile(os.path.join(out, "rope_freqs.weight.f16"), dtype="<u2")
        assert np.array_equal(got, gw.llama3_rope_factors(cfg).astype(np.float16).view(np.uint16))
    return n


def check_meta(tmp):
    for case, wtype, align in (("gqa8", "q8_0", 64), ("qwen2", "f16", 32)):
        ck = os.path.join(tmp, case)
        path = os.path.join(tmp, "%s-meta.gguf" % case)
        gw.from_checkpoint(ck, path, wtype, vocab="gpt2" if case == "qwen2" else "llama", alignment=align)
        ver, kv, infos, _ = gw.read_gguf(path)
        m = json.loads(tool("meta", path).stdout)
        assert m["version"] == ver == 3 and m["alignment"] == align
        assert set(m["kv"]) == set(kv), set(m["kv"]) ^ set(kv)
        for k, v in kv.items():
            got = m["kv"][k]["value"]
            if isinstance(v, float):
                assert got == v or abs(got - v) <= 1e-7 * abs(v), (k, got, v)
            else:
                assert got == v, (k, str(got)[:80], str(v)[:80])
        for name, (gt, ne, off, nbytes) in infos.items():
            ti = m["tensors"][name]
            assert (ti["type"], ti["ne"], ti["offset"], ti["nbytes"]) == (gw.GT_NAME[gt], ne, off, nbytes), name
    seeds = os.path.join(tmp, "seeds")
    gw.write_seeds(seeds)
    _, kv, _, _ = gw.read_gguf(os.path.join(seeds, "all-types.gguf"))
    m = json.loads(tool("meta", os.path.join(seeds, "all-types.gguf")).stdout)
    types = {k: v["type"] for k, v in m["kv"].items()}
    assert types["k.u8"] == "UINT8" and types["k.f64"] == "FLOAT64" and types["a.str"] == "ARRAY"
    for k, v in kv.items():
        got = m["kv"][k]["value"]
        assert got == v or (isinstance(v, float) and abs(got - v) <= 1e-7 * abs(v)), (k, got, v)
    r = tool("read", os.path.join(seeds, "q4_k.gguf"), "blk.0.ffn_up.weight", ok=False)
    assert r.returncode == 2 and "'blk.0.ffn_up.weight' is Q4_K: not supported: convert to F16, BF16 or Q8_0" \
        in r.stderr, r.stderr
    print("metadata: OK (every key, type and value; tensor infos; every value type; Q4_K refused)")


def header(nt, nkv, version=3):
    return b"GGUF" + struct.pack("<IQQ", version, nt, nkv)


def check_bad(tmp):
    p = lambda n: os.path.join(tmp, n)  # noqa: E731
    w = np.arange(64, dtype=np.float32).reshape(2, 32) / 8
    good = p("good.gguf")
    gw.write_gguf(good, [("general.architecture", "str", "llama"), ("x.arr", "arr", ("str", ["ab", "c"]))],
                  [("a", "Q8_0", w), ("b", "F32", w[0])])
    raw = open(good, "rb").read()
    _, _, infos, _ = gw.read_gguf(good)
    data_start = min(o for _, _, o, _ in infos.values())
    msgs = set()
    for cut in range(0, data_start + 1):               # every truncation of the header region
        open(p("cut.gguf"), "wb").write(raw[:cut])
        msgs.add(expect_bad(p("cut.gguf")).split(": ", 2)[-1][:40])
    open(p("cut.gguf"), "wb").write(raw[:-1])          # one byte short of the last tensor
    expect_bad(p("cut.gguf"), "'b'", "runs past the end")
    open(p("x.gguf"), "wb").write(b"GGUG" + raw[4:])
    expect_bad(p("x.gguf"), "bad magic")
    open(p("x.gguf"), "wb").write(raw[:4] + struct.pack("<I", 1) + raw[8:])
    expect_bad(p("x.gguf"), "version 1")
    open(p("x.gguf"), "wb").write(raw[:4] + struct.pack(">I", 3) + raw[8:])
    expect_bad(p("x.gguf"), "big-endian")
    open(p("x.gguf"), "wb").write(header(1 << 40, 1 << 40) + raw[24:])
    expect_bad(p("x.gguf"), "cannot fit")
    gw.write_gguf(p("x.gguf"), [("k", "u32", 1), ("k", "u32", 2)], [])
    expect_bad(p("x.gguf"), "'k' appears twice")
    gw.write_gguf(p("x.gguf"), [], [("t", "F32", w[0]), ("t", "F32", w[1])])
    expect_bad(p("x.gguf"), "tensor 't' appears twice")
    open(p("x.gguf"), "wb").write(header(0, 1) + gw.enc_str("n") + struct.pack("<IIQ", 9, 9, 0))
    expect_bad(p("x.gguf"), "'n'", "arrays of arrays")
    gw.write_gguf(p("x.gguf"), [("general.alignment", "u32", 48)], [])
    expect_bad(p("x.gguf"), "not a power of two")
    gw.write_gguf(p("x.gguf"), [("general.alignment", "i32", 32)], [])
    expect_bad(p("x.gguf"), "'general.alignment' is INT32")
    gw.write_gguf(p("x.gguf"), [], [("q", "Q8_0", (bytes(34), [16, 2]))])
    expect_bad(p("x.gguf"), "'q'", "blocks of 32", "ne[0] is 16")
    gw.write_gguf(p("x.gguf"), [], [("t", "F32", w[0])], alignment=32)
    b = bytearray(open(p("x.gguf"), "rb").read())
    hdr = header(1, 0) + gw.enc_str("t") + struct.pack("<IQIQ", 1, 32, 0, 8)   # offset 8: misaligned
    b[:len(hdr)] = hdr
    open(p("x.gguf"), "wb").write(bytes(b))
    expect_bad(p("x.gguf"), "'t'", "not a multiple of the alignment 32")
    hdr = header(1, 0) + gw.enc_str("t") + struct.pack("<IQIQ", 1, 64, 0, 0)   # 256 bytes, 128 there
    b[:len(hdr)] = hdr
    open(p("x.gguf"), "wb").write(bytes(b))
    expect_bad(p("x.gguf"), "'t'", "runs past the end")
    gw.write_gguf(p("x.gguf"), [], [("big", "F32", np.array([1.0, 7e4, -1e6, 3.0], np.float32))])
    expect_bad(p("x.gguf"), "'big'", "2 of 4 values are not finite in fp16", args=("read", "big"))
    assert tool("read", p("x.gguf"), "big", "--allow-nonfinite").stdout.strip() == "nonfinite 2"
    expect_bad(good, "'a'", "cannot be split into 3 heads", args=("read", "a", "--heads", "3"))
    expect_bad(good, "no tensor 'zz'", args=("read", "zz"))
    expect_bad(p("nonexistent.gguf"), "cannot open")
    print("bad files: OK (%d truncations, %d distinct messages; magic, versions, sizes, duplicates, nested"
          " arrays, alignment, blocks, offsets, fp16 overflow, head count)" % (data_start + 1, len(msgs)))


def main():
    if not TOOL:
        sys.exit("usage: gguf_check.py GGUF_TOOL")
    with tempfile.TemporaryDirectory() as tmp:
        n = 0
        for case, wtype, align, arch in (("gqa8", "f16", 32, "auto"), ("gqa8", "q8_0", 64, "auto"),
                                         ("mha", "f32", 32, "auto"), ("llama3", "q8_0", 32, "auto"),
                                         ("bf16-sharded", "bf16", 32, "auto"), ("qwen2", "f16", 32, "auto"),
                                         ("qwen2", "q8_0", 32, "llama"), ("tied", "bf16", 128, "auto"),
                                         ("mixtral", "q8_0", 32, "auto"), ("qwen3-moe", "f16", 64, "auto")):
            n += check_tensors(tmp, case, wtype, align, arch)
        print("tensors: OK (%d tensors: F16, F32, BF16, Q8_0; un-permuted q/k; alignment 64, 128; experts' 3-D "
              "stacks)" % n)
        check_meta(tmp)
        check_bad(tmp)
    print("gguf_check: OK")


if __name__ == "__main__":
    main()
