/* fmt_gemm_bench.c - `flexgen-fmt-bench`: a Linear layer on weights of each
 * format (fg_gemm_fmt) at one shape, beside this machine's limits measured in
 * the same process: memory read bandwidth (a sum over a buffer 4x the
 * largest cache, all threads), the fp32 FMA peak (independent AVX-512 or
 * AVX2 FMA chains in registers on every thread: what the cores can do) and
 * beside it fp32 GEMM at 2048^3 by OpenBLAS's sgemm and by this engine's
 * kernel, and the int16 dot peak (independent VPDPWSSD chains, where the
 * CPU has AVX512-VNNI: what the int16 kernels for k-quants can do, a
 * multiply-add counted as 2 ops). Per format and row count: the median of
 * --reps runs, the weight bytes read per second (its share of the read
 * bandwidth) and FLOP/s (its share of the fp32 FMA peak, and for the int16
 * kernels of the int16 peak).
 *
 *   flexgen-fmt-bench [--out N] [--in N] [--rows 1,32] [--reps N] [--formats F16,Q8_0,...]
 *                     [--paths int16,fp32] [--cached]
 *
 * --paths: where the int16 kernels run a format (kernels/fg_gemm_i16.h),
 * each listed path is timed in the same run, the calls interleaved
 * (fg_gemm_int16 switches them; a bench-only switch): "int16" the engine's
 * default, "fp32" the fp32 kernels it replaced. Default both.
 *
 * The weights are random valid blocks (fg_fmt_fill_random: every byte random but the scales,
 * set small and finite), in copies filling 512 MiB or more that successive
 * runs walk, so each reads its weight from memory; --cached runs every call
 * on one copy instead, read back from the caches (the shape's weight fits
 * the L3 of this project's hosts): the kernel's own rate, where the
 * memory bus is not what limits it. Threads: FLEXGEN_THREADS (the pool's
 * setting). */
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

/* int16 dot peak: 12 independent chains of VPDPWSSD (32 multiply-adds
 * each), as fma_chains512. */
#define DOT_ITERS 20000000
__attribute__((target("avx512f,avx512vnni"))) static float dot_chains512(int s) {
    __m512i a[12], m = _mm512_set1_epi32(0x00010001), c = _mm512_set1_epi32(s);
#pragma GCC unroll 12
    for (int k = 0; k < 12; k++) a[k] = _mm512_set1_epi32(s + k);
    for (int i = 0; i < DOT_ITERS; i++)
#pragma GCC unroll 12
        for (int k = 0; k < 12; k++) a[k] = _mm512_dpwssd_epi32(a[k], m, c);
    __m512i t = a[0];
#pragma GCC unroll 12
    for (int k = 1; k < 12; k++) t = _mm512_add_epi32(t, a[k]);
    return (float)_mm512_reduce_add_epi32(t);
}
#endif

typedef struct {
    int lanes, dot;
    float out[64];
} fma_job;

static void fma_task(void *p, int t) {
    fma_job *j = p;
#ifdef __x86_64__
    j->out[t] = j->dot ? dot_chains512(t) : j->lanes == 16 ? fma_chains512((float)t) : fma_chains256((float)t);
#else
    (void)j, (void)t;
#endif
}

/* GOP/s of every pool thread running the int16 dot chains (0 without
 * AVX512-VNNI). */
