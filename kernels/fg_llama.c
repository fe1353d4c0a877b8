/* fg_llama.c - the Llama family's embedding, blocks and LM head on the CPU
 * (see fg_llama.h); attention over the cache is fg_opt_attn_core, which
 * serves every family, and a sparse layer's MLP fg_moe.c's. */
#include "fg_llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fg_common.h"
#include "fg_moe.h"

void fg_rope_inv_freq(float *inv, const fg_model_config *c) {
    int d = c->head_dim, half = d / 2;
    const float base = c->rope_theta, factor = c->rope_factor;
    for (int i = 0; i < half; i++) inv[i] = 1.0f / powf(base, (float)(2 * i) / (float)d);
    if (c->rope_scaling == FG_ROPE_LINEAR)
        for (int i = 0; i < half; i++) inv[i] = inv[i] / factor;
    if (c->rope_scaling != FG_ROPE_LLAMA3) return;
    const float orig = (float)c->rope_orig_max, low = c->rope_low, high = c->rope_high;
    const float low_wl = orig / low, high_wl = orig / high, two_pi = (float)(2.0 * M_PI);
    for (int i = 0; i < half; i++) {
        float wl = two_pi / inv[i];
        float out = wl > low_wl ? inv[i] / factor : inv[i];
        if (!(wl < high_wl) && !(wl > low_wl)) {   /* the band between: a smooth mix */
            float s = (orig / wl - low) / (high - low);
            out = (1 - s) * out / factor + s * out;
        }
        inv[i] = out;
    }
}

void fg_rope_positions(int *pos, const fg_step *st) { fg_step_positions(pos, st, 0); }

void fg_rope_apply(float *x, int rows, int n_heads, int d, const int *pos, const float *inv_freq, float *cs) {
    int half = d / 2;
    for (int r = 0; r < rows; r++) {
        float *cr = cs + (size_t)r * d, *sr = cr + half;
        for (int i = 0; i < half; i++) {
            float ang = (float)pos[r] * inv_freq[i];
            cr[i] = cosf(ang);
            sr[i] = sinf(ang);
        }
        for (int h = 0; h < n_heads; h++) {
            float *p = x + ((size_t)r * n_heads + h) * d;
            for (int i = 0; i < half; i++) {
                float a = p[i], b = p[i + half];
                p[i] = a * cr[i] - b * sr[i];
                p[i + half] = b * cr[i] + a * sr[i];
            }
        }
    }
}

void fg_llama_embed(float *h, const int32_t *ids, const fg_step *st, const fg_model_config *c,
                    const fg_global_w *g, fg_opt_ws *ws) {
    int rows = st->B * st->S, H = c->hidden;
    FG_ASSERT(rows <= ws->max_rows);
    fg_embed_rows(h, ids, rows, c, g, H);
    fg_round_fp16_n(h, (size_t)rows * H);   /* exact for an fp16 table; a quantized one's values rounded here */
}

void fg_llama_attn_qkv(float *q, float *k, float *v, const float *h, const fg_step *st, const fg_model_config *c,
                       const fg_layer_w *w, fg_opt_ws *ws) {
    int rows = st->B * st->S, H = c->hidden, d = c->head_dim, Q = fg_config_q_dim(c), KV = fg_config_kv_dim(c);
    FG_ASSERT(rows <= ws->max_rows);
    fg_rmsnorm(ws->a, h, w->w[FG_LW_LN1_W], c->norm_eps, rows, H);
    fg_linear(q, ws->a, c, w, FG_LW_Q_W, FG_LW_Q_B, rows, H, Q);
    fg_linear(k, ws->a, c, w, FG_LW_K_W, FG_LW_K_B, rows, H, KV);
    fg_linear(v, ws->a, c, w, FG_LW_V_W, FG_LW_V_B, rows, H, KV);
    if (c->qk_norm) {   /* Qwen3: each head of q and of k RMS-normalised (fp32, unrounded), before rotary */
        fg_rmsnorm(q, q, w->w[FG_LW_QN_W], c->norm_eps, rows * c->n_heads, d);
        fg_rmsnorm(k, k, w->w[FG_LW_KN_W], c->norm_eps, rows * c->n_kv_heads, d);
    }
    int *pos = fg_xmalloc(sizeof(int) * (size_t)rows);
    float *inv = fg_xmalloc(sizeof(float) * (size_t)(d / 2)), *cs = fg_xmalloc(sizeof(float) * (size_t)rows * d);
    fg_rope_positions(pos, st);
    fg_rope_inv_freq(inv, c);
    fg_rope_apply(q, rows, c->n_heads, d, pos, inv, cs);
    fg_rope_apply(k, rows, c->n_kv_heads, d, pos, inv, cs);
    free(pos), free(inv), free(cs);
    /* Hugging Face scales q inside attention; here it is scaled, then rounded once */
    float scale = 1.0f / sqrtf((float)d);
    for (size_t i = 0; i < (size_t)rows * Q; i++) q[i] *= scale;
    fg_round_fp16_n(q, (size_t)rows * Q);
    fg_round_fp16_n(k, (size_t)rows * KV);
    fg_round_fp16_n(v, (size_t)rows * KV);
}

