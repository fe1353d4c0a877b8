#!/usr/bin/python3
"""Write a small random Llama-family checkpoint laid out as Hugging Face
publishes one (model_type llama, mistral, qwen2, qwen3, and the mixtures of
experts mixtral and qwen3_moe), and load any such
directory back (load_llama_checkpoint) for the numpy oracle llama_ref.py and
for gguf_write.py.

Part of the independent test oracle: numpy only, written from the Hugging
Face config and tensor naming conventions, never from the C engine.

  make_llama_checkpoint.py --out DIR [--type llama|mistral|qwen2|qwen3|mixtral|qwen3_moe]
      [--layers 2] [--hidden 64] [--heads 4] [--kv-heads K] [--head-dim D]
      [--ffn 172] [--vocab 320] [--max-pos 256] [--eps 1e-5]
      [--rope-theta 10000] [--rope-scaling none|linear|llama3]
      [--rope-factor 8] [--rope-low 1] [--rope-high 4] [--rope-orig 64]
      [--tied] [--sliding-window W] [--eos 2 [--eos 3 ...]]
      [--seed S] [--std 0.1] [--embed-std E] [--head-std E]
      [--format safetensors|sharded] [--shards 2] [--dtype f16|bf16|f32]
      [--experts E] [--topk K] [--moe-ffn FE] [--norm-topk] [--sparse-step N]
      [--mlp-only L [--mlp-only L ...]] [--router-std S]
      [--case NAME]

--case sets a named test configuration (CASES below: mha, gqa8, mqa,
llama3, tied, qwen2, bf16-sharded, mistral, qwen3, qwen3-tied, mixtral,
qwen3-moe, qwen3-moe-all, qwen3-moe-nonorm); flags given after it still win
only where they are not part of the case (a case is a starting point).

Files: config.json and generation_config.json as the hub has them (eos may
be a list), model.safetensors or model-0000k-of-0000n.safetensors shards with
model.safetensors.index.json (the safetensors writer is make_checkpoint.py's).
Tensor names: model.embed_tokens.weight; per layer
model.layers.N.self_attn.{q,k,v,o}_proj.weight (+ q/k/v .bias for qwen2),
model.layers.N.self_attn.{q,k}_norm.weight [head_dim] for qwen3,
model.layers.N.mlp.{gate,up,down}_proj.weight,
model.layers.N.{input_layernorm,post_attention_layernorm}.weight;
a sparse layer (every layer of mixtral; qwen3_moe's where (N + 1) %
decoder_sparse_step == 0 and N is not in mlp_only_layers) has instead
mixtral's model.layers.N.block_sparse_moe.gate.weight [E, H] and
.block_sparse_moe.experts.M.{w1,w3}.weight [F, H], .w2.weight [H, F]
(F = intermediate_size), or qwen3_moe's model.layers.N.mlp.gate.weight and
.mlp.experts.M.{gate,up,down}_proj.weight (F = moe_intermediate_size);
model.norm.weight; lm_head.weight unless tie_word_embeddings (a tied
checkpoint stores no lm_head, as Llama 3.2 1B and Qwen2.5 0.5B do).

Values: float32 N(0, std) (RMSNorm weights 1 + N(0, std)), the embedding
N(0, embed_std) and the LM head N(0, head_std), all rounded to fp16 (and with
--dtype bf16 further to bf16, |x| < 2^-14 flushed to 0, so they are exact in
both), as make_checkpoint.py does: --dtype only chooses the storage type.
Random models have flat next-token distributions; a larger head (or, tied,
embedding) std makes the top-1 logit stand clear of the second (the logit
std is about sqrt(hidden) * head_std), which the llama.cpp comparison needs.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_checkpoint as mc  # noqa: E402  (safetensors writer/reader, bf16, shape checks)

# Named configurations the tests use: every case the engine must cover.
CASES = {
    "mha": dict(type="llama", heads=4, kv_heads=4, hidden=64, ffn=172),
    "gqa8": dict(type="llama", heads=16, kv_heads=2, hidden=64, head_dim=16, ffn=160,
                 rope_theta=500000.0, rope_scaling="llama3"),
    "mqa": dict(type="llama", heads=4, kv_heads=1, hidden=64, ffn=128),
    "llama3": dict(type="llama", heads=8, kv_heads=2, hidden=128, ffn=256,
                   rope_theta=500000.0, rope_scaling="llama3", eos=[2, 3]),
    "tied": dict(type="llama", heads=4, kv_heads=2, hidden=64, ffn=128, tied=True,
                 rope_scaling="linear", rope_factor=2.0),
    "qwen2": dict(type="qwen2", heads=4, kv_heads=2, hidden=64, ffn=160, tied=True,
                  rope_theta=1000000.0, eps=1e-6),
    "bf16-sharded": dict(type="llama", heads=4, kv_heads=2, hidden=64, ffn=128,
                         dtype="bf16", format="sharded", shards=3),
    "mistral": dict(type="mistral", heads=4, kv_heads=1, hidden=64, ffn=128, sliding_window=8),
    # Qwen3: q/k norms; head_dim 16 given where hidden / heads would be 8
    "qwen3": dict(type="qwen3", heads=8, kv_heads=2, hidden=64, head_dim=16, ffn=160,
                  rope_theta=1000000.0, eps=1e-6),
    "qwen3-tied": dict(type="qwen3", heads=4, kv_heads=4, hidden=64, head_dim=16, ffn=128, tied=True,
                       rope_theta=1000000.0, eps=1e-6),
    # Mixtral-like: 8 experts, top 2 (renormalised), GQA 4:2, every layer sparse
    "mixtral": dict(type="mixtral", heads=4, kv_heads=2, hidden=64, ffn=96, experts=8, topk=2,
                    rope_theta=1000000.0),
    # Qwen3-MoE-like: 32 experts, top 8 renormalised (norm_topk_prob), q/k norms, layer 1
    # dense (mlp_only_layers) with its own intermediate_size
    "qwen3-moe": dict(type="qwen3_moe", layers=3, heads=8, kv_heads=2, hidden=64, head_dim=16, ffn=128,
                      experts=32, topk=8, moe_ffn=32, norm_topk=True, mlp_only=[1],
                      rope_theta=1000000.0, eps=1e-6),
    # every layer sparse, renormalised: what llama.cpp's qwen3moe loads (it has no dense layers)
    "qwen3-moe-all": dict(type="qwen3_moe", layers=2, heads=8, kv_heads=2, hidden=64, head_dim=16, ffn=128,
                          experts=32, topk=8, moe_ffn=32, norm_topk=True, rope_theta=1000000.0, eps=1e-6),
    # the same without renormalising the top 8, sparse every second layer (1 and 3)
    "qwen3-moe-nonorm": dict(type="qwen3_moe", layers=4, heads=8, kv_heads=2, hidden=64, head_dim=16, ffn=128,
                             experts=32, topk=8, moe_ffn=32, sparse_step=2, rope_theta=1000000.0, eps=1e-6),
}

ARCH = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
        "qwen3": "Qwen3ForCausalLM", "mixtral": "MixtralForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM"}

# ---------------------------------------------------------------- config


def head_dim(cfg):
    """head_dim from the config when given (Qwen3-style, Mistral-Nemo), else hidden / heads
    (Qwen3Config's default is 128 instead)."""
    hd = cfg.get("head_dim")
    if hd:
        return int(hd)
    return 128 if cfg.get("model_type") == "qwen3" else cfg["hidden_size"] // cfg["num_attention_heads"]


def qk_norm(cfg):
    """Qwen3 (and Qwen3-MoE) RMS-normalise each head of q and k (q_norm, k_norm: [head_dim])."""
    return cfg["model_type"] in ("qwen3", "qwen3_moe")


def n_experts(cfg):
    """Experts of a sparse layer (0: a dense model), as MixtralConfig and Qwen3MoeConfig default them."""
    if cfg["model_type"] == "mixtral":
        return cfg.get("num_local_experts", 8)
    if cfg["model_type"] == "qwen3_moe":
        return cfg.get("num_experts", 128)
    return 0


def top_k(cfg):
    return cfg.get("num_experts_per_tok", 2 if cfg["model_type"] == "mixtral" else 8)


def is_sparse(cfg, i):
    """Layer i's MLP is a mixture: Mixtral's every layer; Qwen3-MoE's as
    Qwen3MoeDecoderLayer decides (not in mlp_only_layers, (i + 1) %
    decoder_sparse_step == 0)."""
    if cfg["model_type"] == "mixtral":
        return True
    if cfg["model_type"] != "qwen3_moe":
        return False
    return (i not in (cfg.get("mlp_only_layers") or []) and n_experts(cfg) > 0
            and (i + 1) % cfg.get("decoder_sparse_step", 1) == 0)


def moe_names(cfg):
    """(router, gate, up, down) of a sparse layer, %d the expert's number, and the experts' size."""
    if cfg["model_type"] == "mixtral":
        return ("block_sparse_moe.gate.weight", "block_sparse_moe.experts.%d.w1.weight",
                "block_sparse_moe.experts.%d.w3.weight", "block_sparse_moe.experts.%d.w2.weight",
                cfg["intermediate_size"])
    return ("mlp.gate.weight", "mlp.experts.%d.gate_proj.weight", "mlp.experts.%d.up_proj.weight",
            "mlp.experts.%d.down_proj.weight", cfg.get("moe_intermediate_size", 768))


def qkv_bias(cfg):
    """Qwen2 always has q/k/v biases; Llama/Mistral/Qwen3 when attention_bias is set."""
    return cfg["model_type"] == "qwen2" or bool(cfg.get("attention_bias", False))


def o_bias(cfg):
    return cfg["model_type"] != "qwen2" and bool(cfg.get("attention_bias", False))


def mlp_bias(cfg):
    return bool(cfg.get("mlp_bias", False))


def make_config(a):
    kv = a.kv_heads or a.heads
    cfg = {
        "model_type": a.type, "architectures": [ARCH[a.type]],
        "vocab_size": a.vocab, "hidden_size": a.hidden, "intermediate_size": a.ffn,
        "num_hidden_layers": a.layers, "num_attention_heads": a.heads,
        "num_key_value_heads": kv, "hidden_act": "silu",
        "max_position_embeddings": a.max_pos, "rms_norm_eps": a.eps,
        "rope_theta": a.rope_theta, "rope_scaling": None,
        "tie_word_embeddings": bool(a.tied), "attention_dropout": 0.0,
        "bos_token_id": 1, "eos_token_id": a.eos[0] if len(a.eos) == 1 else list(a.eos),
        "torch_dtype": {"f16": "float16", "bf16": "bfloat16", "f32": "float32"}[a.dtype],
        "use_cache": True, "initializer_range": 0.02,
    }
    if a.head_dim or a.type in ("qwen3", "qwen3_moe"):
        cfg["head_dim"] = a.head_dim or a.hidden // a.heads
    if a.type in ("llama", "qwen3", "qwen3_moe"):
        cfg.update(attention_bias=False, mlp_bias=False, pretraining_tp=1)
    if a.type == "mixtral":
        cfg.update(num_local_experts=a.experts, num_experts_per_tok=a.topk, sliding_window=None,
                   router_jitter_noise=0.0, output_router_logits=False, router_aux_loss_coef=0.02)
    if a.type == "qwen3_moe":
        cfg.update(num_experts=a.experts, num_experts_per_tok=a.topk, moe_intermediate_size=a.moe_ffn,
                   norm_topk_prob=bool(a.norm_topk), decoder_sparse_step=a.sparse_step,
                   mlp_only_layers=list(a.mlp_only or []), use_sliding_window=False, sliding_window=None,
                   max_window_layers=a.layers, output_router_logits=False, router_aux_loss_coef=0.001)
        del cfg["pretraining_tp"]
    if a.type == "mistral":
        cfg["sliding_window"] = a.sliding_window or None
    if a.type == "qwen2":
        cfg.update(use_sliding_window=False, sliding_window=a.max_pos, max_window_layers=a.layers)
    if a.type == "qwen3":
        cfg.update(use_sliding_window=False, sliding_window=None, max_window_layers=a.layers)
        del cfg["pretraining_tp"]
    if a.rope_scaling == "linear":
        cfg["rope_scaling"] = {"rope_type": "linear", "factor": a.rope_factor}
    elif a.rope_scaling == "llama3":
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": a.rope_factor,
                               "low_freq_factor": a.rope_low, "high_freq_factor": a.rope_high,
                               "original_max_position_embeddings": a.rope_orig}
    return cfg


