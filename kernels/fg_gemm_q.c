/* fg_gemm_q.c - fused GEMV for the most common ggml formats at decode
 * (few rows): the weight's blocks are read once from memory and never
 * expanded. Per weight row and sub-block (a run of values sharing one scale
 * pair), the integer codes are widened to fp32 in registers and multiplied
 * into 16-lane partial dot products with each activation row; the scales
 * are applied once per sub-block, the minimum term from the activations'
 * per-sub-block sums (computed once per call, shared by every weight row;
 * a block's sub-blocks in the lanes of one FMA, the lanes added at the end;
 * a block's scales unpacked and multiplied as vectors):
 *   y[r, o] = sum over sub-blocks of  ds * (q . x_r)  -  dm * sum(x_r)
 * with ds = d * sc and dm = dmin * m in fp32 as fg_fmt.c has them. This is
 * the dequantized weights' dot product regrouped, so it differs from
 * fg_gemm_fmt's expansion path in rounding only (fp32, ~1e-7 relative per
 * sum). Each (row, output) uses its own lanes in a fixed order whatever the
 * batch, the tile or the thread: a row's result does not depend on the
 * others (the batch invariance the engine relies on). Formats: Q8_0, Q4_K
 * and Q6_K (what Q8_0 and Q4_K_M files are made of); fg_gemm_q_fused says
 * which. Q6_K's codes are taken unsigned (q + 32) and 32 ds sum(x) taken off
 * per 16 values, as Q4_K's minimum. Where the CPU has AVX512-VNNI, Q4_K and
 * Q6_K go to the int16 kernels (fg_gemm_i16.h) instead and only Q8_0 comes
 * here. */
#include "fg_gemm_q.h"

#include <math.h>
#include <string.h>

#include "fg_fmt.h"
#include "fg_fp16.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma,avx2")))
#define RMAX FG_GEMM_Q_MAX_ROWS

/* An fp16 scale, exactly (F16C). */
__attribute__((target("f16c"))) static inline float f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* x sums per 32 values for Q4_K's minimum term: xs[r][s], s < in / 32, the
 * sum of x[r][32s ..] (16 lanes added pairwise, then reduced). */
T512 static void x_sums(const float *x, int rows, int in, float *xs) {
    for (int r = 0; r < rows; r++)
        for (int s = 0; s < in / 32; s++)
            xs[(size_t)r * (in / 32) + s] = _mm512_reduce_add_ps(
                _mm512_add_ps(_mm512_loadu_ps(x + (size_t)r * in + 32 * s), _mm512_loadu_ps(x + (size_t)r * in + 32 * s + 16)));
}

/* One output of R rows: Q8_0 row w (in / 32 blocks). */
T512 static inline __attribute__((always_inline)) void q8_row(const int R, const uint8_t *w, const float *x, int in,
                                                              int out, float *y) {
    __m512 acc[RMAX];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps();
    for (int b = 0; b < in / 32; b++, w += 34) {
        __m512 d = _mm512_set1_ps(f16(w));
        __m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + 2))));
        __m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(w + 18))));
        for (int r = 0; r < R; r++) {
            const float *xr = x + (size_t)r * in + 32 * b;
            __m512 dot = _mm512_mul_ps(q0, _mm512_loadu_ps(xr));
            dot = _mm512_fmadd_ps(q1, _mm512_loadu_ps(xr + 16), dot);
            acc[r] = _mm512_fmadd_ps(d, dot, acc[r]);
        }
    }
    for (int r = 0; r < R; r++) y[(size_t)r * out] = _mm512_reduce_add_ps(acc[r]);
}

/* The 8 six-bit scales and mins of a Q4_K block (fg_fmt.c's). */
static inline void k_scale_min(const uint8_t *s, int *sc, int *mn) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[4 + j] & 63;
        sc[4 + j] = (s[8 + j] & 15) | ((s[j] >> 2) & 48);
        mn[4 + j] = (s[8 + j] >> 4) | ((s[4 + j] >> 2) & 48);
    }
}

/* A Q4_K block's 8 scales and mins times d and dmin, as 8 fp32 lanes each:
 * fg_fmt.c's six-bit unpacking done on three 32-bit words (bytes 0-3: the
 * low scales and the top bits of the high ones, 4-7 the same for the
 * mins, 8-11 the high ones' low nibbles), each product d * (float)sc as
 * the scalar path has it. */
T512 static inline __attribute__((always_inline)) void k_scales8(const uint8_t *s, float d, float dmin, __m256 *ds,
                                                                 __m256 *dm) {
    uint32_t u0, u1, u2;
    memcpy(&u0, s, 4), memcpy(&u1, s + 4, 4), memcpy(&u2, s + 8, 4);
    uint32_t sl = u0 & 0x3f3f3f3fu, ml = u1 & 0x3f3f3f3fu;
    uint32_t sh = (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u), mh = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u);
    __m128i v = _mm_set_epi32((int)mh, (int)ml, (int)sh, (int)sl);
    *ds = _mm256_mul_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v)));
    *dm = _mm256_mul_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8))));
}

