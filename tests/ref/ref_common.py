"""What the numpy oracles (opt_ref.py, llama_ref.py) share, whatever the
model family: left padding, greedy generation with a KV cache, the
recompute-without-cache self-check, top-2 margins, and the command line

  --model DIR --prompt-ids FILE.json --gen-len N
  --out-logits FILE.npy --out-tokens FILE.json [--no-cache] [family flags]

(its inputs and outputs are described in opt_ref.py). Each oracle keeps its
family's forward and describes it with a Family:
  name                  the prefix of its messages ("opt_ref");
  load_model(dir)       the model object the functions below take;
  left_pad(m, prompts)  -> ids, mask [B, S] (left_pad below, with its pad id);
  positions(mask)       -> the family's Hugging Face position ids [B, S];
  new_caches(m, B, T)   -> per layer (K, V), room for T positions;
  forward(m, ids, pos, caches, start, key_mask)
                        -> the logits [B, V] of the last position, the new
                           k, v written at cache slots [start, start + T);
  vocab(m)              the number of logits a position has.
"""
import argparse
import collections
import json
import sys
import time

import numpy as np

F32_MIN = np.finfo(np.float32).min

Family = collections.namedtuple("Family", "name load_model left_pad positions new_caches forward vocab")


def left_pad(prompts, pad, vocab=None):
    """prompts (lists of ids, lengths may differ) -> ids, mask int64 [N, S]:
    each prompt right-aligned, pad (mask 0) before it. An empty prompt is
    refused, and with vocab given an id outside [0, vocab)."""
    S = max(len(p) for p in prompts)
    ids = np.full((len(prompts), S), pad, dtype=np.int64)
    mask = np.zeros((len(prompts), S), dtype=np.int64)
    for i, p in enumerate(prompts):
        if len(p) == 0:
            raise ValueError("prompt %d is empty" % i)
        if vocab is not None and (min(p) < 0 or max(p) >= vocab):
            raise ValueError("prompt %d has a token id outside [0, %d)" % (i, vocab))
        ids[i, S - len(p):] = p
        mask[i, S - len(p):] = 1
    return ids, mask


def generate(fam, m, prompts, gen_len, timings=None):
    """Greedy generation with a KV cache: one prefill of the padded batch, then
    one token a step, never stopping at EOS (a decode token's position = the
    number of real tokens before it). Returns (logits [N, G, V], tokens [N, G]);
    timings, a dict, gets prefill_s and decode_s."""
    ids, mask = fam.left_pad(m, prompts)
    B, S = ids.shape
    caches = fam.new_caches(m, B, S + gen_len)
    key_mask = np.concatenate([mask, np.ones((B, gen_len), np.int64)], axis=1)
    n_real = mask.sum(1)
    out = np.zeros((B, gen_len, fam.vocab(m)), np.float32)
    toks = np.zeros((B, gen_len), np.int64)
    t0 = time.perf_counter()
    lg = fam.forward(m, ids, fam.positions(mask), caches, 0, key_mask)
    t1 = time.perf_counter()
    for t in range(gen_len):
        if t > 0:
            pos = (n_real + t - 1)[:, None]
            lg = fam.forward(m, toks[:, t - 1:t], pos, caches, S + t - 1, key_mask)
        out[:, t] = lg
        toks[:, t] = lg.argmax(-1)
    if timings is not None:
        timings["prefill_s"], timings["decode_s"] = t1 - t0, time.perf_counter() - t1
    return out, toks


def logits_nocache(fam, m, prompts, gen_tokens):
    """Self-check: every step recomputed from scratch on the whole sequence (no
    KV cache reuse). gen_tokens: [N, G]. Returns logits [N, G, V]."""
    ids, mask = fam.left_pad(m, prompts)
    B, S = ids.shape
    G = gen_tokens.shape[1]
    out = np.zeros((B, G, fam.vocab(m)), np.float32)
    for t in range(G):
        full_ids = np.concatenate([ids, gen_tokens[:, :t]], axis=1)
        full_mask = np.concatenate([mask, np.ones((B, t), np.int64)], axis=1)
        caches = fam.new_caches(m, B, S + t)
        out[:, t] = fam.forward(m, full_ids, fam.positions(full_mask), caches, 0, full_mask)
    return out


def margins(logits):
    """top1 - top2 logit along the last axis."""
    top2 = np.sort(logits, axis=-1)[..., -2:]
    return top2[..., 1] - top2[..., 0]


def main(fam, doc, add_args=None, configure=None, summary=None):
    """The oracle's command line; doc's first line describes it. add_args(ap)
    adds the family's own flags; configure(args) applies them before the model
    loads and returns a note for the summary line ("" for none); summary(m),
    right after generate, another note and fields for the tokens file."""
    ap = argparse.ArgumentParser(description=doc.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--prompt-ids", required=True)
    ap.add_argument("--gen-len", type=int, required=True)
    ap.add_argument("--out-logits", required=True)
    ap.add_argument("--out-tokens", required=True)
    ap.add_argument("--no-cache", action="store_true",
                    help="also recompute without KV cache and check they agree (slow)")
    if add_args:
        add_args(ap)
    a = ap.parse_args()
    note = configure(a) if configure else ""
    with open(a.prompt_ids) as f:
        prompts = json.load(f)
    m = fam.load_model(a.model)
    logits, toks = generate(fam, m, prompts, a.gen_len)
    more, fields = summary(m) if summary else ("", {})
    note += more
    if not np.isfinite(logits).all():
        sys.exit("%s: non-finite logits" % fam.name)
    if a.no_cache:
        d = np.abs(logits_nocache(fam, m, prompts, toks) - logits).max()
        print("%s: cache vs no-cache max |diff| = %.3g" % (fam.name, d))
        # Not bit-equal: gemv vs gemm summation order flips a few fp16
        # roundings (1 ulp = 2^-11 relative), which then propagate.
        if d > 1e-2:
            sys.exit("%s: cache vs no-cache mismatch" % fam.name)
    np.save(a.out_logits, logits)
    with open(a.out_tokens, "w") as f:
        json.dump(dict({"tokens": toks.tolist(),
                        "margins": [[float(x) for x in r] for r in margins(logits)]}, **fields), f)
    print("%s: %d prompts x %d tokens, median top-2 margin %.4f%s"
          % (fam.name, len(prompts), a.gen_len, float(np.median(margins(logits))), note))


def finish(name, fails):
    """The end of a check: exit 1 listing the first 20 failures on stderr, or
    print NAME: OK."""
    if fails:
        for f in fails[:20]:
            print("%s: FAIL: %s" % (name, f), file=sys.stderr)
        sys.exit(1)
    print("%s: OK" % name)