def generation_config(cfg):
    return {"_from_model_config": True, "bos_token_id": cfg["bos_token_id"],
            "eos_token_id": cfg["eos_token_id"], "transformers_version": "4.45.0"}


def expected_shapes(cfg):
    """{HF name without 'model.': shape} the config implies (lm_head.weight
    listed unless tied; a tied directory may still carry one)."""
    H, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    A, KV, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], head_dim(cfg)
    s = {"embed_tokens.weight": (V, H)}
    for i in range(cfg["num_hidden_layers"]):
        p = "layers.%d." % i
        s[p + "input_layernorm.weight"] = (H,)
        for n, rows in (("q", A * hd), ("k", KV * hd), ("v", KV * hd)):
            s[p + "self_attn.%s_proj.weight" % n] = (rows, H)
            if qkv_bias(cfg):
                s[p + "self_attn.%s_proj.bias" % n] = (rows,)
        if qk_norm(cfg):
            s[p + "self_attn.q_norm.weight"] = (hd,)
            s[p + "self_attn.k_norm.weight"] = (hd,)
        s[p + "self_attn.o_proj.weight"] = (H, A * hd)
        if o_bias(cfg):
            s[p + "self_attn.o_proj.bias"] = (H,)
        s[p + "post_attention_layernorm.weight"] = (H,)
        if is_sparse(cfg, i):
            router, gate, up, down, FE = moe_names(cfg)
            s[p + router] = (n_experts(cfg), H)
            for e in range(n_experts(cfg)):
                s[p + gate % e], s[p + up % e], s[p + down % e] = (FE, H), (FE, H), (H, FE)
            continue
        for n, shape in (("gate", (F, H)), ("up", (F, H)), ("down", (H, F))):
            s[p + "mlp.%s_proj.weight" % n] = shape
            if mlp_bias(cfg):
                s[p + "mlp.%s_proj.bias" % n] = (shape[0],)
    s["norm.weight"] = (H,)
    if not cfg.get("tie_word_embeddings", False):
        s["lm_head.weight"] = (V, H)
    return s