void fg_llama_attn_out(float *h, const float *ctx, const fg_step *st, const fg_model_config *c, const fg_layer_w *w,
                       fg_opt_ws *ws) {
    int rows = st->B * st->S, H = c->hidden;
    size_t n = (size_t)rows * H;
    fg_linear(ws->a, ctx, c, w, FG_LW_O_W, FG_LW_O_B, rows, fg_config_q_dim(c), H);
    fg_add(h, ws->a, n);
    fg_round_fp16_n(h, n);
}

void fg_llama_mlp_split(float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *w, fg_opt_ws *ws,
                        int g_lo, int g_n, const float *given) {
    int rows = st->B * st->S, H = c->hidden;
    size_t n = (size_t)rows * H;
    FG_ASSERT(rows <= ws->max_rows && w->w[FG_LW_ROUTER_W]);
    fg_rmsnorm(ws->a, h, w->w[FG_LW_LN2_W], c->norm_eps, rows, H);   /* as fg_llama_mlp_block */
    fg_moe_mlp_given(ws->a, ws->a, rows, c, w, ws, g_lo, g_n, given);
    fg_add(h, ws->a, n);
    fg_round_fp16_n(h, n);
}

void fg_llama_moe_band(float *out, const float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *band,
                       fg_opt_ws *ws, int lo, int n) {
    int rows = st->B * st->S;
    FG_ASSERT(rows <= ws->max_rows && band->w[FG_LW_ROUTER_W]);
    fg_rmsnorm(ws->a, h, band->w[FG_LW_LN2_W], c->norm_eps, rows, c->hidden);   /* as fg_llama_mlp_block */
    fg_moe_band(out, ws->a, rows, c, band, ws, lo, n);
}

void fg_llama_mlp_block(float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *w, fg_opt_ws *ws) {
    int rows = st->B * st->S, H = c->hidden, F = c->ffn_dim;
    size_t n = (size_t)rows * H;
    FG_ASSERT(rows <= ws->max_rows);
    float *gate = ws->ff, *up = ws->ff + (size_t)rows * F;
    if (w->w[FG_LW_ROUTER_W]) {   /* a sparse layer: the one kind whose weights include a router */
        fg_llama_mlp_split(h, st, c, w, ws, 0, 0, NULL);
        return;
    }
    fg_rmsnorm(ws->a, h, w->w[FG_LW_LN2_W], c->norm_eps, rows, H);
    fg_linear(gate, ws->a, c, w, FG_LW_FC1_W, FG_LW_FC1_B, rows, H, F);
    fg_linear(up, ws->a, c, w, FG_LW_UP_W, FG_LW_UP_B, rows, H, F);
    fg_swiglu(gate, up, (size_t)rows * F);
    fg_linear(ws->a, gate, c, w, FG_LW_FC2_W, FG_LW_FC2_B, rows, F, H);
    fg_add(h, ws->a, n);
    fg_round_fp16_n(h, n);
}

void fg_llama_moe_route(int32_t *counts, const float *h, const fg_step *st, const fg_model_config *c,
                        const fg_layer_w *w, fg_opt_ws *ws) {
    int rows = st->B * st->S;
    FG_ASSERT(rows <= ws->max_rows && w->w[FG_LW_ROUTER_W]);
    fg_rmsnorm(ws->a, h, w->w[FG_LW_LN2_W], c->norm_eps, rows, c->hidden);   /* as fg_llama_mlp_block */
    fg_moe_counts(counts, ws->a, rows, c, w, ws);
}

void fg_llama_lm_head(float *logits, const float *h, const fg_step *st, const fg_model_config *c,
                      const fg_global_w *g, fg_opt_ws *ws) {
    int B = st->B, H = c->hidden;
    for (int b = 0; b < B; b++)   /* the last new token of each sequence: (B, H) */
        memcpy(ws->a + (size_t)b * H, h + ((size_t)b * st->S + st->S - 1) * H, sizeof(float) * H);
    fg_rmsnorm(ws->a, ws->a, g->w[FG_GW_FINAL_LN_W], c->norm_eps, B, H);
    fg_global_linear(logits, ws->a, c, g, c->tied ? FG_GW_EMBED_TOKENS : FG_GW_LM_HEAD, B, H, c->vocab_size);
}
