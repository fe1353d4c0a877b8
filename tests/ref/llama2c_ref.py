#!/usr/bin/python3
"""llama2.c's files for the numpy oracle, written from llama2.c's own
description of them (its export.py and run.c), not from this engine:

  llama2c_ref.py convert MODEL.bin OUTDIR
      the checkpoint as a Hugging Face Llama directory (config.json and an
      F16 model.safetensors: the engine holds weights as fp16) that
      llama_ref.py reads. wq and wk rows are permuted from llama2.c's
      interleaved rotary pairs (2i, 2i+1) to Hugging Face's rotate-half
      pairs (i, i + d/2), as transformers' convert_llama_weights_to_hf does.
  llama2c_ref.py encode TOKENIZER.bin PROMPTS.txt
      each non-empty line's ids as run.c's encode() makes them (BOS, a
      dummy-prefix space, code points or their <0xNN> bytes, then the
      best-scoring merge, leftmost first, until none), one JSON list of
      lists on stdout.
  llama2c_ref.py decode TOKENIZER.bin IDS.json
      each list of ids as run.c's decode() prints it (<0xNN> as its byte;
      the leading space of a piece right after BOS dropped), a JSON list of
      strings on stdout (bytes decoded as UTF-8 with replacement).

The checkpoint layouts: legacy (seven int32: dim, hidden_dim, n_layers,
n_heads, n_kv_heads, vocab_size (< 0: a classifier follows), seq_len; then
float32 token embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3,
rms_final, two rotary tables, the classifier) and version 1 (magic
0x616b3432, version 1, the seven int32, shared_classifier, padded to 256
bytes; then rms_att, rms_ffn, rms_final, embedding, wq, wk, wv, wo, w1, w2,
w3, the classifier unless shared).
"""
import json
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_checkpoint import write_safetensors  # noqa: E402


