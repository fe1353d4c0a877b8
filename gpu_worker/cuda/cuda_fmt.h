/* cuda_fmt.h - the weight formats (common/fg_fmt.h) on the device, as C
 * launchers of cuda_fmt.cu's kernels: rows of a matrix dequantized (the
 * embedding's gather, the prefill tile cuBLAS reads) and a dequantizing
 * GEMV (decode). cuda_linear.c decides which runs; these only launch on the
 * stream they are given and return the launch's cudaError_t as an int.
 *
 * Values. Every ggml format's value is computed with the IEEE fp32
 * operations of fg_fmt.c, in its order (the file is compiled without FMA
 * contraction and writes each product and sum as a rounded intrinsic), so
 * a dequantized value on the device is fg_fmt_to_f32's bit for bit; Q4G64's
 * is fg_q4_expand's fp16 value (q * (1 / scale), rounded, + min, rounded).
 * An fp16 output is that value rounded to nearest even, once.
 *
 * A matrix W (out, in) in format fmt is laid out as fg_fmt.h says (rows of
 * blocks; Q4G64 grouped along out), and in must be a multiple of
 * FG_CUK_FMT_VEC: a thread dequantizes a run of that many values, which
 * lies inside one block or sub-block of every ggml format (cudaErrorInvalidValue
 * otherwise, and for a format outside the table). */
#ifndef FG_CUDA_FMT_H
#define FG_CUDA_FMT_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FG_CUK_FMT_VEC 8   /* values a thread dequantizes at a time; in % FG_CUK_FMT_VEC == 0 */

/* n rows of W (out, in) dequantized into dst (n, in), fp16 (dst16) or fp32
 * (dst32; the other NULL): row r is ids[r] (the embedding's gather: an id
 * outside [0, out) writes zeros and sets *bad to the lowest such r with
 * atomicMin, as fg_cuk_embed_gather) or, with ids NULL, o0 + r (a tile of
 * rows; bad unused). */
int fg_cuk_fmt_rows(uint16_t *dst16, float *dst32, const int32_t *ids, const void *W, int fmt, int in, int64_t out,
                    int64_t o0, int64_t n, int32_t *bad, cudaStream_t s);

/* y (rows, out) = alpha x (rows, in) W^T + beta y, fp32 sums, x fp16; y
 * fp16 (y32 0: each output rounded once) or fp32. Each output is one warp's
 * sum over its row of W, read from device memory once for every row of x
 * (FG_CUK_GEMV_PASS_ROWS rows of x a pass, the row's blocks read again from
 * cache for the next pass), so the result of a row of x does not depend on
 * the others. As cuBLAS, y is not read where beta is 0. */
#define FG_CUK_GEMV_PASS_ROWS 8
int fg_cuk_fmt_gemv(void *y, int y32, const uint16_t *x, const void *W, int fmt, int rows, int in, int out,
                    float alpha, float beta, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
