/* fg_llama.h - the Llama family's forward pass on the CPU (Llama 2/3.x,
 * Mistral, Qwen2, Qwen3, TinyLlama), in the pieces fg_opt.h has, written from
 * Hugging Face's modeling_llama.py: RMSNorm before each block, q/k/v with
 * optional biases, Qwen3's per-head RMSNorm of q and k (modeling_qwen3.py),
 * rotary embeddings on q and k (rotate-half layout),
 * grouped-query attention over a cache of the kv heads only, the gated SiLU
 * MLP, a final RMSNorm and a tied or separate LM head.
 *
 * fp16 rounding points (tests/ref/llama_ref.py has the same): the embedding
 * output; q after bias, rotary and the head_dim^-0.5 scale, rounded once; k
 * after bias and rotary, rounded once (the cache holds k after rotary, so a
 * cached key is never rotated or rounded again); v after bias; the attention
 * context before o_proj; the hidden state after each residual add. RMSNorm,
 * SwiGLU, the final norm and the logits stay fp32. */
#ifndef FG_LLAMA_H
#define FG_LLAMA_H

#include "fg_opt.h"

/* ---- building blocks ---- */

/* inv_freq[i] (d/2 values) = theta^(-2i/d) in fp32 as Hugging Face computes
 * it, then rope_scaling: linear divides by the factor; llama3 keeps the
 * wavelengths 2 pi / inv_freq under original_max / high_freq_factor,
 * divides those over original_max / low_freq_factor by the factor, and mixes
 * the band between (1 - s) inv_freq / factor + s inv_freq, s = (original_max
 * / wavelength - low) / (high - low). */
void fg_rope_inv_freq(float *inv_freq, const fg_model_config *c);

/* Rotary positions of the step's S new tokens (B, S), from the attention
 * mask as Hugging Face's generate derives them: a real token's position is
 * the number of real tokens before it (cumsum(mask) - 1, so left padding
 * shifts nothing); a pad's is 1 (no real token attends to it). */
void fg_rope_positions(int *pos, const fg_step *st);

/* Rotate rows of x (rows, n_heads * d) in place, head by head, in the
 * rotate-half layout (pairs i, i + d/2): x * cos + rotate_half(x) * sin,
 * angle pos[r] * inv_freq[i] in fp32. cs: (rows, d) scratch for cos | sin. */
void fg_rope_apply(float *x, int rows, int n_heads, int d, const int *pos, const float *inv_freq, float *cs);

/* ---- the family's pieces (signatures as fg_opt.h's) ---- */

/* h (B*S, H) = embed_tokens[ids] (no positions: they are rotary). */
void fg_llama_embed(float *h, const int32_t *ids, const fg_step *st, const fg_model_config *c,
                    const fg_global_w *g, fg_opt_ws *ws);
/* q (B*S, A*d), k, v (B*S, KV*d) = rotary(RMSNorm(h) W + b), q scaled by
 * head_dim^-0.5; positions from st->mask. With qk_norm, each d-wide head of
 * q and k is RMSNorm(head) * q_norm / k_norm (eps norm_eps) before rotary. */
void fg_llama_attn_qkv(float *q, float *k, float *v, const float *h, const fg_step *st, const fg_model_config *c,
                       const fg_layer_w *w, fg_opt_ws *ws);
/* h += round16 ... : h = round16(h + ctx W_o (+ b_o)). ctx (B*S, A*d). */
void fg_llama_attn_out(float *h, const float *ctx, const fg_step *st, const fg_model_config *c, const fg_layer_w *w,
                       fg_opt_ws *ws);
/* h = round16(h + down(silu(gate x) * up x)), x = RMSNorm(h). */
void fg_llama_mlp_block(float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *w, fg_opt_ws *ws);
/* A sparse layer's MLP block with the outputs of experts [g_lo, g_lo +
 * g_n) given (fg_moe_mlp_given; given NULL: the block itself), and the
 * outputs of experts [lo, lo + n) alone, into out (B*S*k, H) (fg_moe_band,
 * band's stacks starting at expert lo). */
void fg_llama_mlp_split(float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *w, fg_opt_ws *ws,
                        int g_lo, int g_n, const float *given);
void fg_llama_moe_band(float *out, const float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *band,
                       fg_opt_ws *ws, int lo, int n);
/* A sparse layer's route of h (B*S, H), unchanged: counts (E) the rows its
 * MLP block sends to each expert (its norm and router, as the block runs them). */
void fg_llama_moe_route(int32_t *counts, const float *h, const fg_step *st, const fg_model_config *c,
                        const fg_layer_w *w, fg_opt_ws *ws);
/* logits (B, V) of each sequence's last new token: final RMSNorm, then the
 * LM head (lm_head, or embed_tokens when tied). */
void fg_llama_lm_head(float *logits, const float *h, const fg_step *st, const fg_model_config *c,
                      const fg_global_w *g, fg_opt_ws *ws);

#endif
