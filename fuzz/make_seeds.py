#!/usr/bin/python3
"""Write the fuzz targets' seeds into fuzz/seeds/<target>/ (committed; rerun
only to change them). Checkpoints come from tests/ref/make_checkpoint.py at
the fuzz targets' tiny size (fuzz/fuzz_tiny.h); the tier store headers are
written here from the format in store/fg_store.h (checksums left 0: the
store target sets them); the rest are small hand-written examples of each
format. Every seed is a few KB at most.

  fuzz/make_seeds.py
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
seeds = os.path.join(root, "fuzz", "seeds")
mkck = os.path.join(root, "tests", "ref", "make_checkpoint.py")
sys.path.insert(0, os.path.dirname(mkck))
from make_checkpoint import bytes_to_unicode  # noqa: E402  (GPT-2's byte -> character table)

TINY = ["--layers", "1", "--hidden", "4", "--heads", "1", "--ffn", "4", "--vocab", "8", "--max-pos", "4"]


def put(target, name, data):
    d = os.path.join(seeds, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def ckpt(tmp, name, *args):
    out = os.path.join(tmp, name)
    subprocess.run([sys.executable, mkck, "--out", out, *TINY, *args], check=True, stdout=subprocess.DEVNULL)
    return out


def read(p):
    with open(p, "rb") as f:
        return f.read()


def tiny_specs():
    """The tiny config's tensors in fg_specs_new order: (name, shape)."""
    V, H, F, P = 8, 4, 4, 4
    g = [("decoder.embed_tokens.weight", (V, H)), ("decoder.embed_positions.weight", (P + 2, H)),
         ("decoder.final_layer_norm.weight", (H,)), ("decoder.final_layer_norm.bias", (H,))]
    spec_index = [0, 1, 4, 5]   # FG_GW_*: project_in/out (2, 3) absent at this size
    layer = [("self_attn.q_proj.weight", (H, H)), ("self_attn.q_proj.bias", (H,)),
             ("self_attn.k_proj.weight", (H, H)), ("self_attn.k_proj.bias", (H,)),
             ("self_attn.v_proj.weight", (H, H)), ("self_attn.v_proj.bias", (H,)),
             ("self_attn.out_proj.weight", (H, H)), ("self_attn.out_proj.bias", (H,)),
             ("self_attn_layer_norm.weight", (H,)), ("self_attn_layer_norm.bias", (H,)),
             ("fc1.weight", (F, H)), ("fc1.bias", (F,)), ("fc2.weight", (H, F)), ("fc2.bias", (H,)),
             ("final_layer_norm.weight", (H,)), ("final_layer_norm.bias", (H,))]
    glob = [(n, s, i) for (n, s), i in zip(g, spec_index)]
    lay = [("decoder.layers.0." + n, s, 6 + k) for k, (n, s) in enumerate(layer)]
    return glob, lay


def store_header(kind, layer, tensors):
    """One tier store file header (fg_store.h, version 2), trailing zeros cut."""
    n = len(tensors)
    hb = 4096
    off, table = hb, b""
    for name, shape, spec in tensors:
        d0, d1 = shape[0], (shape[1] if len(shape) == 2 else 1)
        nbytes = d0 * d1 * 2
        table += name.encode().ljust(96, b"\0") + struct.pack("<IIII", spec, 1, len(shape), 0)
        table += struct.pack("<qqQQQQ", d0, d1, off, nbytes, 0, 0)
        off += (nbytes + 4095) // 4096 * 4096
    file_bytes = off
    h = b"FGSTORE\0" + struct.pack("<IIIIIIII", 2, hb, kind, 0xFFFFFFFF if kind == 0 else layer, 1, n, 0, 0)
    h += struct.pack("<QQQQQ", 0x0123456789ABCDEF, file_bytes, hb, file_bytes - hb, 0)
    h += b"opt-tiny".ljust(64, b"\0") + b"fuzz seed".ljust(176, b"\0") + table
    return h.rstrip(b"\0")


