/* fg_gemm.c - fp16-weight Linear (see fg_gemm.h). The fused kernel is written
 * for AVX2+FMA+F16C with a portable fallback; the pool (fg_pool.h) splits
 * output rows over the cores. */
#include "fg_gemm.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "fg_common.h"
#include "fg_ops.h"
#include "fg_pool.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define FG_X86 1
#endif

/* ---- portable fused kernel: y[r, o] for o in [o0, o1) ---- */
static void small_portable(float *y, const float *x, const fg_half *W, int rows, int in, int out, int o0, int o1,
                           float *wrow) {
    for (int o = o0; o < o1; o++) {
        fg_half_to_float_n(W + (size_t)o * in, wrow, (size_t)in);
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (size_t)r * in;
            float s = 0;
            for (int i = 0; i < in; i++) s += xr[i] * wrow[i];
            y[(size_t)r * out + o] = s;
        }
    }
}

#ifdef FG_X86
__attribute__((target("avx2,fma"))) static inline float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

/* Two output rows at a time (widened once into wrow, L1-resident), four
 * activation rows at a time: 8 accumulators + 2 weights + 1 input in ymm. */
__attribute__((target("avx2,fma,f16c"))) static void small_avx2(float *y, const float *x, const fg_half *W, int rows,
                                                                 int in, int out, int o0, int o1, float *wrow) {
    int in8 = in & ~7;
    int o = o0;
    for (; o + 2 <= o1; o += 2) {
        float *w0 = wrow, *w1 = wrow + in;
        fg_half_to_float_n(W + (size_t)o * in, w0, (size_t)in * 2);   /* rows o, o+1 are contiguous */
        int r = 0;
        for (; r + 4 <= rows; r += 4) {
            const float *x0 = x + (size_t)r * in, *x1 = x0 + in, *x2 = x1 + in, *x3 = x2 + in;
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a02 = a00, a03 = a00;
            __m256 a10 = a00, a11 = a00, a12 = a00, a13 = a00;
            for (int i = 0; i < in8; i += 8) {
                __m256 wa = _mm256_loadu_ps(w0 + i), wb = _mm256_loadu_ps(w1 + i), xv;
                xv = _mm256_loadu_ps(x0 + i); a00 = _mm256_fmadd_ps(wa, xv, a00); a10 = _mm256_fmadd_ps(wb, xv, a10);
                xv = _mm256_loadu_ps(x1 + i); a01 = _mm256_fmadd_ps(wa, xv, a01); a11 = _mm256_fmadd_ps(wb, xv, a11);
                xv = _mm256_loadu_ps(x2 + i); a02 = _mm256_fmadd_ps(wa, xv, a02); a12 = _mm256_fmadd_ps(wb, xv, a12);
                xv = _mm256_loadu_ps(x3 + i); a03 = _mm256_fmadd_ps(wa, xv, a03); a13 = _mm256_fmadd_ps(wb, xv, a13);
            }
            float s[8] = {hsum256(a00), hsum256(a01), hsum256(a02), hsum256(a03),
                          hsum256(a10), hsum256(a11), hsum256(a12), hsum256(a13)};
            for (int i = in8; i < in; i++) {
                s[0] += w0[i] * x0[i]; s[1] += w0[i] * x1[i]; s[2] += w0[i] * x2[i]; s[3] += w0[i] * x3[i];
                s[4] += w1[i] * x0[i]; s[5] += w1[i] * x1[i]; s[6] += w1[i] * x2[i]; s[7] += w1[i] * x3[i];
            }
            for (int k = 0; k < 4; k++) {
                y[(size_t)(r + k) * out + o] = s[k];
                y[(size_t)(r + k) * out + o + 1] = s[4 + k];
            }
        }
        for (; r < rows; r++) {
            const float *xr = x + (size_t)r * in;
            __m256 a0 = _mm256_setzero_ps(), a1 = a0;
            for (int i = 0; i < in8; i += 8) {
                __m256 xv = _mm256_loadu_ps(xr + i);
                a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i), xv, a0);
                a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + i), xv, a1);
            }
            float s0 = hsum256(a0), s1 = hsum256(a1);
            for (int i = in8; i < in; i++) {
                s0 += w0[i] * xr[i];
                s1 += w1[i] * xr[i];
            }
            y[(size_t)r * out + o] = s0;
            y[(size_t)r * out + o + 1] = s1;
        }
    }
    if (o < o1) small_portable(y, x, W, rows, in, out, o, o1, wrow);
}

