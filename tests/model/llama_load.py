#!/usr/bin/python3
"""Loading a Llama-family directory: what it refuses and what it reports.

  llama_load.py FLEXGEN WORKDIR

  * A BF16 checkpoint with values fp16 cannot hold (one past 65504, one
    below its smallest subnormal) runs, and the log names the tensor and
    counts both (stored as inf and as 0), never clamped silently;
  * config.json refusals exit 2 naming the file and the field: an unknown
    model_type, rope_scaling yarn and dynamic, partial rotary, a hidden_act
    other than silu, Qwen2's and Qwen3's use_sliding_window, Qwen3's sliding
    layer_types, a tensor of the wrong shape (K/V are num_key_value_heads x
    head_dim rows; Qwen3's head_dim defaults to 128), a missing tensor (a
    Qwen3 k_norm; one expert's matrix, named by its own name), an expert
    number past the experts, a dense layer's names in a sparse layer (and a
    sparse one's in a dense layer), mlp_only_layers past the layers, top k
    past the experts;
  * generation_config.json's EOS list ends generation at any of its ids;
  * every --dummy name of the family has its published parameter count
    (its shapes are the real ones), and flexgen policy's arithmetic reads the
    description: a KV cache of the kv heads only, decode FLOPs of 2 per
    parameter computed with (for the mixtures of experts, the activated ones
    their model cards publish); the three smallest run their first layer.
"""
import json
import os
import shutil
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref"))
import make_checkpoint as mc  # noqa: E402
import make_llama_checkpoint as mlc  # noqa: E402

flexgen, work = sys.argv[1], sys.argv[2]
fails = []


def run(model, *extra, gen=3, prompts="[[1, 5, 6, 7], [1, 9]]", dummy=False):
    with open(os.path.join(work, "p.json"), "w") as f:
        f.write(prompts)
    src = ["--dummy", model] if dummy else ["--model", model]
    cmd = [flexgen, "run", "--engine", "reference", *src, "--prompt-ids", os.path.join(work, "p.json"),
           "--gen-len", str(gen), "--out", os.path.join(work, "o.jsonl"), *extra]
    p = subprocess.run(cmd, capture_output=True, text=True)
    return p.returncode, p.stderr


def check(name, ok, detail):
    print("%s %s: %s" % ("ok  " if ok else "FAIL", name, detail.strip().splitlines()[-1] if detail.strip() else ""))
    if not ok:
        fails.append(name)


def make(name, *args):
    d = os.path.join(work, name)
    shutil.rmtree(d, ignore_errors=True)
    mlc.write(mlc.parse_args(["--out", d, *args]))
    return d


def edit_config(d, **kv):
    p = os.path.join(d, "config.json")
    with open(p) as f:
        c = json.load(f)
    for k, v in kv.items():
        if v is None:
            c.pop(k, None)
        else:
            c[k] = v
    with open(p, "w") as f:
        json.dump(c, f)


shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)

# BF16 values fp16 cannot hold: counted in the log
d = make("bf16", "--case", "mha", "--dtype", "bf16")
st = os.path.join(d, "model.safetensors")
t = mc.read_safetensors(st)
w = t["model.layers.0.mlp.down_proj.weight"]
w[0, 0], w[0, 1], w[1, 0] = 1.0e6, 1.0e-30, -2.0e5
mc.write_safetensors(st, list(t.items()), "BF16")
rc, err = run(d)
check("bf16_overflow_reported", rc == 0 and "layers.0.mlp.down_proj.weight" in err and "2 of" in err and
      "overflow fp16" in err and "1 underflow" in err, err)

