/* fg_gemm.c - fp16-weight Linear (see fg_gemm.h). The fused kernel is written
 * for AVX-512 (F+BW+VL) and for AVX2+FMA+F16C, with a portable fallback; the
 * pool (fg_pool.h) splits output rows over the cores. */
#include "fg_gemm.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "fg_common.h"
#include "fg_ops.h"
#include "fg_pool.h"
#include "fg_fmt.h"
#include "fg_gemm_i16.h"
#include "fg_gemm_q.h"
#include "fg_q4.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define FG_X86 1
#endif

/* ---- portable fused kernel: y[r, o] for o in [o0, o1) ---- */
static void small_portable(float *y, const float *x, const void *W, int f32, int rows, int in, int out, int o0,
                           int o1, float *wrow) {
    for (int o = o0; o < o1; o++) {
        if (f32) memcpy(wrow, (const float *)W + (size_t)o * in, sizeof(float) * (size_t)in);
        else fg_half_to_float_n((const fg_half *)W + (size_t)o * in, wrow, (size_t)in);
        for (int r = 0; r < rows; r++) {
            const float *xr = x + (size_t)r * in;
            float s = 0;
            for (int i = 0; i < in; i++) s += xr[i] * wrow[i];
            y[(size_t)r * out + o] = s;
        }
    }
}

#ifdef FG_X86
/* ---- SIMD fused kernels ----
 * Both work in register tiles of P weight rows by R activation rows. The
 * fp16 weights are widened inside the FMA loop (vcvtph2ps straight from
 * memory), so each weight byte is read once and nothing is stored back. The
 * R activation vectors of a step are held in registers and the P weight
 * rows streamed past them: P * R accumulators, R + 1 operands.
 *
 * Every (row, output) sum has its own accumulator walked in k order, then a
 * fixed horizontal reduction: on a given path a result depends on `in`
 * only, never on the tile shape, the chunking, the task split, the thread
 * count or the other rows of the batch. */
#define TILE_MAX 8

/* Calls the tile instance for (P, R): one case per shape in CASES, each with
 * P and R constant so that its loops unroll into registers. */
#define TILE_DISPATCH(CASES, CALL)                                \
    switch (P * 16 + R) {                                         \
        CASES(CALL)                                               \
    default:                                                      \
        FG_ASSERT(!"tile shape missing from a TILE_CASES list"); \
    }

__attribute__((target("avx2,fma"))) static inline float hsum256(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
    return _mm_cvtss_f32(lo);
}

/* AVX2 (16 ymm): y[r, p] = w[p, :] . x[r, :] over the whole input, eight
 * lanes at a time; the in % 8 tail is one more step on zero-padded copies
 * (zero lanes add +0). */
#define AVX2_TARGET __attribute__((target("avx2,fma,f16c")))
AVX2_TARGET static inline __attribute__((always_inline)) __m256 load256(const int F32, const void *w, size_t i) {
    return F32 ? _mm256_loadu_ps((const float *)w + i)
               : _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const fg_half *)w + i)));
}

/* F32: the weights are fp32 (dequantized ggml blocks), else fp16. */
AVX2_TARGET static inline __attribute__((always_inline)) void tile256(const int P, const int R, const int F32,
                                                                      float *y, const float *x, const void *w,
                                                                      int in, int out) {
    __m256 a[TILE_MAX][TILE_MAX];
#pragma GCC unroll 8
    for (int p = 0; p < P; p++)
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) a[p][r] = _mm256_setzero_ps();
    int in8 = in & ~7;
    for (int k = 0; k < in8; k += 8) {
        __m256 xv[TILE_MAX];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            xv[r] = _mm256_loadu_ps(x + (size_t)r * in + k);
            __asm__("" : "+x"(xv[r]));   /* one load, not one folded into each FMA */
        }
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
            __m256 wv = load256(F32, w, (size_t)p * in + k);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) a[p][r] = _mm256_fmadd_ps(wv, xv[r], a[p][r]);
        }
    }
    if (in8 < in) {
        float xt[TILE_MAX][8] = {{0}};
        float wt[8] = {0};   /* fp32 or fp16, zero-padded */
        size_t es = F32 ? sizeof(float) : sizeof(fg_half);
        for (int r = 0; r < R; r++) memcpy(xt[r], x + (size_t)r * in + in8, sizeof(float) * (size_t)(in - in8));
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
            memcpy(wt, (const char *)w + ((size_t)p * in + in8) * es, es * (size_t)(in - in8));
            __m256 wv = load256(F32, wt, 0);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) a[p][r] = _mm256_fmadd_ps(wv, _mm256_loadu_ps(xt[r]), a[p][r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) y[(size_t)r * out + p] = hsum256(a[p][r]);
}

