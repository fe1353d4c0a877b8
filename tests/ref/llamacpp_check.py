#!/usr/bin/python3
"""The numpy Llama oracle (llama_ref.py, --fp32 reading) against llama.cpp,
an implementation written by other people: a random checkpoint from
make_llama_checkpoint.py, converted by gguf_write.py, decoded greedily by
both on the same prompts (the oracle batched with left padding, llama.cpp one
unpadded sequence at a time).

  llamacpp_check.py --case NAME --work DIR [--type f32|f16|bf16|q8_0] [--kv f32|f16]
      [--vocab llama|gpt2] [--prompts 16] [--gen-len 32] [--atol A] [--tie T] [--head-std S]
      [--embed-std S] [--seed N] [--route-tol R]

Checks, per prompt:
  * step 0: every token's log-probability (log-softmax of the logits; llama.cpp
    reports probabilities, so logits are known up to a constant) within atol
    of the oracle's, over the tokens llama.cpp gives a log-probability above
    -50 (below that its float expf underflows); at every later step where
    the tokens so far agree, the log-probability of llama.cpp's top-1;
  * greedy tokens equal at every step, except that a prompt may diverge at a
    step where llama.cpp's own top-2 probabilities are within the near-tie
    margin (log(p1 / p2) <= tie) and the oracle's top-2 logits are as close;
    the prompt is not compared after that (the continuations differ);
  * with experts (mixtral, qwen3-moe-all: llama.cpp's qwen3moe has no dense
    layers), routing near-ties as compare.py counts them: where the
    oracle's k-th and (k+1)-th router logits came within route-tol (1e-3)
    of each other, a differing step (token or top-1 log-probability) ends
    that prompt's comparison instead of failing, the prompt is left out of
    the step-0 check, and at least 3/4 of the steps must still be compared;
  * the comparison has teeth: the oracle with a deliberate fault (rotary on
    llama.cpp's interleaved rows without undoing the Q/K permutation; and,
    where the case scales rope, the scaling left out; with experts, each
    layer's experts in reverse order, so expert e is not the stack's slice
    e) must miss llama.cpp's step-0 log-probabilities by more than 10 * atol.
It prints the agreement counts and the near-ties (steps where llama.cpp's
top-2 are within the margin, diverging or not).

Tolerances. --type f32 --kv f32 (default): llama.cpp computes in float32
throughout, as the oracle does, and only the order of summation differs
(~1e-7 relative per sum); measured step-0 differences are ~4e-6, so atol
1e-4 leaves 3x room over the worst case seen (3.3e-5, hidden 128, llama3
rope; the steps after 0 the same size). --type f16 --kv f16 (llama.cpp's
defaults and the engine's storage types): llama.cpp rounds each matmul's
input activations to fp16 (2^-11 relative) and the KV cache to fp16, where
the oracle stays float32; measured 0.016 (hidden 64) to 0.026 (hidden 128),
so atol 5e-2. A token can only flip where the two logits differ by less
than twice the largest logit error, so tie = 2 * atol.
--type bf16 and q8_0 check the file format rather than the numerics: the
oracle then runs on the weights as the file holds them (read back with
gguf_write.read_gguf, un-permuted), and llama.cpp converts each matmul's
activations to the weight's type (bf16's 8-bit mantissa; Q8_0's int8
blocks), measured 0.13 (BF16) and 0.34 to 0.55 (Q8_0) in log-probability,
so atol 1: a misread layout (scales, block order, byte order) gives random
logits, ~10 off, as the permutation fault shows.

Weights: --head-std (0.5) scales the LM head (for a tied case --embed-std,
the embedding) so logits have a spread of about sqrt(hidden) * 0.5 = 4 and
the top-1 usually stands clear; the layers keep std 0.1, so attention and the
MLP still move the residual stream far more than the embedding does.
Exit 77 (skipped) when llama.cpp (node-llama-cpp) cannot be installed or
loaded on this machine.
"""
import argparse
import json
import os
import subprocess
import sys

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")   # tiny matrices: threads only wait on a shared host
import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import gguf_write  # noqa: E402
import llama_ref  # noqa: E402
import make_llama_checkpoint as mlc  # noqa: E402
import ref_common  # noqa: E402

