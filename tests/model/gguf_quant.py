#!/usr/bin/python3
"""GGUF files in ggml's quantized formats, held as their blocks (common/fg_fmt.h).

  gguf_quant.py FLEXGEN WORKDIR GGUF_PY_DIR [--llamacpp DIR]

A random Llama checkpoint (hidden 256, 3 layers, GQA 4:2, FFN 512: every row a
whole number of 256-value k-quant blocks) is written by tests/ref/gguf_quant.py
as a GGUF in each pure format (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
Q5_K, Q6_K, MXFP4) and in a Q4_K_M-like mix (Q4_K, Q6_K for the head and for
attn_v / ffn_down of some layers, F32 norms), with a twin directory of
gguf-py's dequantized weights in float32.

  1. numerics: for every file the engine's logits and greedy tokens against the
     numpy reference (tests/ref/llama_ref.py) run on the twin: the same fp32
     weights and the same fp16 rounding points, only the summation order
     differs, so compare.py's tolerance for the fp16 oracle tests holds
     (atol 1e-2, near-ties within 2 atol; its header says why);
  2. placement: the Q4_K_M-like file under 9 policies (the reference engine;
     all on GPU; weights on disk; everything on disk with CPU attention;
     weights split over three tiers; cache and activations on the CPU with CPU
     attention; two GPU batches; the 4-bit (FlexGen) cache beside GGUF
     weights, on the GPU and on disk with CPU attention): logits bitwise equal
     to the reference engine's (to the 4-bit-cache reference for those);
  3. bytes: the run's "weight bytes" line counts exactly the file's bytes for
     every matrix (its ggml blocks) plus 2 bytes per value of the F32 norms
     (held fp16), and the tier store's files are those tensors, each padded to
     4096 bytes, plus a header page;
  4. with --llamacpp: llama.cpp (node-llama-cpp) decodes the same files
     greedily; agreement with the engine counted per format, a divergence
     accepted only at a near-tie (llama.cpp's top-2 log-probabilities within
     TIE of each other). llama.cpp is a loose oracle here: its CPU matmuls
     quantize the activations to 8 bits first (q8_0 / q8_K), so its logits
     move by 0.1-0.5 (log-probability) where the reference is exact; TIE = 1.0
     covers twice the largest such move measured on these models.
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
import make_llama_checkpoint as mlc  # noqa: E402

flexgen, work, ggufpy = sys.argv[1], sys.argv[2], sys.argv[3]
lcpp = sys.argv[sys.argv.index("--llamacpp") + 1] if "--llamacpp" in sys.argv else None
sys.path.insert(0, ggufpy)
import gguf  # noqa: E402

FORMATS = ["Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "MXFP4", "q4_k_m"]
PROMPTS = [[1, 10, 20, 30, 40, 50, 60], [1, 7], [1, 99, 98, 97, 96, 95, 94, 93, 92, 91, 90, 89], [1, 5, 6, 7]]
GEN = 8
TIE = 1.0
fails = []


def check(name, ok, detail):
    print("%s %s: %s" % ("ok  " if ok else "FAIL", name, detail))
    if not ok:
        fails.append(name)


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


def numerics(files):
    for mix, (g, twin) in files.items():
        lg, toks, err = run(g, "ref-" + mix)
        if lg is None:
            check("numerics_" + mix, False, err.strip().splitlines()[-1])
            continue
        rl, rt = os.path.join(work, "np-%s.npy" % mix), os.path.join(work, "np-%s.json" % mix)
        subprocess.run([sys.executable, os.path.join(REF, "llama_ref.py"), "--model", twin, "--prompt-ids",
                        os.path.join(work, "p.json"), "--gen-len", str(GEN), "--out-logits", rl, "--out-tokens", rt],
                       check=True, capture_output=True)
        c = subprocess.run([sys.executable, os.path.join(REF, "compare.py"), "--ref-logits", rl, "--ref-tokens", rt,
                            "--jsonl", os.path.join(work, "ref-%s.jsonl" % mix), "--logits",
                            os.path.join(work, "ref-%s.npy" % mix)], capture_output=True, text=True)
        check("numerics_" + mix, c.returncode == 0, (c.stdout + c.stderr).strip().splitlines()[0])


POLICIES = [
    ("all_gpu", ["--percent", "100", "0", "100", "0", "100", "0"]),
    ("weights_disk", ["--percent", "0", "0", "100", "0", "100", "0"]),
    ("all_disk_cpu_attn", ["--percent", "0", "0", "0", "0", "0", "0", "--cpu-cache-compute"]),
    ("weights_3_tiers", ["--percent", "30", "40", "100", "0", "100", "0"]),
    ("cpu_cache_attn", ["--percent", "50", "50", "0", "100", "0", "100", "--cpu-cache-compute"]),
    ("two_batches", ["--percent", "0", "100", "0", "100", "0", "100", "--num-gpu-batches", "2"]),
]
POLICIES_Q4C = [
    ("q4cache_gpu", ["--percent", "100", "0", "100", "0", "100", "0", "--compress-cache"]),
    ("q4cache_disk_cpu_attn", ["--percent", "0", "0", "0", "0", "0", "0", "--compress-cache", "--cpu-cache-compute"]),
]


def placement(g):
    base = run(g, "pl-ref")
    baseq = run(g, "pl-refq4c", "--engine", "reference", "--compress-cache")
    for name, args, ref in [(n, a, base) for n, a in POLICIES] + [(n, a, baseq) for n, a in POLICIES_Q4C]:
        lg, toks, err = run(g, "pl-" + name, "--device", "host", *args)
        if lg is None or ref[0] is None:
            check("placement_" + name, False, (err if lg is None else ref[2]).strip().splitlines()[-1])
            continue
        same = lg.tobytes() == ref[0].tobytes() and toks == ref[1]
        check("placement_" + name, same, "bitwise equal to the reference engine" if same
              else "differs by %.3g" % float(np.abs(lg - ref[0]).max()))
        if name == "weights_3_tiers":
            weight_bytes(g, err, name)


def file_bytes(g):
    """(matrix bytes as stored, 1-D values, per-tensor stored sizes) from gguf-py's reader."""
    r = gguf.GGUFReader(g)
    mats, vec, sizes = 0, 0, []
    for t in r.tensors:
        if len(t.shape) == 1:
            vec += int(t.n_elements)
            sizes.append(2 * int(t.n_elements))
        else:
            mats += int(t.n_bytes)
            sizes.append(int(t.n_bytes))
    return mats, vec, sizes