/* P * R <= 12 accumulators + R + 1 of the 16 ymm registers. */
#define TILE256_CASES(X) X(8, 1) X(6, 2) X(4, 3) X(6, 1) X(1, 1) X(1, 2) X(1, 3)
#define TILE256_CALL(p, r)                     \
    case p * 16 + r:                           \
        tile256(p, r, 0, y, x, w, in, out);    \
        return;
#define TILE256F_CALL(p, r)                    \
    case p * 16 + r:                           \
        tile256(p, r, 1, y, x, w, in, out);    \
        return;
AVX2_TARGET static void tile256_any(int P, int R, int f32, float *y, const float *x, const void *w, int in,
                                    int out) {
    if (f32) {
        TILE_DISPATCH(TILE256_CASES, TILE256F_CALL)
    } else {
        TILE_DISPATCH(TILE256_CASES, TILE256_CALL)
    }
}

/* Tile width by rows: up to 3 rows go in one block, more in blocks of 2
 * (P = 6) that each stream the weight tile again, from cache. */
static const int tile256_p[4] = {0, 8, 6, 4};

AVX2_TARGET static void small_avx2(float *y, const float *x, const void *W, int f32, int rows, int in, int out,
                                   int o0, int o1) {
    size_t es = f32 ? sizeof(float) : sizeof(fg_half);
    int rb = rows <= 3 ? rows : 2, P = rows <= 3 ? tile256_p[rows] : 6;
    for (int o = o0; o < o1;) {
        int p = o + P <= o1 ? P : 1;
        for (int r = 0; r < rows; r += rb) {
            int rn = rows - r < rb ? rows - r : rb;
            tile256_any(p, rn, f32, y + (size_t)r * out + o, x + (size_t)r * in, (const char *)W + (size_t)o * in * es,
                        in, out);
        }
        o += p;
    }
}

/* AVX-512 (32 zmm): acc[p][r] += w[p, k0:k1] . x[r, k0:k1], sixteen lanes
 * at a time. The accumulators start at zero (k0 == 0) or come from
 * part[r][p]; they go back there unless this is the last chunk, which ends
 * with a masked step over the in % 16 tail (zero lanes add +0) and reduces
 * them into y. pf, when set, is the next tile's first weight row: its lines
 * at the same k are fetched while this tile computes, so the weight stream
 * never waits on a cold start (a 4 KB page ends the hardware prefetcher's
 * run, and a weight row of 2048 is one page). */
#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))
AVX512_TARGET static inline __attribute__((always_inline)) __m512 load512(const int F32, const void *w, size_t i) {
    return F32 ? _mm512_loadu_ps((const float *)w + i)
               : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const fg_half *)w + i)));
}

