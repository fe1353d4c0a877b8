/* fg_opt.h - the OPT forward pass on the CPU, in pieces a scheduler can place:
 * the embedding, a decoder layer's attention block and MLP block, and the LM
 * head. Each piece rounds what it hands on to fp16 at the points docs/ARCHITECTURE.md ("Numerics")
 * names (embedding output, q/k/v, attention context, each block's output), so
 * the result is the same bits whichever process runs which piece. */
#ifndef FG_OPT_H
#define FG_OPT_H

#include "fg_gemm.h"
#include "fg_ops.h"

/* One decoder layer's weights as every tier stores them, indexed by FG_LW_*
 * (fg_config.h); shapes as fg_specs_new() lists them. 1-D tensors fp16;
 * each matrix in its format (fg_config_fmt: fp16, FlexGen's 4-bit under
 * compress_weight, or a GGUF file's ggml blocks), the pointer at its bytes,
 * expanded or dequantized next to the GEMM (fg_gemm_fmt). */
typedef struct {
    const fg_half *w[FG_LW_COUNT];
} fg_layer_w;

/* The model-level weights, indexed by FG_GW_* (NULL where absent). */
typedef struct {
    const fg_half *w[FG_GW_COUNT];
} fg_global_w;

/* One forward step of a batch: S new tokens for each of B sequences, after
 * `past` tokens already in the cache. */
typedef struct {
    int B, S, past;
    const uint8_t *mask;   /* [B, mask_stride]: 1 = real token, positions < past+S */
    int mask_stride;
} fg_step;

/* Scratch for a step, sized for at most max_rows = B*S rows. */
typedef struct {
    int max_rows;
    float *a, *q, *k, *v, *ctx; /* (max_rows, H), (.., A*d), (.., KV*d) x 2, (.., A*d) */
    float *ff;                  /* (max_rows, F), or 2F for a gated MLP */
    float *e;                   /* (max_rows, D) */
    float *moe;                 /* a sparse layer's router and gathers: fg_moe_ws_floats (NULL: no experts) */
} fg_opt_ws;

/* Sizes by the description: a (rows, H), q and ctx (rows, A*d), k and v
 * (rows, KV*d), ff (rows, fg_opt_ws_ff: a dense MLP's, or an expert's gate
 * and up, whichever is wider), e (rows, D), moe (fg_moe_ws_floats); for OPT
 * all of a, q, k, v, ctx are (rows, H). Every family's pieces
 * (kernels/fg_fwd.h) share it. */
static inline int fg_opt_ws_ff(const fg_model_config *c) {
    int ff = c->ffn_kind == FG_FFN_SWIGLU ? 2 * c->ffn_dim : c->ffn_dim;
    return c->n_experts && 2 * c->moe_ffn_dim > ff ? 2 * c->moe_ffn_dim : ff;
}
void fg_opt_ws_init(fg_opt_ws *ws, const fg_model_config *c, int max_rows);
/* Bytes fg_opt_ws_init allocates: what a backend's workspace costs against
 * its memory budget. A weight in any format needs none: fg_gemm_fmt
 * expands or dequantizes a few tiles of rows at a time into its threads'
 * own buffers next to the kernel. */
uint64_t fg_opt_ws_bytes(const fg_model_config *c, int max_rows);
void fg_opt_ws_free(fg_opt_ws *ws);

/* y = x . W^T + b with W the layer's weight `which` (out, in) and b its
 * `bias` (absent: none): W in its format (fg_config_fmt), which the GEMM
 * expands as it goes (fg_gemm_fmt). */
void fg_linear(float *y, const float *x, const fg_model_config *c, const fg_layer_w *w, int which, int bias,
               int rows, int in, int out);
/* y = x . W^T with W the model-level matrix `which` (the LM head, a tied
 * embedding as the head, project_in/out), in its format. */
void fg_global_linear(float *y, const float *x, const fg_model_config *c, const fg_global_w *g, int which, int rows,
                      int in, int out);
/* h[r] = the token embedding's row ids[r] (D values) as fp32, for r < rows,
 * dequantized from its format (fp16 values are exact). */
void fg_embed_rows(float *h, const int32_t *ids, int rows, const fg_model_config *c, const fg_global_w *g, int D);

/* Positions of the step's S new tokens from the attention mask, as Hugging
 * Face derives them: a real token's is the number of real tokens before it
 * plus `offset`; a pad's is 1 (no real token attends to it). pos (B, S).
 * Every family's positions are this with its own offset. */
void fg_step_positions(int *pos, const fg_step *st, int offset);

/* Learned positions: cumsum(mask) * mask - 1 + 2 (OPT's offset). */
void fg_opt_positions(int *pos, const fg_step *st);

/* h (B*S, H) = round16(embed_tokens[ids] (-> project_in) + embed_pos[pos]).
 * ids (B, S). */
void fg_opt_embed(float *h, const int32_t *ids, const fg_step *st, const fg_model_config *c,
                  const fg_global_w *g, fg_opt_ws *ws);

/* The attention block of one layer (fg_fwd_attn_block runs the three pieces
 * below in order) writes the step's k, v (rounded to fp16) into the cache at
 * positions [past, past+S). kc, vc (Tmax, B, KV*d) fp16, time-major: the
 * cache holds the n_kv_heads heads only (GQA); with c->compress_cache,
 * Tmax*B*n_kv_heads fg_q4 head slices in the same order (fg_cache_row_bytes
 * per position and sequence): attention then reads the past [0, past)
 * expanded and the step's own k, v as computed (FlexGen's order: the new
 * entries are compressed as they are stored). */

/* The attention block in pieces a scheduler can place apart: with
 * cpu_cache_compute the GPU runs qkv and out, the CPU worker runs core over
 * the cache it holds, and only q and ctx (B*S, A*d), k and v (B*S, KV*d)
 * cross between them.
 *   qkv:  ws->q, ws->k, ws->v = round16(LN1?(h) Wq,k,v + b), q scaled
 *   core: k, v stored into the cache at [past, past+S); ctx = round16(attention)
 *   out:  h = round16(LN1?(h + ctx Wo + bo)) (the LayerNorm for post-LN) */
void fg_opt_attn_qkv(float *q, float *k, float *v, const float *h, const fg_step *st, const fg_model_config *c,
                     const fg_layer_w *w, fg_opt_ws *ws);
/* core serves every family: grouped kv heads (n_kv_heads; OPT's equal
 * n_heads), the cache (Tmax, B, KV*d), c->sliding_window. */
void fg_opt_attn_core(float *ctx, const float *q, const float *k, const float *v, void *kc, void *vc, int Tmax,
                      const fg_step *st, const fg_model_config *c);
void fg_opt_attn_out(float *h, const float *ctx, const fg_step *st, const fg_model_config *c, const fg_layer_w *w,
                     fg_opt_ws *ws);

/* h (B*S, H) in/out: the MLP block of one layer. */
void fg_opt_mlp_block(float *h, const fg_step *st, const fg_model_config *c, const fg_layer_w *w,
                      fg_opt_ws *ws);

/* logits (B, V) from the last new token of each sequence: final LayerNorm
 * (pre-LN models), project_out, tied LM head. h (B*S, H). */
void fg_opt_lm_head(float *logits, const float *h, const fg_step *st, const fg_model_config *c,
                    const fg_global_w *g, fg_opt_ws *ws);

#endif