SKIP = 77
LP_FLOOR = -50.0
# Routing near-ties (models with experts): where the oracle's k-th and
# (k+1)-th router logits are this close, llama.cpp may route otherwise
# (compare.py's default; with F32 weights both sides' router logits agree
# to ~1e-6, so this is generous).
ROUTE_TOL = 1e-3


def fetch_llamacpp():
    r = subprocess.run([os.path.join(ROOT, "scripts", "fetch-llamacpp.sh")],
                       stdout=subprocess.PIPE, text=True)
    if r.returncode == 3:
        print("skip: node-llama-cpp cannot be installed here (see above)")
        sys.exit(SKIP)
    if r.returncode != 0:
        sys.exit("FAIL: scripts/fetch-llamacpp.sh exited %d" % r.returncode)
    return r.stdout.strip().splitlines()[-1]


def make_prompts(n, vocab, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, vocab, size=int(k)).tolist() for k in rng.integers(2, 13, size=n)]


def log_softmax(x):
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def step0_logprobs(m, prompts):
    """The oracle's first-step log-probabilities [N, V] (a fresh prefill)."""
    ids, mask = llama_ref.left_pad(m, prompts)
    caches = llama_ref.new_caches(m, ids.shape[0], ids.shape[1])
    return log_softmax(llama_ref.forward(m, ids, llama_ref.hf_positions(mask), caches, 0, mask))


def gguf_model(ck, gguf):
    """The oracle on the weights as the GGUF file holds them (BF16- or
    Q8_0-rounded), read back by gguf_write.read_gguf, un-permuted and the
    experts' stacks split."""
    cfg, _ = mlc.load_llama_checkpoint(ck)
    return llama_ref.Model(cfg, gguf_write.checkpoint_tensors(cfg, gguf))


def lp_diff(a, b, rows=None):
    """max |a - b| over the tokens llama.cpp gives a log-probability above
    LP_FLOOR, in the prompts `rows` (all by default)."""
    if rows is not None:
        a, b = a[rows], b[rows]
    keep = b > LP_FLOOR
    return float(np.abs(a - b)[keep].max()) if keep.any() else 0.0


def faults(m, cfg):
    """(name, faulty model) pairs: each must miss llama.cpp by far."""
    import copy
    out = []
    bad = copy.copy(m)
    bad.layers = [dict(L) for L in m.layers]
    for L in bad.layers:   # the reader forgot to undo the GGUF row permutation
        L["wq"] = np.ascontiguousarray(gguf_write.permute_rows(L["wq"].T, m.A).T)
        L["wk"] = np.ascontiguousarray(gguf_write.permute_rows(L["wk"].T, m.KV).T)
    out.append(("q/k rows left permuted", bad))
    if m.layers[0].get("qn") is not None:   # qwen3: the per-head q/k norms forgotten
        bad = copy.copy(m)
        bad.layers = [dict(L, qn=None, kn=None) for L in m.layers]
        out.append(("q/k norms left out", bad))
    if cfg.get("rope_scaling"):
        bad = copy.copy(m)
        plain = dict(cfg, rope_scaling=None)
        bad.inv_freq = llama_ref.rope_inv_freq(plain)
        out.append(("rope scaling left out", bad))
    if any(L["moe"] for L in m.layers):   # the stacks read in the wrong order: expert e is not slice e
        bad = copy.copy(m)
        bad.layers = [dict(L, moe=L["moe"] and dict(L["moe"], experts=L["moe"]["experts"][::-1]))
                      for L in m.layers]
        out.append(("experts in reverse order", bad))
    return out


def routed_near(route, p, s, route_tol):
    """1 if prompt p's routing up to step s came within route_tol of another
    choice (the oracle's smallest top-k router logit gap so far)."""
    return route is not None and route[p][s] < route_tol


