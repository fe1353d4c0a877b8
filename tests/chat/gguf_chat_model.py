#!/usr/bin/python3
"""gguf_chat_model.py - a GGUF model of random weights that carries a real
vocabulary and chat template in its metadata, for the chat tests: a tiny
Llama-architecture model (1 layer, hidden 32, tied embedding) whose vocab_size
is the vocabulary's, with every tokenizer.* key of VOCAB.gguf (one of
llama.cpp's models/ggml-vocab-*.gguf) copied as it is typed there.

  gguf_chat_model.py --vocab VOCAB.gguf --out MODEL.gguf
                     [--template-config tokenizer_config.json | --no-template]

--template-config: tokenizer.chat_template is set to that file's
"chat_template" (over one the vocabulary may have); --no-template: the key is
left out; neither: the vocabulary's own is kept (if it has one)."""
import argparse
import json
import os
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "ref"))
import gguf_write as gw  # noqa: E402
import make_llama_checkpoint as mlc  # noqa: E402

KEY = "tokenizer.chat_template"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--out", required=True)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--template-config")
    g.add_argument("--no-template", action="store_true")
    a = ap.parse_args()
    kvs = gw.read_kvs(a.vocab, "tokenizer.")
    tokens = next((v for k, t, v in kvs if k == "tokenizer.ggml.tokens"), None)
    if tokens is None:
        sys.exit("%s: no tokenizer.ggml.tokens" % a.vocab)
    if a.template_config or a.no_template:
        kvs = [kv for kv in kvs if kv[0] != KEY]
    if a.template_config:
        kvs.append((KEY, "str", json.load(open(a.template_config, encoding="utf-8"))["chat_template"]))
    V = len(tokens[1])
    with tempfile.TemporaryDirectory() as tmp:
        mlc.write(mlc.parse_args(["--out", tmp, "--layers", "1", "--hidden", "32", "--heads", "2", "--kv-heads", "1",
                                  "--ffn", "32", "--vocab", str(V), "--max-pos", "512", "--tied", "--seed", "7"]))
        n = gw.from_checkpoint(tmp, a.out, "f16", arch="llama", tok_kvs=kvs)
    has = any(k == KEY for k, _, _ in kvs)
    print("wrote %s: %d tokens, %s, %d bytes" % (a.out, V, "a chat template" if has else "no chat template", n))


if __name__ == "__main__":
    main()
