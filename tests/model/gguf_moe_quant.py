#!/usr/bin/python3
"""Mixtures of experts as GGUF files in ggml's formats: the numerics against
the numpy oracle, placement, bytes, and greedy tokens against llama.cpp.

  gguf_moe_quant.py FLEXGEN WORKDIR GGUF_PY_DIR [--llamacpp DIR]

Three random checkpoints whose every row is whole 256-value k-quant blocks
(hidden 256, experts of 256): Mixtral-like (architecture llama, 8 experts,
top 2, 2 layers), Qwen3-MoE-like (qwen3moe, 32 experts, top 8, renormalised,
2 layers, every layer sparse as llama.cpp's qwen3moe wants), and Qwen3-MoE
without renormalising and with dense layers (sparse every second of 3
layers: llama.cpp cannot load it, the engine reads each layer's kind from
its router). Each is written by tests/ref/gguf_write.py (F16) and by
tests/ref/gguf_quant.py (Q8_0, and the Q4_K_M-like mix as llama.cpp's
quantizer lays out a mixture: routers F32, experts' stacks quantized row by
row, Q4_K with ffn_down_exps Q6_K where use_more_bits says, for 8 experts
attn_k and attn_v Q8_0 and attn_output Q5_K), with a twin directory holding
gguf-py's dequantize of exactly those blocks.

  1. numerics: the reference engine on every quantized file against the
     numpy oracle (tests/ref/llama_ref.py) on its twin: the same fp32
     weights and fp16 rounding points, only the summation order differs, so
     compare.py's tolerance for the fp16 oracle tests holds relative to the
     logits' spread: its atol 1e-2 is for logits of std ~0.8, and here the
     LM head's std is 10x (0.5, so that llama.cpp's top-1 stands clear of
     its second below), the logits' std 8.1 (printed), so atol 0.1 (near-ties
     within 2 atol; measured up to 0.023); routing near-ties where the
     oracle's k-th and (k+1)-th router logits are within 1e-3, compare.py's
     default, as the routers' logits spread as in those tests (0.8);
  2. placement: the Mixtral-like Q4_K_M mix offloaded (all on disk with CPU
     attention; weights over three tiers with two GPU batches) bitwise
     equal to the reference engine;
  3. bytes: `flexgen policy --model FILE.gguf` counts every matrix as its
     blocks (gguf-py's sizes), routers and norms fp16, and a layer's bytes
     as the file's;
  4. with --llamacpp: llama.cpp (node-llama-cpp) decodes the all-sparse
     models' F16, Q8_0 and Q4_K_M files greedily; the engine's tokens on the
     same file must equal llama.cpp's but at near-ties, each divergence
     counted with its gaps: the engine's top-2 logits within TIE, or
     llama.cpp's top-2 log-probabilities within TIE, or else the routing so
     far within ROUTE_TIE of another choice (the numpy oracle's smallest
     top-k router logit gap on the file's weights, as compare.py counts
     routing near-ties). llama.cpp is a loose oracle: it rounds a matmul's
     activations to fp16 for F16 weights and quantizes them to 8 bits
     (q8_0 / q8_K) for quantized ones, where the engine keeps them fp32.
     TIE: 0.1 for F16 (llamacpp_check.py's F16 margin: twice its atol,
     which is twice the 0.026 measured), 1.0 for the quantized files
     (gguf_quantized's: twice the largest move measured on its dense
     models). ROUTE_TIE: llama.cpp's rounding moves the router's logits as
     it moves the output logits, in proportion to their spread, so TIE
     times the ratio of the router logits' spread to the output logits'
     (both measured on the oracle, printed: about a tenth).
"""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REF = os.path.join(os.path.dirname(HERE), "ref")
sys.path.insert(0, REF)
import gguf_quant as gq  # noqa: E402
import gguf_write as gw  # noqa: E402
import make_llama_checkpoint as mlc  # noqa: E402

flexgen, work, ggufpy = sys.argv[1], sys.argv[2], sys.argv[3]
lcpp = sys.argv[sys.argv.index("--llamacpp") + 1] if "--llamacpp" in sys.argv else None
sys.path.insert(0, ggufpy)
import gguf  # noqa: E402

MODELS = {
    "mixtral": ["--type", "mixtral", "--hidden", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "256",
                "--experts", "8", "--topk", "2", "--layers", "2", "--rope-theta", "1000000"],
    "qwen3moe": ["--type", "qwen3_moe", "--hidden", "256", "--heads", "8", "--kv-heads", "2", "--head-dim", "32",
                 "--ffn", "256", "--moe-ffn", "256", "--experts", "32", "--topk", "8", "--norm-topk", "--layers", "2",
                 "--rope-theta", "1000000", "--eps", "1e-6"],
    "qwen3moe_nonorm_dense": ["--type", "qwen3_moe", "--hidden", "256", "--heads", "8", "--kv-heads", "2",
                              "--head-dim", "32", "--ffn", "512", "--moe-ffn", "256", "--experts", "32", "--topk",
                              "8", "--sparse-step", "2", "--layers", "3", "--rope-theta", "1000000", "--eps", "1e-6"],
}
LLAMACPP_MODELS = ("mixtral", "qwen3moe")   # llama.cpp's qwen3moe has no dense layers
MIXES = ["Q8_0", "q4_k_m"]
GEN = 12
ATOL = 0.1
TIE = {"F16": 0.1, "Q8_0": 1.0, "q4_k_m": 1.0}
fails = []


