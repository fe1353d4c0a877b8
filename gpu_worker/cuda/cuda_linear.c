/* cuda_linear.c - a Linear in any weight format on the cuda backend (see
 * cuda_linear.h): F16 weights go to cuBLAS as stored; a quantized weight is
 * read by the dequantizing GEMV at decode, and dequantized to fp16 a tile
 * of rows at a time for cuBLAS at prefill, so the fp16 matrix is never
 * written whole. The row count between the two (FG_CUDA_GEMV_MAX_ROWS) and
 * the tile's size (FG_CUDA_DQ_TILE_MAX) are fg_devsize.h's, which sizes the
 * tile in the workspace the coordinator's plan counts; neither has been
 * tuned on a GPU. */
#include "cuda_linear.h"

#include <inttypes.h>

#include "cuda_fmt.h"
#include "fg_devsize.h"
#include "fg_fmt.h"

/* Tile rows are a multiple of this where the tile holds more (cuBLAS's
 * shapes of a multiple of 64 rows run its best kernels). */
#define TILE_ROW_ALIGN 64

static fg_status launch_fail(int err, const fg_cu_lin *L, const char *what) {
    return fg_err_set(FG_ERUNTIME, "%s on cuda: %s: %s", L->op, what, cudaGetErrorString((cudaError_t)err));
}

static fg_status blas_fail(cublasStatus_t b, const fg_cu_lin *L, const char *what) {
    return fg_err_set(FG_ERUNTIME, "%s on cuda: cuBLAS %s: %s", L->op, what, cublasGetStatusString(b));
}

/* y = alpha x W^T + beta y with W fp16 (out, in): cuBLAS is column-major, so
 * row-major y is y^T (out x rows, ld ldy) = W x^T, row-major W reads as W^T
 * (in x out, ld in), hence op T; x reads as x^T. */
static fg_status gemm16(const fg_cu_lin *L, void *y, int y32, int ldy, const uint16_t *x, const void *W, int rows,
                        int in, int out, float alpha, float beta, const char *what) {
    cublasStatus_t b = cublasGemmEx(L->blas, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha, W, CUDA_R_16F, in, x,
                                    CUDA_R_16F, in, &beta, y, y32 ? CUDA_R_32F : CUDA_R_16F, ldy, CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT);
    return b == CUBLAS_STATUS_SUCCESS ? FG_OK : blas_fail(b, L, what);
}

fg_status fg_cu_linear(const fg_cu_lin *L, void *y, int y32, const uint16_t *x, fg_cu_w W, int rows, int in, int out,
                       float alpha, float beta, const char *what) {
    int small = rows <= FG_CUDA_GEMV_MAX_ROWS;
    if (W.fmt == FG_FMT_F16 && !(L->f16_gemv && small && in % FG_CUK_FMT_VEC == 0))
        return gemm16(L, y, y32, out, x, W.p, rows, in, out, alpha, beta, what);
    if (in % FG_CUK_FMT_VEC)
        return fg_err_set(FG_EINPUT, "%s on cuda: %s: a %s weight's rows of %d values are not a multiple of %d, "
                          "which the dequantizing kernels take (HINT: --device host)", L->op, what,
                          fg_fmt_name(W.fmt), in, FG_CUK_FMT_VEC);
    int e;
    if (small) {
        if ((e = fg_cuk_fmt_gemv(y, y32, x, W.p, W.fmt, rows, in, out, alpha, beta, L->s))) return launch_fail(e, L, what);
        return FG_OK;
    }
    uint64_t per = L->tile_bytes / (sizeof(uint16_t) * (uint64_t)in);   /* weight rows a tile holds */
    if (per < 1)
        return fg_err_set(FG_EINPUT, "%s on cuda: %s: %d rows of a %s weight need its dequantization tile, and "
                          "DEVICE_INIT's workspace has %" PRIu64 " bytes of it (max_rows above %d makes one)", L->op,
                          what, rows, fg_fmt_name(W.fmt), L->tile_bytes, FG_CUDA_GEMV_MAX_ROWS);
    if (per >= (uint64_t)out) per = (uint64_t)out;
    else if (per > TILE_ROW_ALIGN) per -= per % TILE_ROW_ALIGN;
    size_t ysz = y32 ? sizeof(float) : sizeof(uint16_t);
    /* one stream: a tile is rewritten only after the GEMM before has read it */
    for (int o0 = 0; o0 < out; o0 += (int)per) {
        int n = out - o0 < (int)per ? out - o0 : (int)per;
        if ((e = fg_cuk_fmt_rows(L->tile, NULL, NULL, W.p, W.fmt, in, out, o0, n, NULL, L->s)))
            return launch_fail(e, L, what);
        fg_status st = gemm16(L, (uint8_t *)y + (size_t)o0 * ysz, y32, out, x, L->tile, rows, in, n, alpha, beta, what);
        if (st) return st;
    }
    return FG_OK;
}
