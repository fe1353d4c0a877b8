/* cuda_kernels.h - the cuda backend's own kernels (cuda_kernels.cu), as C
 * launchers: everything an op needs beside cuBLAS's GEMMs. backend_cuda.c
 * decides what runs when; these only launch, on the stream they are given,
 * and return the launch's cudaError_t as an int (0: launched; the caller
 * names the op and cudaGetErrorString gives the reason). fp16 tensors
 * travel as uint16_t, so C callers need no CUDA types.
 *
 * Rounding: a kernel that writes fp16 converts with __float2half_rn (round
 * to nearest even, as common/fg_fp16.c does), and only at the points the
 * design rounds at (docs/ARCHITECTURE.md, "Numerics") or where fp16 storage
 * requires it (a GEMM's inputs). */
#ifndef FG_CUDA_KERNELS_H
#define FG_CUDA_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y16 (rows, dim) = round16(LayerNorm(x[src_row(r)]) * w + b), eps 1e-5,
 * mean and variance in two passes. x is fp16 (x16) or fp32 (x32, the other
 * NULL); src_row(r) = r * row_mul + row_add (the LM head's last token of
 * each sequence: row_mul S, row_add S-1; else 1, 0). y may alias x16 only
 * when row_mul is 1 and row_add 0. */
int fg_cuk_layernorm(uint16_t *y16, const uint16_t *x16, const float *x32, const uint16_t *w, const uint16_t *b,
                     int rows, int dim, int row_mul, int row_add, cudaStream_t s);

/* y16 (rows, dim) = round16(x[src_row(r)] / sqrt(mean(x^2) + eps) * w)
 * (fg_rmsnorm: the mean square in double); x, src_row and aliasing as
 * fg_cuk_layernorm. */
int fg_cuk_rmsnorm(uint16_t *y16, const uint16_t *x16, const float *x32, const uint16_t *w, float eps, int rows,
                   int dim, int row_mul, int row_add, cudaStream_t s);

/* RMSNorm of each of rows rows (dim) of x (fp16 x16 or fp32 x32, the other
 * NULL) into y16 = round16(...) and/or y32 (fp32, unrounded: the host's
 * value), either NULL; y32 may be x32. Qwen3's per-head q/k norms (rows =
 * tokens x heads, dim = head_dim, in place on the projection's fp32 sum)
 * and a sparse layer's input (y32 for the router, y16 for the experts). */
int fg_cuk_rmsnorm_f32(uint16_t *y16, float *y32, const uint16_t *x16, const float *x32, const uint16_t *w, float eps,
                       int rows, int dim, cudaStream_t s);

/* dst32 (rows, n) = bias (n) in every row, 0 without one: the C of a GEMM
 * whose fp32 output rotary reads before it rounds. */
int fg_cuk_bias_rows32(float *dst32, const uint16_t *bias, int rows, int n, cudaStream_t s);
/* g16 (n) = round16(silu(g) * u), fp32 between (fg_swiglu). */
int fg_cuk_swiglu16(uint16_t *g16, const uint16_t *u16, int64_t n, cudaStream_t s);

/* Rotary embeddings (fg_rope_positions, fg_rope_apply): y16 (B*S, n_heads *
 * head_dim) = round16(scale * rotate(x32)), rotate-half pairs (i, i + d/2),
 * angle pos * inv_freq[i] in fp32, the position of row b*S + i from the mask
 * (a real token: the real tokens before it; a pad: 1). inv_freq is the
 * host's (fg_rope_inv_freq), passed by value: head_dim / 2 <=
 * FG_CUK_ROPE_MAX_HALF, else cudaErrorInvalidValue. */
#define FG_CUK_ROPE_MAX_HALF 128
typedef struct {
    float inv_freq[FG_CUK_ROPE_MAX_HALF];
} fg_cuk_rope;
int fg_cuk_rope16(uint16_t *y16, const float *x32, const uint8_t *mask, int mask_stride, int B, int S, int past,
                  int n_heads, int head_dim, const fg_cuk_rope *f, float scale, cudaStream_t s);

/* dst16 (rows, n) = bias (n) in every row (the C of a GEMM with beta 1:
 * cuBLAS then rounds x W^T + b once). */
int fg_cuk_bias_rows16(uint16_t *dst16, const uint16_t *bias, int rows, int n, cudaStream_t s);
/* y32 (rows, n) = h16 + bias (fp32): the C of an output GEMM that adds the
 * residual. bias may be NULL. */
int fg_cuk_resid_init(float *y32, const uint16_t *h16, const uint16_t *bias, int rows, int n, cudaStream_t s);
/* x16 (n) = max(x16, 0), exact in fp16. */
int fg_cuk_relu16(uint16_t *x16, int64_t n, cudaStream_t s);
/* y16 (n) = round16(x32). */
int fg_cuk_round16(uint16_t *y16, const float *x32, int64_t n, cudaStream_t s);
/* y16 (n) = round16(h16 + acc32), the sum in fp32 (a sparse layer's
 * residual: fg_add, then the block's rounding); y16 may be h16. */
int fg_cuk_resid_round16(uint16_t *y16, const uint16_t *h16, const float *acc32, int64_t n, cudaStream_t s);

