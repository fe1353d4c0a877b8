/* fg_opt.c - OPT's embedding, decoder blocks and LM head on the CPU, written
 * from Hugging Face's modeling_opt.py semantics (see fg_opt.h). */
#include "fg_opt.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fg_common.h"
#include "fg_moe.h"
#include "fg_pool.h"
#include "fg_q4.h"

/* Rows of each scratch tensor, per row of the step: a H, q and ctx A*d, k
 * and v KV*d, ff F (twice F for a gated MLP: gate, then up), e D; a sparse
 * layer's scratch (fg_moe.h). */
void fg_opt_ws_init(fg_opt_ws *ws, const fg_model_config *c, int max_rows) {
    size_t r = (size_t)max_rows, H = (size_t)c->hidden, Q = (size_t)fg_config_q_dim(c), KV = (size_t)fg_config_kv_dim(c);
    ws->max_rows = max_rows;
    ws->a = fg_alloc_tensor(sizeof(float) * r * H);
    ws->q = fg_alloc_tensor(sizeof(float) * r * Q);
    ws->k = fg_alloc_tensor(sizeof(float) * r * KV);
    ws->v = fg_alloc_tensor(sizeof(float) * r * KV);
    ws->ctx = fg_alloc_tensor(sizeof(float) * r * Q);
    ws->ff = fg_alloc_tensor(sizeof(float) * r * (size_t)fg_opt_ws_ff(c));
    ws->e = fg_alloc_tensor(sizeof(float) * r * (size_t)c->word_embed_proj_dim);
    ws->moe = c->n_experts ? fg_alloc_tensor(sizeof(float) * (size_t)fg_moe_ws_floats(c, max_rows)) : NULL;
}

uint64_t fg_opt_ws_bytes(const fg_model_config *c, int max_rows) {
    uint64_t H = (uint64_t)c->hidden, Q = (uint64_t)fg_config_q_dim(c), KV = (uint64_t)fg_config_kv_dim(c);
    return sizeof(float) * ((uint64_t)max_rows *
           (H + 2 * Q + 2 * KV + (uint64_t)fg_opt_ws_ff(c) + (uint64_t)c->word_embed_proj_dim) +
           fg_moe_ws_floats(c, max_rows));
}

void fg_opt_ws_free(fg_opt_ws *ws) {
    free(ws->a); free(ws->q); free(ws->k); free(ws->v); free(ws->ctx); free(ws->ff); free(ws->e); free(ws->moe);
    memset(ws, 0, sizeof *ws);
}

void fg_step_positions(int *pos, const fg_step *st, int offset) {
    for (int b = 0; b < st->B; b++) {
        const uint8_t *m = st->mask + (size_t)b * st->mask_stride;
        int count = 0;
        for (int t = 0; t < st->past; t++) count += m[t] != 0;
        for (int i = 0; i < st->S; i++) {
            int real = m[st->past + i] != 0;
            count += real;
            pos[b * st->S + i] = real ? count - 1 + offset : 1;
        }
    }
}

void fg_opt_positions(int *pos, const fg_step *st) { fg_step_positions(pos, st, 2); }

void fg_opt_embed(float *h, const int32_t *ids, const fg_step *st, const fg_model_config *c,
                  const fg_global_w *g, fg_opt_ws *ws) {
    int rows = st->B * st->S, H = c->hidden, D = c->word_embed_proj_dim;
    FG_ASSERT(rows <= ws->max_rows);
    const fg_half *P = g->w[FG_GW_EMBED_POS];
    int *pos = fg_xmalloc(sizeof(int) * (size_t)rows);
    fg_opt_positions(pos, st);
    if (fg_config_has_proj(c)) {
        fg_embed_rows(ws->e, ids, rows, c, g, D);
        fg_global_linear(h, ws->e, c, g, FG_GW_PROJ_IN, rows, D, H);
    } else {
        fg_embed_rows(h, ids, rows, c, g, H);
    }
    for (int r = 0; r < rows; r++) {
        fg_half_to_float_n(P + (size_t)pos[r] * H, ws->a, (size_t)H);
        fg_add(h + (size_t)r * H, ws->a, (size_t)H);
    }
    fg_round_fp16_n(h, (size_t)rows * H);
    free(pos);
}

