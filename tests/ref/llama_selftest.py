#!/usr/bin/python3
"""Self-test of the numpy Llama oracle and its writers (no C engine, no
llama.cpp): the invariants the oracle must hold before anything is compared
with it.
  1. checkpoints: every case writes and loads back (f16, f32, bf16 sharded),
     names and shapes as the hub has them, tied without lm_head, qwen2 with
     q/k/v biases, qwen3 with q/k norms of head_dim, eos lists in both config files;
  2. rotary: identity at position 0; pairs (i, i + d/2) rotated as complex
     numbers; scores depend on the relative position only; llama3 scaling
     keeps high frequencies, divides low ones by factor, and agrees with the
     rope_freqs factors gguf_write.py writes; linear scaling = positions / factor;
  3. the forward against a slow loop-per-head reference (float32), Qwen3's
     per-head q/k norms included; with them, scaling q_proj and k_proj
     changes nothing (each head is normalised) and dropping them does;
     GQA equals MHA with each kv head repeated for its query heads;
     kv_heads == heads is plain MHA; the tied head is the embedding;
  4. left padding gives each prompt the logits it gets alone; the KV cache
     agrees with recomputation; a sliding window as wide as the sequence
     changes nothing and a narrow one matches the loop reference;
  5. the fp16 rounding points: the cache holds fp16(rotary(k)) (rounded once,
     after rotary), and the fp16 and --fp32 readings differ but stay close;
  6. experts (Mixtral, Qwen3-MoE cases): the sparse block against a loop
     over rows and their k experts written from the definition, the weights
     renormalised (mixtral, qwen3-moe) or not (qwen3-moe-nonorm), top-all
     renormalised = every expert weighted by the softmax, an expert no row
     chooses changes nothing, dense layers where mlp_only_layers and
     decoder_sparse_step say, the checkpoints' expert names and shapes;
  7. GGUF: the writer's file reads back (alignment, offsets, values per type,
     the Q/K permutation undone by its inverse), and Q8_0 follows
     quantize_row_q8_0_ref on hand-computed blocks; with experts, the keys
     llama.cpp's converter writes, routers F32, each role's experts one 3-D
     tensor whose slice e is expert e (or one tensor per expert), dense
     layers under their own names, and the file read back to the checkpoint.
Usage: llama_selftest.py   (exit 0 = all good)
"""
import json
import os
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gguf_write as gw  # noqa: E402
import llama_ref as lr  # noqa: E402
import make_checkpoint as mc  # noqa: E402
import make_llama_checkpoint as mlc  # noqa: E402


def make(tmp, name, *args):
    out = os.path.join(tmp, name)
    mlc.write(mlc.parse_args(["--out", out, *args]))
    return out


def prompts(V, n=5, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, V, size=int(k)).tolist() for k in rng.integers(1, 9, size=n)]