def compare(ref_toks, ref_logits, lc, tie, route=None, route_tol=ROUTE_TOL):
    """Walk the steps; returns (agreeing prompts, near-tie divergences, near-tie
    steps, failures, steps compared, max top-1 log-prob difference, routing
    near-ties). With experts (route: the oracle's route_gaps), a step that
    fails after the routing came within route_tol of another choice is a
    routing near-tie instead (as compare.py counts them): that prompt is
    compared no further, and at least 3/4 of the steps must still be."""
    agree, diverged, near, fails, steps, dtop, routed = 0, [], 0, [], 0, 0.0, []
    for p, (rt, ct) in enumerate(zip(ref_toks, lc["tokens"])):
        ok = True
        for s, (r, c) in enumerate(zip(rt, ct)):
            steps += 1
            id1, p1, id2, p2 = lc["top2"][p][s]
            gap_lc = float(np.log(p1 / p2)) if p2 > 0 else float("inf")
            near += gap_lc <= tie
            ref_lp = log_softmax(ref_logits[p, s].astype(np.float64))
            d = abs(float(np.log(p1)) - float(ref_lp[id1]))
            if r == c and (d <= tie / 2 or not routed_near(route, p, s, route_tol)):
                dtop = max(dtop, d)
                continue
            top = np.sort(ref_logits[p, s])[-2:]
            gap_ref = float(top[1] - top[0])
            ok = False
            if r != c and gap_lc <= tie and gap_ref <= tie and r in (id1, id2):
                diverged.append((p, s, gap_lc))
            elif routed_near(route, p, s, route_tol):
                routed.append((p, s, route[p][s]))
                steps -= 1
            else:
                fails.append("prompt %d step %d: oracle %d, llama.cpp %d (llama.cpp top-2 %d %.4g, %d %.4g:"
                             " log ratio %.3g; oracle top-2 gap %.3g; near-tie margin %g)"
                             % (p, s, r, c, id1, p1, id2, p2, gap_lc, gap_ref, tie))
            break
        agree += ok
    if routed and steps < 0.75 * sum(len(t) for t in ref_toks):
        fails.append("only %d steps compared before routing near-ties" % steps)
    return agree, diverged, near, fails, steps, dtop, routed



