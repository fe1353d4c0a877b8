#!/usr/bin/python3
"""Baseline throughput of the numpy oracle (tests/ref/opt_ref.py, same forward
code) on an OPT-125M-shaped model with random weights made in memory:
12 layers, hidden 768, 12 heads, ffn 3072, vocab 50272, max pos 2048;
batch 16, prompt length 128, 32 new tokens, greedy with KV cache.

  bench/ref_numpy.py [--batch 16] [--prompt-len 128] [--gen-len 32] [--seed 0]

Prints one JSON line: {"tokens_per_s", "prefill_s", "decode_s", ...} where
tokens_per_s = batch * gen_len / (prefill_s + decode_s) (FlexGen's definition).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "ref"))
import make_checkpoint as mc  # noqa: E402
import opt_ref  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--gen-len", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    shape = argparse.Namespace(layers=12, hidden=768, heads=12, ffn=3072, vocab=50272,
                               max_pos=2048, post_ln=False, proj_dim=0)
    cfg = mc.make_config(shape)
    m = opt_ref.Model(cfg, mc.make_tensors(cfg, a.seed, 0.1))
    rng = np.random.default_rng(a.seed + 1)
    prompts = rng.integers(3, cfg["vocab_size"], (a.batch, a.prompt_len)).tolist()
    t = {}
    opt_ref.generate(m, prompts, a.gen_len, timings=t)
    total = t["prefill_s"] + t["decode_s"]
    print(json.dumps({"tokens_per_s": round(a.batch * a.gen_len / total, 2),
                      "prefill_s": round(t["prefill_s"], 3), "decode_s": round(t["decode_s"], 3),
                      "model": "opt-125m-shape", "batch": a.batch, "prompt_len": a.prompt_len,
                      "gen_len": a.gen_len, "threads": os.cpu_count()}))


if __name__ == "__main__":
    main()
