/* fg_ops.h - CPU math for every model family, shared by the reference engine, the gpu_worker's
 * host backend and the cpu_worker. fp32 compute between fixed fp16 rounding
 * points (docs/ARCHITECTURE.md, "Numerics"); Linear layers go through OpenBLAS sgemm.
 * Layouts are row-major; a Linear weight is [out, in] as Hugging Face stores it.
 * Weights are fp16 (as every tier holds them); Linear layers are in fg_gemm.h. */
#ifndef FG_OPS_H
#define FG_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "fg_config.h"
#include "fg_fp16.h"

#define FG_LN_EPS 1e-5f

/* y[r, :] = LayerNorm(x[r, :]) * w + b, for r < rows. y may alias x.
 * w, b (dim) fp16 as stored. */
void fg_layernorm(float *y, const float *x, const fg_half *w, const fg_half *b, int rows, int dim);

/* y[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * w (RMSNorm: the mean
 * square summed in double, the rest fp32). y may alias x. w (dim) fp16. */
void fg_rmsnorm(float *y, const float *x, const fg_half *w, float eps, int rows, int dim);

void fg_relu(float *x, size_t n);
/* g[i] = silu(g[i]) * u[i] = g / (1 + exp(-g)) * u, fp32 (the gated MLP). */
void fg_swiglu(float *g, const float *u, size_t n);
void fg_add(float *y, const float *x, size_t n);           /* y += x */

/* Multi-head attention of S new queries per sequence over a KV cache that
 * already holds their keys and values.
 *   ctx  [B, S, H]  out: softmax(q k^T) v per head (q already scaled)
 *   q    [B, S, H]
 *   kc,vc [Tmax, B, H] fp16 cache, time-major (as FlexGen lays it out: the
 *         rows of one position for the whole batch are contiguous, so a
 *         step's new entries and a prefix of the cache are single ranges to
 *         move between tiers); positions [0, past + S) are valid
 *   mask [B, mask_stride]: 1 = real token, 0 = padding, for positions < past+S
 * Query i of sequence b sits at position past+i and sees keys t <= past+i with
 * mask[b, t] = 1; other scores are set to the most negative finite float, so
 * an all-padding row stays finite (uniform weights), as Hugging Face does. */
void fg_attention(float *ctx, const float *q, const fg_half *kc, const fg_half *vc, int Tmax,
                  const uint8_t *mask, int mask_stride, int B, int S, int past, int H, int n_heads);

/* The attention's shape: A query heads over KV kv heads of d values (query
 * head h reads kv head h / (A / KV): grouped-query attention; KV = A is
 * multi-head, KV = 1 multi-query); q and ctx rows are A*d wide, the cache's
 * and k, v's KV*d. window > 0: query slot i sees key slots i - window < j
 * <= i only (Mistral's sliding window, in cache slots as Hugging Face's mask
 * counts them, pads included). */
typedef struct {
    int n_heads, n_kv_heads, head_dim, window;
} fg_attn_shape;

/* fg_attention for any shape: fg_attention is this with KV = A, d = H / A,
 * no window (the same sums). */
void fg_attention_gqa(float *ctx, const float *q, const fg_half *kc, const fg_half *vc, int Tmax,
                      const uint8_t *mask, int mask_stride, int B, int S, int past, const fg_attn_shape *sh);
void fg_attention_gqa_q4(float *ctx, const float *q, const float *k, const float *v, const void *kc, const void *vc,
                         const uint8_t *mask, int mask_stride, int B, int S, int past, const fg_attn_shape *sh);

/* fg_attention over a 4-bit compressed cache (fg_q4.h): kc, vc (Tmax, B,
 * n_heads) head slices of which positions [0, past) are read, expanded; the
 * step's keys and values [past, past+S) come from k, v [B, S, H] (values
 * fp16 holds), not from the cache. The same sums as fg_attention over an fp16
 * cache holding those values. */
void fg_attention_q4(float *ctx, const float *q, const float *k, const float *v, const void *kc, const void *vc,
                     const uint8_t *mask, int mask_stride, int B, int S, int past, int H, int n_heads);

/* Seconds spent inside BLAS calls by this thread since the last reset: the
 * "time in sgemm" share the benchmarks report. */
double fg_ops_gemm_seconds(void);
void fg_ops_gemm_reset(void);
void fg_ops_gemm_add(double seconds);


#endif
