#!/usr/bin/python3
"""Write GGUF v3 files (llama.cpp's model format) from a Hugging Face
Llama-family checkpoint directory, for llama.cpp as an outside oracle and for
the C GGUF reader's tests and fuzz seeds; read them back (read_gguf) for
self-checks. Written from the GGUF specification (ggml docs/gguf.md) and the
conventions of llama.cpp's convert_hf_to_gguf.py, numpy only.

  gguf_write.py --model DIR --out FILE.gguf [--type f32|f16|bf16|q8_0]
                [--vocab llama|gpt2] [--arch auto|llama|qwen2|qwen3|qwen3moe] [--alignment 32]
                [--experts merged|split]
  gguf_write.py --seeds DIR        # the fuzz seeds (fuzz/seeds/gguf), a few KB each

Layout (all little-endian): "GGUF", u32 version 3, u64 tensor count, u64
metadata count; metadata as (string key, u32 value type, value), a string
being u64 length + bytes and an array u32 element type + u64 count +
elements; tensor infos as (string name, u32 n_dims, u64 ne[n_dims] with ne[0]
the fastest-varying dimension, i.e. numpy's shape reversed, u32 ggml type, u64
offset from the data section); zero padding to the alignment
(general.alignment, default 32); the data section, each tensor starting at
an offset that is a multiple of the alignment.

Tensors: llama.cpp's names (token_embd, blk.N.attn_norm, attn_q, attn_k,
attn_v, attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down, output_norm,
output; q/k/v biases as blk.N.attn_q.bias ...; output absent when tied;
rope_freqs for llama3 rope scaling, F32 factors 1, factor, or 1 / ((1 - s) /
factor + s) in the band, as convert_hf_to_gguf.py writes them). Matrices in
--type, 1-D tensors (norms, biases, rope_freqs) always F32, as the converter
keeps them; Q8_0 needs rows of a multiple of 32 values, else F16 is written.
Architecture llama (Llama, Mistral; Qwen2 too with --arch llama) permutes the
rows of q and k, weights and biases, within each head from the rotate-half
layout (pairs i, i + d/2) to llama.cpp's interleaved one (pairs 2i, 2i+1):
new row h*d + 2i + s = old row h*d + s*d/2 + i (convert_hf_to_gguf's
permute: reshape(heads, 2, d/2, ...).swapaxes(1, 2)), with heads = n_head
for q and n_head_kv for k. A reader must undo it. Architecture qwen2 rotates
NEOX-style in llama.cpp and is not permuted, nor is qwen3 (Qwen3: its per-head
norms as blk.N.attn_q_norm.weight and blk.N.attn_k_norm.weight).

Mixtures of experts, as convert_hf_to_gguf.py writes them: Mixtral is
architecture llama with llama.expert_count and llama.expert_used_count
(feed_forward_length is the experts' size); Qwen3-MoE is architecture
qwen3moe (qwen3moe.expert_count, expert_used_count,
expert_feed_forward_length = moe_intermediate_size, feed_forward_length =
intermediate_size; q/k norms as qwen3). A sparse layer's router is
blk.N.ffn_gate_inp.weight ([E, H], F32 whatever --type says: the converter
never narrows it), and each role's experts are stacked into one 3-D tensor,
expert after expert: blk.N.ffn_gate_exps.weight and ffn_up_exps.weight of ne
[H, Fe, E], ffn_down_exps.weight of ne [Fe, H, E] (numpy [E, Fe, H] and [E,
H, Fe]). --experts split writes instead one 2-D tensor per expert
(blk.N.ffn_gate.E.weight ...), as older converters wrote Mixtral. Two
departures, both outside what llama.cpp's converter can produce: a
Qwen3-MoE checkpoint with norm_topk_prob false gets qwen3moe.expert_weights_norm
false (llama.cpp's qwen3moe graph ignores that key and always renormalises);
and one with dense layers (mlp_only_layers, decoder_sparse_step) keeps
those layers' ffn_gate, ffn_up and ffn_down (llama.cpp's qwen3moe wants
every layer sparse and refuses such a file; FlexGen reads each layer's kind
from whether it has a router).

Q8_0 (ggml type 8), blocks of 32 values along a row, 34 bytes each: fp16
d = max|x| / 127, then 32 int8 q = roundf(x * (1/d)) (half away from zero;
1/d taken from the float32 d, q = 0 when d = 0): llama.cpp's
quantize_row_q8_0_ref. A value reads back as fp16(d) * q.

Tokenizer metadata only has to let llama.cpp load the file (tests feed token
ids): "llama" writes an SPM vocabulary (<unk>, <s>, </s>, the 256 byte tokens
<0x00>..<0xFF>, then word pieces), "gpt2" a byte-level BPE one with merges.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_checkpoint as mc  # noqa: E402  (bf16 bits)
import make_llama_checkpoint as mlc  # noqa: E402

VT = {"u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7,
      "str": 8, "arr": 9, "u64": 10, "i64": 11, "f64": 12}
VT_FMT = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
          10: "<Q", 11: "<q", 12: "<d"}
GT = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 8, "Q4_K": 12, "BF16": 30}
GT_NAME = {v: k for k, v in GT.items()}
FILE_TYPE = {"F32": 0, "F16": 1, "Q8_0": 7, "BF16": 32}   # general.file_type (llama_ftype)
QK8_0 = 32

# ---------------------------------------------------------------- encoding


def enc_str(s):
    b = s.encode() if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def enc_value(vt, v):
    """vt: a VT name; an array is ("arr", (elem VT name, list))."""
    t = VT[vt]
    if t == VT["str"]:
        return enc_str(v)
    if t == VT["arr"]:
        et, items = v
        return struct.pack("<IQ", VT[et], len(items)) + b"".join(enc_value(et, x) for x in items)
    return struct.pack(VT_FMT[t], v)


def quantize_q8_0(x):
    """float32 [rows, n] (n % 32 == 0) -> (d fp16 [rows, n/32], q int8 [rows, n])
    exactly as llama.cpp's quantize_row_q8_0_ref."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    b = x.reshape(-1, QK8_0)
    d = (np.abs(b).max(axis=1) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore"):
        inv = np.where(d == 0, np.float32(0), np.float32(1) / d).astype(np.float32)
    v = (b * inv[:, None]).astype(np.float32)
    q = np.sign(v) * np.floor(np.abs(v).astype(np.float64) + 0.5)   # roundf: half away from 0
    rows = x.shape[0] if x.ndim > 1 else 1
    return d.astype(np.float16).reshape(rows, -1), q.astype(np.int8).reshape(x.shape)


def dequantize_q8_0(d, q):
    """The Q8_0 definition: fp16 d times int8 q, in float32."""
    return (np.repeat(d.astype(np.float32), QK8_0, axis=-1) * q.astype(np.float32)).astype(np.float32)


def encode_tensor(a, gtype):
    """float32 array -> raw bytes of ggml type gtype."""
    if gtype == "F32":
        return a.astype("<f4").tobytes()
    if gtype == "F16":
        return a.astype("<f2").tobytes()
    if gtype == "BF16":
        return mc.f32_to_bf16_bits(a).astype("<u2").tobytes()
    if gtype == "Q8_0":
        d, q = quantize_q8_0(a.reshape(-1, a.shape[-1]))
        blocks = np.concatenate([d.reshape(-1, 1).view(np.uint8).reshape(-1, 2),
                                 q.reshape(-1, QK8_0).view(np.uint8)], axis=1)
        return blocks.tobytes()
    raise ValueError("cannot encode ggml type %s" % gtype)


def write_gguf(path, kvs, tensors, alignment=32):
    """kvs: [(key, VT name, value)]; tensors: [(name, ggml type name, float32
    array)] or [(name, ggml type name, (raw bytes, ne list))] for raw data."""
    out = [b"GGUF", struct.pack("<IQQ", 3, len(tensors), len(kvs))]
    for key, vt, v in kvs:
        out += [enc_str(key), struct.pack("<I", VT[vt]), enc_value(vt, v)]
    blobs, off = [], 0
    for name, gtype, a in tensors:
        if isinstance(a, tuple):
            raw, ne = a
        else:
            raw, ne = encode_tensor(a, gtype), list(reversed(a.shape))
        off += -off % alignment
        out += [enc_str(name), struct.pack("<I", len(ne)), struct.pack("<%dQ" % len(ne), *ne),
                struct.pack("<IQ", GT[gtype], off)]
        blobs.append((off, raw))
        off += len(raw)
    head = b"".join(out)
    head += b"\0" * (-len(head) % alignment)
    data = bytearray(off)
    for o, raw in blobs:
        data[o:o + len(raw)] = raw
    with open(path, "wb") as f:
        f.write(head)
        f.write(bytes(data))
    return len(head) + off

# ---------------------------------------------------------------- reading back


def read_gguf(path):
    """-> (version, {key: value}, {name: (ggml type, ne, absolute offset, nbytes)}, raw)."""
    raw = open(path, "rb").read()
    p = [0]

    def take(fmt):
        v = struct.unpack_from(fmt, raw, p[0])
        p[0] += struct.calcsize(fmt)
        return v[0]

    def rstr():
        n = take("<Q")
        s = raw[p[0]:p[0] + n].decode()
        p[0] += n
        return s

    def rval(t):
        if t == VT["str"]:
            return rstr()
        if t == VT["arr"]:
            et, n = take("<I"), take("<Q")
            return [rval(et) for _ in range(n)]
        return take(VT_FMT[t])

    if raw[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    p[0] = 4
    version, nt, nkv = take("<I"), take("<Q"), take("<Q")
    kv = {}
    for _ in range(nkv):
        k = rstr()
        kv[k] = rval(take("<I"))
    infos = []
    for _ in range(nt):
        name, nd = rstr(), take("<I")
        ne = [take("<Q") for _ in range(nd)]
        infos.append((name, take("<I"), ne, take("<Q")))
    align = kv.get("general.alignment", 32)
    start = p[0] + (-p[0] % align)
    tensors = {}
    for name, gt, ne, off in infos:
        n = int(np.prod(ne))
        nbytes = n // QK8_0 * 34 if gt == GT["Q8_0"] else n * (4 if gt == GT["F32"] else 2)
        tensors[name] = (gt, ne, start + off, nbytes)
    return version, kv, tensors, raw


def read_kvs(path, prefix=""):
    """The metadata of a GGUF file whose keys start with prefix, typed as
    write_gguf takes them: [(key, VT name, value)], an array as ("arr",
    (element VT name, list)); strings stay bytes (a vocabulary's tokens need
    not be UTF-8 alone). Only the header is read, not the tensors."""
    names = {v: k for k, v in VT.items()}
    with open(path, "rb") as f:
        raw = f.read(64 << 20)
    p = [0]

    def take(fmt):
        v = struct.unpack_from(fmt, raw, p[0])
        p[0] += struct.calcsize(fmt)
        return v[0]

    def rval(t):
        if t == VT["str"]:
            n = take("<Q")
            p[0] += n
            return raw[p[0] - n:p[0]]
        if t == VT["arr"]:
            et, n = take("<I"), take("<Q")
            return (names[et], [rval(et) for _ in range(n)])
        return take(VT_FMT[t])

    if raw[:4] != b"GGUF":
        raise ValueError("%s: not a GGUF file" % path)
    p[0] = 8
    _, nkv = take("<Q"), take("<Q")
    out = []
    for _ in range(nkv):
        n = take("<Q")
        key = raw[p[0]:p[0] + n].decode()
        p[0] += n
        t = take("<I")
        v = rval(t)
        if key.startswith(prefix):
            out.append((key, names[t], v))
    return out


def tensor_f32(info, raw):
    """A tensor from read_gguf as float32 in numpy (HF) shape."""
    gt, ne, off, nbytes = info
    b = raw[off:off + nbytes]
    shape = tuple(reversed(ne))
    if gt == GT["F32"]:
        return np.frombuffer(b, "<f4").reshape(shape).astype(np.float32)
    if gt == GT["F16"]:
        return np.frombuffer(b, "<f2").reshape(shape).astype(np.float32)
    if gt == GT["BF16"]:
        return mc.bf16_bits_to_f32(np.frombuffer(b, "<u2")).reshape(shape)
    blk = np.frombuffer(b, np.uint8).reshape(-1, 34)
    d = blk[:, :2].copy().view("<f2").reshape(-1)
    q = blk[:, 2:].copy().view(np.int8)
    return dequantize_q8_0(d[:, None], q).reshape(shape)

# ---------------------------------------------------------------- checkpoint -> GGUF


def permute_rows(w, heads):
    """convert_hf_to_gguf's Q/K permute: rotate-half rows -> interleaved rows."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def unpermute_rows(w, heads):
    """The inverse of permute_rows (what a reader of llama-arch GGUF does)."""
    return w.reshape(heads, w.shape[0] // heads // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def llama3_rope_factors(cfg):
    """rope_freqs.weight for llama3 scaling: per-frequency divisors of theta_i."""
    rs, d = cfg["rope_scaling"], mlc.head_dim(cfg)
    base, factor = cfg.get("rope_theta", 10000.0), rs["factor"]
    low, high = rs["low_freq_factor"], rs["high_freq_factor"]
    orig = rs["original_max_position_embeddings"]
    out = []
    for i in range(0, d, 2):
        wl = 2 * math.pi * base ** (i / d)
        if wl < orig / high:
            out.append(1.0)
        elif wl > orig / low:
            out.append(factor)
        else:
            s = (orig / wl - low) / (high - low)
            out.append(1.0 / ((1 - s) / factor + s))
    return np.array(out, np.float32)


def expert_of(cfg, hf):
    """(layer, role, expert) of a sparse layer's expert matrix (HF name
    without 'model.'; role gate, up or down), else None."""
    if not mlc.n_experts(cfg) or not hf.startswith("layers."):
        return None
    _, n, rest = hf.split(".", 2)
    _, gate, up, down, _ = mlc.moe_names(cfg)
    for role, pat in (("gate", gate), ("up", up), ("down", down)):
        pre, post = pat.split("%d")
        mid = rest[len(pre):len(rest) - len(post)]
        if rest.startswith(pre) and rest.endswith(post) and mid.isdigit():
            return int(n), role, int(mid)
    return None


def gguf_tensors(cfg, t, arch, experts="merged"):
    """The checkpoint's tensors ({HF name without 'model.': float32}) as
    llama.cpp's converter lays them out: [(GGUF name, float32 array in
    numpy order)], q/k rows permuted for architecture llama, a sparse
    layer's experts stacked per role into one [E, rows, in] array (or, with
    experts="split", one per expert)."""
    A = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or A
    out, stacks = [], {}
    for hf in mlc.expected_shapes(cfg):
        a = t[hf]
        if arch == "llama" and ".q_proj." in hf:
            a = permute_rows(a, A)
        elif arch == "llama" and ".k_proj." in hf:
            a = permute_rows(a, KV)
        ex = expert_of(cfg, hf)
        if ex is None:
            out.append((gguf_name(hf), a))
        elif experts == "split":
            out.append(("blk.%d.ffn_%s.%d.weight" % ex, a))
        else:
            st = stacks.setdefault(ex[:2], [])
            st.append(a)
            if len(st) == mlc.n_experts(cfg):
                out.append(("blk.%d.ffn_%s_exps.weight" % ex[:2], np.stack(st)))
    return out


def hf_tensors(cfg, arch, g):
    """The inverse of gguf_tensors: {GGUF name: float32 array} -> {HF name
    without 'model.': float32}, q/k rows un-permuted for architecture
    llama, stacks split per expert (merged or one per expert, as g has them)."""
    heads = {".q_proj.": cfg["num_attention_heads"], ".k_proj.": cfg.get("num_key_value_heads")
             or cfg["num_attention_heads"]}
    t = {}
    for hf in mlc.expected_shapes(cfg):
        ex = expert_of(cfg, hf)
        if ex is None:
            a = g[gguf_name(hf)]
        elif "blk.%d.ffn_%s_exps.weight" % ex[:2] in g:
            a = g["blk.%d.ffn_%s_exps.weight" % ex[:2]][ex[2]]
        else:
            a = g["blk.%d.ffn_%s.%d.weight" % ex]
        for k, h in heads.items():
            if k in hf and arch == "llama":
                a = unpermute_rows(a, h)
        t[hf] = a
    return t


def checkpoint_tensors(cfg, path):
    """A file's tensors as the checkpoint's ({HF name without 'model.':
    float32}, the values as the file holds them: F32, F16, BF16, Q8_0)."""
    _, kv, tens, raw = read_gguf(path)
    return hf_tensors(cfg, kv["general.architecture"], {n: tensor_f32(i, raw) for n, i in tens.items()})


def gguf_name(hf):
    """HF name without 'model.' -> llama.cpp tensor name (a sparse layer's
    router too; its experts: gguf_tensors)."""
    fixed = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    if hf in fixed:
        return fixed[hf]
    _, n, rest = hf.split(".", 2)
    for a, b in (("input_layernorm", "attn_norm"), ("post_attention_layernorm", "ffn_norm"),
                 ("self_attn.q_proj", "attn_q"), ("self_attn.k_proj", "attn_k"),
                 ("self_attn.v_proj", "attn_v"), ("self_attn.o_proj", "attn_output"),
                 ("mlp.gate_proj", "ffn_gate"), ("mlp.up_proj", "ffn_up"), ("mlp.down_proj", "ffn_down"),
                 ("self_attn.q_norm", "attn_q_norm"), ("self_attn.k_norm", "attn_k_norm"),
                 ("block_sparse_moe.gate", "ffn_gate_inp"), ("mlp.gate", "ffn_gate_inp")):
        if rest.startswith(a + "."):
            return "blk.%s.%s%s" % (n, b, rest[len(a):])
    raise ValueError("no GGUF name for %s" % hf)


def vocab_kvs(kind, V, bos, eos, seed=0):
    """Tokenizer metadata with exactly V tokens."""
    rng = np.random.default_rng(seed)
    letters = "etaoinshrdlucmfwypvbgk"
    if kind == "llama":
        toks = ["<unk>", "<s>", "</s>"] + (["<0x%02X>" % b for b in range(256)] if V >= 259 else [])
        types = [2, 3, 3] + [6] * (len(toks) - 3)
        seen = set(toks)
        while len(toks) < V:
            w = "\u2581" + "".join(letters[i] for i in rng.integers(len(letters), size=rng.integers(1, 5)))
            if w not in seen:
                seen.add(w)
                toks.append(w)
                types.append(1)
        toks, types = toks[:V], types[:V]
        return [("tokenizer.ggml.model", "str", "llama"),
                ("tokenizer.ggml.tokens", "arr", ("str", toks)),
                ("tokenizer.ggml.scores", "arr", ("f32", [-float(i) for i in range(V)])),
                ("tokenizer.ggml.token_type", "arr", ("i32", types)),
                ("tokenizer.ggml.bos_token_id", "u32", bos), ("tokenizer.ggml.eos_token_id", "u32", eos),
                ("tokenizer.ggml.unknown_token_id", "u32", 0),
                ("tokenizer.ggml.add_bos_token", "bool", False)]
    b2u = mc.bytes_to_unicode()
    toks = [b2u[b] for b in range(256)][:V]
    merges, seen = [], set(toks)
    while len(toks) < V - 1:
        a, b = (b2u[ord(letters[i])] for i in rng.integers(len(letters), size=2))
        if a + b not in seen:
            seen.add(a + b)
            toks.append(a + b)
            merges.append(a + " " + b)
    toks.append("<|endoftext|>")
    types = [1] * (len(toks) - 1) + [3]
    return [("tokenizer.ggml.model", "str", "gpt2"), ("tokenizer.ggml.pre", "str", "default"),
            ("tokenizer.ggml.tokens", "arr", ("str", toks)),
            ("tokenizer.ggml.token_type", "arr", ("i32", types)),
            ("tokenizer.ggml.merges", "arr", ("str", merges)),
            ("tokenizer.ggml.bos_token_id", "u32", V - 1), ("tokenizer.ggml.eos_token_id", "u32", V - 1)]


def model_kvs(cfg, arch, ftype):
    A = cfg["num_attention_heads"]
    hd = mlc.head_dim(cfg)
    kv = [("general.architecture", "str", arch), ("general.name", "str", "flexgen-test-" + cfg["model_type"]),
          ("general.file_type", "u32", FILE_TYPE[ftype]),
          (arch + ".context_length", "u32", cfg["max_position_embeddings"]),
          (arch + ".embedding_length", "u32", cfg["hidden_size"]),
          (arch + ".block_count", "u32", cfg["num_hidden_layers"]),
          (arch + ".feed_forward_length", "u32", cfg["intermediate_size"]),
          (arch + ".attention.head_count", "u32", A),
          (arch + ".attention.head_count_kv", "u32", cfg.get("num_key_value_heads") or A),
          (arch + ".attention.layer_norm_rms_epsilon", "f32", cfg.get("rms_norm_eps", 1e-6)),
          (arch + ".rope.freq_base", "f32", cfg.get("rope_theta", 10000.0)),
          (arch + ".rope.dimension_count", "u32", hd),
          (arch + ".vocab_size", "u32", cfg["vocab_size"])]
    if cfg.get("head_dim"):
        kv += [(arch + ".attention.key_length", "u32", hd), (arch + ".attention.value_length", "u32", hd)]
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) == "linear":
        kv += [(arch + ".rope.scaling.type", "str", "linear"), (arch + ".rope.scaling.factor", "f32", rs["factor"])]
    if mlc.n_experts(cfg):
        kv += [(arch + ".expert_count", "u32", mlc.n_experts(cfg)),
               (arch + ".expert_used_count", "u32", mlc.top_k(cfg))]
    if cfg["model_type"] == "qwen3_moe":
        kv.append((arch + ".expert_feed_forward_length", "u32", mlc.moe_names(cfg)[4]))
        if not cfg.get("norm_topk_prob", False):
            kv.append((arch + ".expert_weights_norm", "bool", False))
    return kv


def arch_of(cfg, arch="auto"):
    """llama.cpp's architecture for a checkpoint: qwen2, qwen3, qwen3moe by
    model_type, else llama (Llama, Mistral, Mixtral)."""
    if arch != "auto":
        return arch
    return {"qwen2": "qwen2", "qwen3": "qwen3", "qwen3_moe": "qwen3moe"}.get(cfg["model_type"], "llama")


def tensor_type(name, a, wtype):
    """The ggml type the converter gives a tensor under --type wtype: F32
    for 1-D tensors and routers, F16 where Q8_0's rows would not be whole
    blocks."""
    if a.ndim == 1 or name.endswith("ffn_gate_inp.weight"):
        return "F32"
    return "F16" if wtype == "Q8_0" and a.shape[-1] % QK8_0 else wtype


def from_checkpoint(model_dir, out, wtype="f16", vocab="llama", arch="auto", alignment=32, tok_kvs=None,
                    experts="merged"):
    """tok_kvs: the tokenizer metadata to write (read_kvs of a real
    vocabulary, say) instead of vocab_kvs(vocab, ...)."""
    cfg, t = mlc.load_llama_checkpoint(model_dir)
    arch = arch_of(cfg, arch)
    wtype = wtype.upper()
    tensors = [(n, tensor_type(n, a, wtype), a) for n, a in gguf_tensors(cfg, t, arch, experts)]
    rs = cfg.get("rope_scaling") or {}
    if rs.get("rope_type", rs.get("type")) == "llama3":
        tensors.append(("rope_freqs.weight", "F32", llama3_rope_factors(cfg)))
    eos = cfg.get("eos_token_id", 2)
    eos = eos[0] if isinstance(eos, list) else eos
    kvs = model_kvs(cfg, arch, wtype)
    if alignment != 32:
        kvs.append(("general.alignment", "u32", alignment))
    kvs += tok_kvs if tok_kvs is not None else vocab_kvs(vocab, cfg["vocab_size"], cfg.get("bos_token_id", 1), eos)
    return write_gguf(out, kvs, tensors, alignment)

# ---------------------------------------------------------------- fuzz seeds


def write_seeds(d):
    """Tiny seeds for fuzz/fuzz_gguf.c: a whole tiny model, a Q8_0 tensor with
    alignment 64, every metadata value type, and an unsupported tensor type;
    the tiny model with each kind of vocabulary (llama, gpt2); tiny mixtures
    of experts (Mixtral's merged stacks and per-expert tensors, Qwen3-MoE in
    Q8_0 with a dense layer)."""
    import tempfile
    os.makedirs(d, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        a = mlc.parse_args(["--out", tmp, "--hidden", "8", "--heads", "2", "--kv-heads", "1",
                            "--ffn", "8", "--vocab", "8", "--layers", "1", "--max-pos", "16"])
        mlc.write(a)
        from_checkpoint(tmp, os.path.join(d, "tiny-llama-f16.gguf"), "f16")
        from_checkpoint(tmp, os.path.join(d, "tiny-llama-gpt2-vocab.gguf"), "f16", vocab="gpt2")
    rng = np.random.default_rng(1)
    w = rng.standard_normal((2, 32)).astype(np.float32)
    write_gguf(os.path.join(d, "q8_0-align64.gguf"),
               [("general.architecture", "str", "llama"), ("general.alignment", "u32", 64)],
               [("blk.0.attn_q.weight", "Q8_0", w), ("b", "BF16", w[:, :4]), ("c", "F32", w[0, :3])], 64)
    kvs = [("k.%s" % n, n, v) for n, v in (("u8", 200), ("i8", -5), ("u16", 60000), ("i16", -300),
                                           ("u32", 4000000000), ("i32", -70000), ("f32", 0.5),
                                           ("bool", True), ("str", "h\u00e9llo"), ("u64", 2 ** 40),
                                           ("i64", -2 ** 40), ("f64", 1e300))]
    kvs += [("a.%s" % n, "arr", (n, v)) for n, v in (("i32", [1, -2, 3]), ("f32", [0.25, -1.5]),
                                                   ("str", ["x", "", "yz"]), ("u8", []),
                                                   ("bool", [True, False]), ("f64", [2.5]))]
    write_gguf(os.path.join(d, "all-types.gguf"), kvs, [("e", "F16", w[:1, :8])])
    write_gguf(os.path.join(d, "q4_k.gguf"), [("general.architecture", "str", "llama")],
               [("blk.0.ffn_up.weight", "Q4_K", (bytes(144), [256]))])
    # mixtures of experts: Mixtral's merged and per-expert layouts; Qwen3-MoE
    # in Q8_0 with a dense layer between sparse ones, not renormalised
    with tempfile.TemporaryDirectory() as tmp:
        mlc.write(mlc.parse_args(["--out", tmp, "--type", "mixtral", "--hidden", "8", "--heads", "2",
                                  "--kv-heads", "1", "--ffn", "8", "--vocab", "8", "--layers", "1",
                                  "--max-pos", "16", "--experts", "4", "--topk", "2"]))
        from_checkpoint(tmp, os.path.join(d, "tiny-mixtral-f16.gguf"), "f16")
        from_checkpoint(tmp, os.path.join(d, "tiny-mixtral-split.gguf"), "f16", experts="split")
    with tempfile.TemporaryDirectory() as tmp:
        mlc.write(mlc.parse_args(["--out", tmp, "--type", "qwen3_moe", "--hidden", "32", "--heads", "2",
                                  "--kv-heads", "1", "--head-dim", "16", "--ffn", "32", "--moe-ffn", "32",
                                  "--vocab", "8", "--layers", "2", "--max-pos", "16", "--experts", "2",
                                  "--topk", "1", "--sparse-step", "2"]))
        from_checkpoint(tmp, os.path.join(d, "tiny-qwen3moe-q8_0.gguf"), "q8_0")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model")
    ap.add_argument("--out")
    ap.add_argument("--type", choices=["f32", "f16", "bf16", "q8_0"], default="f16")
    ap.add_argument("--vocab", choices=["llama", "gpt2"], default="llama")
    ap.add_argument("--arch", choices=["auto", "llama", "qwen2", "qwen3", "qwen3moe"], default="auto")
    ap.add_argument("--experts", choices=["merged", "split"], default="merged")
    ap.add_argument("--alignment", type=int, default=32)
    ap.add_argument("--seeds", help="write the fuzz seeds into this folder instead")
    a = ap.parse_args()
    if a.seeds:
        write_seeds(a.seeds)
        return
    if not a.model or not a.out:
        ap.error("--model and --out are required")
    if a.alignment <= 0 or a.alignment & (a.alignment - 1):
        ap.error("--alignment must be a power of two")
    n = from_checkpoint(a.model, a.out, a.type, a.vocab, a.arch, a.alignment, experts=a.experts)
    print("wrote %s (%s, %d bytes)" % (a.out, a.type, n))


if __name__ == "__main__":
    main()
