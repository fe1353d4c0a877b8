#!/usr/bin/python3
"""Numpy OPT forward + greedy generation: the independent test oracle (and the
numpy benchmark baseline). Written from Hugging Face modeling_opt.py semantics
(eager attention, left padding, KV cache), plus this project's fp16 rounding
points (docs/ARCHITECTURE.md, "Numerics"), never from the C engine.

  opt_ref.py --model DIR --prompt-ids FILE.json --gen-len N
             --out-logits FILE.npy --out-tokens FILE.json [--no-cache]
             [--compress-weight] [--compress-cache]

FILE.json: a JSON list of lists of token ids (lengths may differ). All prompts
run as one batch, left-padded with pad_token_id (attention mask 0 there), and
gen_len tokens are chosen greedily for each, never stopping at EOS.
out-logits: float32 [num_prompts, gen_len, vocab], the logits each generated
token was chosen from (step 0 = last prompt position of the prefill).
out-tokens: {"tokens": [[...]...], "margins": [[top1 - top2 logit]...]}.
The padding, the generation loop, the no-cache check and this command line
are ref_common.py's, shared with llama_ref.py; OPT's forward is here.

HF semantics kept here:
  * positions = cumsum(mask) * mask - 1, + 2 into embed_positions (pads -> row 1);
    a decode token's position = number of real tokens before it;
  * token embeds -> project_in (if any) -> + position embeds;
  * pre-LN:  h = h + attn(LN1(h));  h = h + fc2(relu(fc1(LN2(h))))
    post-LN: h = LN1(h + attn(h));  h = LN2(h + fc2(relu(fc1(h))))   (opt-350m)
  * q = (x Wq^T + bq) * head_dim^-0.5 (scaled after the bias);
  * masked scores (causal, padding keys) set to finfo(float32).min, so a row of
    pure padding is uniform, not NaN; softmax in float32; LN eps 1e-5;
  * final LayerNorm only for pre-LN models; project_out after it;
  * LM head = embed_tokens, always (a stored lm_head.weight is ignored).
Rounding to fp16 (then back to float32) exactly at: the embedding output; q
(after bias and scale), k, v (the KV cache is fp16); the attention context
before out_proj; each block output (after the residual add, or after the
LayerNorm that ends a post-LN block). Everything else is float32.

Compression (FlexGen's 4-bit group-wise scheme, q4_ref.py): --compress-weight
computes with the q, k, v, out_proj, fc1 and fc2 weights compressed along
their output dimension and expanded; --compress-cache stores k and v in the
cache compressed per head along head_dim, while a step's attention uses its
own new k, v as computed (FlexGen's order).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_checkpoint import load_checkpoint  # noqa: E402
import q4_ref  # noqa: E402
import ref_common  # noqa: E402

F32_MIN = ref_common.F32_MIN
margins = ref_common.margins   # top1 - top2 logits, for this module's users

LN_EPS = 1e-5


ROUND_FP16 = True  # False only for self-tests that isolate summation-order noise
COMPRESS_WEIGHT = False
COMPRESS_CACHE = False


def cw(w):
    """A Linear weight [out, in] as the engine computes with it."""
    if not COMPRESS_WEIGHT:
        return w
    return q4_ref.roundtrip(w.astype(np.float16), axis=0).astype(np.float32)


def r16(x):
    """Round a float32 array to fp16 and back: one of the fixed rounding points."""
    return x.astype(np.float16).astype(np.float32) if ROUND_FP16 else x


class Model:
    """OPT weights as float32 arrays (fp16-exact values), from HF names."""

    def __init__(self, cfg, t):
        self.cfg = cfg
        self.H = cfg["hidden_size"]
        self.A = cfg["num_attention_heads"]
        self.hd = self.H // self.A
        self.pre_ln = cfg.get("do_layer_norm_before", True)
        self.pad = cfg.get("pad_token_id", 1)
        self.E = t["decoder.embed_tokens.weight"]          # [V, D]; also the LM head
        self.P = t["decoder.embed_positions.weight"]       # [max_pos + 2, H]
        self.pin = t.get("decoder.project_in.weight")       # [H, D] or None
        self.pout = t.get("decoder.project_out.weight")     # [D, H] or None
        self.lnf = None
        if self.pre_ln:
            self.lnf = (t["decoder.final_layer_norm.weight"], t["decoder.final_layer_norm.bias"])
        self.layers = []
        for i in range(cfg["num_hidden_layers"]):
            p = "decoder.layers.%d." % i
            g = lambda n: t[p + n]  # noqa: E731
            # Linear weights transposed once ([in, out], contiguous) for x @ W.
            self.layers.append({
                "wq": np.ascontiguousarray(cw(g("self_attn.q_proj.weight")).T), "bq": g("self_attn.q_proj.bias"),
                "wk": np.ascontiguousarray(cw(g("self_attn.k_proj.weight")).T), "bk": g("self_attn.k_proj.bias"),
                "wv": np.ascontiguousarray(cw(g("self_attn.v_proj.weight")).T), "bv": g("self_attn.v_proj.bias"),
                "wo": np.ascontiguousarray(cw(g("self_attn.out_proj.weight")).T), "bo": g("self_attn.out_proj.bias"),
                "ln1": (g("self_attn_layer_norm.weight"), g("self_attn_layer_norm.bias")),
                "w1": np.ascontiguousarray(cw(g("fc1.weight")).T), "b1": g("fc1.bias"),
                "w2": np.ascontiguousarray(cw(g("fc2.weight")).T), "b2": g("fc2.bias"),
                "ln2": (g("final_layer_norm.weight"), g("final_layer_norm.bias")),
            })


def load_model(d):
    return Model(*load_checkpoint(d))


def layer_norm(x, wb):
    mu = x.mean(-1, keepdims=True)
    xc = x - mu
    var = (xc * xc).mean(-1, keepdims=True)
    return xc / np.sqrt(var + np.float32(LN_EPS)) * wb[0] + wb[1]


def embed(m, ids, pos):
    """ids, pos: int [B, T] (pos = HF position id before the +2 offset)."""
    x = m.E[ids]
    if m.pin is not None:
        x = x @ m.pin.T
    return r16(x + m.P[pos + 2])


def attention(m, L, x, cache, start, key_mask):
    """x: [B, T, H] attention input (already LayerNormed for pre-LN).
    cache: (K, V) each [B, A, Tmax, hd]; the new k, v go to [start, start+T).
    key_mask: [B, >= start+T], 1 for real tokens. Returns out_proj output."""
    B, T, H = x.shape
    A, hd = m.A, m.hd
    S = start + T
    x2 = x.reshape(B * T, H)
    q = r16((x2 @ L["wq"] + L["bq"]) * np.float32(hd ** -0.5))
    k = r16(x2 @ L["wk"] + L["bk"])
    v = r16(x2 @ L["wv"] + L["bv"])
    heads = lambda a: a.reshape(B, T, A, hd).transpose(0, 2, 1, 3)  # noqa: E731
    K, V = cache
    K[:, :, start:S] = heads(k)
    V[:, :, start:S] = heads(v)
    s = heads(q) @ K[:, :, :S].transpose(0, 1, 3, 2)                    # [B, A, T, S]
    qpos = np.arange(start, S)[:, None]
    allowed = (np.arange(S)[None, :] <= qpos)[None] & (key_mask[:, None, :S] != 0)  # [B, T, S]
    s = np.where(allowed[:, None], s, F32_MIN)
    s = np.exp(s - s.max(-1, keepdims=True))
    p = s / s.sum(-1, keepdims=True)
    ctx = r16(p @ V[:, :, :S])                                          # [B, A, T, hd]
    if COMPRESS_CACHE:   # stored compressed after use: later steps read them expanded
        K[:, :, start:S] = q4_ref.roundtrip_heads(K[:, :, start:S].astype(np.float16), hd).astype(np.float32)
        V[:, :, start:S] = q4_ref.roundtrip_heads(V[:, :, start:S].astype(np.float16), hd).astype(np.float32)
    ctx = ctx.transpose(0, 2, 1, 3).reshape(B * T, H)
    return (ctx @ L["wo"] + L["bo"]).reshape(B, T, H)


def mlp(L, x):
    B, T, H = x.shape
    y = np.maximum(x.reshape(B * T, H) @ L["w1"] + L["b1"], 0)
    return (y @ L["w2"] + L["b2"]).reshape(B, T, H)


def forward(m, ids, pos, caches, start, key_mask):
    """Run all layers on ids [B, T] at cache slots [start, start+T).
    Returns the logits [B, V] of the last position only."""
    h = embed(m, ids, pos)
    for L, cache in zip(m.layers, caches):
        if m.pre_ln:
            h = r16(h + attention(m, L, layer_norm(h, L["ln1"]), cache, start, key_mask))
            h = r16(h + mlp(L, layer_norm(h, L["ln2"])))
        else:
            h = r16(layer_norm(h + attention(m, L, h, cache, start, key_mask), L["ln1"]))
            h = r16(layer_norm(h + mlp(L, h), L["ln2"]))
    x = h[:, -1]
    if m.lnf is not None:
        x = layer_norm(x, m.lnf)
    if m.pout is not None:
        x = x @ m.pout.T
    return x @ m.E.T


def new_caches(m, B, T):
    shape = (B, m.A, T, m.hd)
    return [(np.zeros(shape, np.float32), np.zeros(shape, np.float32)) for _ in m.layers]


def left_pad(m, prompts):
    return ref_common.left_pad(prompts, m.pad)


def hf_positions(mask):
    return np.cumsum(mask, axis=1) * mask - 1


FAMILY = ref_common.Family("opt_ref", load_model, left_pad, hf_positions, new_caches, forward,
                           vocab=lambda m: m.E.shape[0])


def generate(m, prompts, gen_len, timings=None):
    """Greedy generation with a KV cache. Returns (logits [N, G, V], tokens [N, G])."""
    return ref_common.generate(FAMILY, m, prompts, gen_len, timings)


def logits_nocache(m, prompts, gen_tokens):
    """Self-check: recompute every step from scratch on the whole sequence
    (no KV cache reuse). gen_tokens: [N, G]. Returns logits [N, G, V]."""
    return ref_common.logits_nocache(FAMILY, m, prompts, gen_tokens)


def add_args(ap):
    ap.add_argument("--compress-weight", action="store_true")
    ap.add_argument("--compress-cache", action="store_true")


def configure(a):
    global COMPRESS_WEIGHT, COMPRESS_CACHE
    COMPRESS_WEIGHT, COMPRESS_CACHE = a.compress_weight, a.compress_cache
    return ""


if __name__ == "__main__":
    ref_common.main(FAMILY, __doc__, add_args, configure)