/* AVX-512: four output rows (widened once into wrow) by four activation
 * rows, 16 accumulators + 4 weights + 1 input of the 32 zmm registers: half
 * the activation traffic per FMA of the AVX2 kernel. The input dimension is
 * walked in chunks of KC so the chunk of every activation row and the four
 * weight rows stay in L1; the accumulators of all row blocks wait in `part`
 * between chunks (lane by lane, so the sums are those of one long pass). */
#define KC 512
#define SMALL_MAX_ROWS 32
__attribute__((target("avx512f,f16c"))) static void small_avx512(float *y, const float *x, const fg_half *W, int rows,
                                                                 int in, int out, int o0, int o1, float *wrow) {
    int in16 = in & ~15, r4 = rows & ~3;
    __m512 part[SMALL_MAX_ROWS][4];
    int o = o0;
    for (; o + 4 <= o1; o += 4) {
        fg_half_to_float_n(W + (size_t)o * in, wrow, (size_t)in * 4);   /* rows o..o+3 are contiguous */
        const float *wp[4] = {wrow, wrow + in, wrow + 2 * (size_t)in, wrow + 3 * (size_t)in};
        for (int r = 0; r < r4; r++)
            for (int p = 0; p < 4; p++) part[r][p] = _mm512_setzero_ps();
        for (int k0 = 0; k0 < in16; k0 += KC) {
            int k1 = k0 + KC < in16 ? k0 + KC : in16;
            for (int r = 0; r < r4; r += 4) {
                const float *x0 = x + (size_t)r * in, *x1 = x0 + in, *x2 = x1 + in, *x3 = x2 + in;
                __m512 a[4][4];
                for (int p = 0; p < 4; p++)
                    for (int q = 0; q < 4; q++) a[p][q] = part[r + q][p];
                for (int i = k0; i < k1; i += 16) {
                    __m512 wv[4] = {_mm512_loadu_ps(wp[0] + i), _mm512_loadu_ps(wp[1] + i), _mm512_loadu_ps(wp[2] + i),
                                    _mm512_loadu_ps(wp[3] + i)};
                    __m512 xv;
                    xv = _mm512_loadu_ps(x0 + i);
                    for (int p = 0; p < 4; p++) a[p][0] = _mm512_fmadd_ps(wv[p], xv, a[p][0]);
                    xv = _mm512_loadu_ps(x1 + i);
                    for (int p = 0; p < 4; p++) a[p][1] = _mm512_fmadd_ps(wv[p], xv, a[p][1]);
                    xv = _mm512_loadu_ps(x2 + i);
                    for (int p = 0; p < 4; p++) a[p][2] = _mm512_fmadd_ps(wv[p], xv, a[p][2]);
                    xv = _mm512_loadu_ps(x3 + i);
                    for (int p = 0; p < 4; p++) a[p][3] = _mm512_fmadd_ps(wv[p], xv, a[p][3]);
                }
                for (int p = 0; p < 4; p++)
                    for (int q = 0; q < 4; q++) part[r + q][p] = a[p][q];
            }
        }
        for (int r = 0; r < r4; r++)
            for (int p = 0; p < 4; p++) {
                float sum = _mm512_reduce_add_ps(part[r][p]);
                for (int i = in16; i < in; i++) sum += wp[p][i] * x[(size_t)r * in + i];
                y[(size_t)r * out + o + p] = sum;
            }
        for (int r = r4; r < rows; r++) {
            const float *xr = x + (size_t)r * in;
            for (int p = 0; p < 4; p++) {
                __m512 acc = _mm512_setzero_ps();
                for (int i = 0; i < in16; i += 16)
                    acc = _mm512_fmadd_ps(_mm512_loadu_ps(wp[p] + i), _mm512_loadu_ps(xr + i), acc);
                float sum = _mm512_reduce_add_ps(acc);
                for (int i = in16; i < in; i++) sum += wp[p][i] * xr[i];
                y[(size_t)r * out + o + p] = sum;
            }
        }
    }
    if (o < o1) small_portable(y, x, W, rows, in, out, o, o1, wrow);
}

