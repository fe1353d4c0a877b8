/* fg_gemm.h - Linear layers with fp16 (or quantized) weights and fp32 activations, the CPU
 * form of what cuBLAS does on the GPU: weights stay fp16 in memory (half the
 * bytes to move and to hold), products and sums are fp32.
 *
 * Two paths, chosen by the number of rows:
 *  - few rows (decode: one token per sequence): a fused kernel (AVX-512
 *    register tiles of up to 8 weight rows by 1-6 activation rows where the
 *    CPU has it, else AVX2, else portable C) widens the fp16 weights inside
 *    its FMA loop and reads them once from memory; memory-bound up to a few
 *    rows, so half the bytes of fp32 weights make it faster than sgemm,
 *    which also repacks the whole weight matrix on every call;
 *  - many rows (prefill): where AVX-512 runs, the same fused kernel on a
 *    tile of weight rows widened once into L2, FG_GEMM_SMALL_ROWS activation
 *    rows at a time (compute-bound; OpenBLAS's sgemm on the widened chunks,
 *    whose kernels for AMD CPUs stop at AVX2, ran at 0.6 of its rate at 256
 *    rows on this project's Zen host: flexgen-fmt-bench); elsewhere the weight
 *    is widened to fp32 in chunks of output rows for OpenBLAS sgemm.
 * Q4_K, Q5_K and Q6_K weights on a CPU with AVX512-VNNI take neither: the
 * int16 kernels (fg_gemm_i16.h) quantize each activation row to int16 per
 * 256 values and multiply the blocks' integer codes with VPDPWSSD, at every
 * row count: each activation moved by at most 0.51 amax / 32767 of its
 * 256 values, the integer sums exact, the rest fp32.
 * The result depends on the path (summation order), never on where the data
 * came from. With AVX-512 the fused kernel sums each row the same way
 * whatever the other rows, the batch size or the thread count (fg_gemm_q.h's
 * kernels for ggml blocks at a few rows aside), and so do the int16
 * kernels; without AVX-512, up to FG_GEMM_SMALL_ROWS. */
#ifndef FG_GEMM_H
#define FG_GEMM_H

#include <stdint.h>

#include "fg_fp16.h"

/* Rows up to this use the fused kernel. */
#define FG_GEMM_SMALL_ROWS 32

/* y[rows, out] = x[rows, in] . W[out, in]^T (+ bias[out]). W, bias fp16.
 * Scratch is internal (per thread); x and y must not alias. */
void fg_gemm_f16w(float *y, const float *x, const fg_half *W, const fg_half *bias, int rows, int in, int out);
/* The same with W a compressed (out, in) weight (fg_q4.h slice, grouped
 * along out): bit for bit fg_gemm_f16w on fg_q4_expand's fp16 matrix, which
 * is expanded a block of rows at a time next to the kernel that reads it
 * (few rows, and many rows where AVX-512 runs) or straight to the fp32
 * that sgemm reads (many rows elsewhere). */
void fg_gemm_q4w(float *y, const float *x, const uint8_t *W, const fg_half *bias, int rows, int in, int out);
/* W in any format of the table (common/fg_fmt.h): F16 and Q4G64 as above;
 * a ggml format's rows of blocks are dequantized to fg_fmt.h's fp32 values
 * a block of rows at a time, next to the fused kernel (few rows: the same
 * kernel on fp32 weights read back from L2, so nothing the size of the
 * weight is ever written; many rows with AVX-512: a tile widened once for
 * every block of rows) or into the fp32 chunk sgemm reads (many rows
 * without AVX-512).
 * The sums are those of the fp16 path on those fp32 values: each (row,
 * output) accumulated in k order with FMA, then a fixed reduction. */
void fg_gemm_fmt(float *y, const float *x, const void *W, int fmt, const fg_half *bias, int rows, int in, int out);
/* Benches and tests: 0 = the fp32 kernels even where the int16 ones run
 * (fg_gemm_i16.h); 1 = the default. */
void fg_gemm_int16(int on);
/* 1 where fg_gemm_fmt runs fmt at this input width on the int16 kernels. */
int fg_gemm_int16_runs(int fmt, int in);
/* Rows [r0, r1) of W (F16 or a ggml format, [*, in]) as fp32: the
 * embedding's gather. */
void fg_fmt_rows_f32(const void *W, int fmt, int in, int r0, int r1, float *dst);

#endif
