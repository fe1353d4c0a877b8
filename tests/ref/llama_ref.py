#!/usr/bin/python3
"""Numpy Llama-family forward + greedy generation: the independent test
oracle for Llama 2/3.x, Mistral, Qwen2/2.5, Qwen3, TinyLlama and the mixtures
of experts Mixtral and Qwen3-MoE. Written from the semantics of Hugging
Face's modeling_llama.py (and the Mistral/Qwen2/Qwen3 differences,
modeling_mixtral.py's and modeling_qwen3_moe.py's sparse blocks), never from
the C engine, with this project's
fp16 rounding points (docs/ARCHITECTURE.md, "Numerics") or, with --fp32,
none at all.

  llama_ref.py --model DIR --prompt-ids FILE.json --gen-len N
               --out-logits FILE.npy --out-tokens FILE.json
               [--no-cache] [--fp32]

The CLI and outputs are opt_ref.py's (both are ref_common.py's, as are the
padding, the generation loop and the no-cache check; the Llama forward is
here): FILE.json is a JSON list of lists of token ids; all prompts run as one
batch, left-padded (attention mask 0 there, pad id = pad_token_id or 0; an
id outside the vocabulary refused), gen_len tokens chosen greedily for each,
never stopping at EOS. out-logits: float32 [num_prompts, gen_len, vocab]
(step 0 = last prompt position of the prefill). out-tokens: {"tokens":
[[...]], "margins": [[top1 - top2 logit]]}.

HF semantics kept here:
  * h = embed_tokens[ids]; per layer (pre-norm):
      h = h + o_proj(attn(RMSNorm_in(h)));  h = h + down(silu(gate(x)) * up(x)),
      x = RMSNorm_post(h); final RMSNorm; logits = x @ lm_head^T, lm_head =
      embed_tokens when tie_word_embeddings;
  * RMSNorm(x) = x * 1/sqrt(mean(x^2) + rms_norm_eps) * w, all in float32
    (HF casts the normalised x to the model dtype before * w: not done here,
    as the engine keeps it float32);
  * q/k/v = x W^T (+ bias: qwen2 always, llama/mistral/qwen3 when attention_bias);
    head_dim = config head_dim if given, else hidden / heads (qwen3: 128);
  * qwen3 (modeling_qwen3.py): q and k, split into heads, each RMS-normalised
    over its head_dim values with q_norm / k_norm ([head_dim], eps
    rms_norm_eps) before rotary; v is not;
  * a sparse layer's MLP (MixtralSparseMoeBlock, Qwen3MoeSparseMoeBlock), on
    the same x = RMSNorm_post(h): router_logits = x @ gate^T (float32),
    p = softmax(router_logits) in float32, the top k of p (torch.topk; ties
    to the lower expert here), weights = those p divided by their sum
    (Mixtral always, Qwen3-MoE only with norm_topk_prob), then for each
    expert e in ascending order the rows routed to it get
    weight * down_e(silu(gate_e x) * up_e x) added (HF's index_add_ loop),
    all float32 (HF casts the weights to the model dtype: not done here, as
    the engine keeps them float32); which layers are sparse as make_llama_
    checkpoint.is_sparse says (mlp_only_layers, decoder_sparse_step);
  * rotary, rotate-half layout: pairs (i, i + d/2); inv_freq_i = theta^(-2i/d)
    computed in float32 as HF does; angle = position * inv_freq in float32;
    rope_scaling "linear": inv_freq / factor (HF's form of position / factor);
    "llama3": wavelengths 2 pi / inv_freq below orig/high_freq_factor kept,
    above orig/low_freq_factor divided by factor, between them a smooth mix
    (1 - s) inv_freq / factor + s inv_freq, s = (orig / wavelen - low) /
    (high - low); "default"/absent: none. Others (yarn, dynamic) refused;
  * grouped-query attention: query head h reads kv head h // (heads / kv_heads);
    scores = q k^T * head_dim^-0.5; masked scores (causal, padding keys,
    outside Mistral's sliding window) = finfo(float32).min, so a row of pure
    padding is uniform, not NaN; softmax in float32;
  * positions = cumsum(mask) - 1 (pads get 1, as HF generate does; no real
    token sees them); a decode token's position = number of real tokens before
    it; sliding_window (Mistral, Qwen2 with use_sliding_window) counts cache
    slots as HF's mask does: key slot j is visible from query slot i iff
    i - window < j <= i, so with left padding the pads take part in the count.

fp16 rounding points (float32 -> fp16 -> float32), the engine's, where the
OPT oracle has them:
  * the embedding output (exact: the table holds fp16 values);
  * q: projection + bias in float32 (qwen3: its head norm in float32), rotary in float32, times head_dim^-0.5,
    then rounded once (the attention core reads q pre-scaled, as for OPT);
  * k: projection + bias in float32, rotary in float32 on that unrounded
    value, then rounded once: the KV cache holds fp16 k AFTER rotary, so a
    cached key is never rotated again and never rounded twice;
  * v: projection + bias, rounded (the cache is fp16);
  * the attention context before o_proj;
  * the hidden state after each residual add (attention block and MLP block).
Everything else (RMSNorm, SwiGLU, the final norm, logits) stays float32.
--fp32 turns every rounding point off: a pure float32 reading of HF's model,
the one compared against llama.cpp with F32 weights and an F32 KV cache.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_llama_checkpoint import (load_llama_checkpoint, head_dim, qkv_bias, o_bias, mlp_bias, qk_norm,  # noqa: E402
                                   is_sparse, moe_names, n_experts, top_k)
import ref_common  # noqa: E402

F32_MIN = ref_common.F32_MIN
margins = ref_common.margins   # top1 - top2 logits, for this module's users

ROUND_FP16 = True  # --fp32 (or a self-test) turns the rounding points off
# Routing near-ties: the gap between a row's k-th and (k+1)-th router logit
# is how near another implementation's routing comes to choosing differently.
# ROW_GAPS collects each sparse layer's rows in a forward call; SEQ_GAP the
# smallest gap over each sequence's real rows so far; STEP_GAPS that, after
# each step of generate (compare.py excuses a divergence after a near-tie).
ROW_GAPS, SEQ_GAP, STEP_GAPS = [], [None], []
# The routes themselves, for tests that count the experts a step touches:
# ROW_SELS each sparse layer's chosen experts [N, k] in a forward call;
# STEP_ROUTES per step: per sparse layer [B, T, k], with STEP_ROW_GAPS the
# step's own smallest gap per sequence (its real rows, all sparse layers).
ROW_SELS, STEP_ROUTES, STEP_ROW_GAPS = [], [], []


def r16(x):
    """One of the fixed fp16 rounding points (identity in --fp32 mode)."""
    return x.astype(np.float16).astype(np.float32) if ROUND_FP16 else x


def rope_inv_freq(cfg):
    """inv_freq [d/2] float32 after rope_scaling, as HF computes it."""
    d = head_dim(cfg)
    base = np.float32(cfg.get("rope_theta", 10000.0))
    expo = np.arange(0, d, 2, dtype=np.int64).astype(np.float32) / np.float32(d)
    inv = (np.float32(1.0) / (base ** expo)).astype(np.float32)
    rs = cfg.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type", "default"))
    if kind == "default":
        return inv
    factor = np.float32(rs["factor"])
    if kind == "linear":
        return (inv / factor).astype(np.float32)
    if kind == "llama3":
        low, high = np.float32(rs["low_freq_factor"]), np.float32(rs["high_freq_factor"])
        orig = np.float32(rs["original_max_position_embeddings"])
        low_wl, high_wl = orig / low, orig / high
        wl = np.float32(2 * np.pi) / inv
        out = np.where(wl > low_wl, inv / factor, inv).astype(np.float32)
        smooth = (orig / wl - low) / (high - low)
        mixed = (1 - smooth) * out / factor + smooth * out
        medium = ~(wl < high_wl) & ~(wl > low_wl)
        return np.where(medium, mixed, out).astype(np.float32)
    raise ValueError("rope_scaling type %r is not supported (linear, llama3)" % kind)


def rope_cos_sin(inv_freq, pos):
    """pos int [B, T] -> cos, sin float32 [B, T, d] (the half repeated twice)."""
    ang = pos.astype(np.float32)[..., None] * inv_freq[None, None, :]
    ang = np.concatenate([ang, ang], axis=-1)
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def rotate(x, cos, sin):
    """x [B, heads, T, d] in the rotate-half layout: x*cos + rotate_half(x)*sin."""
    h = x.shape[-1] // 2
    rh = np.concatenate([-x[..., h:], x[..., :h]], axis=-1)
    return x * cos[:, None] + rh * sin[:, None]


class Model:
    """A Llama-family checkpoint as float32 arrays; Linear weights transposed
    once ([in, out]) for x @ W."""

    def __init__(self, cfg, t):
        self.cfg = cfg
        self.H, self.A = cfg["hidden_size"], cfg["num_attention_heads"]
        self.KV = cfg.get("num_key_value_heads") or self.A
        self.hd = head_dim(cfg)
        self.eps = np.float32(cfg.get("rms_norm_eps", 1e-6))
        self.pad = cfg.get("pad_token_id") or 0
        self.window = None
        if cfg["model_type"] == "mistral" or cfg.get("use_sliding_window", False):
            self.window = cfg.get("sliding_window") or None
        self.inv_freq = rope_inv_freq(cfg)
        self.E = t["embed_tokens.weight"]
        tied = cfg.get("tie_word_embeddings", False)
        self.head = self.E if tied else t["lm_head.weight"]
        self.norm = t["norm.weight"]
        T = lambda w: np.ascontiguousarray(w.T)  # noqa: E731
        self.layers = []
        for i in range(cfg["num_hidden_layers"]):
            g = lambda n: t.get("layers.%d.%s" % (i, n))  # noqa: E731
            L = {"ln1": g("input_layernorm.weight"), "ln2": g("post_attention_layernorm.weight")}
            L["qn"] = g("self_attn.q_norm.weight") if qk_norm(cfg) else None
            L["kn"] = g("self_attn.k_norm.weight") if qk_norm(cfg) else None
            for n in ("q", "k", "v", "o"):
                L["w" + n] = T(g("self_attn.%s_proj.weight" % n))
                has = qkv_bias(cfg) if n != "o" else o_bias(cfg)
                L["b" + n] = g("self_attn.%s_proj.bias" % n) if has else None
            L["moe"] = self.experts(cfg, g, T) if is_sparse(cfg, i) else None
            for n in ("gate", "up", "down"):
                if L["moe"] is None:
                    L["w" + n] = T(g("mlp.%s_proj.weight" % n))
                    L["b" + n] = g("mlp.%s_proj.bias" % n) if mlp_bias(cfg) else None
            self.layers.append(L)

    @staticmethod
    def experts(cfg, g, T):
        """A sparse layer: router [H, E] and, per expert, (gate, up, down) transposed."""
        router, gate, up, down, _ = moe_names(cfg)
        norm = cfg["model_type"] == "mixtral" or bool(cfg.get("norm_topk_prob", False))
        ex = [tuple(T(g(n % e)) for n in (gate, up, down)) for e in range(n_experts(cfg))]
        return {"router": T(g(router)), "experts": ex, "k": top_k(cfg), "norm": norm}


def load_model(d):
    return Model(*load_llama_checkpoint(d))


def rms_norm(x, w, eps):
    var = (x * x).mean(-1, keepdims=True)
    return x * (np.float32(1.0) / np.sqrt(var + eps)) * w


def linear(x, w, b):
    y = x @ w
    return y if b is None else y + b


def attention(m, L, x, cache, start, key_mask, cos, sin):
    """x [B, T, H] normalised input at cache slots [start, start+T); cache (K, V)
    each [B, KV, Tmax, hd] holding fp16-rounded rotated k and v. Returns o_proj."""
    B, T, _ = x.shape
    A, KV, hd = m.A, m.KV, m.hd
    S = start + T
    x2 = x.reshape(B * T, -1)
    heads = lambda a, n: a.reshape(B, T, n, hd).transpose(0, 2, 1, 3)  # noqa: E731
    q = heads(linear(x2, L["wq"], L["bq"]), A)
    k = heads(linear(x2, L["wk"], L["bk"]), KV)
    v = heads(linear(x2, L["wv"], L["bv"]), KV)
    if L["qn"] is not None:                              # qwen3: per head, over head_dim
        q, k = rms_norm(q, L["qn"], m.eps), rms_norm(k, L["kn"], m.eps)
    q = r16(rotate(q, cos, sin) * np.float32(hd ** -0.5))
    K, V = cache
    K[:, :, start:S] = r16(rotate(k, cos, sin))
    V[:, :, start:S] = r16(v)
    rep = A // KV
    Kq = np.repeat(K[:, :, :S], rep, axis=1)          # query head h -> kv head h // rep
    Vq = np.repeat(V[:, :, :S], rep, axis=1)
    s = q @ Kq.transpose(0, 1, 3, 2)                     # [B, A, T, S]
    qslot = np.arange(start, S)[:, None]
    kslot = np.arange(S)[None, :]
    allowed = kslot <= qslot
    if m.window:
        allowed = allowed & (kslot > qslot - m.window)
    allowed = allowed[None] & (key_mask[:, None, :S] != 0)  # [B, T, S]
    s = np.where(allowed[:, None], s, F32_MIN)
    s = np.exp(s - s.max(-1, keepdims=True))
    p = s / s.sum(-1, keepdims=True)
    ctx = r16(p @ Vq).transpose(0, 2, 1, 3).reshape(B * T, A * hd)
    return linear(ctx, L["wo"], L["bo"]).reshape(B, T, -1)


def swiglu_mlp(x2, wg, wu, wd, bg=None, bu=None, bd=None):
    g = linear(x2, wg, bg)
    u = linear(x2, wu, bu)
    return linear(g / (np.float32(1.0) + np.exp(-g)) * u, wd, bd)   # down(silu(gate) * up)


def moe(M, x2):
    """The sparse block on rows x2 [N, H]: route, then each expert's rows."""
    logits = x2 @ M["router"]
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p = (p / p.sum(-1, keepdims=True)).astype(np.float32)
    k = M["k"]
    order = np.argsort(-p, axis=-1, kind="stable")       # best first, ties to the lower expert
    sel = order[:, :k]
    w = np.take_along_axis(p, sel, axis=-1)
    ROW_SELS.append(sel)
    if k < p.shape[1]:
        ranked = np.take_along_axis(logits, order[:, k - 1:k + 1], axis=-1)
        ROW_GAPS.append(ranked[:, 0] - ranked[:, 1])
    if M["norm"]:
        w = w / w.sum(-1, keepdims=True)
    out = np.zeros_like(x2)
    for e, (wg, wu, wd) in enumerate(M["experts"]):
        rows, slot = np.nonzero(sel == e)
        if len(rows):
            out[rows] += w[rows, slot][:, None] * swiglu_mlp(x2[rows], wg, wu, wd)
    return out


