#!/usr/bin/python3
"""--model FILE.gguf with experts: llama.cpp's mixtures of experts run as
their safetensors twins do.

  gguf_moe.py FLEXGEN WORKDIR

  * The same weights as a Hugging Face directory and as GGUF, written by
    tests/ref/gguf_write.py as llama.cpp's converter writes them (each
    role's experts one 3-D tensor, routers F32), give bitwise identical
    logits and tokens, on the reference engine and on the offloading engine
    (all on disk with CPU attention; weights over three tiers): Mixtral-like
    (architecture llama, 8 experts, top 2; F16 and BF16, and F16 with one
    tensor per expert as older files have), Qwen3-MoE-like (architecture
    qwen3moe, 32 experts, top 8: every layer sparse; norm_topk_prob true with
    layer 1 dense by mlp_only_layers; false and sparse every second layer).
  * Q8_0 (a quantized file, gguf_write.py's own quantizer) runs, and
    `flexgen policy --model FILE.gguf` counts its weights by format as the
    file holds them: every matrix as its blocks, routers and norms fp16,
    bytes per layer exactly the file's (its numerics: gguf_moe_quant.py).
  * Refused with exit 2, naming the file and the key or tensor: shared
    experts, a gating function other than softmax, a weights scale, expert
    groups, expert_weights_norm false for Mixtral, a missing
    expert_used_count or expert_count, a missing stack, a stack of another
    expert count, a missing expert of a per-expert file, experts of one role
    in two formats, leading_dense_block_count against the tensors. A router
    the file holds in Q8_0 (llama.cpp never writes one) runs, held fp16.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import gguf_write as gw  # noqa: E402
import make_llama_checkpoint as mlc  # noqa: E402

flexgen, work = sys.argv[1], sys.argv[2]
fails = []
PROMPTS = "[[1, 10, 20, 30, 40, 50, 60], [1, 7], [1, 99, 98, 97, 96, 95, 94, 93, 92, 91, 90, 89], [1, 5, 6, 7]]"
OFFLOADED = [("disk_cpu_attention", ["--percent", "0", "0", "0", "0", "0", "0", "--cpu-cache-compute"]),
             ("weights_3_tiers", ["--percent", "30", "40", "100", "0", "100", "0", "--num-gpu-batches", "2"])]


def check(name, ok, detail):
    print("%s %s: %s" % ("ok  " if ok else "FAIL", name, detail))
    if not ok:
        fails.append(name)


def run(model, tag, *extra):
    """The reference engine, or with extra the offloading one; batches of 2
    either way (a Linear's sums depend on its row count)."""
    out, lg = os.path.join(work, tag + ".jsonl"), os.path.join(work, tag + ".npy")
    p = subprocess.run([flexgen, "run", "--model", model, "--prompt-ids", os.path.join(work, "p.json"),
                        "--gen-len", "8", "--ignore-eos", "--out", out, "--dump-logits", lg, "--gpu-batch-size", "2",
                        "--offload-dir", os.path.join(work, "off-" + tag), *(extra or ("--engine", "reference"))],
                       capture_output=True, text=True)
    if p.returncode:
        return None, None, p.stderr, p.returncode
    with open(out) as f:
        toks = [json.loads(x)["output_ids"] for x in f if x.strip()]
    return np.load(lg), toks, p.stderr, 0


def same(name, a, b, what):
    la, ta, ea, _ = a
    lb, tb, eb, _ = b
    if la is None or lb is None:
        check(name, False, "run failed: %s" % (ea if la is None else eb).strip().splitlines()[-1])
        return
    eq = la.tobytes() == lb.tobytes() and ta == tb
    check(name, eq, what + (" bitwise equal" if eq else " differ by %.3g" % float(np.abs(la - lb).max())))


def make(name, *args):
    d = os.path.join(work, name)
    mlc.write(mlc.parse_args(["--out", d, *args]))
    return d


def last_line(err):
    lines = err.strip().splitlines()
    return lines[-1] if lines else "(no message)"


# ---------------------------------------------------------------- bitwise twins

CASES = [("mixtral", ["--case", "mixtral"], "f16", "merged"),
         ("mixtral", ["--case", "mixtral"], "bf16", "merged"),
         ("mixtral", ["--case", "mixtral"], "f16", "split"),
         ("qwen3_moe_all", ["--case", "qwen3-moe-all"], "f16", "merged"),
         ("qwen3_moe_dense1", ["--case", "qwen3-moe"], "f16", "merged"),
         ("qwen3_moe_nonorm", ["--case", "qwen3-moe-nonorm"], "f16", "merged")]


def twins():
    made = {}
    for name, args, wtype, experts in CASES:
        dtype = "bf16" if wtype == "bf16" else "f16"   # bf16: values bf16 holds, so the BF16 file is the same model
        if (name, dtype) not in made:
            d = make(name if dtype == "f16" else name + "_bf16", *args, "--dtype", dtype)
            made[name, dtype] = d, run(d, "%s-%s-st" % (name, dtype))
        d, st = made[name, dtype]
        tag = "%s-%s-%s" % (name, wtype, experts)
        g = os.path.join(work, tag + ".gguf")
        gw.from_checkpoint(d, g, wtype, experts=experts)
        same("gguf_" + tag, st, run(g, tag), "safetensors and GGUF %s (%s experts), reference engine:"
             % (wtype.upper(), experts))
        if wtype != "f16":
            continue
        for pol, args in OFFLOADED:
            same("gguf_%s_%s" % (tag, pol), st, run(g, tag + "-" + pol, "--device", "host", *args),
                 "safetensors on the reference engine and GGUF offloaded (%s):" % pol)


# ---------------------------------------------------------------- Q8_0 and policy


def held_bytes(g):
    """What the tiers hold of a GGUF file (gguf_write.read_gguf: F32, F16,
    Q8_0): a matrix in Q8_0 as its blocks, everything else fp16 (1-D
    tensors, F32 routers); per decoder layer and in all."""
    _, _, tens, _ = gw.read_gguf(g)
    layers, total = {}, 0
    for name, (gt, ne, _, nbytes) in tens.items():
        b = nbytes if gt == gw.GT["Q8_0"] else 2 * int(np.prod(ne))
        total += b
        if name.startswith("blk."):
            layers[int(name.split(".")[1])] = layers.get(int(name.split(".")[1]), 0) + b
    return layers, total


def q8_and_policy():
    d = os.path.join(work, "mixtral")
    g = os.path.join(work, "mixtral-q8_0.gguf")
    gw.from_checkpoint(d, g, "q8_0")
    q8 = run(g, "mixtral-q8_0")
    check("gguf_q8_0_runs", q8[0] is not None, "Mixtral-like Q8_0 runs" if q8[0] is not None else last_line(q8[2]))
    same("gguf_q8_0_offloaded", q8, run(g, "mixtral-q8_0-off", "--device", "host", *OFFLOADED[0][1]),
         "Q8_0 on the reference engine and offloaded:")
    for f in (g, os.path.join(work, "qwen3_moe_dense1-f16-merged.gguf")):
        p = subprocess.run([flexgen, "policy", "--model", f, "--prompt-len", "8", "--gen-len", "8", "--gpu-mem", "1T",
                            "--cpu-mem", "1T", "--hardware", "flexgen-t4", "--json"], capture_output=True, text=True)
        if p.returncode:
            check("policy_" + os.path.basename(f), False, last_line(p.stderr))
            continue
        ar = json.loads(p.stdout)["arithmetic"]
        fm = ar["weight_formats"]
        layers, total = held_bytes(f)
        got = sum(v["bytes"] for v in fm["by_format"].values())
        want_q8 = sum(n for gt, _, _, n in gw.read_gguf(f)[2].values() if gt == gw.GT["Q8_0"])
        got_q8 = fm["by_format"].get("Q8_0", {}).get("bytes", 0)
        # (weight_bytes_total is a mean per layer times the layers: equal up to float rounding)
        ok = (got == total and abs(ar["weight_bytes_total"] - total) <= 1e-9 * total and got_q8 == want_q8 and
              fm["layer_bytes_min"] == min(layers.values()) and fm["layer_bytes_max"] == max(layers.values()))
        check("policy_" + os.path.basename(f), ok,
              "weights %d bytes (the file's as held: %d; Q8_0 %d of %d), a layer %d to %d (the file's %d to %d)"
              % (got, total, got_q8, want_q8, fm["layer_bytes_min"], fm["layer_bytes_max"], min(layers.values()),
                 max(layers.values())))


# ---------------------------------------------------------------- refusals


def variant(src, out, arch=None, kv_drop=(), kv_add=(), t_drop=(), t_type=None, experts="merged"):
    """The GGUF of checkpoint src with metadata keys dropped or added
    (arch-relative names), tensors dropped, or some tensors' type changed
    (t_type: {name: ggml type})."""
    cfg, t = mlc.load_llama_checkpoint(src)
    arch = arch or gw.arch_of(cfg)
    kvs = [kv for kv in gw.model_kvs(cfg, arch, "F16") if kv[0][len(arch) + 1:] not in kv_drop]
    kvs += [(arch + "." + k, vt, v) for k, vt, v in kv_add]
    kvs += gw.vocab_kvs("llama", cfg["vocab_size"], 1, 2)
    tensors = [(n, (t_type or {}).get(n, gw.tensor_type(n, a, "F16")), a)
               for n, a in gw.gguf_tensors(cfg, t, arch, experts) if n not in t_drop]
    gw.write_gguf(out, kvs, tensors)
    return out


def refused(name, g, *want):
    _, _, err, rc = run(g, "refuse-" + name)
    msg = last_line(err)
    check("refuse_" + name, rc == 2 and os.path.basename(g) in msg and all(w in msg for w in want),
          "exit %d: %s" % (rc, msg))


def refusals():
    mx, qw = os.path.join(work, "mixtral"), os.path.join(work, "qwen3_moe_dense1")
    v = lambda n, src, **k: variant(src, os.path.join(work, n + ".gguf"), **k)  # noqa: E731
    refused("shared_experts", v("shared", qw, kv_add=[("expert_shared_count", "u32", 1)]),
            "qwen3moe.expert_shared_count", "shared experts")
    refused("gating_sigmoid", v("sigmoid", mx, kv_add=[("expert_gating_func", "u32", 2)]),
            "llama.expert_gating_func", "softmax")
    refused("weights_scale", v("scale", qw, kv_add=[("expert_weights_scale", "f32", 2.5)]),
            "qwen3moe.expert_weights_scale")
    refused("expert_groups", v("groups", qw, kv_add=[("expert_group_count", "u32", 4)]),
            "qwen3moe.expert_group_count")
    refused("mixtral_no_renorm", v("nonorm", mx, kv_add=[("expert_weights_norm", "bool", False)]),
            "llama.expert_weights_norm")
    refused("missing_used_count", v("nouse", qw, kv_drop=["expert_used_count"]),
            "qwen3moe.expert_used_count", "missing")
    refused("missing_expert_count", v("nocount", qw, kv_drop=["expert_count"]), "qwen3moe.expert_count", "missing")
    refused("missing_stack", v("nostack", mx, t_drop=["blk.1.ffn_up_exps.weight"]),
            "missing tensor", "blk.1.ffn_up_exps.weight", "[64, 96, 8]")
    # (layer 0's router left out, so its stacks are the first to disagree; the
    # layers are sparse by leading_dense_block_count 0, not by their routers)
    refused("stack_expert_count", v("count4", mx, kv_drop=["expert_count"], t_drop=["blk.0.ffn_gate_inp.weight"],
                                    kv_add=[("expert_count", "u32", 4), ("leading_dense_block_count", "u32", 0)]),
            "blk.0.ffn_gate_exps.weight", "[64, 96, 8]", "[64, 96, 4]")
    refused("missing_expert", v("noexpert", mx, experts="split", t_drop=["blk.0.ffn_down.7.weight"]),
            "missing tensor", "blk.0.ffn_down.7.weight", "[96, 64]")
    refused("experts_two_formats", v("twofmt", mx, experts="split", t_type={"blk.0.ffn_gate.3.weight": "Q8_0"}),
            "blk.0.ffn_gate.3.weight", "share a format")
    refused("leading_dense_blocks", v("lead", qw, kv_add=[("leading_dense_block_count", "u32", 2)]),
            "blk.0.ffn_gate_inp.weight", "not part of")
    # a router quantized (llama.cpp's converter and quantizer never do) is held fp16: it runs
    rq = run(v("router_q8", mx, t_type={"blk.0.ffn_gate_inp.weight": "Q8_0"}), "router_q8")
    check("router_q8_0_runs", rq[0] is not None, "a Q8_0 router, held fp16, runs" if rq[0] is not None
          else last_line(rq[2]))


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
with open(os.path.join(work, "p.json"), "w") as f:
    f.write(PROMPTS)
twins()
q8_and_policy()
refusals()
print("gguf_moe: %d failed" % len(fails))
if not fails:
    shutil.rmtree(work)
sys.exit(1 if fails else 0)