def make_tensors(cfg, seed, std, embed_std, head_std, bf16_exact=False, router_std=None):
    """Ordered {full HF name: float32 array} of fp16-exact values (bf16-exact too
    with bf16_exact), in the order expected_shapes lists them; a router
    N(0, router_std), default std."""
    rng = np.random.default_rng(seed)

    def rnd(shape, s, base=0.0):
        x = (base + s * rng.standard_normal(shape, dtype=np.float32)).astype(np.float32)
        x = x.astype(np.float16).astype(np.float32)
        if bf16_exact:
            x[np.abs(x) < 2.0 ** -14] = 0.0
            x = mc.bf16_bits_to_f32(mc.f32_to_bf16_bits(x))
        return x

    t = {}
    for name, shape in expected_shapes(cfg).items():
        if name == "embed_tokens.weight":
            a = rnd(shape, embed_std)
        elif name == "lm_head.weight":
            a = rnd(shape, head_std)
        elif name.endswith("norm.weight"):
            a = rnd(shape, std, base=1.0)
        elif name.endswith("block_sparse_moe.gate.weight") or name.endswith("mlp.gate.weight"):
            a = rnd(shape, router_std or std)
        else:
            a = rnd(shape, std)
        t[name if name == "lm_head.weight" else "model." + name] = a
    return t

