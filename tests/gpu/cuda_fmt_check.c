/* cuda_fmt_check.c - the cuda backend's weight formats held to the CPU's
 * element by element, where a GPU exists (exit 77, ctest's skip, where no
 * CUDA device can be opened). It reaches the module's own code through its
 * probe (fg_cuda.h: the kernels and the Linear the ops run) and compares:
 *
 * 1. Dequantization, bit for bit, for every format of common/fg_fmt.h.
 *    Matrices of random bytes (every code and every scale bit pattern,
 *    NaN and inf scales included) and of realistic blocks (fmt_fill.h),
 *    with rows of several blocks and an odd row count (Q4G64: a last group
 *    of 44 rows): the device's fp32 rows must equal fg_fmt_to_f32's
 *    (Q4G64: fg_q4_expand_rows_f32's) in every bit, and its fp16 rows (the
 *    prefill tile) fg_float_to_half of those (Q4G64: fg_q4_expand's).
 *    NaN equals NaN (a NaN's payload is the hardware's); nothing else is
 *    let through.
 *
 * 2. The Linear y = alpha x W^T + beta y (fg_cu_linear) at 1, 3, 8, 9 and
 *    16 rows (the dequantizing GEMV, one and two passes of 8 rows) and 17,
 *    64 and 130 rows (the fp16 tiles and cuBLAS, several tiles per matrix),
 *    fp32 and fp16 outputs, with and without beta, against a double-
 *    precision sum over the exact dequantized values (the CPU's), element
 *    by element within a bound derived, not fitted. With S = sum |x_i w_i|,
 *    X = sum |x_i| over the row's n = in terms and u = 2^-24:
 *      GEMV:  |y - ref| <= |alpha| 2 n u S            (fp32 sums of exact
 *             products in some order: gamma_n = n u, doubled for slack)
 *      tiles: |y - ref| <= |alpha| (2^-11 S + 2^-25 X + 4 n u S)
 *             (each weight rounded to fp16 once: 2^-11 relative, or 2^-25
 *             absolute in fp16's subnormal range; exact for Q4G64, whose
 *             values are fp16; cuBLAS's fp32 accumulation allowed twice the
 *             GEMV's, as tensor cores may truncate where IEEE rounds)
 *      plus the output's own rounding: 2^-11 |y| + 2^-25 for fp16, 4 u |y|
 *      for fp32, |y| <= |alpha| S + |beta c|.
 *    A wrong code, scale, block or row is an error of the size of a
 *    weight times an activation, far outside these. Also refused with
 *    FG_EINPUT: rows of a length the kernels do not take, and a prefill
 *    without a tile. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_backend.h"
#include "fg_cuda.h"
#include "fg_devsize.h"
#include "fg_fmt.h"
#include "fg_fp16.h"
#include "fg_q4.h"
#include "fmt_fill.h"

#define U32 (1.0 / 16777216.0)            /* fp32's unit roundoff, 2^-24 */
#define U16 (1.0 / 2048.0)                /* fp16's, 2^-11 */
#define SUB16 (1.0 / 33554432.0)          /* half fp16's subnormal spacing, 2^-25 */
#define GEMV_SUM_SLACK 2.0                /* times n u */
#define TILE_SUM_SLACK 4.0

static const fg_cuda_fmt_probe_table *P;
static fg_cuda_fmt_probe *probe;
static uint64_t rng = 0x5eed;

/* ---- 1. dequantization ------------------------------------------------------- */