/* y = x . W^T + b with W a layer's weight `which` (out, in) and b its
 * `bias`: W in its format (the description's, fg_config_fmt), which the
 * GEMM expands or dequantizes as it goes. */
void fg_linear(float *y, const float *x, const fg_model_config *c, const fg_layer_w *w, int which, int bias,
               int rows, int in, int out) {
    fg_gemm_fmt(y, x, w->w[which], fg_config_fmt(c, fg_spec_layer(0, which)), w->w[bias], rows, in, out);
}

void fg_global_linear(float *y, const float *x, const fg_model_config *c, const fg_global_w *g, int which, int rows,
                      int in, int out) {
    fg_gemm_fmt(y, x, g->w[which], fg_config_fmt(c, fg_spec_global(which)), NULL, rows, in, out);
}

void fg_embed_rows(float *h, const int32_t *ids, int rows, const fg_model_config *c, const fg_global_w *g, int D) {
    int fmt = fg_config_fmt(c, fg_spec_global(FG_GW_EMBED_TOKENS));
    for (int r = 0; r < rows; r++) fg_fmt_rows_f32(g->w[FG_GW_EMBED_TOKENS], fmt, D, ids[r], ids[r] + 1, h + (size_t)r * D);
}

/* Copy (B*S, KD) rows into the fp16 cache (Tmax, B, KD) at [past, past+S). */
static void cache_store(fg_half *cache, const float *x, const fg_step *st, int KD) {
    for (int b = 0; b < st->B; b++)
        for (int i = 0; i < st->S; i++)
            fg_float_to_half_n(x + ((size_t)b * st->S + i) * KD, cache + ((size_t)(st->past + i) * st->B + b) * KD,
                               (size_t)KD);
}

void fg_opt_attn_qkv(float *q, float *k, float *v, const float *h, const fg_step *st, const fg_model_config *c,
                     const fg_layer_w *w, fg_opt_ws *ws) {
    int rows = st->B * st->S, H = c->hidden;
    size_t n = (size_t)rows * H;
    FG_ASSERT(rows <= ws->max_rows);
    const float *x = h;
    if (c->pre_ln) {
        fg_layernorm(ws->a, h, w->w[FG_LW_LN1_W], w->w[FG_LW_LN1_B], rows, H);
        x = ws->a;
    }
    fg_linear(q, x, c, w, FG_LW_Q_W, FG_LW_Q_B, rows, H, H);
    fg_linear(k, x, c, w, FG_LW_K_W, FG_LW_K_B, rows, H, H);
    fg_linear(v, x, c, w, FG_LW_V_W, FG_LW_V_B, rows, H, H);
    /* Hugging Face scales q after its bias. */
    float scale = 1.0f / sqrtf((float)fg_config_head_dim(c));
    for (size_t i = 0; i < n; i++) q[i] *= scale;
    fg_round_fp16_n(q, n);
    fg_round_fp16_n(k, n);
    fg_round_fp16_n(v, n);
}

/* The step's k or v (B*S, KV*d), values fp16 holds, compressed into the
 * cache (Tmax, B, KV) of fg_q4 head slices at [past, past+S). */
static void cache_store_q4(uint8_t *cache, const float *x, const fg_step *st, const fg_model_config *c) {
    int KD = fg_config_kv_dim(c), d = fg_config_head_dim(c);
    uint64_t slice = fg_q4_slice_bytes((uint64_t)d, 1);
    fg_half *row = fg_xmalloc(sizeof(fg_half) * (size_t)KD);
    for (int b = 0; b < st->B; b++)
        for (int i = 0; i < st->S; i++) {
            fg_float_to_half_n(x + ((size_t)b * st->S + i) * KD, row, (size_t)KD);
            uint8_t *dst = cache + ((size_t)(st->past + i) * st->B + b) * fg_cache_row_bytes(c);
            for (int h = 0; h < c->n_kv_heads; h++) fg_q4_pack(row + (size_t)h * d, d, 1, dst + h * slice);
        }
    free(row);
}