/* F32: the weights are fp32 (dequantized ggml blocks), else fp16. */
AVX512_TARGET static inline __attribute__((always_inline)) void tile512(const int P, const int R, const int F32,
                                                                        float *y, const float *x, const void *w,
                                                                        int in, int out, int k0, int k1, int last,
                                                                        float *part, const void *pf) {
    const size_t es = F32 ? sizeof(float) : sizeof(fg_half);
    __m512 a[TILE_MAX][TILE_MAX];
#pragma GCC unroll 8
    for (int p = 0; p < P; p++)
#pragma GCC unroll 8
        for (int r = 0; r < R; r++)
            a[p][r] = k0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(part + ((size_t)r * P + p) * 16);
    int k1v = last ? k0 + ((k1 - k0) & ~15) : k1;
    for (int k = k0; k < k1v; k += 16) {
        if (pf && (F32 || !(k & 16)))   /* one prefetch per 64-byte line */
#pragma GCC unroll 8
            for (int p = 0; p < P; p++) _mm_prefetch((const char *)pf + ((size_t)p * in + k) * es, _MM_HINT_T0);
        __m512 xv[TILE_MAX];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            xv[r] = _mm512_loadu_ps(x + (size_t)r * in + k);
            __asm__("" : "+v"(xv[r]));   /* one load, not one folded into each FMA */
        }
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
            __m512 wv = load512(F32, w, (size_t)p * in + k);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) a[p][r] = _mm512_fmadd_ps(wv, xv[r], a[p][r]);
        }
    }
    if (!last) {
#pragma GCC unroll 8
        for (int p = 0; p < P; p++)
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) _mm512_storeu_ps(part + ((size_t)r * P + p) * 16, a[p][r]);
        return;
    }
    if (k1v < k1) {
        __mmask16 m = (__mmask16)((1u << (k1 - k1v)) - 1);
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
            __m512 wv = F32 ? _mm512_maskz_loadu_ps(m, (const float *)w + (size_t)p * in + k1v)
                            : _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const fg_half *)w + (size_t)p * in + k1v));
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                a[p][r] = _mm512_fmadd_ps(wv, _mm512_maskz_loadu_ps(m, x + (size_t)r * in + k1v), a[p][r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) y[(size_t)r * out + p] = _mm512_reduce_add_ps(a[p][r]);
}

/* P * R <= 25 accumulators + R + 1 of the 32 zmm registers. P = 1 is the
 * tail of a task whose outputs are not a whole number of tiles. */
#define TILE512_CASES(X)                                                                                       \
    X(8, 1) X(8, 2) X(8, 3) X(6, 4) X(5, 5) X(4, 6) X(6, 1) X(6, 2) X(6, 3) X(1, 1) X(1, 2) X(1, 3) X(1, 4) \
        X(1, 5) X(1, 6)
#define TILE512_CALL(p, r)                                           \
    case p * 16 + r:                                                 \
        tile512(p, r, 0, y, x, w, in, out, k0, k1, last, part, pf);  \
        return;
#define TILE512F_CALL(p, r)                                          \
    case p * 16 + r:                                                 \
        tile512(p, r, 1, y, x, w, in, out, k0, k1, last, part, pf);  \
        return;
AVX512_TARGET static void tile512_any(int P, int R, int f32, float *y, const float *x, const void *w, int in,
                                      int out, int k0, int k1, int last, float *part, const void *pf) {
    if (f32) {
        TILE_DISPATCH(TILE512_CASES, TILE512F_CALL)
    } else {
        TILE_DISPATCH(TILE512_CASES, TILE512_CALL)
    }
}

/* Tile width by rows: up to 6 rows go in one block (memory-bound: one pass
 * over the weights); more in blocks of 4 (P = 6, compute-bound) that each
 * read the weight tile again, from cache. The activations are read from L2
 * (chunking them for L1 costs more in `part` traffic than it saves). A long input is walked in chunks of kc, each chunk through every
 * tile of the task, so that chunk of the activations stays in L2 instead of
 * streaming from L3 once per tile; the accumulators wait in `part` between
 * chunks. */
static const int tile512_p[7] = {0, 8, 8, 8, 6, 5, 4};
#define X_L2_BYTES (256 << 10)