def test_checkpoints(tmp):
    for case in mlc.CASES:
        d = make(tmp, case, "--case", case)
        cfg, t = mlc.load_llama_checkpoint(d)
        gen = json.load(open(os.path.join(d, "generation_config.json")))
        assert gen["eos_token_id"] == cfg["eos_token_id"], case
        assert cfg["tie_word_embeddings"] == ("lm_head.weight" not in t), case
        assert ("layers.0.self_attn.q_proj.bias" in t) == (cfg["model_type"] == "qwen2"), case
        assert "layers.0.self_attn.o_proj.bias" not in t, case
        qn = t.get("layers.0.self_attn.q_norm.weight")
        assert (qn is not None) == mlc.qk_norm(cfg), case
        assert qn is None or qn.shape == (mlc.head_dim(cfg),) == t["layers.0.self_attn.k_norm.weight"].shape, case
        for k, a in t.items():
            assert np.array_equal(a, lr.r16(a)), (case, k)      # fp16-exact values
    cfg, t = mlc.load_llama_checkpoint(os.path.join(tmp, "bf16-sharded"))
    assert len([f for f in os.listdir(os.path.join(tmp, "bf16-sharded")) if f.endswith(".safetensors")]) == 3
    for k, a in t.items():
        assert np.array_equal(a, mc.bf16_bits_to_f32(mc.f32_to_bf16_bits(a))), k
    assert json.load(open(os.path.join(tmp, "llama3", "config.json")))["eos_token_id"] == [2, 3]
    gq = json.load(open(os.path.join(tmp, "gqa8", "config.json")))
    assert gq["head_dim"] == 16 and gq["num_attention_heads"] // gq["num_key_value_heads"] == 8
    # same seed, f32 storage: the same numbers as f16 storage
    _, a = mlc.load_llama_checkpoint(make(tmp, "f32", "--case", "mha", "--dtype", "f32"))
    _, b = mlc.load_llama_checkpoint(os.path.join(tmp, "mha"))
    assert all(np.array_equal(a[k], b[k]) for k in a)
    print("checkpoints: OK (%d cases, f32 = f16 values, bf16 sharded, tied, biases, eos lists)" % len(mlc.CASES))


def test_rotary():
    cfg = {"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 10000.0}
    inv = lr.rope_inv_freq(cfg)
    assert inv.dtype == np.float32 and np.allclose(inv, 1.0 / 10000.0 ** (np.arange(0, 16, 2) / 16), rtol=1e-6)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 2, 3, 16)).astype(np.float32)
    c, s = lr.rope_cos_sin(inv, np.zeros((1, 3), np.int64))
    assert np.array_equal(lr.rotate(x, c, s), x)                       # position 0: identity
    pos = np.array([[5, 17, 40]])
    c, s = lr.rope_cos_sin(inv, pos)
    z = (x[..., :8] + 1j * x[..., 8:]) * np.exp(1j * pos[0][None, None, :, None] * inv.astype(np.float64))
    want = np.concatenate([z.real, z.imag], axis=-1)                   # pair (i, i + d/2) as a complex number
    assert np.allclose(lr.rotate(x, c, s), want, atol=1e-5)
    q, k = x[:, :1, :1], x[:, 1:, :1]
    dots = []
    for m, n in ((7, 3), (30, 26), (104, 100)):                        # q.k depends on m - n only
        cq, sq = lr.rope_cos_sin(inv, np.array([[m]]))
        ck, sk = lr.rope_cos_sin(inv, np.array([[n]]))
        dots.append(float((lr.rotate(q, cq, sq) * lr.rotate(k, ck, sk)).sum()))
    assert np.allclose(dots, dots[0], atol=1e-4), dots
    # llama3: theta 500000, head_dim 16, orig 64, factor 8, low 1, high 4
    l3 = dict(cfg, rope_theta=500000.0, rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64})
    plain = lr.rope_inv_freq(dict(l3, rope_scaling=None))
    scaled = lr.rope_inv_freq(l3)
    wl = 2 * np.pi / plain
    hi, lo = wl < 64 / 4.0, wl > 64 / 1.0
    assert hi.any() and lo.any() and (~hi & ~lo).any()                # every band is exercised
    assert np.array_equal(scaled[hi], plain[hi])                       # high frequencies untouched
    assert np.allclose(scaled[lo], plain[lo] / 8, rtol=1e-6)
    mid = ~hi & ~lo
    assert np.all(scaled[mid] < plain[mid]) and np.all(scaled[mid] > plain[mid] / 8)
    fac = gw.llama3_rope_factors({**l3, "num_attention_heads": 4})     # what llama.cpp divides by
    assert np.allclose(plain / fac, scaled, rtol=1e-5), (plain / fac, scaled)
    lin = lr.rope_inv_freq(dict(cfg, rope_scaling={"type": "linear", "factor": 4.0}))
    c1, s1 = lr.rope_cos_sin(lin, np.array([[12]]))
    c2, s2 = lr.rope_cos_sin(inv, np.array([[3]]))
    assert np.allclose(c1, c2, atol=1e-6) and np.allclose(s1, s2, atol=1e-6)   # positions / factor
    try:
        lr.rope_inv_freq(dict(cfg, rope_scaling={"rope_type": "yarn", "factor": 2.0}))
        raise AssertionError("yarn accepted")
    except ValueError:
        pass
    print("rotary: OK (identity at 0, complex pairs, relative, llama3 bands + GGUF factors, linear)")


