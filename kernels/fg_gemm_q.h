/* fg_gemm_q.h - fused few-row GEMV on ggml blocks (fg_gemm_q.c): what
 * fg_gemm_fmt runs for Q8_0, Q4_K and Q6_K weights at up to
 * FG_GEMM_Q_MAX_ROWS rows on an AVX-512 CPU (Q4_K and Q6_K only where it
 * lacks AVX512-VNNI: fg_gemm_i16.h). Internal to kernels/. */
#ifndef FG_GEMM_Q_H
#define FG_GEMM_Q_H

#include <stddef.h>
#include <stdint.h>

#define FG_GEMM_Q_MAX_ROWS 4

/* 1 if the fused kernel runs fmt at this row count and input width. */
int fg_gemm_q_fused(int fmt, int rows, int in);
/* Scratch floats' bytes fg_gemm_q_prepare fills (the activations' sums per
 * sub-block), and filling it, once per call. */
size_t fg_gemm_q_scratch(int fmt, int rows, int in);
void fg_gemm_q_prepare(int fmt, const float *x, int rows, int in, float *scratch);
/* y[r, o] for o in [o0, o1) (y row stride out) of W [out, in] in fmt. */
void fg_gemm_q_outputs(int fmt, const uint8_t *W, const float *x, const float *scratch, int rows, int in, int out,
                       int o0, int o1, float *y);

#endif