AVX512_TARGET static void small_avx512(float *y, const float *x, const void *W, int f32, int rows, int in,
                                       int out, int o0, int o1, float *part /* [o1 - o0][rows][16] */) {
    size_t es = f32 ? sizeof(float) : sizeof(fg_half);
    int rb = rows <= 6 ? rows : 4, P = tile512_p[rb];
    int kc = X_L2_BYTES / (4 * rows) & ~15;
    if (kc < 256) kc = 256;
    for (int k0 = 0; k0 == 0 || k0 < in; k0 += kc) {   /* in == 0 still writes zeros */
        int k1 = in - k0 <= kc ? in : k0 + kc;
        for (int o = o0; o < o1;) {
            int p = o + P <= o1 ? P : 1;
            /* the first row block fetches the next tile of this task */
            const void *pf = o + p + P <= o1 ? (const char *)W + (size_t)(o + p) * in * es : NULL;
            for (int r = 0; r < rows; r += rb) {
                int rn = rows - r < rb ? rows - r : rb;
                tile512_any(p, rn, f32, y + (size_t)r * out + o, x + (size_t)r * in, (const char *)W + (size_t)o * in * es,
                            in, out, k0, k1, k1 == in, part + ((size_t)(o - o0) * rows + (size_t)r * p) * 16,
                            r == 0 ? pf : NULL);
            }
            o += p;
        }
    }
}

static int have_avx512(void) {
    static int cached = -1;
    if (cached < 0)
        cached = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                 __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("f16c");
    return cached;
}

static int have_avx2(void) {
    static int cached = -1;
    if (cached < 0)
        cached = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    return cached;
}
#endif

/* Weight rows per tile of the fused path. */
static int tile_p(int rows) {
    int p = 8;
#ifdef FG_X86
    if (have_avx512()) p = tile512_p[rows <= 6 ? rows : 4];
    else if (have_avx2()) p = rows <= 3 ? tile256_p[rows] : 6;
#endif
    return p;
}

/* Outputs per task in the fused path: about 64, a whole number of tiles. */
static int small_chunk(int rows) {
    int p = tile_p(rows);
    return (64 + p / 2) / p * p;
}

static void add_bias(float *y, const fg_half *bias, int rows, int out) {
    float *b = fg_xmalloc(sizeof(float) * (size_t)out);
    fg_half_to_float_n(bias, b, (size_t)out);
    for (int r = 0; r < rows; r++) {
        float *yr = y + (size_t)r * out;
        for (int o = 0; o < out; o++) yr[o] += b[o];
    }
    free(b);
}

/* Per-thread scratch buffers that grow as needed and live as long as the
 * thread (pool threads live as long as the process): slots 0 and 1 for a
 * task, SCRATCH_CALL for what a call shares with its tasks (the caller
 * runs tasks too). */
#define SCRATCH_CALL 2
static void *scratch(int slot, size_t bytes) {
    static _Thread_local void *buf[3];
    static _Thread_local size_t cap[3];
    if (bytes > cap[slot]) {
        free(buf[slot]);
        buf[slot] = fg_alloc_tensor(bytes);
        cap[slot] = bytes;
    }
    return buf[slot];
}

typedef struct {
    float *y;
    const float *x;
    const float *xs;    /* the fused kernel's per-call scratch (fg_gemm_q.h) */
    fg_i16_x xq;        /* the activations quantized for the int16 kernels (fg_gemm_i16.h) */
    const fg_half *W;   /* fp16 weights, or NULL and */
    const uint8_t *Wq;  /* a compressed (fg_q4) slice, or ggml blocks of format fmt */
    int fmt;            /* FG_FMT_F16, FG_FMT_Q4G64, or a ggml format */
    int rows, in, out, chunk;
} gemm_job;

/* n outputs through the fused kernel: y is the first one's column of the
 * result, W its weight row (fp16, or fp32 with f32), the others follow.
 * With AVX-512 any number of rows, FG_GEMM_SMALL_ROWS activation rows at a
 * time over the same weight rows (read back from L2: the many-rows path);
 * otherwise at most FG_GEMM_SMALL_ROWS rows. */