void fg_opt_attn_core(float *ctx, const float *q, const float *k, const float *v, void *kc, void *vc, int Tmax,
                      const fg_step *st, const fg_model_config *c) {
    int KD = fg_config_kv_dim(c);
    fg_attn_shape sh = {.n_heads = c->n_heads, .n_kv_heads = c->n_kv_heads, .head_dim = c->head_dim,
                        .window = c->sliding_window};
    FG_ASSERT(st->past + st->S <= Tmax);
    if (c->compress_cache) {
        /* attention first: it reads the past from the cache and the step's own k, v from k, v */
        fg_attention_gqa_q4(ctx, q, k, v, kc, vc, st->mask, st->mask_stride, st->B, st->S, st->past, &sh);
        cache_store_q4(kc, k, st, c);
        cache_store_q4(vc, v, st, c);
    } else {
        cache_store(kc, k, st, KD);
        cache_store(vc, v, st, KD);
        fg_attention_gqa(ctx, q, kc, vc, Tmax, st->mask, st->mask_stride, st->B, st->S, st->past, &sh);
    }
    fg_round_fp16_n(ctx, (size_t)st->B * st->S * fg_config_q_dim(c));
}

void fg_opt_attn_out(float *h, const float *ctx, const fg_step *st, const fg_model_config *c, const fg_layer_w *w,
                     fg_opt_ws *ws) {
    int rows = st->B * st->S, H = c->hidden;
    size_t n = (size_t)rows * H;
    fg_linear(ws->a, ctx, c, w, FG_LW_O_W, FG_LW_O_B, rows, H, H);
    fg_add(h, ws->a, n);
    if (!c->pre_ln) fg_layernorm(h, h, w->w[FG_LW_LN1_W], w->w[FG_LW_LN1_B], rows, H);
    fg_round_fp16_n(h, n);
}

void fg_opt_mlp_block(float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *w,
                      fg_opt_ws *ws) {
    int rows = st->B * st->S, H = c->hidden, F = c->ffn_dim;
    size_t n = (size_t)rows * H;
    FG_ASSERT(rows <= ws->max_rows);
    const float *x = h;
    if (c->pre_ln) {
        fg_layernorm(ws->a, h, w->w[FG_LW_LN2_W], w->w[FG_LW_LN2_B], rows, H);
        x = ws->a;
    }
    fg_linear(ws->ff, x, c, w, FG_LW_FC1_W, FG_LW_FC1_B, rows, H, F);
    fg_relu(ws->ff, (size_t)rows * F);
    fg_linear(ws->a, ws->ff, c, w, FG_LW_FC2_W, FG_LW_FC2_B, rows, F, H);
    fg_add(h, ws->a, n);
    if (!c->pre_ln) fg_layernorm(h, h, w->w[FG_LW_LN2_W], w->w[FG_LW_LN2_B], rows, H);
    fg_round_fp16_n(h, n);
}

void fg_opt_lm_head(float *logits, const float *h, const fg_step *st, const fg_model_config *c,
                    const fg_global_w *g, fg_opt_ws *ws) {
    int B = st->B, H = c->hidden, D = c->word_embed_proj_dim;
    /* gather the last new token of each sequence: (B, H) */
    for (int b = 0; b < B; b++)
        memcpy(ws->a + (size_t)b * H, h + ((size_t)b * st->S + st->S - 1) * H, sizeof(float) * H);
    if (c->pre_ln)
        fg_layernorm(ws->a, ws->a, g->w[FG_GW_FINAL_LN_W], g->w[FG_GW_FINAL_LN_B], B, H);
    const float *x = ws->a;
    if (fg_config_has_proj(c)) {
        fg_global_linear(ws->e, ws->a, c, g, FG_GW_PROJ_OUT, B, H, D);
        x = ws->e;
    }
    fg_global_linear(logits, x, c, g, FG_GW_EMBED_TOKENS, B, D, c->vocab_size);
}
