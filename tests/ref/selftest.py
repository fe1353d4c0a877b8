#!/usr/bin/python3
"""Self-test of the numpy oracle itself (no C engine involved):
  1. checkpoints in every format/dtype/naming load back to the same values;
  2. safetensors files are well formed (header padded to 8, contiguous offsets);
  3. the oracle on tiny models (pre-LN; post-LN with project_in/out) gives
     finite logits, non-trivial greedy margins, finite pure-padding rows, and
     KV-cache decoding agrees with full recomputation within 1e-3.
Usage: selftest.py [--keep DIR]   (exit 0 = all good)
"""
import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_checkpoint as mc  # noqa: E402
import opt_ref  # noqa: E402

TINY = ["--layers", "2", "--hidden", "64", "--heads", "4", "--ffn", "256",
        "--vocab", "1000", "--max-pos", "128", "--seed", "7"]


def make(out, *extra):
    subprocess.run([sys.executable, os.path.join(HERE, "make_checkpoint.py"),
                    "--out", out, *TINY, *extra], check=True, stdout=subprocess.DEVNULL)


def check_st_layout(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert n % 8 == 0 and 8 + n <= len(raw), path
    hdr = json.loads(raw[8:8 + n])
    assert hdr.pop("__metadata__") == {"format": "pt"}
    spans = sorted(v["data_offsets"] for v in hdr.values())
    pos = 0
    for b, e in spans:
        assert b == pos and e > b, (path, b, e)
        pos = e
    assert pos == len(raw) - 8 - n, path


def expected(post_ln=False, proj=0, bf16=False):
    class A:  # mimic argparse namespace for make_config
        layers, hidden, heads, ffn, vocab, max_pos = 2, 64, 4, 256, 1000, 128
    A.post_ln, A.proj_dim = post_ln, proj
    cfg = mc.make_config(A)
    return mc.make_tensors(cfg, 7, 0.1, bf16_exact=bf16)


def test_formats(tmp):
    ref = expected()
    variants = {
        "st": (), "sharded": ("--format", "sharded", "--shards", "3"),
        "npy": ("--format", "npy"), "f32": ("--dtype", "f32"),
        "hub": ("--hub-names",), "sharded_hub_f32": ("--format", "sharded", "--hub-names", "--dtype", "f32"),
    }
    for name, extra in variants.items():
        d = os.path.join(tmp, name)
        make(d, *extra)
        for fn in os.listdir(d):
            if fn.endswith(".safetensors"):
                check_st_layout(os.path.join(d, fn))
        cfg, t = mc.load_checkpoint(d)
        lm = t.pop("lm_head.weight", None)
        assert set(t) == set(ref), (name, set(t) ^ set(ref))
        for k in ref:
            assert t[k].shape == ref[k].shape and np.array_equal(t[k], ref[k]), (name, k)
        if "hub" in name:
            assert lm is None, name
        else:
            assert np.array_equal(lm, ref["decoder.embed_tokens.weight"]), name
        if name == "sharded":
            assert len([f for f in os.listdir(d) if f.endswith(".safetensors")]) == 3
    # bf16: values exact in bf16 and fp16, file holds exactly them
    d = os.path.join(tmp, "bf16")
    make(d, "--dtype", "bf16")
    check_st_layout(os.path.join(d, "model.safetensors"))
    _, t = mc.load_checkpoint(d)
    refb = expected(bf16=True)
    for k in refb:
        assert np.array_equal(t[k], refb[k]), k
        assert np.array_equal(t[k], opt_ref.r16(t[k])), k
    # post-LN + projection model: no final LN, project_in/out present
    d = os.path.join(tmp, "postln")
    make(d, "--post-ln", "--proj-dim", "32")
    _, t = mc.load_checkpoint(d)
    assert "decoder.final_layer_norm.weight" not in t
    assert t["decoder.project_in.weight"].shape == (64, 32)
    assert t["decoder.project_out.weight"].shape == (32, 64)
    assert t["decoder.embed_tokens.weight"].shape == (1000, 32)
    # synthetic tokenizer files: ids 0..V-1 exactly, merges only use known pieces
    d = os.path.join(tmp, "vocab")
    make(d, "--synth-vocab")
    v = json.load(open(os.path.join(d, "vocab.json"), encoding="utf-8"))
    assert sorted(v.values()) == list(range(1000)) and v["<pad>"] == 1 and v["</s>"] == 2
    lines = open(os.path.join(d, "merges.txt"), encoding="utf-8").read().splitlines()
    assert lines[0].startswith("#version")
    known = {k for k, i in v.items() if i < 260}
    for ln in lines[1:]:
        x, y = ln.split(" ")
        assert x in known and y in known and v[x + y] >= 260, ln
        known.add(x + y)
    assert len(known) == 1000
    print("formats: OK (st, sharded, npy, f32, hub names, bf16, post-LN/proj, synth vocab)")


def naive_logits(t, cfg, prompt, gen):
    """Slow, loop-per-position-and-head OPT forward of ONE unpadded sequence
    (prompt + gen tokens), straight from the HF formulas, no fp16 rounding.
    Returns the logits of positions len(prompt)-1 ... end."""
    H, A = cfg["hidden_size"], cfg["num_attention_heads"]
    hd, pre = H // A, cfg["do_layer_norm_before"]
    g = lambda n: t["decoder." + n]  # noqa: E731

    def ln(x, n):
        return (x - x.mean()) / np.sqrt(x.var() + 1e-5) * g(n + ".weight") + g(n + ".bias")

    def lin(x, n):
        return g(n + ".weight") @ x + g(n + ".bias")

    seq = list(prompt) + list(gen)
    hs = []
    for i, tok in enumerate(seq):
        e = g("embed_tokens.weight")[tok]
        if "decoder.project_in.weight" in t:
            e = g("project_in.weight") @ e
        hs.append(e + g("embed_positions.weight")[i + 2])
    hs = np.array(hs)
    for li in range(cfg["num_hidden_layers"]):
        p = "layers.%d." % li
        x = np.array([ln(h, p + "self_attn_layer_norm") for h in hs]) if pre else hs
        q = np.array([lin(v, p + "self_attn.q_proj") for v in x]) * hd ** -0.5
        k = np.array([lin(v, p + "self_attn.k_proj") for v in x])
        v_ = np.array([lin(v, p + "self_attn.v_proj") for v in x])
        ctx = np.zeros_like(hs)
        for i in range(len(seq)):
            for a in range(A):
                sl = slice(a * hd, (a + 1) * hd)
                sc = np.array([q[i, sl] @ k[j, sl] for j in range(i + 1)])
                w = np.exp(sc - sc.max())
                ctx[i, sl] = (w / w.sum()) @ v_[: i + 1, sl]
        hs = hs + np.array([lin(c, p + "self_attn.out_proj") for c in ctx])
        if not pre:
            hs = np.array([ln(h, p + "self_attn_layer_norm") for h in hs])
        x = np.array([ln(h, p + "final_layer_norm") for h in hs]) if pre else hs
        y = np.array([lin(np.maximum(lin(v, p + "fc1"), 0), p + "fc2") for v in x])
        hs = hs + y
        if not pre:
            hs = np.array([ln(h, p + "final_layer_norm") for h in hs])
    out = []
    for h in hs[len(prompt) - 1:]:
        if pre:
            h = ln(h, "final_layer_norm")
        if "decoder.project_out.weight" in t:
            h = g("project_out.weight") @ h
        out.append(g("embed_tokens.weight") @ h)
    return np.array(out)


def test_oracle(tmp, model_dir, label):
    m = opt_ref.load_model(model_dir)
    rng = np.random.default_rng(3)
    prompts = [rng.integers(3, 1000, n).tolist() for n in (1, 5, 17, 30, 9)]
    G = 12
    logits, toks = opt_ref.generate(m, prompts, G)
    assert logits.shape == (5, G, 1000) and np.isfinite(logits).all()
    marg = opt_ref.margins(logits)
    med = float(np.median(marg))
    assert med > 0.05, "greedy margins all near ties: %g" % med
    # pure-padding rows: cut the padded batch where prompt 0 is still padding,
    # so the last (reported) row of that prompt attends to nothing real.
    ids, mask = opt_ref.left_pad(m, prompts)
    k = 10
    caches = opt_ref.new_caches(m, len(prompts), k)
    lg = opt_ref.forward(m, ids[:, :k], opt_ref.hf_positions(mask[:, :k]), caches, 0, mask[:, :k])
    assert mask[0, :k].sum() == 0 and np.isfinite(lg).all()
    assert all(np.isfinite(c[0]).all() and np.isfinite(c[1]).all() for c in caches)
    # KV cache vs full recomputation. Without the fp16 rounding points the two
    # differ only by float32 summation order (~1e-6); with them, a few fp16
    # roundings flip by 1 ulp (2^-11 relative) and the logits move by ~1e-3.
    opt_ref.ROUND_FP16 = False
    try:
        lx, tx = opt_ref.generate(m, prompts, G)
        d0 = float(np.abs(opt_ref.logits_nocache(m, prompts, tx) - lx).max())
    finally:
        opt_ref.ROUND_FP16 = True
    assert d0 <= 1e-4, "cache vs no-cache without fp16 rounding: %g" % d0
    # vectorised (padded batch, KV cache) vs naive loops, both unrounded
    cfg, t = mc.load_checkpoint(model_dir)
    for i in (1, 3):
        nl = naive_logits(t, cfg, prompts[i], tx[i, :G - 1])
        dn = float(np.abs(nl - lx[i]).max())
        assert dn <= 1e-4, "vectorised vs naive, prompt %d: %g" % (i, dn)
    d = float(np.abs(opt_ref.logits_nocache(m, prompts, toks) - logits).max())
    assert d <= 5e-3, "cache vs no-cache: %g" % d
    # batching: a prompt alone gives the same tokens as inside the padded batch
    for i in (0, 3):
        l1, t1 = opt_ref.generate(m, [prompts[i]], G)
        assert np.abs(l1[0] - logits[i]).max() <= 5e-3 and (t1[0] == toks[i]).all()
    # CLI round trip
    pf = os.path.join(tmp, "prompts.json")
    json.dump(prompts, open(pf, "w"))
    lf, tf = os.path.join(tmp, label + "_logits.npy"), os.path.join(tmp, label + "_tokens.json")
    subprocess.run([sys.executable, os.path.join(HERE, "opt_ref.py"), "--model", model_dir,
                    "--prompt-ids", pf, "--gen-len", str(G), "--out-logits", lf,
                    "--out-tokens", tf], check=True, stdout=subprocess.DEVNULL)
    assert np.array_equal(np.load(lf), logits)
    assert json.load(open(tf))["tokens"] == toks.tolist()
    print("oracle %-7s: OK  median top-2 margin %.4f  min %.2e  cache/no-cache %.2e (unrounded %.1e)"
          % (label, med, float(marg.min()), d, d0))
    return med


def test_compare(tmp):
    """compare.py accepts the oracle against itself and small noise; rejects
    big logit errors and non-tie token flips; accepts near-tie flips."""
    rng = np.random.default_rng(0)
    N, G, V = 3, 6, 50
    rl = rng.standard_normal((N, G, V)).astype(np.float32)
    rt = rl.argmax(-1)
    rl[1, 2, 7] = rl[1, 2].max() + 0.004       # a near tie at prompt 1 step 2
    rl[1, 2, 8] = rl[1, 2, 7] - 0.004
    rt[1, 2] = 7
    np.save(os.path.join(tmp, "r.npy"), rl)
    json.dump({"tokens": rt.tolist()}, open(os.path.join(tmp, "r.json"), "w"))

    def run(c_logits, c_tokens):
        np.save(os.path.join(tmp, "c.npy"), c_logits)
        with open(os.path.join(tmp, "c.jsonl"), "w") as f:
            for row in c_tokens:
                f.write(json.dumps({"id": 0, "output_ids": [int(x) for x in row]}) + "\n")
        return subprocess.run([sys.executable, os.path.join(HERE, "compare.py"),
                               "--ref-logits", os.path.join(tmp, "r.npy"),
                               "--ref-tokens", os.path.join(tmp, "r.json"),
                               "--logits", os.path.join(tmp, "c.npy"),
                               "--jsonl", os.path.join(tmp, "c.jsonl"), "--atol", "0.01"],
                              capture_output=True, text=True).returncode

    assert run(rl, rt) == 0
    assert run(rl + 0.005, rt) == 0
    bad = rl.copy()
    bad[2, 4, 3] += 0.05
    assert run(bad, rt) == 1
    flip = rt.copy()
    flip[1, 2] = 8                                # near-tie flip, rest differs after it
    flip[1, 3:] = (flip[1, 3:] + 1) % V
    assert run(rl, flip) == 0
    flip = rt.copy()
    flip[0, 1] = (rt[0, 1] + 1) % V               # clear flip
    assert run(rl, flip) == 1
    assert run(rl, rt[:, :-1]) == 1               # too few tokens
    print("compare: OK (accepts noise and near ties, rejects errors)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keep", default=None)
    a = ap.parse_args()
    tmp = a.keep or tempfile.mkdtemp(prefix="fg_ref_")
    os.makedirs(tmp, exist_ok=True)
    test_formats(tmp)
    test_compare(tmp)
    test_oracle(tmp, os.path.join(tmp, "st"), "pre-LN")
    test_oracle(tmp, os.path.join(tmp, "postln"), "post-LN")
    # formats give identical oracle outputs
    p = [[5, 6, 7], [9]]
    l1, _ = opt_ref.generate(opt_ref.load_model(os.path.join(tmp, "st")), p, 4)
    l2, _ = opt_ref.generate(opt_ref.load_model(os.path.join(tmp, "npy")), p, 4)
    assert np.array_equal(l1, l2)
    print("selftest: all OK")
    if not a.keep:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