static void small_rows(const gemm_job *j, float *y, const void *W, int f32, int n) {
#ifdef FG_X86
    if (have_avx512()) {
        int rb = j->rows < FG_GEMM_SMALL_ROWS ? j->rows : FG_GEMM_SMALL_ROWS;
        float *part = scratch(0, sizeof(float) * (size_t)j->chunk * (size_t)rb * 16);
        for (int r = 0; r < j->rows; r += rb)
            small_avx512(y + (size_t)r * j->out, j->x + (size_t)r * j->in, W, f32, j->rows - r < rb ? j->rows - r : rb,
                         j->in, j->out, 0, n, part);
        return;
    }
    if (have_avx2()) {
        small_avx2(y, j->x, W, f32, j->rows, j->in, j->out, 0, n);
        return;
    }
#endif
    small_portable(y, j->x, W, f32, j->rows, j->in, j->out, 0, n, scratch(0, sizeof(float) * (size_t)j->in));
}

/* Weight bytes a compressed task expands at a time (fp16 for Q4G64, fp32
 * for ggml blocks): about half of a core's L2, so the kernel reads them
 * back from there. */
#define Q4_BLOCK_BYTES (128 << 10)

/* Rows [r0, r1) of a ggml-format weight as fp32 (fg_fmt.h's values). */
static void rows_f32(const gemm_job *j, int r0, int r1, float *dst) {
    uint64_t rb = fg_fmt_row_bytes(j->fmt, (uint64_t)j->in);
    fg_fmt_to_f32(j->fmt, j->Wq + (size_t)r0 * rb, dst, (uint64_t)(r1 - r0) * (uint64_t)j->in);
}

/* Few rows: a task is a block of output rows through the fused kernel. A
 * compressed or quantized weight is expanded a few tiles of rows at a time
 * into scratch (fp16 for Q4G64, fp32 for ggml blocks) and those run through
 * the same kernel: the same values in the same order give the same bits as
 * the kernel on the expanded matrix, which is never written to memory. */
static void small_task(void *p, int t) {
    const gemm_job *j = p;
    int o0 = t * j->chunk, o1 = o0 + j->chunk < j->out ? o0 + j->chunk : j->out;
    if (j->fmt == FG_FMT_F16) {
        small_rows(j, j->y + o0, j->W + (size_t)o0 * j->in, 0, o1 - o0);
        return;
    }
    if (j->fmt == FG_FMT_F32) { /* already the kernel's fp32: no copy */
        small_rows(j, j->y + o0, (const float *)j->Wq + (size_t)o0 * j->in, 1, o1 - o0);
        return;
    }
    int f32 = j->fmt != FG_FMT_Q4G64;
    size_t es = f32 ? sizeof(float) : sizeof(fg_half);
    int P = tile_p(j->rows), blk = (int)(Q4_BLOCK_BYTES / (es * (size_t)(j->in > 0 ? j->in : 1))) / P * P;
    if (blk < P) blk = P;
    void *wb = scratch(1, es * (size_t)blk * j->in);
    for (int o = o0; o < o1; o += blk) {
        int n = o1 - o < blk ? o1 - o : blk;
        if (f32) rows_f32(j, o, o + n, wb);
        else fg_q4_expand_rows(j->Wq, j->out, j->in, o, o + n, wb);
        small_rows(j, j->y + o, wb, f32, n);
    }
}

/* Many rows: a task widens (or expands, or dequantizes) a chunk of weight
 * rows to fp32 and runs sgemm on it, writing its columns of y (ldc = out). */
