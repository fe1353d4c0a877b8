/* cuda_ops.c - the cuda backend's ops: each engine op of fg_engine_ops.h as
 * cuBLAS GEMMs and the kernels of cuda_kernels.cu, all on the compute
 * stream, in the order backend_host.c's fg_fwd calls compute them (see
 * backend_cuda.c for the numerics), for every family: each op reads the
 * description's kinds (norm, MLP, positions) and widths. Every pointer here
 * is device memory (a->in / a->out resolved through the backend's dev_ptr)
 * but the pinned buffers named so. Shapes as fg_backend.h: B sequences, S
 * new tokens, H hidden, F ffn, D embedding width, V vocabulary, R = B*S rows,
 * Q = n_heads * head_dim (q, ctx), KV = n_kv_heads * head_dim (k, v, cache).
 *
 * Weights: every matrix in the format the op's description gives it
 * (fg_config_fmt), each GEMM with a weight through fg_cu_linear
 * (cuda_linear.c: cuBLAS on F16, the dequantizing kernels on the rest); the
 * embedding gathers rows of any format (cuda_fmt.h). Norm weights and
 * biases are always fp16.
 *
 * The Llama family's kernels here (RMSNorm, rotary, SwiGLU, grouped-query
 * and sliding-window attention) compile with -Werror but have not run on a
 * GPU: no GPU was at hand when they were written. tests/gpu's checks (host
 * against cuda, op by op and end to end) are what would first run them. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "cuda_fmt.h"
#include "cuda_kernels.h"
#include "cuda_linear.h"
#include "cuda_moe.h"
#include "cuda_ops.h"
#include "fg_fmt.h"
#include "fg_llama.h"
#include "fg_sample.h"

#define DECODE_MAX_S 4        /* up to this many new tokens: the decode kernel, else GEMMs */

_Static_assert(FG_CONFIG_MAX_EXPERTS <= FG_CUK_MOE_MAX_EXPERTS, "cuda_moe.cu's top k and sort hold every expert");

typedef const uint16_t *cw;   /* an fp16 tensor: a norm's weight, a bias, the position table */

/* One op's view: the stream, cuBLAS, the workspace regions. */
typedef struct {
    void *ctx;
    const fg_op_args *a;
    cudaStream_t s;
    cublasHandle_t blas;
    const fg_cuda_ws *ws;
    uint16_t *x16, *q16, *k16, *v16, *ff16;   /* (R, max(H, D, Q)), (R, Q), (R, KV) x 2, (R, max(FF, D)) */
    float *y32;                               /* (R, max(H, Q)), or the attention's tiles */
    int32_t *flag;
    /* a sparse layer's (fg_devsize.h; unused without experts): */
    float *moe_logits, *moe_wt;               /* (R, E) logits then p; (R, k) routing weights */
    int32_t *moe_sel, *moe_order, *moe_counts;   /* (R, k) experts; (R k) slots by expert; (E) counts, (E + 1) starts */
    uint16_t *moe_x16;                        /* (R, H) one expert's rows */
    float *moe_y32;                           /* (R, H) that expert's output */
    uint16_t *kv16;                           /* a compressed cache's kv head expanded: (T, d) keys, (T, d) values */
    fg_cu_lin lin;                            /* cuBLAS, the stream and the dequantization tile */
    int R, H, Q, KV;
} op_env;

static op_env env_of(void *ctx, const fg_op_args *a) {
    op_env e = {.ctx = ctx, .a = a, .s = fg_cu_compute(ctx), .blas = fg_cu_blas(ctx)};
    uint8_t *w = fg_cu_ws(ctx, &e.ws);
    e.x16 = (uint16_t *)(w + e.ws->x16);
    e.q16 = (uint16_t *)(w + e.ws->q16);
    e.k16 = (uint16_t *)(w + e.ws->k16);
    e.v16 = (uint16_t *)(w + e.ws->v16);
    e.y32 = (float *)(w + e.ws->y32);
    e.ff16 = (uint16_t *)(w + e.ws->ff16);
    e.flag = (int32_t *)(w + e.ws->flags);
    e.moe_logits = (float *)(w + e.ws->moe_logits);
    e.moe_wt = (float *)(w + e.ws->moe_wt);
    e.moe_sel = (int32_t *)(w + e.ws->moe_sel);
    e.moe_order = (int32_t *)(w + e.ws->moe_order);
    e.moe_counts = (int32_t *)(w + e.ws->moe_counts);
    e.moe_x16 = (uint16_t *)(w + e.ws->moe_x16);
    e.moe_y32 = (float *)(w + e.ws->moe_y32);
    e.kv16 = (uint16_t *)(w + e.ws->kv16);
    e.lin = (fg_cu_lin){.blas = e.blas, .s = e.s, .tile = e.ws->w16_bytes ? (uint16_t *)(w + e.ws->w16) : NULL,
                        .tile_bytes = e.ws->w16_bytes, .op = a->name};
    e.R = a->st.B * a->st.S;
    e.H = a->cfg.hidden;
    e.Q = fg_config_q_dim(&a->cfg);
    e.KV = fg_config_kv_dim(&a->cfg);
    return e;
}