def run_llamacpp(lib, gguf, prompts, vocab, gen_len, kv, work):
    """prompts written to WORK/prompts.json and run greedily by llama.cpp
    (llamacpp_oracle.mjs): (that file, its output). Exits SKIP where the
    oracle cannot run, fails where it errs."""
    pfile = os.path.join(work, "prompts.json")
    with open(pfile, "w") as f:
        json.dump(prompts, f)
    out = os.path.join(work, "llamacpp.json")
    r = subprocess.run(["node", os.path.join(HERE, "llamacpp_oracle.mjs"), "--lib", lib, "--model", gguf,
                        "--prompt-ids", pfile, "--gen-len", str(gen_len), "--vocab", str(vocab),
                        "--out", out, "--kv", kv])
    if r.returncode == SKIP:
        sys.exit(SKIP)
    if r.returncode != 0:
        sys.exit("FAIL: llamacpp_oracle.mjs exited %d" % r.returncode)
    with open(out) as f:
        return pfile, json.load(f)

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", required=True, choices=sorted(mlc.CASES))
    ap.add_argument("--work", required=True)
    ap.add_argument("--type", choices=["f32", "f16", "bf16", "q8_0"], default="f32")
    ap.add_argument("--kv", choices=["f32", "f16"], default="f32")
    ap.add_argument("--vocab", choices=["llama", "gpt2"], default="llama", help="the GGUF's tokenizer kind")
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--gen-len", type=int, default=32)
    ap.add_argument("--atol", type=float, default=0.0, help="default 1e-4 (f32), 5e-2 (f16), 1 (bf16, q8_0)")
    ap.add_argument("--tie", type=float, default=0.0, help="default 2 * atol")
    ap.add_argument("--head-std", type=float, default=0.5)
    ap.add_argument("--embed-std", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--route-tol", type=float, default=ROUTE_TOL)
    a = ap.parse_args()
    f16 = a.type == "f16" or a.kv == "f16"
    atol = a.atol or (1.0 if a.type in ("bf16", "q8_0") else 5e-2 if f16 else 1e-4)
    tie = a.tie or 2 * atol
    lib = fetch_llamacpp()

    os.makedirs(a.work, exist_ok=True)
    ck = os.path.join(a.work, "ckpt")
    margs = ["--out", ck, "--case", a.case, "--seed", str(a.seed), "--head-std", str(a.head_std)]
    tied = mlc.CASES[a.case].get("tied", False)
    if a.embed_std or tied:
        margs += ["--embed-std", str(a.embed_std or a.head_std)]
    cfg, _ = mlc.write(mlc.parse_args(margs))
    gguf = os.path.join(a.work, "model.gguf")
    gguf_write.from_checkpoint(ck, gguf, a.type, vocab=a.vocab)
    prompts = make_prompts(a.prompts, cfg["vocab_size"], a.seed)
    pfile, lc = run_llamacpp(lib, gguf, prompts, cfg["vocab_size"], a.gen_len, a.kv, a.work)

    llama_ref.ROUND_FP16 = False
    m = llama_ref.load_model(ck) if a.type in ("f32", "f16") else gguf_model(ck, gguf)
    logits, toks = llama_ref.generate(m, prompts, a.gen_len)
    route = llama_ref.summary(m)[1].get("route_gaps")
    lc_lp0 = np.array(lc["logprobs0"], np.float64)
    # step 0 over the prompts whose prefill routing has no near-tie
    clear = [p for p in range(len(prompts)) if not routed_near(route, p, 0, a.route_tol)]
    d0 = lp_diff(log_softmax(logits[:, 0].astype(np.float64)), lc_lp0, clear)
    fails = []
    if not d0 <= atol:
        fails.append("step 0: max |log-prob diff| %.3g > atol %g" % (d0, atol))
    for name, bad in faults(m, cfg):
        db = lp_diff(step0_logprobs(bad, prompts), lc_lp0)
        print("llamacpp_check: with the fault '%s' the oracle misses by %.3g" % (name, db))
        if not db > 10 * atol:
            fails.append("the fault '%s' moves step 0 by only %.3g (<= 10 * atol): the check has no teeth"
                         % (name, db))
    agree, diverged, near, tfails, steps, dtop, routed = compare(toks.tolist(), logits, lc, tie, route,
                                                                a.route_tol)
    fails += tfails
    print("llamacpp_check: max |log-prob diff| of llama.cpp's top-1 over the agreeing steps %.3g" % dtop)
    if not dtop <= atol:
        fails.append("a later step: |log-prob diff| of llama.cpp's top-1 %.3g > atol %g" % (dtop, atol))
    N, G = len(prompts), a.gen_len
    print("llamacpp_check: case %s, GGUF %s, KV cache %s: %d prompts x %d tokens; %d prompts agree at every step,"
          " %d diverge at a near-tie%s; %d of %d steps compared have llama.cpp's top-2 within the margin"
          " (log p1/p2 <= %g); step-0 max |log-prob diff| %.3g (atol %g); median oracle top-2 gap %.3g%s"
          % (a.case, a.type.upper(), a.kv.upper(), N, G, agree, len(diverged),
             "".join(" [prompt %d step %d log ratio %.2g]" % t for t in diverged[:6]),
             near, steps, tie, d0, atol, float(np.median(llama_ref.margins(logits))),
             "" if route is None else "; %d routing near-tie(s) (router gap < %g)%s, smallest router gap %.3g"
             % (len(routed), a.route_tol, "".join(" [prompt %d step %d gap %.2g]" % t for t in routed[:6]),
                float(np.min(route)))))
    ref_common.finish("llamacpp_check", fails)


if __name__ == "__main__":
    main()