static void large_task(void *p, int t) {
    const gemm_job *j = p;
    int o0 = t * j->chunk, n = j->out - o0 < j->chunk ? j->out - o0 : j->chunk;
    float *wf = scratch(0, sizeof(float) * (size_t)n * j->in);
    if (j->fmt == FG_FMT_Q4G64) fg_q4_expand_rows_f32(j->Wq, j->out, j->in, o0, o0 + n, wf);
    else if (j->fmt == FG_FMT_F16) fg_half_to_float_n(j->W + (size_t)o0 * j->in, wf, (size_t)n * j->in);
    else rows_f32(j, o0, o0 + n, wf);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->rows, n, j->in, 1.0f, j->x, j->in, wf, j->in, 0.0f,
                j->y + o0, j->out);
}

#ifdef FG_X86
/* Output rows per task of the many-rows AVX-512 path: a whole number of
 * tiles, about 512 KiB of F16 or widened weight rows, so a task's rows stay
 * few enough to share the pool's threads evenly and its scratch small. */
#define WIDE_CHUNK_BYTES (512 << 10)

static int wide_chunk(int fmt, int in) {
    size_t es = fmt == FG_FMT_F16 || fmt == FG_FMT_Q4G64 ? sizeof(fg_half) : sizeof(float);
    int p = tile_p(FG_GEMM_SMALL_ROWS), n = (int)(WIDE_CHUNK_BYTES / (es * (size_t)(in > 0 ? in : 1))) / p * p;
    return n < p ? p : n;
}
#endif

/* The fused ggml kernel over a block of outputs. */
static void fused_task(void *p, int t) {
    const gemm_job *j = p;
    int o0 = t * j->chunk, o1 = o0 + j->chunk < j->out ? o0 + j->chunk : j->out;
    fg_gemm_q_outputs(j->fmt, j->Wq, j->x, j->xs, j->rows, j->in, j->out, o0, o1, j->y);
}

/* ---- the int16 kernels (fg_gemm_i16.h) ---- */

/* Activation rows quantized per task. */
#define I16_QUANT_ROWS 8
/* Bytes of widened weight rows a many-rows task holds: within a core's L2
 * beside the activation rows it streams past them. */
#define I16_PACK_BYTES (384 << 10)
/* Outputs per task of the few-rows path: a whole number of 4-row tiles. */
#define I16_FEW_CHUNK 64

static void i16_quant_task(void *p, int t) {
    gemm_job *j = p;
    int r0 = t * I16_QUANT_ROWS, r1 = r0 + I16_QUANT_ROWS < j->rows ? r0 + I16_QUANT_ROWS : j->rows;
    fg_gemm_i16_quantize(j->fmt, j->x, r0, r1, &j->xq);
}

static void i16_few_task(void *p, int t) {
    const gemm_job *j = p;
    int o0 = t * j->chunk, o1 = o0 + j->chunk < j->out ? o0 + j->chunk : j->out;
    fg_gemm_i16_few(j->fmt, j->Wq, &j->xq, j->out, o0, o1, j->y);
}

static void i16_many_task(void *p, int t) {
    const gemm_job *j = p;
    int o0 = t * j->chunk, o1 = o0 + j->chunk < j->out ? o0 + j->chunk : j->out;
    void *pack = scratch(0, fg_gemm_i16_pack_bytes(j->fmt, j->in, j->chunk));
    fg_gemm_i16_many(j->fmt, j->Wq, &j->xq, j->out, o0, o1, j->y, pack);
}

/* Outputs per many-rows task: 16-output groups, as many as I16_PACK_BYTES
 * holds, but no more than makes 4 tasks per thread (so that a small
 * matrix still spreads over the pool). */
static int i16_many_chunk(int fmt, int in, int out, int threads) {
    int per = (int)(I16_PACK_BYTES / fg_gemm_i16_pack_bytes(fmt, in, 16));
    int ng = (out + 15) / 16, spread = (ng + 4 * threads - 1) / (4 * threads);
    int g = per < spread ? per : spread;
    return 16 * (g < 1 ? 1 : g);
}

/* Every row count through the int16 kernels: the activations quantized
 * once (in tasks of rows), then tasks of outputs. */