static int is_nan32(float f) { return f != f; }
static int is_nan16(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

/* The CPU's values of W (out, in): fp32, and fp16 as the tile holds them. */
static void cpu_rows(int fmt, const uint8_t *W, int out, int in, float *f32, uint16_t *f16) {
    size_t n = (size_t)out * in;
    if (fmt == FG_FMT_Q4G64) {
        fg_q4_expand_rows_f32(W, out, in, 0, out, f32);
        fg_q4_expand_rows(W, out, in, 0, out, f16);
        return;
    }
    uint64_t rb = fg_fmt_row_bytes(fmt, (uint64_t)in);
    for (int r = 0; r < out; r++) fg_fmt_to_f32(fmt, W + (size_t)r * rb, f32 + (size_t)r * in, (uint64_t)in);
    for (size_t i = 0; i < n; i++) f16[i] = fg_float_to_half(f32[i]);
}

static int check_dequant(int fmt, int out, int in, int realistic) {
    uint64_t wb = fg_fmt_bytes(fmt, (uint64_t)out, (uint64_t)in);
    size_t n = (size_t)out * in;
    uint8_t *W = malloc(wb);
    float *h32 = malloc(4 * n), *g32 = malloc(4 * n);
    uint16_t *h16 = malloc(2 * n), *g16 = malloc(2 * n);
    if (realistic) fmt_fill(W, fmt, out, in, 0.05f, &rng);
    else fmt_fill_bytes(W, wb, &rng);
    cpu_rows(fmt, W, out, in, h32, h16);
    int ok = 1;
    fg_status st = P->dequant(probe, fmt, W, out, in, g32, g16);
    if (st) {
        printf("FAIL dequant %s: %s\n", fg_fmt_name(fmt), fg_err_msg());
        ok = 0;
    }
    size_t bad32 = 0, bad16 = 0, first = n, nan = 0;
    for (size_t i = 0; ok && i < n; i++) {
        uint32_t a, b;
        memcpy(&a, &h32[i], 4), memcpy(&b, &g32[i], 4);
        int e32 = is_nan32(h32[i]) ? !is_nan32(g32[i]) : a != b;
        int e16 = is_nan16(h16[i]) ? !is_nan16(g16[i]) : h16[i] != g16[i];
        nan += is_nan32(h32[i]);
        bad32 += e32, bad16 += e16;
        if ((e32 || e16) && first == n) first = i;
    }
    if (ok && (bad32 || bad16)) {
        printf("FAIL dequant %s %s (%d, %d): %zu fp32 and %zu fp16 values differ; first [%zu, %zu]: cpu %.9g (fp16 "
               "0x%04x), cuda %.9g (0x%04x)\n", fg_fmt_name(fmt), realistic ? "realistic" : "random bytes", out, in,
               bad32, bad16, first / in, first % in, (double)h32[first], h16[first], (double)g32[first], g16[first]);
        ok = 0;
    } else if (ok) {
        printf("ok   dequant %s %s (%d, %d): fp32 and fp16 bitwise equal (%zu NaN)\n", fg_fmt_name(fmt),
               realistic ? "realistic" : "random bytes", out, in, nan);
    }
    free(W), free(h32), free(g32), free(h16), free(g16);
    return ok;
}

/* ---- 2. the Linear ------------------------------------------------------------- */

typedef struct {
    int rows;
    int y32;
    float alpha, beta;
    int small_tile;   /* a tile of 64 weight rows: several tiles per matrix */
} lin_case;

static int check_linear(int fmt, int out, int in, const lin_case *lc) {
    /* F16 goes to cuBLAS as stored at every row count: bounded as the tiles, exact weights */
    int rows = lc->rows, tiled = rows > FG_CUDA_GEMV_MAX_ROWS || fmt == FG_FMT_F16, y32 = lc->y32;
    uint64_t wb = fg_fmt_bytes(fmt, (uint64_t)out, (uint64_t)in);
    size_t nw = (size_t)out * in, ny = (size_t)rows * out, ysz = y32 ? 4 : 2;
    uint8_t *W = malloc(wb), *y = malloc(ny * ysz);
    float *w = malloc(4 * nw);
    uint16_t *w16 = malloc(2 * nw), *x = malloc(2 * (size_t)rows * in);
    double *c = malloc(sizeof(double) * ny);
    fmt_fill(W, fmt, out, in, sqrtf(3.0f / (float)in), &rng);
    cpu_rows(fmt, W, out, in, w, w16);
    for (size_t i = 0; i < (size_t)rows * in; i++) x[i] = fg_float_to_half((float)(4 * fmt_fill_urand(&rng) - 2));
    for (size_t i = 0; i < ny; i++) {   /* C: what beta scales (a bias, a residual), as the output type holds it */
        float v = (float)(2 * fmt_fill_urand(&rng) - 1);
        if (y32) memcpy(y + 4 * i, &v, 4);
        else ((uint16_t *)y)[i] = fg_float_to_half(v);
        c[i] = y32 ? v : fg_half_to_float(fg_float_to_half(v));
    }
    uint64_t tile = rows > FG_CUDA_GEMV_MAX_ROWS ? (lc->small_tile ? 2ull * 64 * (uint64_t)in : FG_CUDA_DQ_TILE_MAX) : 0;
    fg_status st = P->linear(probe, fmt, W, out, in, x, rows, lc->alpha, lc->beta, y32, y, tile);
    char what[160];
    snprintf(what, sizeof what, "linear %s (%d, %d) x %d rows (%s), %s out, alpha %g beta %g%s", fg_fmt_name(fmt), out,
             in, rows, fmt == FG_FMT_F16 ? "cuBLAS" : tiled ? "fp16 tiles + cuBLAS" : "GEMV", y32 ? "fp32" : "fp16", (double)lc->alpha,
             (double)lc->beta, tiled && lc->small_tile ? ", 64-row tiles" : "");
    int ok = 1;
    if (st) {
        printf("FAIL %s: %s\n", what, fg_err_msg());
        ok = 0;
    }
    double worst = 0;   /* the largest |error| / bound */
    size_t bad = 0;
    int exact_w = fmt == FG_FMT_Q4G64 || fmt == FG_FMT_F16;   /* values fp16 holds: the tile is exact */
    for (int r = 0; ok && r < rows; r++)
        for (int o = 0; o < out; o++) {
            double ref = 0, S = 0, X = 0;
            for (int i = 0; i < in; i++) {
                double xi = fg_half_to_float(x[(size_t)r * in + i]), wi = w[(size_t)o * in + i];
                ref += xi * wi, S += fabs(xi * wi), X += fabs(xi);
            }
            size_t k = (size_t)r * out + o;
            double cb = lc->beta != 0 ? (double)lc->beta * c[k] : 0;
            double want = (double)lc->alpha * ref + cb;
            double got = y32 ? ((float *)y)[k] : fg_half_to_float(((uint16_t *)y)[k]);
            double sum_tol = tiled ? (exact_w ? 0 : U16 * S + SUB16 * X) + TILE_SUM_SLACK * in * U32 * S
                                   : GEMV_SUM_SLACK * in * U32 * S;
            double mag = fabs(lc->alpha) * S + fabs(cb);
            double tol = fabs(lc->alpha) * sum_tol + (y32 ? 4 * U32 * mag : U16 * mag + SUB16);
            double err = fabs(got - want);
            if (!(err <= tol)) bad++;
            if (tol > 0 && err / tol > worst) worst = err / tol;
        }
    if (ok) {
        ok = bad == 0;
        printf("%s %s: %zu of %zu outside the bound, largest error %.3g of the bound\n", ok ? "ok  " : "FAIL", what,
               bad, ny, worst);
    }
    free(W), free(y), free(w), free(w16), free(x), free(c);
    return ok;
}

/* What the Linear refuses: rows the kernels do not take, a prefill without a tile. */
static int check_refusals(void) {
    int ok = 1;
    uint8_t W[4 * 12 * 4] = {0};
    uint16_t x[17 * 12] = {0};
    float y[17 * 4] = {0};
    fg_status st = P->linear(probe, FG_FMT_F32, W, 4, 12, x, 1, 1, 0, 1, y, 0);
    printf("%s linear F32 rows of 12 values: %s\n", st == FG_EINPUT ? "ok  " : "FAIL",
           st == FG_EINPUT ? fg_err_msg() : "not refused with FG_EINPUT");
    ok &= st == FG_EINPUT;
    uint8_t Q[4 * 34] = {0};
    uint16_t xq[17 * 32] = {0};
    st = P->linear(probe, FG_FMT_Q8_0, Q, 4, 32, xq, FG_CUDA_GEMV_MAX_ROWS + 1, 1, 0, 1, y, 0);
    printf("%s linear Q8_0 at %d rows without a tile: %s\n", st == FG_EINPUT ? "ok  " : "FAIL",
           FG_CUDA_GEMV_MAX_ROWS + 1, st == FG_EINPUT ? fg_err_msg() : "not refused with FG_EINPUT");
    return ok & (st == FG_EINPUT);
}

int main(void) {
    if (fg_devsize_usable("cuda")) {
        printf("cuda_fmt_check: no CUDA device: skipped\n");
        return 77;
    }
    P = fg_backend_cuda_sym(FG_CUDA_FMT_PROBE_SYM);
    if (!P) fg_exit_on(fg_err_set(FG_ERUNTIME, "the cuda module has no %s", FG_CUDA_FMT_PROBE_SYM));
    fg_exit_on(P->probe_new(&probe));
    int ok = 1;
    for (int fmt = 0; fmt < FG_FMT_COUNT; fmt++) {
        const fg_fmt_info *f = fg_fmt_get(fmt);
        /* rows of three k-quant blocks or seventeen 32-blocks; Q4G64 groups along out: 300 rows, the last group 44 */
        int in = f->block == 256 ? 768 : 544, out = fmt == FG_FMT_Q4G64 ? 300 : 37;
        if (fmt == FG_FMT_Q4G64) in = 40;
        ok &= check_dequant(fmt, out, in, 0);
        ok &= check_dequant(fmt, out, in, 1);
    }
    const lin_case cases[] = {
        {1, 1, 1.0f, 0.0f, 0},     {3, 0, 0.125f, 1.0f, 0},   {8, 1, 1.0f, 1.0f, 0},  {9, 0, 1.0f, 0.0f, 0},
        {16, 1, 0.125f, 1.0f, 0}, {17, 1, 1.0f, 0.0f, 1},    {64, 0, 0.125f, 1.0f, 1}, {130, 1, 1.0f, 1.0f, 0},
    };
    for (int fmt = 0; fmt < FG_FMT_COUNT; fmt++) {
        const fg_fmt_info *f = fg_fmt_get(fmt);
        int in = f->block == 256 ? 768 : 544;   /* a last warp step over part of its 256 values */
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) ok &= check_linear(fmt, 300, in, &cases[k]);
    }
    ok &= check_refusals();
    P->probe_destroy(&probe);
    printf("cuda_fmt_check: %s\n", ok ? "every format agrees" : "FAIL");
    return ok ? 0 : 1;
}