def weight_bytes(g, log, name):
    m = re.search(r"weight bytes gpu/cpu/disk: (\d+)/(\d+)/(\d+) \(([^)]*)\)", log)
    if not m:
        check("bytes_report", False, "no 'weight bytes' line in the run's log")
        return
    held = sum(int(m.group(i)) for i in (1, 2, 3))
    mats, vec, sizes = file_bytes(g)
    want = mats + 2 * vec
    check("bytes_per_tier", held == want, "gpu %s + cpu %s + disk %s = %d bytes; the file's matrices %d + 2 x %d "
          "norm values = %d (%s)" % (m.group(1), m.group(2), m.group(3), held, mats, vec, want, m.group(4)))
    store = [os.path.join(dp, f) for dp, _, fs in os.walk(os.path.join(work, "off-pl-" + name)) for f in fs
             if f.endswith(".bin")]
    on_disk = sum(os.path.getsize(f) for f in store)
    padded = sum((s + 4095) // 4096 * 4096 for s in sizes) + 4096 * len(store)
    check("store_bytes", on_disk == padded, "tier store %d bytes in %d files = tensors padded to 4096 + one header "
          "page each (%d)" % (on_disk, len(store), padded))


def llamacpp(files, refs):
    sys.path.insert(0, REF)
    import llamacpp_check as lc
    total = agree = ties = 0
    gaps = []
    for mix, (g, _) in files.items():
        _, out = lc.run_llamacpp(lcpp, g, PROMPTS, 512, GEN, "f16", work)
        ref = refs.get(mix)
        if ref is None:
            continue
        bad = []
        for p, (ours, theirs) in enumerate(zip(ref, out["tokens"])):
            for s in range(GEN):
                total += 1
                if ours[s] == theirs[s]:
                    agree += 1
                    continue
                id1, p1, id2, p2 = out["top2"][p][s]
                gap = float(np.log(p1 / p2)) if p2 > 0 else float("inf")
                ties += 1
                gaps.append(gap)
                if gap > TIE:
                    bad.append("prompt %d step %d: ours %d, llama.cpp %d (its top-2 log gap %.3f)" %
                               (p, s, ours[s], theirs[s], gap))
                break
        check("llamacpp_" + mix, not bad, "; ".join(bad) if bad else "greedy tokens agree but at near-ties")
    print("     llama.cpp: %d of %d steps compared agree; %d divergence(s) at top-2 log gaps %s (near-tie: <= %.1f)"
          % (agree, total, ties, ", ".join("%.3f" % g for g in sorted(gaps)), TIE))


def main():
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    with open(os.path.join(work, "p.json"), "w") as f:
        json.dump(PROMPTS, f)
    ck = os.path.join(work, "ck")
    mlc.write(mlc.parse_args(["--out", ck, "--hidden", "256", "--heads", "4", "--kv-heads", "2", "--ffn", "512",
                              "--vocab", "512", "--layers", "3", "--std", "0.05", "--seed", "33"]))
    files = {}
    for i, mix in enumerate(FORMATS):
        g, twin = os.path.join(work, mix + ".gguf"), os.path.join(work, "twin-" + mix)
        used = gq.build(ck, mix, g, twin, 100 + i, gguf)
        print("     %s: %s" % (mix, ", ".join("%s %d" % kv for kv in sorted(used.items()))))
        files[mix] = (g, twin)
    numerics(files)
    placement(files["q4_k_m"][0])
    if lcpp:
        refs = {}
        for mix in files:
            p = os.path.join(work, "ref-%s.jsonl" % mix)
            if os.path.exists(p):
                with open(p) as f:
                    refs[mix] = [json.loads(x)["output_ids"] for x in f if x.strip()]
        llamacpp(files, refs)
    print("gguf_quant:", "FAILED: " + ", ".join(fails) if fails else "all good")
    return 1 if fails else 0


sys.exit(main())