static void gemm_i16(gemm_job *j, int threads) {
    fg_gemm_i16_x_init(&j->xq, scratch(SCRATCH_CALL, fg_gemm_i16_x_bytes(j->rows, j->in)), j->rows, j->in);
    fg_pool_run((j->rows + I16_QUANT_ROWS - 1) / I16_QUANT_ROWS, i16_quant_task, j);
    if (j->rows <= FG_GEMM_I16_FEW_ROWS) {
        j->chunk = I16_FEW_CHUNK;
        fg_pool_run((j->out + j->chunk - 1) / j->chunk, i16_few_task, j);
    } else {
        j->chunk = i16_many_chunk(j->fmt, j->in, j->out, threads);
        fg_pool_run((j->out + j->chunk - 1) / j->chunk, i16_many_task, j);
    }
}

int fg_gemm_int16_runs(int fmt, int in) { return fg_gemm_i16_runs(fmt, in); }

static void gemm(gemm_job j, const fg_half *bias) {
    int rows = j.rows, in = j.in, out = j.out;
    if (rows <= 0 || out <= 0) return;
    double t0 = fg_now();
    int threads = fg_pool_threads();
    if (fg_gemm_i16_runs(j.fmt, in)) {
        gemm_i16(&j, threads);
    } else if (fg_gemm_q_fused(j.fmt, rows, in)) {
        float *xs = scratch(1, fg_gemm_q_scratch(j.fmt, rows, in) + 64);
        fg_gemm_q_prepare(j.fmt, j.x, rows, in, xs);
        j.xs = xs;
        j.chunk = 64;
        fg_pool_run((out + j.chunk - 1) / j.chunk, fused_task, &j);
    } else if (rows <= FG_GEMM_SMALL_ROWS) {
        j.chunk = small_chunk(rows);
        fg_pool_run((out + j.chunk - 1) / j.chunk, small_task, &j);
#ifdef FG_X86
    } else if (have_avx512()) {
        /* many rows, the same fused kernel: each weight tile is widened once
         * and every block of rows runs on it (small_rows), at about 1.6x
         * OpenBLAS's sgemm here, whose Zen kernels stop at AVX2; a row sums
         * as on the few-rows path, so its result does not depend on the
         * batch size above FG_GEMM_Q_MAX_ROWS */
        j.chunk = wide_chunk(j.fmt, in);
        fg_pool_run((out + j.chunk - 1) / j.chunk, small_task, &j);
#endif
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
    if (bias) add_bias(j.y, bias, rows, out);
}

void fg_gemm_f16w(float *y, const float *x, const fg_half *W, const fg_half *bias, int rows, int in, int out) {
    gemm_job j = {.y = y, .x = x, .W = W, .fmt = FG_FMT_F16, .rows = rows, .in = in, .out = out};
    gemm(j, bias);
}

void fg_gemm_q4w(float *y, const float *x, const uint8_t *W, const fg_half *bias, int rows, int in, int out) {
    gemm_job j = {.y = y, .x = x, .Wq = W, .fmt = FG_FMT_Q4G64, .rows = rows, .in = in, .out = out};
    gemm(j, bias);
}

void fg_gemm_fmt(float *y, const float *x, const void *W, int fmt, const fg_half *bias, int rows, int in, int out) {
    FG_ASSERT(fg_fmt_get(fmt) && (fmt == FG_FMT_Q4G64 || fg_fmt_row_bytes(fmt, (uint64_t)in)));
    gemm_job j = {.y = y, .x = x, .W = W, .Wq = W, .fmt = fmt, .rows = rows, .in = in, .out = out};
    gemm(j, bias);
}

void fg_fmt_rows_f32(const void *W, int fmt, int in, int r0, int r1, float *dst) {
    gemm_job j = {.Wq = W, .fmt = fmt, .in = in};
    if (fmt == FG_FMT_F16) fg_half_to_float_n((const fg_half *)W + (size_t)r0 * in, dst, (size_t)(r1 - r0) * in);
    else rows_f32(&j, r0, r1, dst);
}