/* One output of R rows: Q4_K row w (in / 256 blocks); xs the x sums. The
 * minimum term is one 8-lane FMA a block (lane s: sub-block s), reduced
 * at the end. */
T512 static inline __attribute__((always_inline)) void q4k_row(const int R, const uint8_t *w, const float *x,
                                                               const float *xs, int in, int out, float *y) {
    const __m512i m4 = _mm512_set1_epi32(15);
    __m512 acc[RMAX];
    __m256 accm[RMAX];
    for (int r = 0; r < R; r++) acc[r] = _mm512_setzero_ps(), accm[r] = _mm256_setzero_ps();
    for (int b = 0; b < in / 256; b++, w += 144) {
        __m256 dsv, dmv;
        k_scales8(w + 4, f16(w), f16(w + 2), &dsv, &dmv);
        float ds8[8];
        _mm256_storeu_ps(ds8, dsv);
        for (int r = 0; r < R; r++)
            accm[r] = _mm256_fmadd_ps(dmv, _mm256_loadu_ps(xs + (size_t)r * (in / 32) + 8 * b), accm[r]);
        for (int c = 0; c < 4; c++) {   /* 32 bytes: sub-blocks 2c (low nibbles) and 2c + 1 (high) */
            /* each byte widened once; its two nibbles split in the lanes */
            __m512i b0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + 16 + 32 * c)));
            __m512i b1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(w + 32 + 32 * c)));
            __m512 q[4] = {_mm512_cvtepi32_ps(_mm512_and_si512(b0, m4)), _mm512_cvtepi32_ps(_mm512_and_si512(b1, m4)),
                           _mm512_cvtepi32_ps(_mm512_srli_epi32(b0, 4)), _mm512_cvtepi32_ps(_mm512_srli_epi32(b1, 4))};
            for (int h = 0; h < 2; h++) {
                int s = 2 * c + h;
                __m512 ds = _mm512_set1_ps(ds8[s]);
                for (int r = 0; r < R; r++) {
                    const float *xr = x + (size_t)r * in + 256 * b + 32 * s;
                    __m512 dot = _mm512_mul_ps(q[2 * h], _mm512_loadu_ps(xr));
                    dot = _mm512_fmadd_ps(q[2 * h + 1], _mm512_loadu_ps(xr + 16), dot);
                    acc[r] = _mm512_fmadd_ps(ds, dot, acc[r]);
                }
            }
        }
    }
    for (int r = 0; r < R; r++) {
        __m128 m = _mm_add_ps(_mm256_castps256_ps128(accm[r]), _mm256_extractf128_ps(accm[r], 1));
        m = _mm_add_ps(m, _mm_movehl_ps(m, m));
        y[(size_t)r * out] = _mm512_reduce_add_ps(acc[r]) - _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
    }
}

/* x sums per 16 values for Q6_K's offset term (its codes are q + 32). */
T512 static void x_sums16(const float *x, int rows, int in, float *xs) {
    for (int r = 0; r < rows; r++)
        for (int s = 0; s < in / 16; s++) xs[(size_t)r * (in / 16) + s] = _mm512_reduce_add_ps(_mm512_loadu_ps(x + (size_t)r * in + 16 * s));
}

/* One output of R rows: Q6_K row w (in / 256 blocks): per 16 values v =
 * 128g + 32j + 16h + t the unsigned code u = lo | hi << 4 (lo: nibble j / 2
 * of ql[64g + 32 (j % 2) + 16h + t], hi: bits 2j of qh[32g + 16h + t]);
 * y = sum ds * (u . x) - sum 32 ds * sum(x), ds = d * scale[8g + 2j + h]. */
T512 static inline __attribute__((always_inline)) void q6k_row(const int R, const uint8_t *w, const float *x,
                                                               const float *xs, int in, int out, float *y) {
    const __m128i m4 = _mm_set1_epi8(15), m2 = _mm_set1_epi8(3);
    __m512 acc[RMAX], accm[RMAX];
    for (int r = 0; r < R; r++) acc[r] = accm[r] = _mm512_setzero_ps();
    for (int b = 0; b < in / 256; b++, w += 210) {
        const uint8_t *ql = w, *qh = w + 128;
        const int8_t *sc = (const int8_t *)(w + 192);
        /* the 16 scales times d (lane k: values 16k ..), and the offset term
         * 32 ds sum(x) of the block as one FMA (lane k: its 16 values) */
        __m512 dsv = _mm512_mul_ps(_mm512_set1_ps(f16(w + 208)),
                                   _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)sc))));
        float ds16[16];
        _mm512_storeu_ps(ds16, dsv);
        for (int r = 0; r < R; r++)
            accm[r] = _mm512_fmadd_ps(_mm512_mul_ps(dsv, _mm512_set1_ps(32)),
                                      _mm512_loadu_ps(xs + (size_t)r * (in / 16) + 16 * b), accm[r]);
        for (int g = 0; g < 2; g++)
            for (int h = 0; h < 2; h++) {
                __m128i l0 = _mm_loadu_si128((const __m128i *)(ql + 64 * g + 16 * h));
                __m128i l1 = _mm_loadu_si128((const __m128i *)(ql + 64 * g + 32 + 16 * h));
                __m128i hb = _mm_loadu_si128((const __m128i *)(qh + 32 * g + 16 * h));
                for (int j = 0; j < 4; j++) {
                    __m128i lb = j % 2 ? l1 : l0;
                    __m128i lo = _mm_and_si128(j / 2 ? _mm_srli_epi16(lb, 4) : lb, m4);
                    __m128i hi = _mm_and_si128(_mm_srli_epi16(hb, 2 * j), m2);
                    __m512 u = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_or_si128(lo, _mm_slli_epi16(hi, 4))));
                    int k = 8 * g + 2 * j + h, v = 128 * g + 32 * j + 16 * h;
                    __m512 vds = _mm512_set1_ps(ds16[k]);
                    for (int r = 0; r < R; r++) {
                        __m512 dot = _mm512_mul_ps(u, _mm512_loadu_ps(x + (size_t)r * in + 256 * b + v));
                        acc[r] = _mm512_fmadd_ps(vds, dot, acc[r]);
                    }
                }
            }
    }
    for (int r = 0; r < R; r++) y[(size_t)r * out] = _mm512_reduce_add_ps(acc[r]) - _mm512_reduce_add_ps(accm[r]);
}

