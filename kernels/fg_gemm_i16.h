/* fg_gemm_i16.h - integer-dot Linear for k-quant weights (fg_gemm_i16.c):
 * what fg_gemm_fmt runs for Q4_K, Q5_K and Q6_K at every row count on a CPU
 * with AVX512-VNNI. Internal to kernels/.
 *
 * What it computes. Each activation row is quantized per 256 values (one
 * super-block) to int16: s = amax / 32767, q = round(x / s), so each
 * element is off by at most s/2 (plus the fp32 rounding of s and of x / s:
 * under 0.51 s; a super-block with amax < 2^-100 is taken as zero). Then,
 * up to fp32 rounding, y = W . (q s) with W the exact block values (those
 * of gguf-py's dequantize): per super-block the integer codes times their
 * integer sub-block scales times q summed in int32 (exact: no lane can
 * overflow, fg_gemm_i16.c), scaled in fp32 by the block's d and s, and
 * Q4_K/Q5_K's minimum terms from the int32 sums of q per sub-block. So
 *   |y - W x| <= sum over super-blocks b of 0.51 s_b sum_{i in b} |w_i|
 * plus fp32 rounding (tests/gguf/gemm_check.py derives and checks both).
 * The fp32 part is one fixed sequence per (row, output), written once for
 * the few-rows and many-rows paths (fg_gemm_i16.c): a row's result does not
 * depend on the batch, the tile, the thread count or the other rows. */
#ifndef FG_GEMM_I16_H
#define FG_GEMM_I16_H

#include <stddef.h>
#include <stdint.h>

/* Up to this many rows run the few-rows kernel (blocks read once from
 * memory); more run the many-rows one (a tile of weight rows widened once). */
#define FG_GEMM_I16_FEW_ROWS 3

/* The activations, quantized once per call. */
typedef struct {
    int16_t *q;   /* [rows][in]: each 256 in the kernel's lane order */
    float *s;     /* [rows][in / 256]: the scale of each super-block */
    float *sum;   /* [rows][in / 256][8]: s * sum of q over 32 values (Q4_K, Q5_K) */
    int rows, in;
} fg_i16_x;

/* 1 where these kernels run fmt at this input width (a VNNI CPU, Q4_K,
 * Q5_K or Q6_K, in % 256 == 0, and fg_gemm_int16(1), the default). */
int fg_gemm_i16_runs(int fmt, int in);
/* The activations of rows x in laid out in buf (fg_gemm_i16_x_bytes). */
size_t fg_gemm_i16_x_bytes(int rows, int in);
void fg_gemm_i16_x_init(fg_i16_x *xq, void *buf, int rows, int in);
/* Quantizes rows [r0, r1) of x [xq->rows, xq->in] into xq. */
void fg_gemm_i16_quantize(int fmt, const float *x, int r0, int r1, const fg_i16_x *xq);
/* y[r, o] (row stride out) for every row of xq (<= FG_GEMM_I16_FEW_ROWS)
 * and o in [o0, o1) of W [out, in]: the blocks read once. */
void fg_gemm_i16_few(int fmt, const uint8_t *W, const fg_i16_x *xq, int out, int o0, int o1, float *y);
/* The same for any number of rows: outputs [o0, o1) widened into pack
 * (fg_gemm_i16_pack_bytes(fmt, in, o1 - o0)), then every row run on it. */
size_t fg_gemm_i16_pack_bytes(int fmt, int in, int n_out);
void fg_gemm_i16_many(int fmt, const uint8_t *W, const fg_i16_x *xq, int out, int o0, int o1, float *y, void *pack);

#endif
