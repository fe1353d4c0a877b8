#!/usr/bin/python3
"""Write a small random OPT checkpoint in Hugging Face or FlexGen-numpy format,
and load any such checkpoint back (load_checkpoint) for the numpy oracle.

Part of the independent test oracle (numpy only, written from Hugging Face
modeling_opt.py, not from the C engine).

  make_checkpoint.py --out DIR --layers N --hidden H --heads A --ffn F
      --vocab V --max-pos P [--seed S] [--std 0.1] [--post-ln] [--proj-dim D]
      [--format safetensors|sharded|npy] [--shards N] [--dtype f16|bf16|f32]
      [--hub-names] [--no-lm-head] [--synth-vocab] [--vocab-from DIR]

Values: drawn as float32 N(0, std) (LayerNorm weights 1 + N(0, std)), then
rounded to fp16 whatever --dtype says, so every format holds the same numbers
and --dtype only chooses the storage type. With --dtype bf16 the fp16 values
are further rounded to bf16 (|x| < 2^-14 flushed to 0), so they are exact in
both bf16 and fp16: a bf16 file therefore holds *different* (bf16-rounded)
values than an f16 file of the same seed; always run the oracle on the very
directory the engine reads.

Names: "model.decoder.*" + "lm_head.weight" (tied copy of embed_tokens);
--hub-names drops the "model." prefix and lm_head.weight, as the original
facebook/opt-* hub checkpoints do (--no-lm-head drops only lm_head.weight).
npy format (FlexGen): one np.save file per tensor, no extension, names without
"model.", decoder.final_layer_norm renamed decoder.layer_norm, lm_head.weight
as a copy of the embedding, plus config.json.
"""
import argparse
import json
import os
import shutil
import struct

import numpy as np

# ---------------------------------------------------------------- bf16 / dtypes