static fg_status kfail(int err, const op_env *e, const char *what) {
    return fg_err_set(FG_ERUNTIME, "%s on cuda: %s: %s", e->a->name, what, cudaGetErrorString((cudaError_t)err));
}
#define K(call, what)                               \
    do {                                            \
        int k_ = (call);                            \
        if (k_) return kfail(k_, e, what);          \
    } while (0)

static fg_status blas_ok(cublasStatus_t b, const op_env *e, const char *what) {
    return b == CUBLAS_STATUS_SUCCESS
               ? FG_OK
               : fg_err_set(FG_ERUNTIME, "%s on cuda: cuBLAS %s: %s", e->a->name, what, cublasGetStatusString(b));
}

/* ---- Linear layers --------------------------------------------------------- */

/* A layer's matrix `which` and a model-level one, in their formats. */
static fg_cu_w lw(const op_env *e, int which) {
    return (fg_cu_w){e->a->lw.w[which], fg_config_fmt(&e->a->cfg, fg_spec_layer(0, which))};
}
static fg_cu_w gw(const op_env *e, int which) {
    return (fg_cu_w){e->a->gw.w[which], fg_config_fmt(&e->a->cfg, fg_spec_global(which))};
}

/* y (rows, out) = alpha x (rows, in) W (out, in)^T + beta y, fp32 sums; y
 * fp16 (yt CUDA_R_16F) or fp32. */
static fg_status gemm(const op_env *e, void *y, cudaDataType yt, const uint16_t *x, fg_cu_w W, int rows, int in,
                      int out, float alpha, float beta, const char *what) {
    return fg_cu_linear(&e->lin, y, yt == CUDA_R_32F, x, W, rows, in, out, alpha, beta, what);
}

/* y16 = round16(scale (x W^T + b)): the bias as C with beta = scale, one
 * rounding (fg_gemm_f16w adds the bias in fp32 before anything rounds). */
static fg_status linear16(const op_env *e, uint16_t *y16, const uint16_t *x, fg_cu_w W, cw b, int rows, int in, int out,
                          float scale, const char *what) {
    if (b) K(fg_cuk_bias_rows16(y16, b, rows, out, e->s), "bias");
    return gemm(e, y16, CUDA_R_16F, x, W, rows, in, out, scale, b ? scale : 0.0f, what);
}

/* y32 = h + x W^T + b: a block's output before its rounding. */
static fg_status linear_resid(const op_env *e, const uint16_t *h, const uint16_t *x, fg_cu_w W, cw b, int in,
                              const char *what) {
    K(fg_cuk_resid_init(e->y32, h, b, e->R, e->H, e->s), "residual");
    return gemm(e, e->y32, CUDA_R_32F, x, W, e->R, in, e->H, 1.0f, 1.0f, what);
}

/* *x = the block's input: the norm of h (a LayerNorm, or an RMSNorm:
 * weight only) into x16 for pre-norm models, else h. */
static fg_status norm_in(const op_env *e, const uint16_t *h, int ln_w, int ln_b, const uint16_t **x) {
    const fg_op_args *a = e->a;
    cw w = a->lw.w[ln_w];
    *x = h;
    if (!a->cfg.pre_ln) return FG_OK;
    if (a->cfg.norm_kind == FG_NORM_RMS)
        K(fg_cuk_rmsnorm(e->x16, h, NULL, w, a->cfg.norm_eps, e->R, e->H, 1, 0, e->s), "RMSNorm");
    else K(fg_cuk_layernorm(e->x16, h, NULL, w, a->lw.w[ln_b], e->R, e->H, 1, 0, e->s), "LayerNorm");
    *x = e->x16;
    return FG_OK;
}

/* h_out = round16(y32), or for post-LayerNorm models round16(LN(y32)). */
static fg_status finish_block(const op_env *e, uint16_t *h_out, cw ln_w, cw ln_b) {
    if (e->a->cfg.pre_ln) K(fg_cuk_round16(h_out, e->y32, (int64_t)e->R * e->H, e->s), "round");
    else K(fg_cuk_layernorm(h_out, NULL, e->y32, ln_w, ln_b, e->R, e->H, 1, 0, e->s), "LayerNorm");
    return FG_OK;
}

/* ---- EMBED ----------------------------------------------------------------- */