def naive_logits(m, seq):
    """Slow float32 reference for ONE unpadded sequence: loops over positions
    and heads, rotary as complex pairs, kv head h * KV // A. Logits of every position."""
    T, A, KV, hd = len(seq), m.A, m.KV, m.hd
    h = m.E[seq].astype(np.float64)
    rms = lambda x, w: x / np.sqrt((x * x).mean() + float(m.eps)) * w  # noqa: E731

    def rot(v, p):
        z = (v[:hd // 2] + 1j * v[hd // 2:]) * np.exp(1j * p * m.inv_freq.astype(np.float64))
        return np.concatenate([z.real, z.imag])
    for L in m.layers:
        b = lambda n: 0 if L[n] is None else L[n]  # noqa: E731
        x = np.array([rms(h[t], L["ln1"]) for t in range(T)])
        q = x @ L["wq"] + b("bq")
        k = x @ L["wk"] + b("bk")
        v = x @ L["wv"] + b("bv")
        if L.get("qn") is not None:   # qwen3: each head of each position on its own
            hn = lambda z, w, n: np.array([[rms(z[t, i * hd:(i + 1) * hd], w) for i in range(n)]  # noqa: E731
                                           for t in range(T)]).reshape(T, n * hd)
            q, k = hn(q, L["qn"], A), hn(k, L["kn"], KV)
        ctx = np.zeros((T, A * hd))
        for a in range(A):
            g = a * KV // A
            for t in range(T):
                qa = rot(q[t, a * hd:(a + 1) * hd], t)
                lo = 0 if not m.window else max(0, t - m.window + 1)
                ks = [rot(k[j, g * hd:(g + 1) * hd], j) for j in range(lo, t + 1)]
                sc = np.array([qa @ kk for kk in ks]) / np.sqrt(hd)
                p = np.exp(sc - sc.max())
                p /= p.sum()
                ctx[t, a * hd:(a + 1) * hd] = p @ v[lo:t + 1, g * hd:(g + 1) * hd]
        h = h + ctx @ L["wo"] + b("bo")
        x = np.array([rms(h[t], L["ln2"]) for t in range(T)])
        gt = x @ L["wgate"]
        h = h + (gt / (1 + np.exp(-gt)) * (x @ L["wup"])) @ L["wdown"]
    return np.array([rms(h[t], m.norm) for t in range(T)]) @ m.head.T


def fwd_all(m, seq):
    ids = np.array([seq])
    mask = np.ones_like(ids)
    return lr.forward(m, ids, lr.hf_positions(mask), lr.new_caches(m, 1, len(seq)), 0, mask, all_positions=True)[0]


def test_forward(tmp):
    lr.ROUND_FP16 = False
    for case in ("mha", "gqa8", "qwen2", "tied", "llama3", "qwen3", "qwen3-tied"):
        m = lr.load_model(os.path.join(tmp, case))
        seq = prompts(m.E.shape[0], 1, seed=5)[0] + [7, 9, 11]
        d = np.abs(fwd_all(m, seq) - naive_logits(m, seq)).max()
        assert d < 1e-4, (case, d)
    # qwen3: q and k normalised per head, so their projections' scale is gone (up to eps)
    q3 = lr.load_model(os.path.join(tmp, "qwen3"))
    seq = [5, 6, 7, 100, 200, 33]
    big = lr.Model.__new__(lr.Model)
    big.__dict__.update(q3.__dict__)
    big.layers = [dict(L, wq=L["wq"] * np.float32(4), wk=L["wk"] * np.float32(0.5)) for L in q3.layers]
    assert np.abs(fwd_all(q3, seq) - fwd_all(big, seq)).max() < 1e-3
    plain = lr.Model.__new__(lr.Model)
    plain.__dict__.update(q3.__dict__)
    plain.layers = [dict(L, qn=None, kn=None) for L in q3.layers]
    assert np.abs(fwd_all(q3, seq) - fwd_all(plain, seq)).max() > 1e-2
    # GQA == MHA whose k/v weights repeat each kv head for its query heads
    g = lr.load_model(os.path.join(tmp, "gqa8"))
    rep = g.A // g.KV
    mha = lr.Model.__new__(lr.Model)
    mha.__dict__.update(g.__dict__)
    mha.KV = g.A
    expand = lambda w: np.repeat(w.reshape(w.shape[0], g.KV, g.hd), rep, axis=1).reshape(w.shape[0], -1)  # noqa: E731
    mha.layers = [dict(L, wk=expand(L["wk"]), wv=expand(L["wv"])) for L in g.layers]
    seq = [5, 6, 7, 100, 200, 33]
    assert np.abs(fwd_all(g, seq) - fwd_all(mha, seq)).max() < 1e-5
    # tied: logits = final hidden @ embedding^T; an untied copy of it changes nothing
    t = lr.load_model(os.path.join(tmp, "tied"))
    assert t.head is t.E
    u = lr.Model.__new__(lr.Model)
    u.__dict__.update(t.__dict__)
    u.head = t.E.copy()
    assert np.array_equal(fwd_all(t, seq), fwd_all(u, seq))
    lr.ROUND_FP16 = True
    print("forward: OK (loop reference, GQA = repeated MHA, tied head = embedding, qwen3 q/k norms)")


def test_padding_cache_window(tmp):
    for fp32, tol in ((True, 1e-5), (False, 2e-2)):
        lr.ROUND_FP16 = not fp32
        for case in ("gqa8", "qwen2", "mistral", "qwen3"):
            m = lr.load_model(os.path.join(tmp, case))
            ps = prompts(m.E.shape[0])
            lg, toks = lr.generate(m, ps, 6)
            for i, p in enumerate(ps):     # alone, unpadded, forced to the same tokens
                if case == "mistral":      # the window counts pad slots (as HF's): differs by design
                    continue
                alone = lr.logits_nocache(m, [p], toks[i:i + 1])
                assert np.abs(alone - lg[i:i + 1]).max() < tol, (case, fp32, i)
            assert np.abs(lr.logits_nocache(m, ps, toks) - lg).max() < tol, (case, fp32)
    lr.ROUND_FP16 = False
    m = lr.load_model(os.path.join(tmp, "mistral"))
    seq = list(range(3, 17))                                        # 14 > window 8
    assert np.abs(fwd_all(m, seq) - naive_logits(m, seq)).max() < 1e-4
    wide = lr.Model.__new__(lr.Model)
    wide.__dict__.update(m.__dict__)
    wide.window = None
    assert np.abs(fwd_all(m, seq[:8]) - fwd_all(wide, seq[:8])).max() == 0   # window >= length: no effect
    assert np.abs(fwd_all(m, seq) - fwd_all(wide, seq)).max() > 1e-3        # and a narrow one matters
    lr.ROUND_FP16 = True
    print("padding/cache/window: OK (left padding = alone, cache = recompute, sliding window)")


def test_rounding_points(tmp):
    m = lr.load_model(os.path.join(tmp, "mha"))
    ids = np.array([[5, 9, 200, 17]])
    mask = np.ones_like(ids)
    caches = lr.new_caches(m, 1, 4)
    lr.forward(m, ids, lr.hf_positions(mask), caches, 0, mask)
    L = m.layers[0]
    x = lr.rms_norm(lr.r16(m.E[ids]), L["ln1"], m.eps).reshape(4, -1)
    k = (x @ L["wk"]).reshape(1, 4, m.KV, m.hd).transpose(0, 2, 1, 3)
    c, s = lr.rope_cos_sin(m.inv_freq, lr.hf_positions(mask))
    once = lr.rotate(k, c, s).astype(np.float16).astype(np.float32)
    twice = lr.rotate(k.astype(np.float16).astype(np.float32), c, s).astype(np.float16).astype(np.float32)
    K = caches[0][0]
    assert np.array_equal(K, K.astype(np.float16).astype(np.float32))   # the cache is fp16
    assert np.array_equal(K, once)                                       # rounded once, after rotary
    assert not np.array_equal(once, twice)                               # (and that is a real choice)
    ps = prompts(m.E.shape[0])
    a, _ = lr.generate(m, ps, 4)
    lr.ROUND_FP16 = False
    b, _ = lr.generate(m, ps, 4)
    lr.ROUND_FP16 = True
    d = np.abs(a - b).max()
    assert 0 < d < 5e-2, d
    print("rounding points: OK (cache = fp16(rotary(k)), fp16 vs fp32 readings differ by %.2g)" % d)


def test_gguf(tmp):
    # Q8_0 on hand-computed blocks: amax 127 -> d 1, x*id exact halves round away from 0
    x = np.zeros((1, 64), np.float32)
    x[0, :4] = [127.0, 2.5, -2.5, 0.49]
    x[0, 32:35] = [-63.5, 31.75, 0.0]
    d, q = gw.quantize_q8_0(x)
    assert d.tolist() == [[1.0, np.float16(63.5 / 127)]]
    assert q[0, :4].tolist() == [127, 3, -3, 0] and q[0, 32:35].tolist() == [-127, 64, 0], q[0, 32:35]
    assert np.array_equal(gw.quantize_q8_0(np.zeros((1, 32), np.float32))[1], np.zeros((1, 32), np.int8))
    w = np.random.default_rng(2).standard_normal((6, 64)).astype(np.float32)
    assert np.array_equal(gw.unpermute_rows(gw.permute_rows(w, 3), 3), w)
    p = gw.permute_rows(np.arange(8, dtype=np.float32)[:, None], 1)[:, 0]
    assert p.tolist() == [0, 4, 1, 5, 2, 6, 3, 7]                       # rows i, i + d/2 made adjacent
    for case, wtype, align in (("gqa8", "f16", 32), ("qwen2", "f32", 32), ("llama3", "q8_0", 64),
                               ("bf16-sharded", "bf16", 32), ("tied", "f16", 32), ("qwen3", "f32", 32)):
        cfg, t = mlc.load_llama_checkpoint(os.path.join(tmp, case))
        path = os.path.join(tmp, case + ".gguf")
        gw.from_checkpoint(os.path.join(tmp, case), path, wtype, alignment=align)
        ver, kv, tens, raw = gw.read_gguf(path)
        assert ver == 3 and kv["general.architecture"] == {"qwen2": "qwen2", "qwen3": "qwen3"}.get(
            cfg["model_type"], "llama")
        arch = kv["general.architecture"]
        assert kv[arch + ".attention.head_count_kv"] == cfg["num_key_value_heads"]
        assert len(kv["tokenizer.ggml.tokens"]) == cfg["vocab_size"]
        assert ("output.weight" in tens) != cfg["tie_word_embeddings"]
        assert ("rope_freqs.weight" in tens) == (case in ("gqa8", "llama3"))
        for hf, a in t.items():
            info = tens[gw.gguf_name(hf)]
            assert (info[2] - tens["token_embd.weight"][2]) % align == 0
            got = gw.tensor_f32(info, raw)
            if arch == "llama" and ".q_proj." in hf:
                got = gw.unpermute_rows(got, cfg["num_attention_heads"])
            elif arch == "llama" and ".k_proj." in hf:
                got = gw.unpermute_rows(got, cfg["num_key_value_heads"])
            if info[0] == gw.GT["Q8_0"]:
                want = gw.dequantize_q8_0(*gw.quantize_q8_0(a))
                # |x - fp16(d) q| <= d / 2 (rounding q) + 127 * |d - fp16(d)| <= d (1/2 + 127 * 2^-11)
                blk_d = np.abs(a.reshape(-1, 32)).max(1) / 127
                assert np.all(np.abs(got - a).reshape(-1, 32).max(1) <= blk_d * (0.5 + 127 * 2.0 ** -11) + 1e-7)
            elif info[0] == gw.GT["BF16"]:
                want = mc.bf16_bits_to_f32(mc.f32_to_bf16_bits(a))
            else:
                want = a
            assert np.array_equal(got, want), (case, hf)
    print("gguf: OK (Q8_0 blocks, permutation, read back per type, alignment 64)")


def test_gguf_experts(tmp):
    """Mixtures of experts as llama.cpp's converter writes them: the keys, the
    router F32, each role's experts one 3-D tensor whose slice e is expert e
    (ne [H, Fe, E] for gate and up, [Fe, H, E] for down), or one tensor per
    expert; dense layers keep their names; the reader gives the checkpoint back."""
    for case, wtype, experts in (("mixtral", "f16", "merged"), ("mixtral", "f16", "split"),
                                 ("mixtral", "q8_0", "merged"), ("qwen3-moe", "f32", "merged"),
                                 ("qwen3-moe-nonorm", "f16", "merged")):
        d = os.path.join(tmp, case)
        cfg, t = mlc.load_llama_checkpoint(d)
        path = os.path.join(tmp, "%s-%s-%s.gguf" % (case, wtype, experts))
        gw.from_checkpoint(d, path, wtype, experts=experts)
        _, kv, tens, raw = gw.read_gguf(path)
        arch = kv["general.architecture"]
        H, E, k = cfg["hidden_size"], mlc.n_experts(cfg), mlc.top_k(cfg)
        FE = mlc.moe_names(cfg)[4]
        assert arch == ("llama" if case == "mixtral" else "qwen3moe"), (case, arch)
        assert kv[arch + ".expert_count"] == E and kv[arch + ".expert_used_count"] == k
        assert kv[arch + ".feed_forward_length"] == cfg["intermediate_size"]
        if arch == "qwen3moe":
            assert kv[arch + ".expert_feed_forward_length"] == FE
            assert kv.get(arch + ".expert_weights_norm", True) == cfg["norm_topk_prob"], case
        for i in range(cfg["num_hidden_layers"]):
            sparse = mlc.is_sparse(cfg, i)
            assert ("blk.%d.ffn_gate_inp.weight" % i in tens) == sparse, (case, i)
            assert ("blk.%d.ffn_gate.weight" % i in tens) != sparse, (case, i)
            if not sparse:
                continue
            assert tens["blk.%d.ffn_gate_inp.weight" % i][:2] == (gw.GT["F32"], [H, E])
            for role, ne in (("gate", [H, FE, E]), ("up", [H, FE, E]), ("down", [FE, H, E])):
                if experts == "split":
                    assert tens["blk.%d.ffn_%s.%d.weight" % (i, role, E - 1)][1] == ne[:2], (case, role)
                    assert "blk.%d.ffn_%s_exps.weight" % (i, role) not in tens
                else:
                    assert tens["blk.%d.ffn_%s_exps.weight" % (i, role)][1] == ne, (case, role)
        back = gw.checkpoint_tensors(cfg, path)
        for hf, a in t.items():
            q8 = wtype == "q8_0" and a.ndim == 2 and not hf.endswith(mlc.moe_names(cfg)[0])   # routers stay F32
            want = gw.dequantize_q8_0(*gw.quantize_q8_0(a)).reshape(a.shape) if q8 else a
            assert np.array_equal(back[hf], want), (case, wtype, experts, hf)
    print("gguf experts: OK (keys, F32 routers, merged stacks slice by slice, per-expert tensors, dense layers)")


def moe_loop(M, x2):
    """The sparse block from its definition, one row and one chosen expert at
    a time, in float64: softmax, the k largest, renormalised or not."""
    out = np.zeros(x2.shape, np.float64)
    for r in range(x2.shape[0]):
        lg = x2[r].astype(np.float64) @ M["router"]
        p = np.exp(lg - lg.max())
        p /= p.sum()
        top = sorted(range(len(p)), key=lambda e: -p[e])[:M["k"]]
        w = p[top] / (p[top].sum() if M["norm"] else 1.0)
        for e, we in sorted(zip(top, w)):
            wg, wu, wd = (a.astype(np.float64) for a in M["experts"][e])
            g, u = x2[r] @ wg, x2[r] @ wu
            out[r] += we * ((g / (1 + np.exp(-g)) * u) @ wd)
    return out


def test_experts(tmp):
    rng = np.random.default_rng(4)
    for case, norm, sparse in (("mixtral", True, [1, 1]), ("qwen3-moe", True, [1, 0, 1]),
                               ("qwen3-moe-nonorm", False, [0, 1, 0, 1])):
        cfg, t = mlc.load_llama_checkpoint(os.path.join(tmp, case))
        m = lr.load_model(os.path.join(tmp, case))
        assert [L["moe"] is not None for L in m.layers] == [bool(x) for x in sparse], case
        router, gate, up, down, FE = mlc.moe_names(cfg)
        for i, sp in enumerate(sparse):
            assert (("layers.%d.%s" % (i, router)) in t) == bool(sp), (case, i)
            assert (("layers.%d.mlp.gate_proj.weight" % i) in t) != bool(sp), (case, i)
        E = mlc.n_experts(cfg)
        assert t["layers.%d.%s" % (sparse.index(1), down % (E - 1))].shape == (cfg["hidden_size"], FE)
        M = next(L["moe"] for L in m.layers if L["moe"] is not None)
        assert M["norm"] == norm, case
        x2 = rng.standard_normal((9, cfg["hidden_size"])).astype(np.float32)
        d = np.abs(lr.moe(M, x2) - moe_loop(M, x2)).max()
        assert d < 1e-4, (case, d)
        other = dict(M, norm=not norm)
        assert np.abs(lr.moe(M, x2) - lr.moe(other, x2)).max() > 1e-2, case   # renormalising shows
        everyone = dict(M, k=E, norm=True)                                      # all experts: softmax-weighted
        p = np.exp(x2 @ M["router"] - (x2 @ M["router"]).max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        dense = sum(p[:, e:e + 1] * lr.swiglu_mlp(x2, *M["experts"][e]) for e in range(E))
        assert np.abs(lr.moe(everyone, x2) - dense).max() < 1e-4, case
        x1 = x2[:1]
        chosen = set(np.argsort(-(x1 @ M["router"])[0], kind="stable")[:M["k"]].tolist())
        idle = next(e for e in range(E) if e not in chosen)
        zeroed = dict(M, experts=[tuple(np.zeros_like(a) for a in ex) if e == idle else ex
                                  for e, ex in enumerate(M["experts"])])
        assert np.array_equal(lr.moe(M, x1), lr.moe(zeroed, x1)), case
    del lr.ROW_GAPS[:]
    print("experts: OK (loop reference, renormalisation on and off, top-all = softmax mixture, idle experts, "
          "dense layers by mlp_only_layers and decoder_sparse_step)")


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_checkpoints(tmp)
        test_rotary()
        test_forward(tmp)
        test_padding_cache_window(tmp)
        test_rounding_points(tmp)
        test_experts(tmp)
        test_gguf(tmp)
        test_gguf_experts(tmp)
    print("llama_selftest: OK")


if __name__ == "__main__":
    main()