#define ROWS_CASES(F) F(1) F(2) F(3) F(4)

T512 static void q6k_rows(int R, const uint8_t *w, const float *x, const float *xs, int in, int out, float *y) {
    switch (R) {
#define C6(n) case n: q6k_row(n, w, x, xs, in, out, y); return;
        ROWS_CASES(C6)
#undef C6
    }
}

T512 static void q8_rows(int R, const uint8_t *w, const float *x, int in, int out, float *y) {
    switch (R) {
#define C8(n) case n: q8_row(n, w, x, in, out, y); return;
        ROWS_CASES(C8)
#undef C8
    }
}

T512 static void q4k_rows(int R, const uint8_t *w, const float *x, const float *xs, int in, int out, float *y) {
    switch (R) {
#define C4(n) case n: q4k_row(n, w, x, xs, in, out, y); return;
        ROWS_CASES(C4)
#undef C4
    }
}

static int have512(void) {
    static int c = -1;
    if (c < 0)
        c = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    /* (every AVX-512 CPU has F16C; clang's builtin does not take "f16c") */
    return c;
}

int fg_gemm_q_fused(int fmt, int rows, int in) {
    if (!have512() || rows < 1 || rows > RMAX) return 0;
    if (fmt == FG_FMT_Q8_0) return in % 32 == 0;
    if (fmt == FG_FMT_Q4_K || fmt == FG_FMT_Q6_K) return in % 256 == 0;
    return 0;
}

size_t fg_gemm_q_scratch(int fmt, int rows, int in) {
    if (fmt == FG_FMT_Q6_K) return sizeof(float) * (size_t)rows * (size_t)(in / 16);
    return fmt == FG_FMT_Q4_K ? sizeof(float) * (size_t)rows * (size_t)(in / 32) : 0;
}

void fg_gemm_q_prepare(int fmt, const float *x, int rows, int in, float *scratch) {
    if (fmt == FG_FMT_Q4_K) x_sums(x, rows, in, scratch);
    if (fmt == FG_FMT_Q6_K) x_sums16(x, rows, in, scratch);
}

void fg_gemm_q_outputs(int fmt, const uint8_t *W, const float *x, const float *scratch, int rows, int in, int out,
                       int o0, int o1, float *y) {
    uint64_t rb = fg_fmt_row_bytes(fmt, (uint64_t)in);
    for (int o = o0; o < o1; o++) {
        const uint8_t *w = W + (size_t)o * rb;
        if (o + 1 < o1) _mm_prefetch((const char *)(w + rb), _MM_HINT_T0);
        if (fmt == FG_FMT_Q8_0) q8_rows(rows, w, x, in, out, y + o);
        else if (fmt == FG_FMT_Q6_K) q6k_rows(rows, w, x, scratch, in, out, y + o);
        else q4k_rows(rows, w, x, scratch, in, out, y + o);
    }
}
#else
int fg_gemm_q_fused(int fmt, int rows, int in) {
    (void)fmt, (void)rows, (void)in;
    return 0;
}
size_t fg_gemm_q_scratch(int fmt, int rows, int in) {
    (void)fmt, (void)rows, (void)in;
    return 0;
}
void fg_gemm_q_prepare(int fmt, const float *x, int rows, int in, float *scratch) {
    (void)fmt, (void)x, (void)rows, (void)in, (void)scratch;
}
void fg_gemm_q_outputs(int fmt, const uint8_t *W, const float *x, const float *scratch, int rows, int in, int out,
                       int o0, int o1, float *y) {
    (void)fmt, (void)W, (void)x, (void)scratch, (void)rows, (void)in, (void)out, (void)o0, (void)o1, (void)y;
}
#endif