def mlp(L, x):
    B, T, H = x.shape
    x2 = x.reshape(B * T, H)
    if L["moe"] is not None:
        return moe(L["moe"], x2).reshape(B, T, H)
    g = linear(x2, L["wgate"], L["bgate"])
    u = linear(x2, L["wup"], L["bup"])
    y = g / (np.float32(1.0) + np.exp(-g)) * u            # silu(gate) * up
    return linear(y, L["wdown"], L["bdown"]).reshape(B, T, H)


def forward(m, ids, pos, caches, start, key_mask, all_positions=False):
    """Run every layer on ids [B, T] at cache slots [start, start+T). Returns
    the logits [B, V] of the last position (or [B, T, V] with all_positions)."""
    h = r16(m.E[ids])
    cos, sin = rope_cos_sin(m.inv_freq, pos)
    for L, cache in zip(m.layers, caches):
        h = r16(h + attention(m, L, rms_norm(h, L["ln1"], m.eps), cache, start, key_mask, cos, sin))
        h = r16(h + mlp(L, rms_norm(h, L["ln2"], m.eps)))
    x = h if all_positions else h[:, -1]
    note_route_gaps(ids.shape, start, key_mask)
    return rms_norm(x, m.norm, m.eps) @ m.head.T


def note_route_gaps(shape, start, key_mask):
    """Fold this call's sparse layers' row gaps into each sequence's smallest
    (its real rows only; a call at start 0 begins new sequences)."""
    B, T = shape
    if start == 0 or SEQ_GAP[0] is None:
        SEQ_GAP[0] = np.full(B, np.inf)
        del STEP_GAPS[:], STEP_ROUTES[:], STEP_ROW_GAPS[:]
    real = key_mask[:, start:start + T] != 0
    step_gap = np.full(B, np.inf)
    for g in ROW_GAPS:
        step_gap = np.minimum(step_gap, np.where(real, g.reshape(B, T), np.inf).min(1))
    SEQ_GAP[0] = np.minimum(SEQ_GAP[0], step_gap)
    del ROW_GAPS[:]
    STEP_GAPS.append(SEQ_GAP[0].copy())
    STEP_ROW_GAPS.append(step_gap)
    STEP_ROUTES.append([s.reshape(B, T, -1) for s in ROW_SELS])
    del ROW_SELS[:]


