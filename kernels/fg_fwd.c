/* fg_fwd.c - the pieces of each family, by the config's family (see
 * fg_fwd.h). A config has passed fg_config_validate, so its family is one
 * of these. Attention over the cache is one function for every family. */
#include "fg_fwd.h"

typedef struct {
    void (*embed)(float *, const int32_t *, const fg_step *, const fg_model_config *, const fg_global_w *, fg_opt_ws *);
    void (*attn_qkv)(float *, float *, float *, const float *, const fg_step *, const fg_model_config *,
                     const fg_layer_w *, fg_opt_ws *);
    void (*attn_out)(float *, const float *, const fg_step *, const fg_model_config *, const fg_layer_w *, fg_opt_ws *);
    void (*mlp_block)(float *, const fg_step *, const fg_model_config *, const fg_layer_w *, fg_opt_ws *);
    void (*lm_head)(float *, const float *, const fg_step *, const fg_model_config *, const fg_global_w *, fg_opt_ws *);
    /* NULL for a family without experts */
    void (*moe_route)(int32_t *, const float *, const fg_step *, const fg_model_config *, const fg_layer_w *, fg_opt_ws *);
    void (*mlp_split)(float *, const fg_step *, const fg_model_config *, const fg_layer_w *, fg_opt_ws *, int, int,
                      const float *);
    void (*moe_band)(float *, const float *, const fg_step *, const fg_model_config *, const fg_layer_w *, fg_opt_ws *,
                     int, int);
} fwd_pieces;

static const fwd_pieces opt_pieces = {fg_opt_embed, fg_opt_attn_qkv, fg_opt_attn_out, fg_opt_mlp_block,
                                      fg_opt_lm_head, NULL, NULL, NULL};
static const fwd_pieces llama_pieces = {fg_llama_embed, fg_llama_attn_qkv, fg_llama_attn_out, fg_llama_mlp_block,
                                        fg_llama_lm_head, fg_llama_moe_route, fg_llama_mlp_split,
                                        fg_llama_moe_band};

static const fwd_pieces *pieces(const fg_model_config *c) {
    switch (c->family) {
    case FG_FAMILY_LLAMA: return &llama_pieces;
    case FG_FAMILY_OPT: return &opt_pieces;
    }
    FG_ASSERT(!"a validated config has a known family");
    return NULL;
}

void fg_fwd_embed(float *h, const int32_t *ids, const fg_step *st, const fg_model_config *c, const fg_global_w *g,
                  fg_opt_ws *ws) {
    pieces(c)->embed(h, ids, st, c, g, ws);
}

void fg_fwd_attn_qkv(float *q, float *k, float *v, const float *h, const fg_step *st, const fg_model_config *c,
                     const fg_layer_w *w, fg_opt_ws *ws) {
    pieces(c)->attn_qkv(q, k, v, h, st, c, w, ws);
}

void fg_fwd_attn_core(float *ctx, const float *q, const float *k, const float *v, void *kc, void *vc, int Tmax,
                      const fg_step *st, const fg_model_config *c) {
    fg_opt_attn_core(ctx, q, k, v, kc, vc, Tmax, st, c);
}

void fg_fwd_attn_out(float *h, const float *ctx, const fg_step *st, const fg_model_config *c, const fg_layer_w *w,
                     fg_opt_ws *ws) {
    pieces(c)->attn_out(h, ctx, st, c, w, ws);
}

void fg_fwd_attn_block(float *h, void *kc, void *vc, int Tmax, const fg_step *st, const fg_model_config *c,
                       const fg_layer_w *w, fg_opt_ws *ws) {
    fg_fwd_attn_qkv(ws->q, ws->k, ws->v, h, st, c, w, ws);
    fg_fwd_attn_core(ws->ctx, ws->q, ws->k, ws->v, kc, vc, Tmax, st, c);
    fg_fwd_attn_out(h, ws->ctx, st, c, w, ws);
}

void fg_fwd_mlp_block(float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *w, fg_opt_ws *ws) {
    pieces(c)->mlp_block(h, st, c, w, ws);
}

void fg_fwd_moe_route(int32_t *counts, const float *h, const fg_step *st, const fg_model_config *c,
                      const fg_layer_w *w, fg_opt_ws *ws) {
    FG_ASSERT(pieces(c)->moe_route);
    pieces(c)->moe_route(counts, h, st, c, w, ws);
}

void fg_fwd_mlp_split(float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *w, fg_opt_ws *ws,
                      int g_lo, int g_n, const float *given) {
    FG_ASSERT(pieces(c)->mlp_split);
    pieces(c)->mlp_split(h, st, c, w, ws, g_lo, g_n, given);
}

void fg_fwd_moe_band(float *out, const float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *band,
                     fg_opt_ws *ws, int lo, int n) {
    FG_ASSERT(pieces(c)->moe_band);
    pieces(c)->moe_band(out, h, st, c, band, ws, lo, n);
}

void fg_fwd_lm_head(float *logits, const float *h, const fg_step *st, const fg_model_config *c, const fg_global_w *g,
                    fg_opt_ws *ws) {
    pieces(c)->lm_head(logits, h, st, c, g, ws);
}