fg_status fg_cu_embed(void *ctx, const fg_op_args *a) {
    op_env env = env_of(ctx, a), *e = &env;
    const int32_t *ids = a->in[0];   /* (B*S) */
    uint16_t *h = a->out[0];         /* (B*S, H) */
    cw E = a->gw.w[FG_GW_EMBED_TOKENS], P = a->gw.w[FG_GW_EMBED_POS];
    int V = a->cfg.vocab_size, D = a->cfg.word_embed_proj_dim, ef = gw(e, FG_GW_EMBED_TOKENS).fmt;
    fg_status st = FG_OK;
    K(cudaMemsetAsync(e->flag, FG_CUK_BAD_FILL, sizeof(int32_t), e->s), "flag");
    const float *e32 = NULL;
    /* rows of another format than F16 are dequantized (fg_fmt.c's fp32 values): to fp16 where the
     * next step reads fp16 (rotary models' h, project_in's input), to fp32 where positions are
     * added to them first, so that sum rounds once as the host's does */
    if (a->cfg.pos_kind == FG_POS_ROPE) {   /* the table's rows alone: positions are rotary, in ATTN */
        if (ef == FG_FMT_F16) K(fg_cuk_embed_gather(h, ids, E, e->R, e->H, V, e->flag, e->s), "gather");
        else K(fg_cuk_fmt_rows(h, NULL, ids, E, ef, e->H, V, 0, e->R, e->flag, e->s), "gather");
    } else if (fg_config_has_proj(&a->cfg)) {
        /* the gathered rows are fp16 already (F16): project_in's GEMM loses nothing to storage */
        if (ef == FG_FMT_F16) K(fg_cuk_embed_gather(e->x16, ids, E, e->R, D, V, e->flag, e->s), "gather");
        else K(fg_cuk_fmt_rows(e->x16, NULL, ids, E, ef, D, V, 0, e->R, e->flag, e->s), "gather");
        if ((st = gemm(e, e->y32, CUDA_R_32F, e->x16, gw(e, FG_GW_PROJ_IN), e->R, D, e->H, 1, 0, "project_in")))
            return st;
        e32 = e->y32;
    } else if (ef != FG_FMT_F16) {
        K(fg_cuk_fmt_rows(NULL, e->y32, ids, E, ef, e->H, V, 0, e->R, e->flag, e->s), "gather");
        e32 = e->y32;
    }
    if (a->cfg.pos_kind != FG_POS_ROPE)
        K(fg_cuk_embed_pos(h, e32, ids, E, P, a->st.mask, a->st.mask_stride, a->st.B, a->st.S, a->st.past, e->H, V,
                           e->flag, e->s), "positions");
    /* ids are device data: the check the host backend makes before it
     * computes comes back here after the fact, before the DONE */
    int32_t *bad = fg_cu_bad_host(ctx);
    K(cudaMemcpyAsync(bad, e->flag, sizeof *bad, cudaMemcpyDeviceToHost, e->s), "flag");
    K(cudaStreamSynchronize(e->s), "EMBED");
    if (bad[0] != FG_CUK_BAD_NONE) {
        int32_t row = bad[0];
        K(cudaMemcpyAsync(bad, ids + row, sizeof *bad, cudaMemcpyDeviceToHost, e->s), "ids");
        K(cudaStreamSynchronize(e->s), "EMBED");
        return fg_err_set(FG_EINPUT, "EMBED: ids[%" PRId32 "] = %" PRId32 " is outside the vocabulary [0, %d)", row,
                          bad[0], V);
    }
    return FG_OK;
}

/* ---- attention --------------------------------------------------------------- */

/* q (R, Q), k (R, KV) = round16(scale rotary(x W + b)) (fg_llama_attn_qkv):
 * each projection in fp32 (the bias as C) so that rotary and the scale act
 * on the unrounded sum, then one rounding; v as the other projections.
 * With qk_norm (Qwen3), each head of that fp32 sum RMS-normalised in place
 * (fp32, its norm's [head_dim] weight) before rotary: no rounding point. */
static fg_status qkv_rotary(const op_env *e, const uint16_t *x, uint16_t *q, uint16_t *k, uint16_t *v) {
    const fg_op_args *a = e->a;
    const fg_layer_w *w = &a->lw;
    const fg_step *t = &a->st;
    int d = fg_config_head_dim(&a->cfg);
    if (d / 2 > FG_CUK_ROPE_MAX_HALF)
        return fg_err_set(FG_EINPUT, "%s on cuda: head_dim %d exceeds the rotary kernel's %d", a->name, d,
                          2 * FG_CUK_ROPE_MAX_HALF);
    fg_cuk_rope f = {{0}};
    fg_rope_inv_freq(f.inv_freq, &a->cfg);   /* the host's frequencies, bit for bit */
    fg_status st;
    K(fg_cuk_bias_rows32(e->y32, w->w[FG_LW_Q_B], e->R, e->Q, e->s), "bias");
    if ((st = gemm(e, e->y32, CUDA_R_32F, x, lw(e, FG_LW_Q_W), e->R, e->H, e->Q, 1, 1, "q_proj"))) return st;
    if (a->cfg.qk_norm)
        K(fg_cuk_rmsnorm_f32(NULL, e->y32, NULL, e->y32, w->w[FG_LW_QN_W], a->cfg.norm_eps, e->R * a->cfg.n_heads, d,
                             e->s), "q_norm");
    K(fg_cuk_rope16(q, e->y32, t->mask, t->mask_stride, t->B, t->S, t->past, a->cfg.n_heads, d, &f,
                    1.0f / sqrtf((float)d), e->s), "rotary");
    K(fg_cuk_bias_rows32(e->y32, w->w[FG_LW_K_B], e->R, e->KV, e->s), "bias");
    if ((st = gemm(e, e->y32, CUDA_R_32F, x, lw(e, FG_LW_K_W), e->R, e->H, e->KV, 1, 1, "k_proj"))) return st;
    if (a->cfg.qk_norm)
        K(fg_cuk_rmsnorm_f32(NULL, e->y32, NULL, e->y32, w->w[FG_LW_KN_W], a->cfg.norm_eps, e->R * a->cfg.n_kv_heads,
                             d, e->s), "k_norm");
    K(fg_cuk_rope16(k, e->y32, t->mask, t->mask_stride, t->B, t->S, t->past, a->cfg.n_kv_heads, d, &f, 1.0f, e->s),
      "rotary");
    return linear16(e, v, x, lw(e, FG_LW_V_W), w->w[FG_LW_V_B], e->R, e->H, e->KV, 1, "v_proj");
}