refusals = [
    ("model_type", dict(model_type="gemma"), "model_type"),
    ("rope_yarn", dict(rope_scaling={"rope_type": "yarn", "factor": 4.0}), "rope_scaling.rope_type"),
    ("rope_dynamic", dict(rope_scaling={"type": "dynamic", "factor": 2.0}), "rope_scaling.rope_type"),
    ("partial_rotary", dict(partial_rotary_factor=0.5), "partial_rotary_factor"),
    ("hidden_act", dict(hidden_act="gelu"), "hidden_act"),
    ("kv_heads_not_divisor", dict(num_key_value_heads=3), "num_key_value_heads"),
    ("llama3_missing_field", dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}), "low_freq_factor"),
]
base = make("base", "--case", "gqa8")
for name, kv, field in refusals:
    d = os.path.join(work, "r_" + name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(base, d)
    edit_config(d, **kv)
    rc, err = run(d)
    check("refuse_" + name, rc == 2 and "config.json" in err and field in err, err)
q = make("qwen_window", "--case", "qwen2")
edit_config(q, use_sliding_window=True)
rc, err = run(q)
check("refuse_qwen2_sliding_window", rc == 2 and "use_sliding_window" in err, err)
# Qwen3: the same window refusals, per-layer sliding layer_types too; head_dim
# absent means Qwen3Config's 128, so a head_dim-16 checkpoint no longer fits
q3 = make("qwen3_base", "--case", "qwen3")
for name, kv, field in (("qwen3_sliding_window", dict(use_sliding_window=True), "use_sliding_window"),
                        ("qwen3_layer_types", dict(layer_types=["full_attention", "sliding_attention"]),
                         "layer_types[1]"),
                        ("qwen3_default_head_dim", dict(head_dim=None), "q_proj.weight")):
    d = os.path.join(work, "r_" + name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(q3, d)
    edit_config(d, **kv)
    rc, err = run(d)
    check("refuse_" + name, rc == 2 and field in err, err)
d = os.path.join(work, "qwen3_no_norm")
shutil.copytree(q3, d)
st = os.path.join(d, "model.safetensors")
t = mc.read_safetensors(st)
del t["model.layers.1.self_attn.k_norm.weight"]
mc.write_safetensors(st, list(t.items()), "F16")
rc, err = run(d)
check("refuse_qwen3_missing_k_norm", rc == 2 and "'layers.1.self_attn.k_norm.weight' (shape [16])" in err, err)
# experts: one expert's matrix missing is named by its own name and shape;
# a dense layer's names in a sparse layer, an expert number past E, a
# mlp_only_layers entry past the layers, shared experts: refused
mx = make("mixtral_base", "--case", "mixtral")
q3m = make("qwen3_moe_base", "--case", "qwen3-moe")
for name, base_dir, tensor_edit, kv, field in (
        ("expert_missing", mx, ("del", "model.layers.1.block_sparse_moe.experts.5.w2.weight"), {},
         "'layers.1.block_sparse_moe.experts.5.w2.weight' (shape [64, 96])"),
        ("expert_past_E", q3m, ("copy", "model.layers.0.mlp.experts.0.up_proj.weight",
                                "model.layers.0.mlp.experts.32.up_proj.weight"), {}, "experts.32.up_proj"),
        ("dense_names_in_sparse", q3m, ("copy", "model.layers.1.mlp.up_proj.weight",
                                        "model.layers.0.mlp.up_proj.weight"), {}, "layers.0.mlp.up_proj.weight"),
        ("mlp_only_past_layers", q3m, None, dict(mlp_only_layers=[1, 3]), "mlp_only_layers[1]"),
        ("topk_past_E", mx, None, dict(num_experts_per_tok=9), "num_experts_per_tok"),
        ("dense_layer_as_sparse", q3m, None, dict(mlp_only_layers=[]), "layers.1.mlp.gate_proj.weight")):
    d = os.path.join(work, "r_" + name)
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(base_dir, d)
    edit_config(d, **kv)
    if tensor_edit:
        st = os.path.join(d, "model.safetensors")
        t = mc.read_safetensors(st)
        if tensor_edit[0] == "del":
            del t[tensor_edit[1]]
        else:
            t[tensor_edit[2]] = t[tensor_edit[1]]
        mc.write_safetensors(st, list(t.items()), "F16")
    rc, err = run(d)
    check("refuse_" + name, rc == 2 and field in err, err)
# K/V rows are num_key_value_heads x head_dim: a checkpoint read as MHA does not fit
d = os.path.join(work, "r_kv_shape")
shutil.copytree(base, d)
edit_config(d, num_key_value_heads=None)
rc, err = run(d)
check("refuse_kv_shape", rc == 2 and "k_proj.weight" in err and "shape" in err, err)
# a tied config without the head still runs; an untied one without lm_head.weight is refused
d = make("untied_no_head", "--case", "mha")
edit_config(d, tie_word_embeddings=True)
rc, err = run(d)
check("tied_config_ignores_lm_head", rc == 0, err or "ran")
d = make("tied", "--case", "tied")
edit_config(d, tie_word_embeddings=False)
rc, err = run(d)
check("refuse_missing_lm_head", rc == 2 and "lm_head.weight" in err and "missing" in err, err)

# generation_config.json's EOS list: generation stops at its second id
d = make("eos", "--case", "llama3")
rc, err = run(d, "--ignore-eos", gen=6, prompts="[[1, 5, 6, 7]]")
with open(os.path.join(work, "o.jsonl")) as f:
    toks = json.loads(f.readline())["output_ids"]
with open(os.path.join(d, "generation_config.json")) as f:
    g = json.load(f)
g["eos_token_id"] = [g["eos_token_id"][0] if isinstance(g["eos_token_id"], list) else g["eos_token_id"], toks[2]]
if g["eos_token_id"][0] in toks[:3]:
    g["eos_token_id"][0] = 319
with open(os.path.join(d, "generation_config.json"), "w") as f:
    json.dump(g, f)
rc, err = run(d, gen=6, prompts="[[1, 5, 6, 7]]")
with open(os.path.join(work, "o.jsonl")) as f:
    o = json.loads(f.readline())
check("generation_config_eos_list", rc == 0 and o["output_ids"] == toks[:3] and o["finish_reason"] == "stop",
      "%s stopped at %s (eos %s)" % (toks, o["output_ids"], g["eos_token_id"]))

# --dummy names: the real shapes, checked by their parameter counts as
# published (flexgen policy's arithmetic: weight bytes / 2), within 0.1%;
# the three smallest also run their first layer (tied head: llama-3.2-1b;
# q/k norms and head_dim 128 over hidden 1024 / 16 heads: qwen3-0.6b)
params = {"tinyllama-1.1b": 1100048384, "llama-3.2-1b": 1235814400, "llama-2-7b": 6738415616,
          "llama-2-13b": 13015864320, "llama-2-70b": 68976648192, "llama-3.1-8b": 8030261248,
          "llama-3.1-70b": 70553706496, "mistral-7b": 7241732096, "qwen2.5-7b": 7615616512,
          "qwen3-0.6b": 596049920, "qwen3-8b": 8190735360}
for name, want in params.items():
    p = subprocess.run([flexgen, "policy", "--dummy", name, "--prompt-len", "8", "--gen-len", "8", "--gpu-mem", "1T",
                        "--cpu-mem", "1T", "--hardware", "flexgen-t4", "--json"], capture_output=True, text=True)
    ar = json.loads(p.stdout)["arithmetic"] if p.returncode == 0 else {}
    got = ar.get("weight_bytes_total", 0) / 2
    check("dummy_shape_" + name, abs(got - want) <= 1e-3 * want, "%d parameters, published %d" % (got, want))
    # the cost model's arithmetic from the description: the cache holds the
    # kv heads only (k and v, fp16, 16 positions); a decode token costs 2
    # FLOPs per parameter computed with (the embedding lookup is none, a tied
    # head's matrix is the embedding) plus its attention, within 3%
    L, KV, d, V, H, tied = {"tinyllama-1.1b": (22, 4, 64, 32000, 2048, 0), "llama-3.2-1b": (16, 8, 64, 128256, 2048, 1),
                            "llama-2-7b": (32, 32, 128, 32000, 4096, 0), "llama-2-13b": (40, 40, 128, 32000, 5120, 0),
                            "llama-2-70b": (80, 8, 128, 32000, 8192, 0), "llama-3.1-8b": (32, 8, 128, 128256, 4096, 0),
                            "llama-3.1-70b": (80, 8, 128, 128256, 8192, 0), "mistral-7b": (32, 8, 128, 32000, 4096, 0),
                            "qwen2.5-7b": (28, 4, 128, 152064, 3584, 0), "qwen3-0.6b": (28, 8, 128, 151936, 1024, 1),
                            "qwen3-8b": (36, 8, 128, 151936, 4096, 0)}[name]
    kv_want, fl_want = 2 * L * 16 * KV * d * 2, 2 * (want - (0 if tied else V * H))
    kv, fl = ar.get("kv_cache_bytes_per_sequence", 0), ar.get("decode_flops_per_token", 0)
    check("dummy_arithmetic_" + name, kv == kv_want and fl_want < fl < 1.03 * fl_want,
          "cache %d bytes per sequence (want %d), decode %.4g FLOPs per token (%.4g in its matrices)"
          % (kv, kv_want, fl, fl_want))
# mixtures of experts: the totals and activated counts their model cards
# publish (Mixtral 8x7B: 46.7B, 12.9B active; Qwen3-30B-A3B: 30.5B, 3.3B;
# Qwen3-235B-A22B: 235B, 22B), each to the precision it is given in (half a
# unit of its last digit), and the cache of the kv heads only. The activated
# count is a decode token's FLOPs / 2 (the router and k experts a layer:
# fg_config_layer_flops) plus the embedding it looks up, within 3% (that
# includes the attention over 16 positions) plus that precision.
moe = {"mixtral-8x7b": (46.7e9, 0.05e9, 12.9e9, 0.05e9, 32, 8, 128, 32000, 4096),
       "qwen3-30b-a3b": (30.5e9, 0.05e9, 3.3e9, 0.05e9, 48, 4, 128, 151936, 2048),
       "qwen3-235b-a22b": (235e9, 0.5e9, 22e9, 0.5e9, 94, 4, 128, 151936, 4096)}
for name, (total, tt, active, ta, L, KV, d, V, H) in moe.items():
    p = subprocess.run([flexgen, "policy", "--dummy", name, "--prompt-len", "8", "--gen-len", "8", "--gpu-mem", "1T",
                        "--cpu-mem", "1T", "--hardware", "flexgen-t4", "--json"], capture_output=True, text=True)
    ar = json.loads(p.stdout)["arithmetic"] if p.returncode == 0 else {}
    got, act = ar.get("weight_bytes_total", 0) / 2, ar.get("decode_flops_per_token", 0) / 2 + V * H
    check("dummy_shape_" + name, abs(got - total) <= tt and ar.get("kv_cache_bytes_per_sequence") == 2 * L * 16 * KV * d * 2,
          "%d parameters (published %.4g), cache %s bytes per sequence" % (got, total, ar.get("kv_cache_bytes_per_sequence")))
    check("dummy_active_" + name, active - ta <= act <= 1.03 * (active + ta),
          "%.4g activated parameters (published %.3g)" % (act, active))
for name in ("tinyllama-1.1b", "llama-3.2-1b", "qwen3-0.6b"):
    rc, err = run(name + ":1", dummy=True, gen=2)
    check("dummy_run_" + name, rc == 0 and "model: " + name in err, [x for x in err.splitlines() if "model:" in x][0]
          if "model:" in err else err)

print("llama_load: %d failed" % len(fails))
if not fails:
    shutil.rmtree(work)
sys.exit(1 if fails else 0)