def check(name, ok, detail):
    print("%s %s: %s" % ("ok  " if ok else "FAIL", name, detail))
    if not ok:
        fails.append(name)


def last_line(err):
    lines = err.strip().splitlines()
    return lines[-1] if lines else "(no message)"


def run(model, tag, *extra):
    out, lg = os.path.join(work, tag + ".jsonl"), os.path.join(work, tag + ".npy")
    p = subprocess.run([flexgen, "run", "--model", model, "--prompt-ids", os.path.join(work, "p.json"),
                        "--gen-len", str(GEN), "--ignore-eos", "--out", out, "--dump-logits", lg,
                        "--gpu-batch-size", "2", "--offload-dir", os.path.join(work, "off-" + tag),
                        *(extra or ("--engine", "reference"))], capture_output=True, text=True)
    if p.returncode:
        return None, None, p.stderr
    with open(out) as f:
        toks = [json.loads(x)["output_ids"] for x in f if x.strip()]
    return np.load(lg), toks, p.stderr


def oracle(twin, tag):
    """llama_ref.py (fp16 rounding points) on a twin: (logits file, tokens file)."""
    rl, rt = os.path.join(work, "np-%s.npy" % tag), os.path.join(work, "np-%s.json" % tag)
    subprocess.run([sys.executable, os.path.join(REF, "llama_ref.py"), "--model", twin, "--prompt-ids",
                    os.path.join(work, "p.json"), "--gen-len", str(GEN), "--out-logits", rl, "--out-tokens", rt],
                   check=True, capture_output=True)
    return rl, rt


def numerics(name, mix, g, twin):
    tag = "%s-%s" % (name, mix)
    lg, toks, err = run(g, tag)
    if lg is None:
        check("numerics_" + tag, False, last_line(err))
        return
    rl, rt = oracle(twin, tag)
    c = subprocess.run([sys.executable, os.path.join(REF, "compare.py"), "--ref-logits", rl, "--ref-tokens", rt,
                        "--jsonl", os.path.join(work, tag + ".jsonl"), "--logits", os.path.join(work, tag + ".npy"),
                        "--atol", str(ATOL)], capture_output=True, text=True)
    check("numerics_" + tag, c.returncode == 0, (c.stdout + c.stderr).strip().splitlines()[0])


def placement(g):
    base = run(g, "mixtral-q4_k_m")
    for pol, args in (("disk_cpu_attention", ["--percent", "0", "0", "0", "0", "0", "0", "--cpu-cache-compute"]),
                      ("weights_3_tiers", ["--percent", "30", "40", "100", "0", "100", "0", "--num-gpu-batches", "2"])):
        lg, toks, err = run(g, "pl-" + pol, "--device", "host", *args)
        if lg is None or base[0] is None:
            check("placement_" + pol, False, last_line(err if lg is None else base[2]))
            continue
        eq = lg.tobytes() == base[0].tobytes() and toks == base[1]
        check("placement_" + pol, eq, "Mixtral-like Q4_K_M offloaded: " + (
            "bitwise equal to the reference engine" if eq else "differs by %.3g" % float(np.abs(lg - base[0]).max())))


def policy_bytes(name, g):
    """flexgen policy's bytes by format and per layer against gguf-py's reading of the file."""
    r = gguf.GGUFReader(g)
    by_fmt, layers = {}, {}
    for t in r.tensors:
        held = t.tensor_type.name if len(t.shape) > 1 and not t.name.endswith("ffn_gate_inp.weight") else "F16"
        held = "F16" if held in ("F32", "BF16") else held
        b = int(t.n_bytes) if held != "F16" else 2 * int(t.n_elements)
        by_fmt[held] = by_fmt.get(held, 0) + b
        if t.name.startswith("blk."):
            layers[int(t.name.split(".")[1])] = layers.get(int(t.name.split(".")[1]), 0) + b
    p = subprocess.run([flexgen, "policy", "--model", g, "--prompt-len", "8", "--gen-len", "8", "--gpu-mem", "1T",
                        "--cpu-mem", "1T", "--hardware", "flexgen-t4", "--json"], capture_output=True, text=True)
    if p.returncode:
        check("policy_bytes_" + name, False, last_line(p.stderr))
        return
    fm = json.loads(p.stdout)["arithmetic"]["weight_formats"]
    got = {k: int(v["bytes"]) for k, v in fm["by_format"].items()}
    ok = got == by_fmt and (fm["layer_bytes_min"], fm["layer_bytes_max"]) == (min(layers.values()),
                                                                               max(layers.values()))
    check("policy_bytes_" + name, ok, "by format %s (the file's %s), a layer %d to %d bytes (the file's %d to %d)"
          % (got, by_fmt, fm["layer_bytes_min"], fm["layer_bytes_max"], min(layers.values()), max(layers.values())))