/* q (R, Q), k, v (R, KV) = round16(norm1?(h) W + b), q scaled after its bias
 * (and after rotary where the model has it). */
static fg_status qkv(const op_env *e, const uint16_t *h, uint16_t *q, uint16_t *k, uint16_t *v) {
    const fg_op_args *a = e->a;
    const fg_layer_w *w = &a->lw;
    const uint16_t *x;
    fg_status st = norm_in(e, h, FG_LW_LN1_W, FG_LW_LN1_B, &x);
    if (st) return st;
    if (a->cfg.pos_kind == FG_POS_ROPE) return qkv_rotary(e, x, q, k, v);
    float scale = 1.0f / sqrtf((float)fg_config_head_dim(&a->cfg));
    if ((st = linear16(e, q, x, lw(e, FG_LW_Q_W), w->w[FG_LW_Q_B], e->R, e->H, e->H, scale, "q_proj")) ||
        (st = linear16(e, k, x, lw(e, FG_LW_K_W), w->w[FG_LW_K_B], e->R, e->H, e->H, 1, "k_proj")))
        return st;
    return linear16(e, v, x, lw(e, FG_LW_V_W), w->w[FG_LW_V_B], e->R, e->H, e->H, 1, "v_proj");
}

/* Where a tile of prefill attention reads its keys and values: kb, vb the
 * tile's first query head's kv head at position 0, ld elements from one
 * position to the next, kstride from one query head's kv head to the
 * next's (d: a kv head each; 0: the tile shares one). */
typedef struct {
    const uint16_t *kb, *vb;
    long long ld, kstride;
} kv_view;

/* One tile of prefill attention of sequence b: hn query heads from h0 and sn
 * queries from i0. scores (hn, sn, T) fp32 = q k^T, weights (hn, sn, T)
 * fp16 = softmax, ctx = w v. */
