/* fmt_gemm_bench.c - `flexgen-fmt-bench`: a Linear layer on weights of each
 * format (fg_gemm_fmt) at one shape, beside this machine's limits measured in
 * the same process: memory read bandwidth (a sum over a buffer 4x the
 * largest cache, all threads), the fp32 FMA peak (independent AVX-512 or
 * AVX2 FMA chains in registers on every thread: what the cores can do) and
 * beside it fp32 GEMM at 2048^3 by OpenBLAS's sgemm and by this engine's
 * kernel. Per format and row count: the median of --reps runs, the weight
 * bytes read per second (its share of the read bandwidth) and FLOP/s (its
 * share of the FMA peak).
 *
 *   flexgen-fmt-bench [--out N] [--in N] [--rows 1,32] [--reps N] [--formats F16,Q8_0,...]
 *
 * The weights are random valid blocks (fg_fmt_fill_random: every byte random
 * but the scales, set small and finite), in copies filling 512 MiB or more that successive
 * runs walk, so each reads its weight from memory. Threads: FLEXGEN_THREADS
 * (the pool's setting). */
#include <cblas.h>
#ifdef __x86_64__
#include <immintrin.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_common.h"
#include "fg_fmt.h"
#include "fg_gemm.h"
#include "fg_pool.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    return t[n / 2];
}

typedef struct {
    const float *buf;
    size_t n;
    double sum[64];
} read_job;

static void read_task(void *p, int t) {
    read_job *j = p;
    size_t per = j->n / (size_t)fg_pool_threads(), lo = per * (size_t)t;
    const float *b = j->buf + lo;
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= per; i += 4) s0 += b[i], s1 += b[i + 1], s2 += b[i + 2], s3 += b[i + 3];
    j->sum[t] = s0 + s1 + s2 + s3;
}

/* GB/s of a parallel read of 1 GiB, median of 5. */
static double read_bandwidth(void) {
    size_t n = (1u << 30) / sizeof(float);
    float *buf = fg_alloc_tensor(n * sizeof(float));
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 7);
    read_job j = {.buf = buf, .n = n};
    double t[5];
    for (int r = 0; r < 5; r++) {
        double t0 = fg_now();
        fg_pool_run(fg_pool_threads(), read_task, &j);
        t[r] = fg_now() - t0;
    }
    free(buf);
    return (double)n * sizeof(float) / median(t, 5) / 1e9;
}

/* fp32 FMA peak: each thread runs 12 independent chains of vector FMAs
 * (enough to cover the FMA latency on every port) for FMA_ITERS rounds. */
#define FMA_ITERS 20000000
#ifdef __x86_64__
__attribute__((target("avx512f"))) static float fma_chains512(float s) {
    __m512 a[12], m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
#pragma GCC unroll 12
    for (int k = 0; k < 12; k++) a[k] = _mm512_set1_ps(s + (float)k);
    for (int i = 0; i < FMA_ITERS; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++) a[k] = _mm512_fmadd_ps(a[k], m, c);
    __m512 t = a[0];
#pragma GCC unroll 12
    for (int k = 1; k < 12; k++) t = _mm512_add_ps(t, a[k]);
    return _mm512_reduce_add_ps(t);
}

__attribute__((target("avx2,fma"))) static float fma_chains256(float s) {
    __m256 a[12], m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
#pragma GCC unroll 12
    for (int k = 0; k < 12; k++) a[k] = _mm256_set1_ps(s + (float)k);
    for (int i = 0; i < FMA_ITERS; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++) a[k] = _mm256_fmadd_ps(a[k], m, c);
    __m256 t = a[0];
#pragma GCC unroll 12
    for (int k = 1; k < 12; k++) t = _mm256_add_ps(t, a[k]);
    float v[8];
    _mm256_storeu_ps(v, t);
    return v[0] + v[7];
}
#endif

typedef struct {
    int lanes;
    float out[64];
} fma_job;

static void fma_task(void *p, int t) {
    fma_job *j = p;
#ifdef __x86_64__
    j->out[t] = j->lanes == 16 ? fma_chains512((float)t) : fma_chains256((float)t);
#else
    (void)j, (void)t;
#endif
}

/* GFLOP/s of every pool thread running fma_task (0 where not x86). */
static double fma_peak(void) {
#ifdef __x86_64__
    fma_job j = {.lanes = __builtin_cpu_supports("avx512f") ? 16 : 8};
    if (j.lanes == 8 && !__builtin_cpu_supports("fma")) return 0;
    double t0 = fg_now();
    fg_pool_run(fg_pool_threads(), fma_task, &j);
    double dt = fg_now() - t0;
    return 2.0 * j.lanes * 12 * (double)FMA_ITERS * fg_pool_threads() / dt / 1e9;
#else
    return 0;
#endif
}