/* EMBED, with positions from the mask as Hugging Face computes them
 * (cumsum(mask) * mask - 1 + 2) for the step's S new tokens of B sequences:
 *   gather: e16 (B*S, D) = E[ids]             (project_in models, before the GEMM)
 *   h16 (B*S, H) = round16(base + P[pos]), base = E[ids] (e32 NULL) or the
 *                  projected e32 (B*S, H)
 * An id outside [0, V) writes zeros and sets *bad to the lowest such row
 * (atomicMin: bad starts at FG_CUK_BAD_NONE, above any row). */
#define FG_CUK_BAD_FILL 0x7f            /* each byte of *bad before EMBED (cudaMemsetAsync) */
#define FG_CUK_BAD_NONE 0x7f7f7f7f      /* *bad with no id outside the vocabulary */
int fg_cuk_embed_gather(uint16_t *e16, const int32_t *ids, const uint16_t *E, int rows, int D, int V, int32_t *bad,
                        cudaStream_t s);
int fg_cuk_embed_pos(uint16_t *h16, const float *e32, const int32_t *ids, const uint16_t *E, const uint16_t *P,
                     const uint8_t *mask, int mask_stride, int B, int S, int past, int H, int V, int32_t *bad,
                     cudaStream_t s);

/* The step's k or v (B*S, H) fp16 into the cache (Tmax, B, H) at positions
 * [past, past+S); H is the cache's width (n_kv_heads * head_dim). */
int fg_cuk_cache_store(uint16_t *cache, const uint16_t *x16, int B, int S, int past, int H, cudaStream_t s);

/* A compressed cache (fg_q4.h: one slice of 36 ceil(d / 64) bytes per
 * position, sequence and kv head, time-major (Tmax, B, KV)): the step's k
 * or v (B*S, KV*d) fp16 packed at positions [past, past+S), bit for bit
 * fg_q4_pack's bytes (cuda_fmt_dq.cuh's q4_pack_group). */
int fg_cuk_cache_store_q4(uint8_t *cache, const uint16_t *x16, int B, int S, int past, int KV, int d, cudaStream_t s);
/* y16 (past + S, d) = kv head g of sequence b: positions before past
 * expanded from the compressed cache cq (fg_q4_expand's values), the
 * step's own from x16 (B*S, KV*d), as fg_attention_gqa_q4 reads them. */
int fg_cuk_cache_expand(uint16_t *y16, const uint8_t *cq, const uint16_t *x16, int b, int g, int B, int S, int past,
                        int KV, int d, cudaStream_t s);

/* Causal masked softmax of nh*sr score rows (T) of sequence b: row r is
 * query i0 + r % sr (position past + i0 + r % sr), which sees keys t <= its
 * position with mask[t] = 1 (and, window > 0, t > position - window); the
 * others get weight 0, and a row with no visible key is uniform over all T
 * (fg_ops.c's masked_softmax). p16 (nh*sr, T) = round16(weights), the fp16
 * input of the ctx GEMM. */
int fg_cuk_softmax(uint16_t *p16, const float *scores, const uint8_t *mask_b, int rows, int sr, int T, int past,
                   int i0, int window, cudaStream_t s);

/* The attention's shape, fg_attn_shape's: query head h reads kv head
 * h / (n_heads / n_kv_heads); window 0 or a sliding window of key slots. */
typedef struct {
    int n_heads, n_kv_heads, head_dim, window;
} fg_cuk_attn_shape;

/* Decode attention straight over the cache, one block per (sequence, query
 * head, query): ctx16 (B*S, A*d) = round16(softmax(q k^T) v) with the same
 * mask and window rule; q (B*S, A*d) fp16 already scaled; kc, vc (Tmax, B,
 * KV*d). Needs
 * T = past + S <= fg_cuk_decode_max_T() and head_dim <=
 * FG_CUK_DECODE_MAX_HEAD_DIM: q and the scores then fit the block's default
 * 48 KiB of shared memory. */
#define FG_CUK_DECODE_MAX_HEAD_DIM 256
int fg_cuk_decode_max_T(void);
int fg_cuk_attn_decode(uint16_t *ctx16, const uint16_t *q16, const uint16_t *kc, const uint16_t *vc,
                       const uint8_t *mask, int mask_stride, int B, int S, int past, const fg_cuk_attn_shape *sh,
                       cudaStream_t s);
/* The same over a compressed cache kq, vq (its past, expanded as it is read)
 * and the step's own k16, v16 (B*S, KV*d) for positions [past, past+S):
 * fg_attention_gqa_q4's reading, before the step's k and v are stored. */
int fg_cuk_attn_decode_q4(uint16_t *ctx16, const uint16_t *q16, const uint8_t *kq, const uint8_t *vq,
                          const uint16_t *k16, const uint16_t *v16, const uint8_t *mask, int mask_stride, int B, int S,
                          int past, const fg_cuk_attn_shape *sh, cudaStream_t s);

/* ids (B) = argmax of each logits row (B, V); the lowest index on ties
 * (fg_argmax). */
int fg_cuk_argmax(int32_t *ids, const float *logits, int B, int V, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
