/* fg_fwd.h - a model's forward pass in placeable pieces, whatever its
 * family: each function calls the piece of the family the config names
 * (fg_opt.h for OPT, fg_llama.h for the Llama family), with the same
 * arguments and the same fp16 rounding points. Every process computes
 * through these (the reference engine, the gpu worker's host backend, the
 * cpu worker), so a model's results do not depend on where a piece runs.
 * Scratch is fg_opt_ws, sized by the description for any family. */
#ifndef FG_FWD_H
#define FG_FWD_H

#include "fg_llama.h"
#include "fg_opt.h"

void fg_fwd_embed(float *h, const int32_t *ids, const fg_step *st, const fg_model_config *c, const fg_global_w *g,
                  fg_opt_ws *ws);
/* q (B*S, A*d), k, v (B*S, KV*d), rounded; ctx (B*S, A*d); h (B*S, H). */
void fg_fwd_attn_qkv(float *q, float *k, float *v, const float *h, const fg_step *st, const fg_model_config *c,
                     const fg_layer_w *w, fg_opt_ws *ws);
void fg_fwd_attn_core(float *ctx, const float *q, const float *k, const float *v, void *kc, void *vc, int Tmax,
                      const fg_step *st, const fg_model_config *c);
void fg_fwd_attn_out(float *h, const float *ctx, const fg_step *st, const fg_model_config *c, const fg_layer_w *w,
                     fg_opt_ws *ws);
/* qkv, core, out in order, through ws->q, k, v, ctx. */
void fg_fwd_attn_block(float *h, void *kc, void *vc, int Tmax, const fg_step *st, const fg_model_config *c,
                       const fg_layer_w *w, fg_opt_ws *ws);
void fg_fwd_mlp_block(float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *w, fg_opt_ws *ws);
/* A sparse layer's MLP block with the experts [g_lo, g_lo + g_n)'s
 * outputs given (given (B*S*k, H), from fg_fwd_moe_band on the cpu
 * worker): bit for bit fg_fwd_mlp_block when they are its own. */
void fg_fwd_mlp_split(float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *w, fg_opt_ws *ws,
                      int g_lo, int g_n, const float *given);
/* Those outputs alone: out (B*S*k, H), for experts [lo, lo + n) whose
 * stacks band holds (a family with experts only). */
void fg_fwd_moe_band(float *out, const float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *band,
                     fg_opt_ws *ws, int lo, int n);
/* A sparse layer's route of h: counts (E) of rows sent to each expert by
 * the MLP block on the same h (a family with experts only). */
void fg_fwd_moe_route(int32_t *counts, const float *h, const fg_step *st, const fg_model_config *c,
                      const fg_layer_w *w, fg_opt_ws *ws);
void fg_fwd_lm_head(float *logits, const float *h, const fg_step *st, const fg_model_config *c, const fg_global_w *g,
                    fg_opt_ws *ws);

#endif