/* The fp32 GEMM rate at 2048^3 of OpenBLAS's sgemm on every pool thread
 * (own = 0) or of this engine's kernel (own = 1: fg_gemm_fmt on fp32
 * weights, the path prefill takes), the median of 3. */
static double gemm_rate(int own) {
    int n = 2048;
    float *a = fg_alloc_tensor(sizeof(float) * (size_t)n * n), *b = fg_alloc_tensor(sizeof(float) * (size_t)n * n),
          *c = fg_alloc_tensor(sizeof(float) * (size_t)n * n);
    for (size_t i = 0; i < (size_t)n * n; i++) a[i] = b[i] = 0.001f * (float)(i % 13);
    openblas_set_num_threads(fg_pool_threads());
    double t[3];
    for (int r = 0; r < 3; r++) {
        double t0 = fg_now();
        if (own) fg_gemm_fmt(c, a, b, FG_FMT_F32, NULL, n, n, n);
        else cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
        t[r] = fg_now() - t0;
    }
    openblas_set_num_threads(1);   /* as fg_pool has it */
    free(a), free(b), free(c);
    return 2.0 * n * n * n / median(t, 3) / 1e9;
}

/* Random valid blocks of fmt for an [out, in] matrix (fg_fmt_fill_random). */
static uint8_t *random_weight(int fmt, int out, int in, uint64_t *bytes) {
    *bytes = fg_fmt_bytes(fmt, (uint64_t)out, (uint64_t)in);
    uint8_t *w = fg_alloc_tensor((size_t)*bytes);
    fg_fmt_fill_random(fmt, w, *bytes, 1);
    return w;
}

int main(int argc, char **argv) {
    int out = 5632, in = 2048, reps = 15;
    const char *rows_s = "1,32", *fmts_s = "F16,Q8_0,Q4_0,Q4_K,Q5_K,Q6_K,MXFP4";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--out")) out = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--in")) in = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rows")) rows_s = argv[i + 1];
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--formats")) fmts_s = argv[i + 1];
        else return fprintf(stderr, "usage: flexgen-fmt-bench [--out N] [--in N] [--rows 1,32] [--reps N] [--formats F,..]\n"), 2;
    }
    double bw = read_bandwidth(), fma = fma_peak(), blas = gemm_rate(0), own = gemm_rate(1);
    double peak = fma > 0 ? fma : (blas > own ? blas : own);
    printf("machine: %d threads, memory read %.1f GB/s, fp32 FMA peak %.1f GFLOP/s; fp32 GEMM 2048^3: OpenBLAS "
           "sgemm %.1f GFLOP/s (%.2f of peak), ours %.1f (%.2f)\n",
           fg_pool_threads(), bw, fma, blas, blas / peak, own, own / peak);
    printf("shape [%d, %d] (out, in), median of %d\n", out, in, reps);
    printf("%-6s %5s %10s %10s %7s %10s %7s\n", "format", "rows", "ms", "GB/s", "of bw", "GFLOP/s", "of peak");
    char fl[256];
    snprintf(fl, sizeof fl, "%s", fmts_s);
    for (char *tok = strtok(fl, ","); tok; tok = strtok(NULL, ",")) {
        int fmt = fg_fmt_by_name(tok);
        if (fmt < 0 || fmt == FG_FMT_Q4G64) return fprintf(stderr, "flexgen-fmt-bench: no format %s\n", tok), 2;
        /* copies of the matrix back to back, 512 MiB or more, walked in turn:
         * every call reads its weight from memory, not from a cache */
        uint64_t wb = fg_fmt_bytes(fmt, (uint64_t)out, (uint64_t)in), all;
        int copies = (int)((512ull << 20) / wb) + 1;
        uint8_t *W = random_weight(fmt, out * copies, in, &all);
        char rl[64];
        snprintf(rl, sizeof rl, "%s", rows_s);
        for (char *rt = rl, *save = NULL, *r = strtok_r(rt, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
            int rows = atoi(r);
            float *x = fg_alloc_tensor(sizeof(float) * (size_t)rows * in), *y = fg_alloc_tensor(sizeof(float) * (size_t)rows * out);
            for (size_t i = 0; i < (size_t)rows * in; i++) x[i] = 0.01f * (float)(i % 11);
            double *t = fg_xmalloc(sizeof(double) * (size_t)reps);
            for (int k = 0; k < reps; k++) {
                double t0 = fg_now();
                fg_gemm_fmt(y, x, W + (size_t)(k % copies) * wb, fmt, NULL, rows, in, out);
                t[k] = fg_now() - t0;
            }
            double s = median(t, reps), gbs = (double)wb / s / 1e9, gf = 2.0 * rows * in * out / s / 1e9;
            printf("%-6s %5d %10.3f %10.2f %6.0f%% %10.1f %6.0f%%\n", tok, rows, s * 1e3, gbs, 100 * gbs / bw, gf,
                   100 * gf / peak);
            free(t), free(x), free(y);
        }
        free(W);
    }
    return 0;
}
