/* cuda_linear.h - a Linear layer on the cuda backend, its weight in any
 * format of common/fg_fmt.h: what every GEMM of an op with a weight calls
 * (cuda_ops.c), and what tests/gpu/cuda_fmt_check reaches through the
 * module's probe (cuda_fmt_probe.c). */
#ifndef FG_CUDA_LINEAR_H
#define FG_CUDA_LINEAR_H

#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "fg_common.h"

/* Where a Linear runs: cuBLAS bound to the stream, and the workspace's
 * dequantization tile (fg_cuda_ws.w16; NULL and 0 where DEVICE_INIT's
 * max_rows needs none). */
typedef struct {
    cublasHandle_t blas;
    cudaStream_t s;
    uint16_t *tile;
    uint64_t tile_bytes;
    const char *op;   /* the op's name, for messages */
    /* 1: an F16 weight too takes the GEMV at up to FG_CUDA_GEMV_MAX_ROWS
     * rows (a sparse layer's experts: many small batches, each a GEMV that
     * reads its expert once, no cuBLAS heuristics per shape) */
    int f16_gemv;
} fg_cu_lin;

/* A weight matrix (out, in) as the arena holds it. */
typedef struct {
    const void *p;
    int fmt;   /* common/fg_fmt.h */
} fg_cu_w;

/* y (rows, out) = alpha x (rows, in) W^T + beta y, fp32 sums; x fp16, y
 * fp16 (y32 0) or fp32 (y32 1), not read where beta is 0.
 *   F16: cublasGemmEx on W as stored (fp16 operands, CUBLAS_COMPUTE_32F),
 *     or with L->f16_gemv the GEMV below at up to FG_CUDA_GEMV_MAX_ROWS rows
 *     (where in is a multiple of FG_CUK_FMT_VEC);
 *   another format, rows <= FG_CUDA_GEMV_MAX_ROWS: the dequantizing GEMV
 *     (fg_cuk_fmt_gemv: W's exact fp32 values, fp32 sums);
 *   more rows: W dequantized to fp16 a tile of rows at a time and
 *     cublasGemmEx on each tile, so W's values are rounded to fp16 once
 *     (exact for Q4G64, whose values are fp16).
 * FG_EINPUT where in is not a multiple of FG_CUK_FMT_VEC (every ggml block
 * format's rows are) or the tile cannot hold one row; FG_ERUNTIME when a
 * launch or cuBLAS fails. `what` names the GEMM in messages. */
fg_status fg_cu_linear(const fg_cu_lin *L, void *y, int y32, const uint16_t *x, fg_cu_w W, int rows, int in, int out,
                       float alpha, float beta, const char *what);

#endif