static fg_status attn_tile(const op_env *e, const uint16_t *q, kv_view kv, uint16_t *ctx, int b, int h0, int hn, int i0,
                           int sn) {
    const fg_op_args *a = e->a;
    int S = a->st.S, past = a->st.past, T = past + S, d = fg_config_head_dim(&a->cfg);
    const float one = 1, zero = 0;
    float *scores = e->y32;
    uint16_t *p16 = (uint16_t *)(scores + (size_t)hn * sn * T);
    const uint16_t *qb = q + ((size_t)b * S + i0) * e->Q + (size_t)h0 * d;
    uint16_t *cb = ctx + ((size_t)b * S + i0) * e->Q + (size_t)h0 * d;
    /* scores^T (T x sn) = K (T x d) q^T (d x sn), per head */
    fg_status st = blas_ok(
        cublasGemmStridedBatchedEx(e->blas, CUBLAS_OP_T, CUBLAS_OP_N, T, sn, d, &one, kv.kb, CUDA_R_16F, (int)kv.ld,
                                   kv.kstride, qb, CUDA_R_16F, e->Q, d, &zero, scores, CUDA_R_32F, T,
                                   (long long)sn * T, hn, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        e, "q k^T");
    if (st) return st;
    K(fg_cuk_softmax(p16, scores, a->st.mask + (size_t)b * a->st.mask_stride, hn * sn, sn, T, past, i0,
                     a->cfg.sliding_window, e->s),
      "softmax");
    /* ctx^T (d x sn) = V^T (d x T) w^T (T x sn), per head, rounded by cuBLAS's fp16 output */
    return blas_ok(cublasGemmStridedBatchedEx(e->blas, CUBLAS_OP_N, CUBLAS_OP_N, d, sn, T, &one, kv.vb, CUDA_R_16F,
                                              (int)kv.ld, kv.kstride, p16, CUDA_R_16F, T, (long long)sn * T, &zero, cb,
                                              CUDA_R_16F, e->Q, d, hn, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                   e, "w v");
}

/* Prefill attention of sequence b by strided-batched GEMMs over heads,
 * tiled to fit the workspace: tiles of query heads (within one kv head's
 * group where heads share kv heads) by queries. The fp16 cache is read in
 * place; a compressed one (kq, vq) is expanded a kv head at a time into
 * kv16 with the step's own k16, v16 after its past (fg_cuk_cache_expand). */
static fg_status attn_gemm(const op_env *e, const uint16_t *q, const void *kc, const void *vc, const uint16_t *k16,
                           const uint16_t *v16, uint16_t *ctx, int b) {
    const fg_op_args *a = e->a;
    int B = a->st.B, S = a->st.S, past = a->st.past, T = past + S, d = fg_config_head_dim(&a->cfg);
    int nh = a->cfg.n_heads, nkv = a->cfg.n_kv_heads, grp = nh / nkv, q4 = a->cfg.compress_cache;
    int span = grp == 1 && !q4 ? nh : grp;   /* heads one batched GEMM may cover */
    uint64_t per = FG_CUDA_SCORE_BYTES * (uint64_t)T, cap = e->ws->y32_bytes / per;   /* (head, query) rows a tile holds */
    if (cap < 1)
        return fg_err_set(FG_EINPUT, "%s: a context of %d positions needs %" PRIu64 " bytes of attention workspace, "
                          "more than the %" PRIu64 " DEVICE_INIT gave", a->name, T, per, e->ws->y32_bytes);
    if (q4 && 2 * sizeof(uint16_t) * (uint64_t)T * d > e->ws->kv16_bytes)
        return fg_err_set(FG_EINPUT, "%s: a compressed cache of %d positions expands to more than the %" PRIu64
                          " bytes DEVICE_INIT gave", a->name, T, e->ws->kv16_bytes);
    int hc = cap >= (uint64_t)span * S ? span : cap >= (uint64_t)S ? (int)(cap / S) : 1;
    int sc = cap >= (uint64_t)S ? S : (int)cap;
    uint16_t *kx = e->kv16, *vx = e->kv16 + (size_t)T * d;
    for (int g0 = 0; g0 < nh; g0 += span) {
        int kvh = g0 / grp;
        kv_view kv;
        if (q4) {
            K(fg_cuk_cache_expand(kx, kc, k16, b, kvh, B, S, past, nkv, d, e->s), "cache expand");
            K(fg_cuk_cache_expand(vx, vc, v16, b, kvh, B, S, past, nkv, d, e->s), "cache expand");
            kv = (kv_view){kx, vx, d, 0};
        } else {   /* the cache's row: position t of sequence b at t*B + b */
            size_t at = (size_t)b * e->KV + (size_t)kvh * d;
            kv = (kv_view){(const uint16_t *)kc + at, (const uint16_t *)vc + at, (long long)B * e->KV,
                           nkv == nh ? d : 0};
        }
        for (int h0 = g0; h0 < g0 + span; h0 += hc) {
            int hn = g0 + span - h0 < hc ? g0 + span - h0 : hc;
            kv_view t = {kv.kb + (size_t)(h0 - g0) * kv.kstride, kv.vb + (size_t)(h0 - g0) * kv.kstride, kv.ld,
                         kv.kstride};
            for (int i0 = 0; i0 < S; i0 += sc) {
                fg_status st = attn_tile(e, q, t, ctx, b, h0, hn, i0, S - i0 < sc ? S - i0 : sc);
                if (st) return st;
            }
        }
    }
    return FG_OK;
}

/* fg_opt_attn_core: k, v into the cache at [past, past+S), then ctx (R, Q)
 * = round16(attention of q over the cache), query heads grouped on the kv
 * heads, keys within the sliding window where the model has one. A
 * compressed cache (--compress-cache) in the host's order: attention over
 * its past and the step's own k and v as computed, then k and v stored
 * compressed. */
static fg_status core(const op_env *e, const uint16_t *q, const uint16_t *k, const uint16_t *v, void *kc, void *vc,
                      uint16_t *ctx) {
    const fg_op_args *a = e->a;
    int B = a->st.B, S = a->st.S, past = a->st.past, q4 = a->cfg.compress_cache;
    fg_cuk_attn_shape sh = {a->cfg.n_heads, a->cfg.n_kv_heads, fg_config_head_dim(&a->cfg), a->cfg.sliding_window};
    if (!q4) {
        K(fg_cuk_cache_store(kc, k, B, S, past, e->KV, e->s), "cache store");
        K(fg_cuk_cache_store(vc, v, B, S, past, e->KV, e->s), "cache store");
    }
    if (S <= DECODE_MAX_S && past + S <= fg_cuk_decode_max_T() && sh.head_dim <= FG_CUK_DECODE_MAX_HEAD_DIM) {
        if (q4) K(fg_cuk_attn_decode_q4(ctx, q, kc, vc, k, v, a->st.mask, a->st.mask_stride, B, S, past, &sh, e->s),
                  "attention");
        else K(fg_cuk_attn_decode(ctx, q, kc, vc, a->st.mask, a->st.mask_stride, B, S, past, &sh, e->s), "attention");
    } else {
        for (int b = 0; b < B; b++) {
            fg_status st = attn_gemm(e, q, kc, vc, k, v, ctx, b);
            if (st) return st;
        }
    }
    if (q4) {
        K(fg_cuk_cache_store_q4(kc, k, B, S, past, a->cfg.n_kv_heads, sh.head_dim, e->s), "cache store");
        K(fg_cuk_cache_store_q4(vc, v, B, S, past, a->cfg.n_kv_heads, sh.head_dim, e->s), "cache store");
    }
    return FG_OK;
}

/* fg_opt_attn_out: h_out = round16(LN1?(h + ctx Wo + bo)). */
static fg_status attn_out(const op_env *e, const uint16_t *h, const uint16_t *ctx, uint16_t *h_out) {
    const fg_layer_w *w = &e->a->lw;
    fg_status st = linear_resid(e, h, ctx, lw(e, FG_LW_O_W), w->w[FG_LW_O_B], e->Q, "out_proj");
    return st ? st : finish_block(e, h_out, w->w[FG_LW_LN1_W], w->w[FG_LW_LN1_B]);
}

/* The attention block: ctx goes to x16, whose LayerNorm output the q k v
 * GEMMs have read by then. */
static fg_status attn_block(const op_env *e, const uint16_t *h, void *kc, void *vc, uint16_t *h_out) {
    fg_status st = qkv(e, h, e->q16, e->k16, e->v16);
    if (!st) st = core(e, e->q16, e->k16, e->v16, kc, vc, e->x16);
    return st ? st : attn_out(e, h, e->x16, h_out);
}

fg_status fg_cu_attn(void *ctx, const fg_op_args *a) {
    op_env env = env_of(ctx, a);
    return attn_block(&env, a->in[0], a->in[2], a->in[3], a->out[0]);
}

fg_status fg_cu_attn_qkv(void *ctx, const fg_op_args *a) {
    op_env env = env_of(ctx, a);
    return qkv(&env, a->in[0], a->out[0], a->out[1], a->out[2]);
}

fg_status fg_cu_attn_out(void *ctx, const fg_op_args *a) {
    op_env env = env_of(ctx, a);
    return attn_out(&env, a->in[0], a->in[1], a->out[0]);
}

/* ---- a sparse layer's MLP: router, top k, experts -------------------------------- */

/* fg_llama_moe_route's and fg_llama_mlp_block's route of h (R, H): x =
 * RMSNorm(h) in fp32 into y32 (and, with x16, rounded there too: the
 * experts' input), the router's logits on that fp32 x (F16 router, fp32
 * sums, as the host's: only the summation order differs), the top k by the
 * router's kind, then the rows counted by expert into counts (E), and with
 * starts and order also sorted (cuda_moe.h). MOE_ROUTE and MLP both run
 * exactly this on the same h, and every kernel of it sums in a fixed order,
 * so the counts MOE_ROUTE returns name the experts MLP reads. */
static fg_status moe_route(const op_env *e, const uint16_t *h, uint16_t *x16, int32_t *counts, int32_t *starts,
                           int32_t *order) {
    const fg_model_config *c = &e->a->cfg;
    const fg_layer_w *w = &e->a->lw;
    int E = c->n_experts, k = c->experts_per_token;
    int renorm = c->router == FG_ROUTER_MIXTRAL || (c->router == FG_ROUTER_QWEN3_MOE && c->moe_norm_topk);
    K(fg_cuk_rmsnorm_f32(x16, e->y32, h, NULL, w->w[FG_LW_LN2_W], c->norm_eps, e->R, e->H, e->s), "RMSNorm");
    K(fg_cuk_moe_router(e->moe_logits, e->y32, w->w[FG_LW_ROUTER_W], e->R, e->H, E, e->s), "router");
    K(fg_cuk_moe_topk(e->moe_sel, e->moe_wt, e->moe_logits, e->R, E, k, renorm, e->s), "top k");
    K(fg_cuk_moe_sort(counts, starts, order, e->moe_sel, e->R * k, E, e->s), "rows by expert");
    return FG_OK;
}

/* fg_moe_mlp inside fg_llama_mlp_block: h_out = round16(h + sum over each
 * row's k experts, ascending, of w * down(silu(gate x) * up x)). The route
 * comes to the host (pinned, one synchronisation) for the experts' row
 * counts, which size their GEMMs: an expert no row chose is not read (its
 * bytes may not be loaded: --expert-load routed). Each chosen expert in
 * turn: its rows gathered, gate and up (rounded: the next GEMM's fp16
 * inputs, as the dense MLP's), SwiGLU (rounded), down in fp32, and the
 * weighted rows added into y32 (zeroed after the router read x from it);
 * at up to FG_CUDA_GEMV_MAX_ROWS rows an expert's Linears are GEMVs in any
 * format. Expert e is bytes e * fg_fmt_bytes(fmt, rows, cols) on of each
 * stack (fg_moe.c's expert_w; a --compress-weight stack holds each
 * expert's Q4G64 slice so). */
/* The sparse MLP; the outputs of experts [g_lo, g_lo + g_n) taken from
 * given (rows * k, H) fp32 instead of computed (MLP_SPLIT), added where and
 * as a computed expert's are. */
static fg_status moe_block_given(const op_env *e, const uint16_t *h, uint16_t *h_out, int g_lo, int g_n,
                                 const float *given) {
    const fg_model_config *c = &e->a->cfg;
    int E = c->n_experts, k = c->experts_per_token, H = e->H, F = c->moe_ffn_dim;
    int32_t *counts = e->moe_counts, *starts = counts + E;
    fg_status st = moe_route(e, h, e->x16, counts, starts, e->moe_order);
    if (st) return st;
    int32_t *hc = fg_cu_moe_host(e->ctx);   /* counts (E), starts (E + 1) */
    K(cudaMemcpyAsync(hc, counts, sizeof(int32_t) * (2 * (size_t)E + 1), cudaMemcpyDeviceToHost, e->s), "counts");
    K(cudaMemsetAsync(e->y32, 0, sizeof(float) * (size_t)e->R * H, e->s), "accumulator");
    K(cudaStreamSynchronize(e->s), "route");
    fg_cu_lin L = e->lin;
    L.f16_gemv = 1;
    fg_cu_w gw_ = lw(e, FG_LW_FC1_W), uw = lw(e, FG_LW_UP_W), dw = lw(e, FG_LW_FC2_W);
    uint64_t gb = fg_fmt_bytes(gw_.fmt, (uint64_t)F, (uint64_t)H), ub = fg_fmt_bytes(uw.fmt, (uint64_t)F, (uint64_t)H);
    uint64_t db = fg_fmt_bytes(dw.fmt, (uint64_t)H, (uint64_t)F);
    uint16_t *gate = e->ff16, *up = e->ff16 + (size_t)e->R * F;
    for (int x = 0; x < E; x++) {
        int n = hc[x];
        if (!n) continue;
        const int32_t *slots = e->moe_order + hc[E + x];
        if (given && x >= g_lo && x < g_lo + g_n) {   /* computed by the cpu worker */
            K(fg_cuk_moe_take(e->moe_y32, given, slots, n, H, e->s), "given outputs");
            K(fg_cuk_moe_scatter(e->y32, e->moe_y32, slots, e->moe_wt, n, k, H, e->s), "scatter");
            continue;
        }
        fg_cu_w g = {(const uint8_t *)gw_.p + (size_t)x * gb, gw_.fmt}, u = {(const uint8_t *)uw.p + (size_t)x * ub, uw.fmt};
        fg_cu_w d = {(const uint8_t *)dw.p + (size_t)x * db, dw.fmt};
        K(fg_cuk_moe_gather(e->moe_x16, e->x16, slots, n, k, H, e->s), "gather");
        if ((st = fg_cu_linear(&L, gate, 0, e->moe_x16, g, n, H, F, 1, 0, "expert gate")) ||
            (st = fg_cu_linear(&L, up, 0, e->moe_x16, u, n, H, F, 1, 0, "expert up")))
            return st;
        K(fg_cuk_swiglu16(gate, up, (int64_t)n * F, e->s), "SwiGLU");
        if ((st = fg_cu_linear(&L, e->moe_y32, 1, gate, d, n, F, H, 1, 0, "expert down"))) return st;
        K(fg_cuk_moe_scatter(e->y32, e->moe_y32, slots, e->moe_wt, n, k, H, e->s), "scatter");
    }
    K(fg_cuk_resid_round16(h_out, h, e->y32, (int64_t)e->R * H, e->s), "residual");
    return FG_OK;
}

static fg_status moe_block(const op_env *e, const uint16_t *h, uint16_t *h_out) {
    return moe_block_given(e, h, h_out, 0, 0, NULL);
}

/* MLP_SPLIT: the sparse MLP with the cpu worker's experts' outputs given
 * (ycpu, the last input). */
fg_status fg_cu_mlp_split(void *ctx, const fg_op_args *a) {
    op_env env = env_of(ctx, a);
    if (!a->lw.w[FG_LW_ROUTER_W]) return fg_err_set(FG_EINPUT, "MLP_SPLIT: the layer has no router (not a sparse layer)");
    return moe_block_given(&env, a->in[0], a->out[0], a->x_lo, a->x_n, a->in[a->info->n_in - 1]);
}

/* MOE_ROUTE: the counts (E) of the route moe_block takes on the same h. */
fg_status fg_cu_moe_route(void *ctx, const fg_op_args *a) {
    op_env env = env_of(ctx, a);
    if (!a->lw.w[FG_LW_ROUTER_W]) return fg_err_set(FG_EINPUT, "MOE_ROUTE: the layer has no router (not a sparse layer)");
    return moe_route(&env, a->in[0], NULL, a->out[0], NULL, NULL);
}

/* ---- MLP ------------------------------------------------------------------- */

/* fg_opt_mlp_block: h_out = round16(LN2?(h + relu(LN2?(h) W1 + b1) W2 + b2));
 * fg_llama_mlp_block: h_out = round16(h + down(silu(gate x) * up x)), x =
 * RMSNorm(h), gate and up rounded (they are the next GEMM's fp16 inputs), the
 * product rounded once. */
static fg_status mlp_block(const op_env *e, const uint16_t *h, uint16_t *h_out) {
    const fg_op_args *a = e->a;
    const fg_layer_w *w = &a->lw;
    int F = a->cfg.ffn_dim;
    const uint16_t *x;
    if (w->w[FG_LW_ROUTER_W]) return moe_block(e, h, h_out);   /* a sparse layer: the one kind with a router */
    fg_status st = norm_in(e, h, FG_LW_LN2_W, FG_LW_LN2_B, &x);
    if (st || (st = linear16(e, e->ff16, x, lw(e, FG_LW_FC1_W), w->w[FG_LW_FC1_B], e->R, e->H, F, 1, "fc1")))
        return st;
    if (a->cfg.ffn_kind == FG_FFN_SWIGLU) {
        uint16_t *up = e->ff16 + (size_t)e->R * F;
        if ((st = linear16(e, up, x, lw(e, FG_LW_UP_W), w->w[FG_LW_UP_B], e->R, e->H, F, 1, "up_proj"))) return st;
        K(fg_cuk_swiglu16(e->ff16, up, (int64_t)e->R * F, e->s), "SwiGLU");
    } else {
        K(fg_cuk_relu16(e->ff16, (int64_t)e->R * F, e->s), "ReLU");
    }
    if ((st = linear_resid(e, h, e->ff16, lw(e, FG_LW_FC2_W), w->w[FG_LW_FC2_B], F, "fc2"))) return st;
    return finish_block(e, h_out, w->w[FG_LW_LN2_W], w->w[FG_LW_LN2_B]);
}

fg_status fg_cu_mlp(void *ctx, const fg_op_args *a) {
    op_env env = env_of(ctx, a);
    return mlp_block(&env, a->in[0], a->out[0]);
}

fg_status fg_cu_layer(void *ctx, const fg_op_args *a) {
    op_env env = env_of(ctx, a);
    fg_status st = attn_block(&env, a->in[0], a->in[2], a->in[3], a->out[0]);
    return st ? st : mlp_block(&env, a->out[0], a->out[0]);
}

/* ---- LM head and sampling -------------------------------------------------------- */

/* fg_opt_lm_head, fg_llama_lm_head: logits (B, V) fp32 = (project_out(norm_f?(h
 * of each sequence's last token))) W^T, W the untied head or the embedding. */
fg_status fg_cu_lm_head(void *ctx, const fg_op_args *a) {
    op_env env = env_of(ctx, a), *e = &env;
    const uint16_t *h = a->in[0];
    float *logits = a->out[0];
    int B = a->st.B, S = a->st.S, D = a->cfg.word_embed_proj_dim;
    fg_status st;
    if (a->cfg.pre_ln && a->cfg.norm_kind == FG_NORM_RMS)
        K(fg_cuk_rmsnorm(e->x16, h, NULL, a->gw.w[FG_GW_FINAL_LN_W], a->cfg.norm_eps, B, e->H, S, S - 1, e->s),
          "final RMSNorm");
    else if (a->cfg.pre_ln)
        K(fg_cuk_layernorm(e->x16, h, NULL, a->gw.w[FG_GW_FINAL_LN_W], a->gw.w[FG_GW_FINAL_LN_B], B, e->H, S, S - 1,
                           e->s), "final LayerNorm");
    else
        K(cudaMemcpy2DAsync(e->x16, (size_t)e->H * sizeof(uint16_t), h + (size_t)(S - 1) * e->H,
                            (size_t)S * e->H * sizeof(uint16_t), (size_t)e->H * sizeof(uint16_t), (size_t)B,
                            cudaMemcpyDeviceToDevice, e->s), "gather");
    const uint16_t *x = e->x16;
    if (fg_config_has_proj(&a->cfg)) {
        if ((st = gemm(e, e->ff16, CUDA_R_16F, e->x16, gw(e, FG_GW_PROJ_OUT), B, e->H, D, 1, 0, "project_out")))
            return st;
        x = e->ff16;
    }
    fg_cu_w head = gw(e, a->cfg.tied ? FG_GW_EMBED_TOKENS : FG_GW_LM_HEAD);   /* in its format: the same Linear */
    return gemm(e, logits, CUDA_R_32F, x, head, B, D, a->cfg.vocab_size, 1, 0, "lm_head");
}

/* Greedy: argmax on the device. With a temperature: the logits and the
 * generator states to pinned host memory, fg_sample row by row (the
 * reference sampler and generator), ids and advanced states back. */
fg_status fg_cu_sample(void *ctx, const fg_op_args *a) {
    op_env env = env_of(ctx, a), *e = &env;
    const float *logits = a->in[0];   /* (B, V) */
    fg_sample_row *rng = a->in[1];    /* (B), states advanced in place */
    int32_t *ids = a->out[0];         /* (B) */
    int B = a->st.B, V = a->cfg.vocab_size;
    if (a->temperature <= 0) {
        K(fg_cuk_argmax(ids, logits, B, V, e->s), "argmax");
        return FG_OK;
    }
    const size_t su = sizeof(fg_sample_row);   /* the rows after the logits, aligned */
    size_t nl = ((size_t)B * V * sizeof(float) + su - 1) / su * su, nr = (size_t)B * su;
    uint8_t *pin = fg_cu_pinned(ctx, nl + nr + (size_t)B * sizeof(int32_t));
    float *scratch = fg_cu_samp(ctx, (size_t)V);
    if (!pin) return FG_ERUNTIME;
    if (!scratch) return fg_err_set(FG_ERUNTIME, "SAMPLE on cuda: out of host memory");
    float *hl = (float *)pin;
    fg_sample_row *hr = (fg_sample_row *)(pin + nl);
    int32_t *hi = (int32_t *)(pin + nl + nr);
    K(cudaMemcpyAsync(hl, logits, (size_t)B * V * sizeof(float), cudaMemcpyDeviceToHost, e->s), "logits to the host");
    K(cudaMemcpyAsync(hr, rng, nr, cudaMemcpyDeviceToHost, e->s), "states to the host");
    K(cudaStreamSynchronize(e->s), "SAMPLE");
    fg_status st = fg_sample_rows_check(hr, B);
    if (st) return st;
    for (int b = 0; b < B; b++) {
        fg_sampler_cfg cfg = {.temperature = hr[b].temperature, .top_p = hr[b].top_p};
        fg_rng r = {hr[b].state};
        hi[b] = fg_sample(hl + (size_t)b * V, V, &cfg, &r, scratch);
        hr[b].state = r.state;
    }
    K(cudaMemcpyAsync(ids, hi, (size_t)B * sizeof(int32_t), cudaMemcpyHostToDevice, e->s), "ids to the device");
    K(cudaMemcpyAsync(rng, hr, nr, cudaMemcpyHostToDevice, e->s), "states to the device");
    return FG_OK;   /* the worker synchronizes before the pinned buffer is used again */
}