# ---------------------------------------------------------------- loader


def load_llama_checkpoint(d):
    """A Hugging Face Llama/Mistral/Qwen2/Qwen3/Mixtral/Qwen3-MoE directory -> (config, {name without
    'model.': float32 array}); shapes checked against the config."""
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    if cfg.get("model_type") not in ARCH:
        raise ValueError("%s: model_type %r is not one of %s" % (d, cfg.get("model_type"), ", ".join(ARCH)))
    t = mc.strip_model(mc.read_safetensors_dir(d))
    mc.check_shapes(d, t, expected_shapes(cfg))
    return cfg, t

# ---------------------------------------------------------------- main


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--case", choices=sorted(CASES))
    ap.add_argument("--type", choices=sorted(ARCH), default="llama")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=0)
    ap.add_argument("--head-dim", type=int, default=0)
    ap.add_argument("--ffn", type=int, default=172)
    ap.add_argument("--vocab", type=int, default=320)
    ap.add_argument("--max-pos", type=int, default=256)
    ap.add_argument("--eps", type=float, default=1e-5)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--rope-scaling", choices=["none", "linear", "llama3"], default="none")
    ap.add_argument("--rope-factor", type=float, default=8.0)
    ap.add_argument("--rope-low", type=float, default=1.0)
    ap.add_argument("--rope-high", type=float, default=4.0)
    ap.add_argument("--rope-orig", type=int, default=64)
    ap.add_argument("--tied", action="store_true")
    ap.add_argument("--sliding-window", type=int, default=0)
    ap.add_argument("--eos", type=int, action="append")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--std", type=float, default=0.1)
    ap.add_argument("--embed-std", type=float, default=0.0, help="default: --std")
    ap.add_argument("--head-std", type=float, default=0.0, help="default: --embed-std")
    ap.add_argument("--format", choices=["safetensors", "sharded"], default="safetensors")
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--dtype", choices=["f16", "bf16", "f32"], default="f16")
    ap.add_argument("--experts", type=int, default=8)
    ap.add_argument("--topk", type=int, default=2)
    ap.add_argument("--moe-ffn", type=int, default=32, help="qwen3_moe's moe_intermediate_size")
    ap.add_argument("--norm-topk", action="store_true", help="qwen3_moe's norm_topk_prob")
    ap.add_argument("--sparse-step", type=int, default=1, help="qwen3_moe's decoder_sparse_step")
    ap.add_argument("--mlp-only", type=int, action="append", help="qwen3_moe's mlp_only_layers")
    ap.add_argument("--router-std", type=float, default=0.0, help="default: --std")
    pre = ap.parse_known_args(argv)[0]
    case = dict(CASES[pre.case]) if pre.case else {}
    case_eos = case.pop("eos", [2])
    ap.set_defaults(**case)   # the case's values become defaults; explicit flags still win
    a = ap.parse_args(argv)
    a.eos = a.eos or case_eos
    a.embed_std = a.embed_std or a.std
    a.head_std = a.head_std or a.embed_std
    kv = a.kv_heads or a.heads
    if a.heads % kv:
        ap.error("--heads must be a multiple of --kv-heads")
    if not a.head_dim and a.hidden % a.heads:
        ap.error("--hidden must be a multiple of --heads (or give --head-dim)")
    if (a.head_dim or a.hidden // a.heads) % 2:
        ap.error("the head dimension must be even (rotary pairs)")
    return a


def write(a):
    cfg = make_config(a)
    t = make_tensors(cfg, a.seed, a.std, a.embed_std, a.head_std, bf16_exact=(a.dtype == "bf16"),
                     router_std=a.router_std)
    st = {"f16": "F16", "bf16": "BF16", "f32": "F32"}[a.dtype]
    # hub_names=True: names are written exactly as given, and no lm_head is added.
    mc.write_checkpoint(a.out, cfg, t, a.format, st, max(1, a.shards), True, False)
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump(generation_config(cfg), f, indent=2)
    return cfg, t


def main():
    a = parse_args()
    cfg, t = write(a)
    print("wrote %s (%s, %s %s, %d tensors)" % (a.out, cfg["model_type"], a.format, a.dtype, len(t)))


if __name__ == "__main__":
    main()