static double dot_peak(void) {
#ifdef __x86_64__
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512vnni")) return 0;
    fma_job j = {.dot = 1};
    double t0 = fg_now();
    fg_pool_run(fg_pool_threads(), fma_task, &j);
    double dt = fg_now() - t0;
    return 2.0 * 32 * 12 * (double)DOT_ITERS * fg_pool_threads() / dt / 1e9;
#else
    return 0;
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
    int out = 5632, in = 2048, reps = 15, cached = 0;
    const char *rows_s = "1,32", *fmts_s = "F16,Q8_0,Q4_0,Q4_K,Q5_K,Q6_K,MXFP4", *paths_s = "int16,fp32";
    for (int i = 1; i < argc; i += 2) {
        if (!strcmp(argv[i], "--cached")) {
            cached = 1, i--;
            continue;
        }
        if (i + 1 >= argc) return fprintf(stderr, "flexgen-fmt-bench: %s needs a value\n", argv[i]), 2;
        if (!strcmp(argv[i], "--out")) out = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--in")) in = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rows")) rows_s = argv[i + 1];
        else if (!strcmp(argv[i], "--reps")) reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--formats")) fmts_s = argv[i + 1];
        else if (!strcmp(argv[i], "--paths")) paths_s = argv[i + 1];
        else
            return fprintf(stderr, "usage: flexgen-fmt-bench [--out N] [--in N] [--rows 1,32] [--reps N] [--formats F,..] "
                                   "[--paths int16,fp32] [--cached]\n"),
                   2;
    }
    int want16 = strstr(paths_s, "int16") != NULL, want32 = strstr(paths_s, "fp32") != NULL;
    if (!want16 && !want32) return fprintf(stderr, "flexgen-fmt-bench: --paths lists int16 and/or fp32\n"), 2;
    double bw = read_bandwidth(), fma = fma_peak(), dot = dot_peak(), blas = gemm_rate(0), own = gemm_rate(1);
    double peak = fma > 0 ? fma : (blas > own ? blas : own);
    printf("machine: %d threads, memory read %.1f GB/s, fp32 FMA peak %.1f GFLOP/s, int16 dot peak %.1f GOP/s; "
           "fp32 GEMM 2048^3: OpenBLAS sgemm %.1f GFLOP/s (%.2f of peak), ours %.1f (%.2f)\n",
           fg_pool_threads(), bw, fma, dot, blas, blas / peak, own, own / peak);
    printf("shape [%d, %d] (out, in), median of %d, paths interleaved, weights %s\n", out, in, reps,
           cached ? "in cache (--cached)" : "from memory");
    printf("%-6s %5s %-5s %10s %10s %7s %10s %7s %7s\n", "format", "rows", "path", "ms", "GB/s", "of bw", "GFLOP/s",
           "of peak", "of i16");
    char fl[256];
    snprintf(fl, sizeof fl, "%s", fmts_s);
    for (char *tok = strtok(fl, ","); tok; tok = strtok(NULL, ",")) {
        int fmt = fg_fmt_by_name(tok);
        if (fmt < 0 || fmt == FG_FMT_Q4G64) return fprintf(stderr, "flexgen-fmt-bench: no format %s\n", tok), 2;
        /* copies of the matrix back to back, 512 MiB or more, walked in turn:
         * every call reads its weight from memory, not from a cache */
        uint64_t wb = fg_fmt_bytes(fmt, (uint64_t)out, (uint64_t)in), all;
        int copies = cached ? 1 : (int)((512ull << 20) / wb) + 1;
        uint8_t *W = random_weight(fmt, out * copies, in, &all);
        char rl[64];
        snprintf(rl, sizeof rl, "%s", rows_s);
        for (char *rt = rl, *save = NULL, *r = strtok_r(rt, ",", &save); r; r = strtok_r(NULL, ",", &save)) {
            int rows = atoi(r);
            float *x = fg_alloc_tensor(sizeof(float) * (size_t)rows * in), *y = fg_alloc_tensor(sizeof(float) * (size_t)rows * out);
            for (size_t i = 0; i < (size_t)rows * in; i++) x[i] = 0.01f * (float)(i % 11);
            /* path 0: int16 (where it runs fmt), 1: fp32 */
            int has16 = fg_gemm_int16_runs(fmt, in), on[2] = {has16 && want16, !has16 || want32};
            double *t[2] = {fg_xmalloc(sizeof(double) * (size_t)reps), fg_xmalloc(sizeof(double) * (size_t)reps)};
            for (int k = 0, c = 0; k < reps; k++)
                for (int p = 0; p < 2; p++) {
                    if (!on[p]) continue;
                    fg_gemm_int16(p == 0);
                    double t0 = fg_now();
                    fg_gemm_fmt(y, x, W + (size_t)(c++ % copies) * wb, fmt, NULL, rows, in, out);
                    t[p][k] = fg_now() - t0;
                }
            fg_gemm_int16(1);
            for (int p = 0; p < 2; p++) {
                if (!on[p]) continue;
                double s = median(t[p], reps), gbs = (double)wb / s / 1e9, gf = 2.0 * rows * in * out / s / 1e9;
                printf("%-6s %5d %-5s %10.3f %10.2f %6.0f%% %10.1f %6.0f%%", tok, rows, p == 0 ? "int16" : "fp32", s * 1e3,
                       gbs, 100 * gbs / bw, gf, 100 * gf / peak);
                if (p == 0 && dot > 0) printf(" %6.0f%%", 100 * gf / dot);
                printf("\n");
            }
            free(t[0]), free(t[1]), free(x), free(y);
        }
        free(W);
    }
    return 0;
}