def read_checkpoint(path):
    b = open(path, "rb").read()
    magic, = struct.unpack_from("<I", b, 0)
    if magic == 0x616B3432:
        version, = struct.unpack_from("<i", b, 4)
        assert version == 1, "version %d" % version
        dim, hid, L, H, KV, V, T = struct.unpack_from("<7i", b, 8)
        shared = b[36] == 1
        off = 256
    else:
        dim, hid, L, H, KV, V, T = struct.unpack_from("<7i", b, 0)
        shared = V > 0
        V = abs(V)
        off = 28
        version = 0
    hs = dim // H
    f = np.frombuffer(b, dtype="<f4", offset=off)
    pos = [0]

    def take(*shape):
        n = int(np.prod(shape))
        a = f[pos[0]:pos[0] + n].reshape(shape).astype(np.float32)
        pos[0] += n
        return a

    w = {}
    if version == 0:
        w["emb"] = take(V, dim)
        w["rms_att"] = take(L, dim)
        w["wq"], w["wk"], w["wv"] = take(L, dim, dim), take(L, KV * hs, dim), take(L, KV * hs, dim)
        w["wo"], w["rms_ffn"] = take(L, dim, dim), take(L, dim)
        w["w1"], w["w2"], w["w3"] = take(L, hid, dim), take(L, dim, hid), take(L, hid, dim)
        w["rms_final"] = take(dim)
        take(T, hs // 2)
        take(T, hs // 2)
    else:
        w["rms_att"], w["rms_ffn"], w["rms_final"] = take(L, dim), take(L, dim), take(dim)
        w["emb"] = take(V, dim)
        w["wq"], w["wk"], w["wv"] = take(L, dim, dim), take(L, KV * hs, dim), take(L, KV * hs, dim)
        w["wo"] = take(L, dim, dim)
        w["w1"], w["w2"], w["w3"] = take(L, hid, dim), take(L, dim, hid), take(L, hid, dim)
    w["cls"] = w["emb"] if shared else take(V, dim)
    assert off + 4 * pos[0] == len(b), "%s: %d bytes left over" % (path, len(b) - off - 4 * pos[0])
    cfg = dict(dim=dim, hidden=hid, layers=L, heads=H, kv_heads=KV, vocab=V, seq_len=T, shared=shared)
    return cfg, w


def to_rotate_half(w, heads):
    """Rows of each head from interleaved (2i, 2i+1) to (i, i + d/2)."""
    rows, cols = w.shape
    d = rows // heads
    return w.reshape(heads, d // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def convert(path, out):
    c, w = read_checkpoint(path)
    os.makedirs(out, exist_ok=True)
    cfg = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": c["dim"],
           "intermediate_size": c["hidden"], "num_hidden_layers": c["layers"],
           "num_attention_heads": c["heads"], "num_key_value_heads": c["kv_heads"],
           "vocab_size": c["vocab"], "max_position_embeddings": c["seq_len"], "rms_norm_eps": 1e-5,
           "rope_theta": 10000.0, "tie_word_embeddings": c["shared"], "bos_token_id": 1,
           "eos_token_id": 1, "hidden_act": "silu"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    t = [("model.embed_tokens.weight", w["emb"]), ("model.norm.weight", w["rms_final"])]
    for i in range(c["layers"]):
        p = "model.layers.%d." % i
        t += [(p + "input_layernorm.weight", w["rms_att"][i]),
              (p + "post_attention_layernorm.weight", w["rms_ffn"][i]),
              (p + "self_attn.q_proj.weight", to_rotate_half(w["wq"][i], c["heads"])),
              (p + "self_attn.k_proj.weight", to_rotate_half(w["wk"][i], c["kv_heads"])),
              (p + "self_attn.v_proj.weight", w["wv"][i]), (p + "self_attn.o_proj.weight", w["wo"][i]),
              (p + "mlp.gate_proj.weight", w["w1"][i]), (p + "mlp.down_proj.weight", w["w2"][i]),
              (p + "mlp.up_proj.weight", w["w3"][i])]
    if not c["shared"]:
        t.append(("lm_head.weight", w["cls"]))
    write_safetensors(os.path.join(out, "model.safetensors"), t, "F16")


def read_tokenizer(path):
    b = open(path, "rb").read()
    off, vocab, scores = 4, [], []
    while off < len(b):
        s, n = struct.unpack_from("<fi", b, off)
        off += 8
        vocab.append(b[off:off + n])
        scores.append(s)
        off += n
    return vocab, scores


def encode(vocab, scores, text):
    index = {p: i for i, p in enumerate(vocab)}
    toks = [1]
    if text:
        toks.append(index[b" "])
    for ch in text:
        u = ch.encode("utf-8")
        if u in index:
            toks.append(index[u])
        else:
            toks += [c + 3 for c in u]
    while True:
        best, at = None, -1
        for i in range(1, len(toks) - 1):   # never merge BOS
            cat = vocab[toks[i]] + vocab[toks[i + 1]]
            j = index.get(cat)
            if j is not None and (best is None or scores[j] > scores[best]):
                best, at = j, i
        if best is None:
            return toks
        toks[at:at + 2] = [best]


def decode(vocab, ids):
    out, prev = b"", None
    for t in ids:
        p = vocab[t]
        if prev == 1 and p.startswith(b" "):
            p = p[1:]
        if len(p) == 6 and p.startswith(b"<0x") and p.endswith(b">"):
            p = bytes([int(p[3:5], 16)])
        if t > 2:   # <unk>, BOS and EOS print nothing here (run.c never reaches them)
            out += p
        prev = t
    return out.decode("utf-8", errors="replace")


def main():
    cmd = sys.argv[1]
    if cmd == "convert":
        convert(sys.argv[2], sys.argv[3])
    elif cmd == "encode":
        vocab, scores = read_tokenizer(sys.argv[2])
        lines = [ln for ln in open(sys.argv[3], encoding="utf-8").read().split("\n") if ln.strip()]
        print(json.dumps([encode(vocab, scores, ln) for ln in lines]))
    elif cmd == "decode":
        vocab, _ = read_tokenizer(sys.argv[2])
        print(json.dumps([decode(vocab, ids) for ids in json.load(open(sys.argv[3]))]))
    else:
        sys.exit("usage: llama2c_ref.py convert|encode|decode ...")


if __name__ == "__main__":
    main()