def tokenizer_json_seeds():
    """fuzz_tokenizer_json: tokenizer.json ["\n\x01\n" tokenizer_config.json
    ["\n\x01\n" generation_config.json]], small synthetic files of each kind
    the loader takes (Llama 3, Qwen, Llama 2 / Mistral, GPT-2 and odd Splits)."""
    m = bytes_to_unicode()
    sep = b"\n\x01\n"
    vocab = {m[b]: b for b in range(256)}
    words = [("\u0120", "t"), ("h", "e"), ("\u0120t", "he"), ("i", "n"), ("in", "g"), ("\u0120", "w"), ("o", "r"),
             ("l", "d"), ("\u0120w", "or"), ("\u0120wor", "ld"), ("\u0120", "\u0120")]
    for a, b in words:
        vocab[a + b] = len(vocab)
    l3 = ("(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
          "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+")
    added = lambda i, c, sp=True, **kw: dict({"id": i, "content": c, "single_word": False, "lstrip": False,
                                              "rstrip": False, "normalized": False, "special": sp}, **kw)
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    llama3 = {"version": "1.0", "truncation": None, "padding": None,
              "added_tokens": [added(300, "<|begin_of_text|>"), added(301, "<|eot_id|>"),
                               added(302, "<think>", False, lstrip=True, rstrip=True)],
              "normalizer": None,
              "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                  {"type": "Split", "pattern": {"Regex": l3}, "behavior": "Isolated", "invert": False}, bl]},
              "post_processor": {"type": "Sequence", "processors": [bl, {
                  "type": "TemplateProcessing",
                  "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                             {"Sequence": {"id": "A", "type_id": 0}}],
                  "pair": [], "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [300],
                                                                       "tokens": ["<|begin_of_text|>"]}}}]},
              "decoder": bl,
              "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                        "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": True,
                        "vocab": vocab, "merges": [a + " " + b for a, b in words]}}
    cfg = {"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|eot_id|>", "__type": "AddedToken"},
           "model_max_length": 10 ** 30}
    put("tokenizer_json", "llama3", json.dumps(llama3).encode() + sep + json.dumps(cfg).encode() + sep +
        b'{"bos_token_id": 300, "eos_token_id": [301, 300]}')

    qwen = dict(llama3, normalizer={"type": "NFC"}, post_processor=bl,
                added_tokens=[added(300, "<|im_start|>"), added(301, "<|im_end|>"), added(302, "<tool>", False)])
    qwen["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": l3.replace("{1,3}", "")}, "behavior": "Isolated", "invert": False},
        bl]}
    qwen["model"] = dict(llama3["model"], ignore_merges=False, merges=[[a, b] for a, b in words],
                         continuing_subword_prefix="", end_of_word_suffix="")
    put("tokenizer_json", "qwen", json.dumps(qwen).encode() + sep +
        b'{"add_bos_token": false, "bos_token": null, "eos_token": "<|im_end|>", "split_special_tokens": false}')

    sp = "\u2581"
    sv = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        sv["<0x%02X>" % b] = len(sv)
    for c in [sp] + list("abcdefghijklmnopqrstuvwxyz.,"):
        sv[c] = len(sv)
    sm = [(sp, "t"), ("h", "e"), (sp + "t", "he"), (sp, sp), (sp, "a"), ("i", "n")]
    for a, b in sm:
        sv[a + b] = len(sv)
    spm = {"version": "1.0", "added_tokens": [added(0, "<unk>"), added(1, "<s>"), added(2, "</s>")],
           "normalizer": {"type": "Sequence", "normalizers": [
               {"type": "Prepend", "prepend": sp}, {"type": "Replace", "pattern": {"String": " "}, "content": sp}]},
           "pre_tokenizer": None,
           "post_processor": {"type": "TemplateProcessing",
                              "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                         {"Sequence": {"id": "A", "type_id": 0}}],
                              "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
           "decoder": {"type": "Sequence", "decoders": [
               {"type": "Replace", "pattern": {"String": sp}, "content": " "}, {"type": "ByteFallback"},
               {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
           "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
                     "vocab": sv, "merges": [a + " " + b for a, b in sm]}}
    put("tokenizer_json", "spm", json.dumps(spm).encode() + sep +
        b'{"add_bos_token": true, "add_eos_token": false, "bos_token": "<s>", "eos_token": "</s>"}')
    meta = dict(spm, normalizer=None,
                pre_tokenizer={"type": "Metaspace", "replacement": sp, "prepend_scheme": "first", "split": True},
                decoder={"type": "Sequence", "decoders": [
                    {"type": "Metaspace", "replacement": sp, "prepend_scheme": "first"}, {"type": "ByteFallback"},
                    {"type": "Fuse"}]})
    put("tokenizer_json", "metaspace", json.dumps(meta))

    small = {c: i for i, c in enumerate(["<unk>", "<s>", "</s>"] + list("abcdehlorw ,!"))}
    small["he"], small["ll"], small["hell"] = len(small), len(small) + 1, len(small) + 2
    splits = {"added_tokens": [], "normalizer": None,
              "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                  {"type": "Split", "pattern": {"String": " "}, "behavior": "MergedWithNext", "invert": False},
                  {"type": "Split", "pattern": {"Regex": "\\p{L}+"}, "behavior": "Contiguous", "invert": True},
                  {"type": "Split", "pattern": {"Regex": "[,!]"}, "behavior": "MergedWithPrevious", "invert": False},
                  {"type": "Split", "pattern": {"String": "w"}, "behavior": "Removed", "invert": False}]},
              "post_processor": {"type": "RobertaProcessing", "cls": ["<s>", 1], "sep": ["</s>", 2]},
              "decoder": {"type": "Sequence", "decoders": [{"type": "Strip", "content": " ", "start": 1, "stop": 1},
                                                           {"type": "Fuse"}]},
              "model": {"unk_token": "<unk>", "fuse_unk": True, "vocab": small,
                        "merges": [["h", "e"], ["l", "l"], ["he", "ll"]]}}
    put("tokenizer_json", "splits", json.dumps(splits))

    gv = {m[b]: b for b in range(256)}
    gv["\u0120a"] = 256
    gpt2 = {"added_tokens": [added(257, "<|endoftext|>")], "normalizer": None,
            "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "use_regex": True},
            "post_processor": None, "decoder": {"type": "ByteLevel"},
            "model": {"type": "BPE", "vocab": gv, "merges": ["\u0120 a"]}}
    put("tokenizer_json", "gpt2", json.dumps(gpt2))


def llama2c_seeds():
    """llama2.c checkpoints (legacy tied and untied, version 1) of a tiny
    shape, and tokenizer.bin files: stories260K's and a small one."""
    dim, hid, L, H, KV, V, T = 4, 4, 1, 2, 1, 8, 4
    hs = dim // H
    rng = np.random.default_rng(7)

    def f32(n):
        return rng.standard_normal(n).astype("<f4").tobytes()
    body = f32(V * dim + L * dim + L * dim * dim + 2 * L * KV * hs * dim + L * dim * dim + L * dim
               + 3 * L * hid * dim + dim)
    rope = f32(2 * T * (hs // 2))
    put("llama2c", "legacy-tied.bin", struct.pack("<7i", dim, hid, L, H, KV, V, T) + body + rope)
    put("llama2c", "legacy-untied.bin", struct.pack("<7i", dim, hid, L, H, KV, -V, T) + body + rope + f32(V * dim))
    head = struct.pack("<Ii7iB", 0x616B3432, 1, dim, hid, L, H, KV, V, T, 0)
    put("llama2c", "v1-untied.bin", head + b"\0" * (256 - len(head)) + body + f32(V * dim))
    put("llama2c", "stories-head.bin", read(os.path.join(root, "models", "stories260K", "stories260K.bin"))[:64])
    put("tokenizer_l2c", "tok512.bin", read(os.path.join(root, "models", "stories260K", "tok512.bin")))
    toks = [(0.0, b"<unk>"), (0.0, b"\n<s>\n"), (0.0, b"\n</s>\n")] + [(0.0, b"<0x%02X>" % i) for i in range(256)]
    toks += [(-1.0, b" "), (-2.0, b"a"), (-3.0, b"b"), (-4.0, b" a"), (-5.0, b"ab"), (-6.0, b" ab"), (-7.0, b"\xc3\xa9")]
    put("tokenizer_l2c", "small.bin", struct.pack("<i", 6) + b"".join(struct.pack("<fi", sc, len(t)) + t
                                                                      for sc, t in toks))


def main():
    shutil.rmtree(seeds, ignore_errors=True)
    tmp = tempfile.mkdtemp()
    try:
        # safetensors: each dtype, hub names; an index for the target's fixed shard
        for dt in ["f16", "bf16", "f32"]:
            put("safetensors", dt + ".safetensors", read(os.path.join(ckpt(tmp, "st-" + dt, "--dtype", dt), "model.safetensors")))
        put("safetensors", "hub-names.safetensors", read(os.path.join(ckpt(tmp, "st-hub", "--hub-names"), "model.safetensors")))
        glob, lay = tiny_specs()
        wm = {"model." + n: "model-00001-of-00001.safetensors" for n, _, _ in glob + lay}
        put("safetensors", "index.json", json.dumps({"metadata": {"total_size": 0}, "weight_map": wm}, indent=1))

        # npy: selector byte (the target's file order: present specs, then lm_head.weight) + file
        npd = ckpt(tmp, "np", "--format", "npy")
        files = [n for n, _, _ in glob + lay]
        for k, n in enumerate(files):
            if k in (0, 1, 2, 7, 14):   # embeddings, a LayerNorm, a bias, fc1
                fn = n if os.path.exists(os.path.join(npd, n)) else n.replace("final_layer_norm", "layer_norm")
                put("npy", n, bytes([k]) + read(os.path.join(npd, fn)))
        put("npy", "lm_head.weight", bytes([len(files)]) + read(os.path.join(npd, "lm_head.weight")))
        f32 = os.path.join(tmp, "f32.npy")   # FlexGen files are fp16; the reader takes '<f4' too
        np.save(f32, np.arange(16, dtype=np.float32).reshape(4, 4) / 16)
        put("npy", "fc1.weight.f32", bytes([14]) + read(f32))

        # config.json: the tiny one, a 350m-like one (post-LN, projection), a hub-style one
        put("config", "tiny.json", read(os.path.join(npd, "config.json")))
        put("config", "proj.json", read(os.path.join(ckpt(tmp, "pj", "--proj-dim", "2", "--post-ln"), "config.json")))
        put("config", "opt-125m.json", json.dumps({
            "_name_or_path": "facebook/opt-125m", "activation_function": "relu", "architectures": ["OPTForCausalLM"],
            "bos_token_id": 2, "do_layer_norm_before": True, "eos_token_id": 2, "ffn_dim": 3072,
            "hidden_size": 768, "max_position_embeddings": 2048, "model_type": "opt", "num_attention_heads": 12,
            "num_hidden_layers": 12, "pad_token_id": 1, "torch_dtype": "float16", "vocab_size": 50272,
            "word_embed_proj_dim": 768}, indent=2))
        # the Llama family: GQA with llama3 scaling and an EOS list; Qwen2 (biases, tied); Mistral (window)
        mlck = os.path.join(os.path.dirname(mkck), "make_llama_checkpoint.py")
        for case in ("llama3", "qwen2", "mistral"):
            d = os.path.join(tmp, "llama-" + case)
            subprocess.run([sys.executable, mlck, "--out", d, "--case", case, "--layers", "1"], check=True,
                           stdout=subprocess.DEVNULL)
            put("config", "llama-%s.json" % case, read(os.path.join(d, "config.json")))

        # tokenizer: vocab.json "\n\x01\n" merges.txt, from the synthetic vocabulary
        vd = os.path.join(tmp, "voc")
        subprocess.run([sys.executable, mkck, "--out", vd, "--layers", "1", "--hidden", "4", "--heads", "1",
                        "--ffn", "4", "--vocab", "272", "--max-pos", "4", "--synth-vocab"], check=True,
                       stdout=subprocess.DEVNULL)
        put("tokenizer", "synth", read(os.path.join(vd, "vocab.json")) + b"\n\x01\n" + read(os.path.join(vd, "merges.txt")))
        byte_vocab = json.loads(read(os.path.join(vd, "vocab.json")))
        small = {k: v for k, v in byte_vocab.items() if v < 260}
        small.update({"<s>": 300, "</s>": 301, "<pad>": 302, "<unk>": 303})
        put("tokenizer", "specials", json.dumps(small).encode() + b"\n\x01\n#version: 0.2\n")
        tokenizer_json_seeds()

        # prompts: text (with an empty prompt, CRLF, a BOM) and JSONL (ids of every JSON kind)
        put("prompts", "sample.txt", read(os.path.join(root, "scripts", "sample-prompts.txt")))
        put("prompts", "crlf.txt", b"\xef\xbb\xbfHello\r\n\r\nw\xc3\xb6rld \xf0\x9f\x98\x80\r\n\n\n")
        put("prompts", "ids.jsonl", "\n".join(json.dumps(o) for o in [
            {"id": "q-1", "prompt": "Paris is"}, {"id": 7, "prompt": ""}, {"prompt": "no id"},
            {"id": {"a": [1, 2]}, "prompt": "caf\u00e9 \\n", "other": None}, {"id": None, "prompt": "x"}]) + "\n")
        put("prompts", "chat.jsonl", "\n".join(json.dumps(o) for o in [
            {"id": "c", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]},
            {"prompt": "plain"}, {"messages": [{"role": "user", "content": "caf\u00e9", "name": "x"}]}]) + "\n")

        # chat templates: a template, then optionally a NUL and the variables as JSON
        conv = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi {{ x }}"},
                             {"role": "assistant", "content": "<think>\nhm\n</think>\n\nHello"},
                             {"role": "user", "content": "caf\u00e9 \\ \"q\""}],
                "add_generation_prompt": True, "bos_token": "<s>", "eos_token": "</s>"}
        put("chat_template", "turns.jinja", (
            "{%- set ns = namespace(last=messages|length - 1, sys='') %}\n"
            "{%- for m in messages[::-1] %}{% if m.role == 'user' and ns.last == messages|length - 1 %}"
            "{% set ns.last = (messages|length - 1) - loop.index0 %}{% endif %}{% endfor %}\n"
            "{{- bos_token }}\n{%- for message in messages %}\n"
            "    {%- if message['role'] == 'system' and loop.first %}{% set ns.sys = message.content|trim %}\n"
            "    {%- elif message.role == 'assistant' and '</think>' in message.content %}\n"
            "        {{- '<|assistant|>\\n' + message.content.split('</think>')[-1].lstrip('\\n') + eos_token }}\n"
            "    {%- else %}\n"
            "        {{- '<|' ~ message.role ~ '|>\\n' ~ (ns.sys + '\\n' if loop.index0 == 1 and ns.sys else '')"
            " ~ message['content'] ~ eos_token }}\n"
            "    {%- endif %}\n{%- endfor %}\n"
            "{%- if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}\n").encode()
            + b"\0" + json.dumps(conv).encode())
        put("chat_template", "constructs.jinja", (
            "{# every construct #}{% set d = {'a': [1, 2.5, none, true], 'b': 'x'} %}"
            "{% for k, v in d.items() %}{{ loop.index }}{{ k }}={{ v|tojson }}{% if not loop.last %}, {% endif %}"
            "{% else %}empty{% endfor %}\n  {%- set a, b = 1, 2 -%}  {{ a + b * 3 // 2 % 5 - -1 }}"
            " {{ 'y' if a is defined and b is not none else 'n' }} {{ [3, 1, 2][1:] }} {{ 'abc'[::-1]|upper }}"
            " {{ ' s '.strip() ~ 'a,b'.split(',')|join('-') ~ 'xyx'.replace('x', 'z', 1) }}"
            " {{ d|tojson(indent=2, sort_keys=true) }} {{ d.get('c', 'dflt') }} {{ 'b' in d }} {{ 2 not in [1] }}"
            " {{ range(3)|list|length }} {{ undefined_x|default('u') }} {{ d.a|first }} {{ d.a|last }}"
            " {% set x %}block {{ 1 }}{% endset %}{{ x|lower }}{{ '\\u00e9\\x41\\n'|tojson(ensure_ascii=true) }}"
            "{% if false %}{{ raise_exception('never') }}{% endif %}").encode())
        put("chat_template", "refused.jinja", b"{% for m in messages %}\n{{ m.content|wordwrap(5) }}\n{% endfor %}")
        put("chat_template", "raise.jinja", b"{% if messages|length > 1 %}{{ raise_exception('no ' ~ 1) }}{% endif %}")

        # --prompt-ids
        put("prompt_ids", "two.json", "[[2, 31414, 232], [2, 5]]\n")
        put("prompt_ids", "one.json", "[[0]]")

        # tier store: globals.bin and layer-000.bin of the tiny model
        put("store", "tiny", b"\0" + store_header(0, 0, glob) + b"\nFGSTORE-NEXT\n" + store_header(1, 0, lay))
        put("store", "globals-only", b"\0" + store_header(0, 0, glob[:2]).replace(struct.pack("<I", 1), struct.pack("<I", 0), 1))

        # profiles: measured (GEMM table) and preset-like (fixed TFLOPS)
        put("profile", "host.json", json.dumps({
            "gpu": {"backend": "host", "shares_host_cpu": True, "h2d_GBps": 9.1, "d2h_GBps": 8.7,
                    "mm": [{"rows": 1, "TFLOPS": 0.01}, {"rows": 64, "TFLOPS": 0.2}, {"rows": 4096, "TFLOPS": 0.4}],
                    "attn_prefill_TFLOPS": 0.05, "attn_decode_GBps": 20.5},
            "cpu": {"attn_decode_GBps": 11.2, "memcpy_GBps": 9.0},
            "disk": {"disk_read_GBps": 1.9, "disk_write_GBps": 1.1},
            "runtime": {"cmd_s": 2e-05, "rtt_s": 8e-05}}, indent=1))
        # per-format GEMM tables, in the gpu section and in a layer shape's entry
        pts = lambda *r: [{"rows": a, "TFLOPS": b} for a, b in r]
        put("profile", "formats.json", json.dumps({
            "gpu": {"backend": "host", "shares_host_cpu": True, "h2d_GBps": 9.1, "d2h_GBps": 8.7,
                    "mm": pts((1, 0.01), (64, 0.2), (1024, 0.3)), "mm_q4": pts((1, 0.02), (256, 0.15)),
                    "mm_fmt": {"Q4_K": pts((1, 0.03), (4, 0.1), (256, 0.2)), "Q6_K": pts((1, 0.02), (1024, 0.2))},
                    "attn_prefill_TFLOPS": 0.05, "attn_decode_GBps": 20.5},
            "cpu": {"attn_decode_GBps": 11.2},
            "shapes": [{"model": "opt-125m", "hidden": 768, "ffn": 3072, "heads": 12,
                        "mm": pts((1, 0.011), (2048, 0.31)),
                        "mm_fmt": {"Q8_0": pts((1, 0.02), (32, 0.1)), "IQ2_XS": pts((1, 1))},
                        "mm_fmt_none": ["Q5_K"], "attn_prefill_TFLOPS": 0.05, "attn_decode_GBps": 20.0},
                       {"model": "llama", "hidden": 4096, "q_dim": 4096, "kv_dim": 1024, "ffn": 14336,
                        "ffn_kind": 1, "mm": pts((1, 0.01)), "attn_prefill_TFLOPS": 0.05,
                        "attn_decode_GBps": 20.0}]}, indent=1))
        put("profile", "fixed.json", json.dumps({
            "gpu": {"backend": "cuda", "h2d_GBps": 13.8, "d2h_GBps": 5.2, "d2h_cache_GBps": 1.0,
                    "mm_prefill_TFLOPS": 21.2, "mm_decode_TFLOPS": 4.3, "attn_prefill_TFLOPS": 5.0,
                    "attn_decode_GBps": 79},
            "cpu": {"attn_decode_GBps": 12.3}, "disk": {"disk_read_GBps": 0.5, "disk_write_GBps": 2.1}}))
        llama2c_seeds()
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