def f32_to_bf16_bits(x):
    """float32 array -> uint16 bf16 bits, round to nearest even."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return b.astype(np.uint16)


def bf16_bits_to_f32(u):
    return (np.asarray(u, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


ST_DTYPES = {"F16": 2, "BF16": 2, "F32": 4}


def encode(arr32, st_dtype):
    """float32 array -> raw little-endian bytes in safetensors dtype."""
    if st_dtype == "F16":
        return arr32.astype("<f2").tobytes()
    if st_dtype == "BF16":
        return f32_to_bf16_bits(arr32).astype("<u2").tobytes()
    return arr32.astype("<f4").tobytes()


def decode(buf, st_dtype, shape):
    if st_dtype == "F16":
        a = np.frombuffer(buf, dtype="<f2").astype(np.float32)
    elif st_dtype == "BF16":
        a = bf16_bits_to_f32(np.frombuffer(buf, dtype="<u2"))
    elif st_dtype == "F32":
        a = np.frombuffer(buf, dtype="<f4").astype(np.float32)
    else:
        raise ValueError("unsupported safetensors dtype %r" % st_dtype)
    return a.reshape(shape)

# ---------------------------------------------------------------- generation


def make_config(a):
    d = a.proj_dim or a.hidden
    return {
        "model_type": "opt", "architectures": ["OPTForCausalLM"],
        "vocab_size": a.vocab, "hidden_size": a.hidden,
        "num_attention_heads": a.heads, "num_hidden_layers": a.layers,
        "ffn_dim": a.ffn, "max_position_embeddings": a.max_pos,
        "word_embed_proj_dim": d, "do_layer_norm_before": not a.post_ln,
        "activation_function": "relu", "pad_token_id": 1, "bos_token_id": 2,
        "eos_token_id": 2, "enable_bias": True,
        "layer_norm_elementwise_affine": True, "torch_dtype": "float16",
    }


def expected_shapes(cfg):
    """{HF name without 'model.': shape} that config implies (lm_head optional)."""
    H, F, V = cfg["hidden_size"], cfg["ffn_dim"], cfg["vocab_size"]
    D, P = cfg.get("word_embed_proj_dim", H), cfg["max_position_embeddings"]
    s = {"decoder.embed_tokens.weight": (V, D), "decoder.embed_positions.weight": (P + 2, H)}
    if D != H:
        s["decoder.project_in.weight"] = (H, D)
        s["decoder.project_out.weight"] = (D, H)
    if cfg.get("do_layer_norm_before", True):
        s["decoder.final_layer_norm.weight"] = s["decoder.final_layer_norm.bias"] = (H,)
    for i in range(cfg["num_hidden_layers"]):
        p = "decoder.layers.%d." % i
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            s[p + "self_attn.%s.weight" % n] = (H, H)
            s[p + "self_attn.%s.bias" % n] = (H,)
        for n in ("self_attn_layer_norm", "final_layer_norm"):
            s[p + n + ".weight"] = s[p + n + ".bias"] = (H,)
        s[p + "fc1.weight"], s[p + "fc1.bias"] = (F, H), (F,)
        s[p + "fc2.weight"], s[p + "fc2.bias"] = (H, F), (H,)
    return s


def make_tensors(cfg, seed, std, bf16_exact=False):
    """Ordered dict of HF names (without 'model.') -> float32 arrays holding
    fp16-exact (and with bf16_exact also bf16-exact) values."""
    rng = np.random.default_rng(seed)
    H, F, V = cfg["hidden_size"], cfg["ffn_dim"], cfg["vocab_size"]
    D, P = cfg["word_embed_proj_dim"], cfg["max_position_embeddings"]

    def rnd(*shape, base=0.0):
        x = (base + std * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
        x = x.astype(np.float16).astype(np.float32)
        if bf16_exact:
            x[np.abs(x) < 2.0 ** -14] = 0.0
            x = bf16_bits_to_f32(f32_to_bf16_bits(x))
            assert np.array_equal(x, x.astype(np.float16).astype(np.float32))
        return x

    t = {}
    t["decoder.embed_tokens.weight"] = rnd(V, D)
    t["decoder.embed_positions.weight"] = rnd(P + 2, H)
    if D != H:
        t["decoder.project_in.weight"] = rnd(H, D)
        t["decoder.project_out.weight"] = rnd(D, H)
    if cfg["do_layer_norm_before"]:
        t["decoder.final_layer_norm.weight"] = rnd(H, base=1.0)
        t["decoder.final_layer_norm.bias"] = rnd(H)
    for i in range(cfg["num_hidden_layers"]):
        p = "decoder.layers.%d." % i
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            t[p + "self_attn.%s.weight" % n] = rnd(H, H)
            t[p + "self_attn.%s.bias" % n] = rnd(H)
        t[p + "self_attn_layer_norm.weight"] = rnd(H, base=1.0)
        t[p + "self_attn_layer_norm.bias"] = rnd(H)
        t[p + "fc1.weight"] = rnd(F, H)
        t[p + "fc1.bias"] = rnd(F)
        t[p + "fc2.weight"] = rnd(H, F)
        t[p + "fc2.bias"] = rnd(H)
        t[p + "final_layer_norm.weight"] = rnd(H, base=1.0)
        t[p + "final_layer_norm.bias"] = rnd(H)
    return t

# ---------------------------------------------------------------- writers


def write_safetensors(path, tensors, st_dtype):
    """tensors: list of (name, float32 array). Hand-written safetensors."""
    header, blobs, off = {}, [], 0
    for name, arr in tensors:
        b = encode(arr, st_dtype)
        header[name] = {"dtype": st_dtype, "shape": list(arr.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    header["__metadata__"] = {"format": "pt"}
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)
    return off


def write_checkpoint(out, cfg, tensors, fmt, st_dtype, shards, hub_names, lm_head):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    if fmt == "npy":
        for name, arr in tensors.items():
            fn = name.replace("decoder.final_layer_norm", "decoder.layer_norm")
            with open(os.path.join(out, fn), "wb") as f:
                np.save(f, arr.astype(np.float16))
        with open(os.path.join(out, "lm_head.weight"), "wb") as f:
            np.save(f, tensors["decoder.embed_tokens.weight"].astype(np.float16))
        return
    pre = "" if hub_names else "model."
    items = [(pre + n, a) for n, a in tensors.items()]
    if lm_head and not hub_names:
        items.append(("lm_head.weight", tensors["decoder.embed_tokens.weight"]))
    if fmt == "safetensors":
        write_safetensors(os.path.join(out, "model.safetensors"), items, st_dtype)
        return
    # sharded: split into `shards` groups of consecutive tensors, ~equal bytes
    total = sum(a.size for _, a in items)
    groups, cur, acc = [], [], 0
    for i, it in enumerate(items):
        cur.append(it)
        acc += it[1].size
        last = i == len(items) - 1
        if not last and len(groups) < shards - 1 and acc >= total * (len(groups) + 1) / shards:
            groups.append(cur)
            cur = []
    groups.append(cur)
    n = len(groups)
    weight_map, total_size = {}, 0
    for k, g in enumerate(groups):
        fn = "model-%05d-of-%05d.safetensors" % (k + 1, n)
        total_size += write_safetensors(os.path.join(out, fn), g, st_dtype)
        for name, _ in g:
            weight_map[name] = fn
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total_size},
                   "weight_map": weight_map}, f, indent=2)

# ---------------------------------------------------------------- loader


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = decode(data[b:e], info["dtype"], info["shape"])
    return out


def read_safetensors_dir(d):
    """A Hugging Face directory's tensors: the shards its
    model.safetensors.index.json names, else model.safetensors."""
    index = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(index):
        return read_safetensors(os.path.join(d, "model.safetensors"))
    raw = {}
    with open(index) as f:
        for fn in sorted(set(json.load(f)["weight_map"].values())):
            raw.update(read_safetensors(os.path.join(d, fn)))
    return raw


def strip_model(raw):
    """{name: array} with the names' "model." prefix dropped."""
    return {(n[len("model."):] if n.startswith("model.") else n): a for n, a in raw.items()}


def check_shapes(d, t, want):
    """Each of want's {name: shape} is in t with that shape; else ValueError
    naming directory d."""
    for name, shape in want.items():
        if name not in t:
            raise ValueError("%s: missing tensor %s" % (d, name))
        if tuple(t[name].shape) != tuple(shape):
            raise ValueError("%s: %s has shape %s, config implies %s"
                             % (d, name, tuple(t[name].shape), tuple(shape)))