def new_caches(m, B, T):
    shape = (B, m.KV, T, m.hd)
    return [(np.zeros(shape, np.float32), np.zeros(shape, np.float32)) for _ in m.layers]


def left_pad(m, prompts):
    return ref_common.left_pad(prompts, m.pad, m.E.shape[0])


def hf_positions(mask):
    """HF generate's position_ids: cumsum(mask) - 1, pads set to 1."""
    return np.where(mask != 0, np.cumsum(mask, axis=1) - 1, 1)


FAMILY = ref_common.Family("llama_ref", load_model, left_pad, hf_positions, new_caches, forward,
                           vocab=lambda m: m.head.shape[0])


def generate(m, prompts, gen_len, timings=None):
    """Greedy generation with a KV cache. Returns (logits [N, G, V], tokens [N, G])."""
    return ref_common.generate(FAMILY, m, prompts, gen_len, timings)


def logits_nocache(m, prompts, gen_tokens):
    """Self-check: every step recomputed from scratch on the whole sequence."""
    return ref_common.logits_nocache(FAMILY, m, prompts, gen_tokens)


def add_args(ap):
    ap.add_argument("--fp32", action="store_true", help="no fp16 rounding points (pure float32)")


def configure(a):
    global ROUND_FP16
    ROUND_FP16 = not a.fp32
    return " (fp32)" if a.fp32 else ""


def summary(m):
    """After generate: for a model with experts, the closest routing choice
    and, per prompt and step, the smallest gap so far ("route_gaps")."""
    if not any(L["moe"] for L in m.layers):
        return "", {}
    g = np.stack(STEP_GAPS, axis=1)   # [N, G]
    # decode steps (one row a sequence): per step, per sparse layer, per
    # sequence its k experts; and per step and sequence that step's own gap
    routes = [[[sorted(int(e) for e in s[b, -1]) for b in range(s.shape[0])] for s in step]
              for step in STEP_ROUTES[1:]]
    return (", smallest top-k router logit gap %.3g" % g.min(),
            {"route_gaps": [[float(x) for x in r] for r in g],
             "decode_routes": routes,
             "decode_route_gaps": [[float(x) for x in r] for r in STEP_ROW_GAPS[1:]]})


if __name__ == "__main__":
    ref_common.main(FAMILY, __doc__, add_args, configure, summary)