static int have_avx512(void) {
    static int cached = -1;
    if (cached < 0) cached = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("f16c");
    return cached;
}

static int have_avx2(void) {
    static int cached = -1;
    if (cached < 0)
        cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    return cached;
}
#endif

static void add_bias(float *y, const fg_half *bias, int rows, int out) {
    float *b = fg_xmalloc(sizeof(float) * (size_t)out);
    fg_half_to_float_n(bias, b, (size_t)out);
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * out;
        for (int o = 0; o < out; o++) yr[o] += b[o];
    }
    free(b);
}

/* A per-thread scratch buffer that grows as needed and lives as long as the
 * thread (pool threads live as long as the process). */
static float *scratch(size_t floats) {
    static _Thread_local float *buf;
    static _Thread_local size_t cap;
    if (floats > cap) {
        free(buf);
        buf = fg_alloc_tensor(sizeof(float) * floats);
        cap = floats;
    }
    return buf;
}

typedef struct {
    float *y;
    const float *x;
    const fg_half *W;
    int rows, in, out, chunk;
} gemm_job;

/* Few rows: a task is a block of output rows through the fused kernel. */
static void small_task(void *p, int t) {
    const gemm_job *j = p;
    int o0 = t * j->chunk, o1 = o0 + j->chunk < j->out ? o0 + j->chunk : j->out;
    float *wrow = scratch(4 * (size_t)j->in);
#ifdef FG_X86
    if (have_avx512()) {
        small_avx512(j->y, j->x, j->W, j->rows, j->in, j->out, o0, o1, wrow);
        return;
    }
    if (have_avx2()) {
        small_avx2(j->y, j->x, j->W, j->rows, j->in, j->out, o0, o1, wrow);
        return;
    }
#endif
    small_portable(j->y, j->x, j->W, j->rows, j->in, j->out, o0, o1, wrow);
}

/* Many rows: a task widens a chunk of weight rows and runs sgemm on it,
 * writing its columns of y (ldc = out). */
static void large_task(void *p, int t) {
    const gemm_job *j = p;
    int o0 = t * j->chunk, n = j->out - o0 < j->chunk ? j->out - o0 : j->chunk;
    float *wf = scratch((size_t)n * j->in);
    fg_half_to_float_n(j->W + (size_t)o0 * j->in, wf, (size_t)n * j->in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->rows, n, j->in, 1.0f, j->x, j->in, wf, j->in, 0.0f,
                j->y + o0, j->out);
}

void fg_gemm_f16w(float *y, const float *x, const fg_half *W, const fg_half *bias, int rows, int in, int out) {
    double t0 = fg_now();
    gemm_job j = {.y = y, .x = x, .W = W, .rows = rows, .in = in, .out = out};
    int threads = fg_pool_threads();
    if (rows <= FG_GEMM_SMALL_ROWS) {
        j.chunk = 64;
        fg_pool_run((out + j.chunk - 1) / j.chunk, small_task, &j);
    } else {
        /* one chunk per thread: sgemm repacks x for every call, so fewer, larger
         * calls win; each chunk's fp32 copy stays under ~16 MB */
        int chunk = (out + threads - 1) / threads;
        chunk = (chunk + 15) / 16 * 16;
        int cap = (int)((4u << 20) / (unsigned)in);
        if (chunk > cap) chunk = cap > 16 ? cap / 16 * 16 : (cap > 0 ? cap : 1);
        if (chunk < 1) chunk = 1;
        j.chunk = chunk;
        fg_pool_run((out + chunk - 1) / chunk, large_task, &j);
    }
    fg_ops_gemm_add(fg_now() - t0);
    if (bias) add_bias(y, bias, rows, out);
}