def load_checkpoint(d):
    """Any format above -> (config dict, {HF name without 'model.': float32})."""
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    raw = {}
    if os.path.exists(os.path.join(d, "model.safetensors.index.json")) or \
            os.path.exists(os.path.join(d, "model.safetensors")):
        raw = read_safetensors_dir(d)
    else:  # FlexGen numpy directory
        for fn in os.listdir(d):
            if fn.startswith("decoder.") or fn == "lm_head.weight":
                raw[fn.replace("decoder.layer_norm.", "decoder.final_layer_norm.")] = \
                    np.load(os.path.join(d, fn)).astype(np.float32)
    t = strip_model(raw)
    want = expected_shapes(cfg)
    if "lm_head.weight" in t:
        want["lm_head.weight"] = want["decoder.embed_tokens.weight"]
    check_shapes(d, t, want)
    return cfg, t

# ---------------------------------------------------------------- tokenizer


def bytes_to_unicode():
    """GPT-2 byte-level BPE: byte value -> printable unicode character."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_synth_vocab(out, V, seed):
    """A valid byte-level BPE vocab.json + merges.txt with exactly V ids,
    RoBERTa/OPT order (<s>=0 <pad>=1 </s>=2 <unk>=3, then the 256 bytes, then
    random merges of letters, space-prefixed words and earlier merges)."""
    b2u = bytes_to_unicode()
    vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
    for b in range(256):
        vocab[b2u[b]] = len(vocab)
    rng = np.random.default_rng(seed)
    pool = [b2u[c] for c in b"etaoinshrdlucmfwypvbgk"] + [b2u[32] + b2u[c] for c in b"tawsch"]
    merges = []
    while len(vocab) < V:
        a = pool[rng.integers(len(pool))]
        b = pool[rng.integers(22 if rng.random() < 0.7 else len(pool))]  # mostly a letter
        if b.startswith(b2u[32]) or a + b in vocab or len(a + b) > 8:
            continue
        for piece in (a, b):  # first-use space-prefixed seeds need their own merge
            if piece not in vocab and len(vocab) < V:
                merges.append(" ".join(piece))
                vocab[piece] = len(vocab)
        if len(vocab) < V:
            merges.append("%s %s" % (a, b))
            vocab[a + b] = len(vocab)
            pool.append(a + b)
    with open(os.path.join(out, "vocab.json"), "w", encoding="utf-8") as f:
        json.dump(vocab, f, ensure_ascii=False)
    with open(os.path.join(out, "merges.txt"), "w", encoding="utf-8") as f:
        f.write("#version: 0.2\n" + "".join(m + "\n" for m in merges))

# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--layers", type=int, required=True)
    ap.add_argument("--hidden", type=int, required=True)
    ap.add_argument("--heads", type=int, required=True)
    ap.add_argument("--ffn", type=int, required=True)
    ap.add_argument("--vocab", type=int, required=True)
    ap.add_argument("--max-pos", type=int, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.1)
    ap.add_argument("--post-ln", action="store_true")
    ap.add_argument("--proj-dim", type=int, default=0)
    ap.add_argument("--format", choices=["safetensors", "sharded", "npy"], default="safetensors")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--dtype", choices=["f16", "bf16", "f32"], default="f16")
    ap.add_argument("--hub-names", action="store_true")
    ap.add_argument("--no-lm-head", action="store_true")
    ap.add_argument("--synth-vocab", action="store_true",
                    help="also write a synthetic byte-level BPE vocab.json/merges.txt (V ids)")
    ap.add_argument("--vocab-from", default=None,
                    help="dir with encoder.json+vocab.bpe (or vocab.json+merges.txt) to copy")
    a = ap.parse_args()
    if a.hidden % a.heads:
        ap.error("--hidden must be a multiple of --heads")
    if a.format == "npy" and a.dtype != "f16":
        ap.error("npy format is fp16 only")
    cfg = make_config(a)
    tensors = make_tensors(cfg, a.seed, a.std, bf16_exact=(a.dtype == "bf16"))
    st = {"f16": "F16", "bf16": "BF16", "f32": "F32"}[a.dtype]
    write_checkpoint(a.out, cfg, tensors, a.format, st, max(1, a.shards),
                     a.hub_names, not a.no_lm_head)
    if a.synth_vocab:
        if a.vocab < 260:
            ap.error("--synth-vocab needs --vocab >= 260")
        write_synth_vocab(a.out, a.vocab, a.seed)
    if a.vocab_from:
        for src, dst in (("encoder.json", "vocab.json"), ("vocab.bpe", "merges.txt"),
                         ("vocab.json", "vocab.json"), ("merges.txt", "merges.txt")):
            if os.path.exists(os.path.join(a.vocab_from, src)):
                shutil.copy(os.path.join(a.vocab_from, src), os.path.join(a.out, dst))
    print("wrote %s (%s, %s, %d tensors)" % (a.out, a.format, a.dtype, len(tensors)))


if __name__ == "__main__":
    main()