def route_gaps(twin, tag):
    """The numpy oracle's smallest top-k router logit gap so far, per prompt
    and step, on the file's weights."""
    with open(oracle(twin, tag)[1]) as f:
        return json.load(f)["route_gaps"]


def spreads(twin, tag):
    """std of the first sparse layer's router logits (on the prompts'
    embeddings, normalised as that layer's MLP input would be) and of the
    oracle's output logits (np-TAG.npy)."""
    import llama_ref
    m = llama_ref.load_model(twin)
    L = next(L for L in m.layers if L["moe"] is not None)
    with open(os.path.join(work, "p.json")) as f:
        ids = sorted({i for p in json.load(f) for i in p})
    x = llama_ref.rms_norm(m.E[ids], L["ln2"], m.eps)
    return float((x @ L["moe"]["router"]).std()), float(np.load(os.path.join(work, "np-%s.npy" % tag)).std())


def llamacpp(files):
    import llamacpp_check as lc
    total = agree = 0
    divs = []
    oracle(files[("mixtral", "F16")][1], "mixtral-F16")
    sr, so = spreads(files[("mixtral", "F16")][1], "mixtral-F16")
    with open(os.path.join(work, "p.json")) as f:
        prompts = json.load(f)
    for (name, mix), (g, twin) in files.items():
        if name not in LLAMACPP_MODELS:
            continue
        tag = "%s-%s" % (name, mix)
        elog, toks, err = run(g, tag)   # (F16: not run yet; the mixes again, as numerics ran them)
        if elog is None:
            check("llamacpp_" + tag, False, last_line(err))
            continue
        route = route_gaps(twin, tag)
        _, out = lc.run_llamacpp(lcpp, g, prompts, 512, GEN, "f16", work)
        mine = []
        for p, (a, b) in enumerate(zip(toks, out["tokens"])):
            for s in range(GEN):
                total += 1
                if a[s] == b[s]:
                    agree += 1
                    continue
                _, p1, _, p2 = out["top2"][p][s]
                gap_lc = float(np.log(p1 / p2)) if p2 > 0 else float("inf")
                top = np.sort(elog[p, s])[-2:]
                gap_ours, gap_route = float(top[1] - top[0]), float(route[p][s])
                divs.append((tag, p, s, gap_lc, gap_ours, gap_route))
                if gap_lc > TIE[mix] and gap_ours > TIE[mix] and gap_route >= TIE[mix] * sr / so:
                    mine.append("prompt %d step %d: ours %d, llama.cpp %d (top-2 gap llama.cpp %.3f, ours %.3f; "
                                "router gap %.3g)" % (p, s, a[s], b[s], gap_lc, gap_ours, gap_route))
                break
        check("llamacpp_" + tag, not mine, "; ".join(mine) if mine else "greedy tokens agree but at near-ties")
    print("     llama.cpp: %d of %d steps compared agree; %d divergence(s)%s (near-tie: a top-2 gap <= TIE, %s, or a "
          "router gap < TIE x %.3g, the router logits' spread %.3g over the output logits' %.3g)" % (
              agree, total, len(divs), "".join(" [%s prompt %d step %d: top-2 gaps llama.cpp %.3f, ours %.3f, "
                                               "router gap %.3g]" % d for d in divs),
              ", ".join("%s %g" % kv for kv in TIE.items()), sr / so, sr, so))


def main():
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    rng = np.random.default_rng(5)
    prompts = [rng.integers(3, 512, size=int(n)).tolist() for n in rng.integers(2, 13, size=8)]
    with open(os.path.join(work, "p.json"), "w") as f:
        json.dump(prompts, f)
    files = {}
    for i, (name, args) in enumerate(MODELS.items()):
        ck = os.path.join(work, name)
        mlc.write(mlc.parse_args(["--out", ck, "--vocab", "512", "--std", "0.05", "--head-std", "0.5",
                                  "--seed", str(40 + i), *args]))
        g = os.path.join(work, name + "-F16.gguf")
        gw.from_checkpoint(ck, g, "f16")
        files[(name, "F16")] = (g, ck)
        for j, mix in enumerate(MIXES):
            g, twin = os.path.join(work, "%s-%s.gguf" % (name, mix)), os.path.join(work, "twin-%s-%s" % (name, mix))
            used = gq.build(ck, mix, g, twin, 100 + 10 * i + j, gguf)
            print("     %s %s: %s" % (name, mix, ", ".join("%s %d" % kv for kv in sorted(used.items()))))
            files[(name, mix)] = (g, twin)
            numerics(name, mix, g, twin)
        policy_bytes(name, files[(name, "q4_k_m")][0])
    placement(files[("mixtral", "q4_k_m")][0])
    if lcpp:
        llamacpp(files)
    print("gguf_moe_quant:", "FAILED: " + ", ".join(fails) if fails else "all good")
    return 1 if fails else 0


sys.exit(main())
