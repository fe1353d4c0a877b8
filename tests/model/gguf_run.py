#!/usr/bin/python3
"""--model FILE.gguf: llama.cpp's files run as their safetensors twins do.

  gguf_run.py FLEXGEN WORKDIR

  * The same weights as a Hugging Face directory and as GGUF (F16, F32,
    BF16; written by tests/ref/gguf_write.py as llama.cpp's converter does:
    architecture llama with q/k rows permuted, qwen2 unpermuted, norms F32,
    llama3 rope scaling as rope_freqs.weight) give bitwise identical logits
    and tokens on the reference engine: MHA, GQA 16:2, llama3 scaling, Qwen2
    (q/k/v biases, tied), a tied head with linear scaling, Qwen3 (architecture
    qwen3: attn_q_norm, attn_k_norm, head_dim from attention.key_length), MQA.
  * Q8_0 runs (its numerics are gguf_quant.py's); how far Q8_0 moves the
    logits from the unquantized model (reported, not judged).
  * The offloading engine on a GGUF (weights, cache and activations on
    disk, CPU attention) equals the reference engine bit for bit.
  * Refused naming the file and what: an architecture the engine does not
    read (general.architecture), rope_freqs.weight that is not Llama 3's
    scaling with its published factors.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import gguf_write as gw  # noqa: E402
import make_checkpoint as mc  # noqa: E402
import make_llama_checkpoint as mlc  # noqa: E402

flexgen, work = sys.argv[1], sys.argv[2]
fails = []
PROMPTS = "[[1, 10, 20, 30, 40, 50, 60], [1, 7], [1, 99, 98, 97, 96, 95, 94, 93, 92, 91, 90, 89], [1, 5, 6, 7]]"


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
                        "--offload-dir", os.path.join(work, "offload"), *(extra or ("--engine", "reference"))],
                       capture_output=True, text=True)
    if p.returncode:
        return None, None, p.stderr
    with open(out) as f:
        toks = [json.loads(x)["output_ids"] for x in f if x.strip()]
    return np.load(lg), toks, p.stderr


def make(name, *args):
    d = os.path.join(work, name)
    mlc.write(mlc.parse_args(["--out", d, *args]))
    return d


def same(name, a, b, what):
    la, ta, ea = a
    lb, tb, eb = b
    if la is None or lb is None:
        check(name, False, "run failed: %s" % (ea if la is None else eb).strip().splitlines()[-1])
        return
    check(name, la.tobytes() == lb.tobytes() and ta == tb, what + (" bitwise equal" if la.tobytes() == lb.tobytes()
          else " differ by %.3g" % float(np.abs(la - lb).max())))


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
with open(os.path.join(work, "p.json"), "w") as f:
    f.write(PROMPTS)

cases = [("mha", ["--case", "mha"], "f16"), ("gqa", ["--case", "gqa8", "--rope-scaling", "none"], "f16"),
         ("llama3", ["--case", "llama3", "--rope-orig", "8192"], "f16"), ("qwen2", ["--case", "qwen2"], "f16"),
         ("tied_linear", ["--case", "tied"], "f16"), ("qwen3", ["--case", "qwen3"], "f16"), ("mqa_f32", ["--case", "mqa"], "f32"),
         ("gqa_bf16", ["--case", "gqa8", "--rope-scaling", "none", "--dtype", "bf16"], "bf16")]
for name, args, wtype in cases:
    d = make(name, *args)
    g = d + ".gguf"
    gw.from_checkpoint(d, g, wtype)
    same("gguf_%s_%s" % (name, wtype), run(d, name + "-st"), run(g, name + "-gguf"),
         "safetensors and GGUF %s:" % wtype.upper())

# Q8_0 is held as its blocks now and computed on fp32 d * q (tests/model/gguf_quant.py checks every
# ggml format against the numpy reference on gguf-py's dequantized weights); here how far Q8_0 moves
# the logits from the unquantized model (reported, not judged)
d = make("q8", "--case", "gqa8", "--rope-scaling", "none")
g = d + "-q8_0.gguf"
gw.from_checkpoint(d, g, "q8_0")
q8 = run(g, "q8-gguf")
check("gguf_q8_0_runs", q8[0] is not None, "GGUF Q8_0 runs" if q8[0] is not None else q8[2].strip())
full = run(d, "q8-full")
if q8[0] is not None and full[0] is not None:
    print("     Q8_0 against the unquantized model: first step max |logit diff| %.3g (logits' std %.3g), first "
          "tokens equal in %d of %d prompts" % (float(np.abs(q8[0][:, 0] - full[0][:, 0]).max()),
                                              float(full[0][:, 0].std()),
                                              sum(p[0] == r[0] for p, r in zip(q8[1], full[1])), len(full[1])))

# the offloading engine reads a GGUF (through the tier store on disk)
g = os.path.join(work, "gqa.gguf")
same("gguf_offloaded", run(g, "gqa-gguf"), run(g, "gqa-flex", "--device", "host", "--percent", "0", "0", "0", "0",
                                               "0", "0", "--num-gpu-batches", "2"),
     "reference and offloading engine (all on disk) on GGUF:")
same("gguf_offloaded_cpu_attention", run(g, "gqa-gguf"),
     run(g, "gqa-flex2", "--device", "host", "--percent", "0", "100", "0", "100", "0", "100", "--cpu-cache-compute"), "reference and offloading engine (CPU, CPU attention) on GGUF:")

# refusals
d = os.path.join(work, "mha")
g = os.path.join(work, "falcon.gguf")
gw.from_checkpoint(d, g, "f16", "llama", "falcon")
_, _, err = run(g, "falcon")
check("gguf_refuse_arch", "falcon.gguf" in err and "general.architecture" in err and "falcon" in err,
      err.strip().splitlines()[-1])
d = make("l3orig64", "--case", "llama3")
g = d + ".gguf"
gw.from_checkpoint(d, g, "f16")
_, _, err = run(g, "l3orig64")
check("gguf_refuse_rope_freqs", "l3orig64.gguf" in err and "rope_freqs.weight" in err, err.strip().splitlines()[-1])

print("gguf_run: %d failed" % len(fails))
if not fails:
    shutil.rmtree(work)
sys.exit(1 if fails else 0)
