/* fg_q4.c - FlexGen's 4-bit group-wise packing and expansion, exactly as
 * fg_q4.h defines them. Packing runs once per weight (store build) and once
 * per new cache entry; expansion runs on every use of a weight, so it has
 * AVX-512 and AVX2 (+F16C) forms chosen at run time, and a portable one.
 *
 * Every form computes q / s as q * (1 / s): one division per (group,
 * column) for its 64 values. The fp32 product can differ from the fp32
 * quotient in its last bits, but never once rounded to fp16, which is all
 * the definition keeps of it: true for every one of the 65536 fp16 s (zero,
 * subnormal, inf and NaN included) and every q, as tests/model/q4_fast.c
 * checks exhaustively. */
#include "fg_q4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#define FG_X86 1
#endif

void fg_q4_pack(const fg_half *x, int N, int C, uint8_t *dst) {
    int G = (int)fg_q4_groups((uint64_t)N);
    uint8_t *packed = dst;
    fg_half *mins = (fg_half *)(dst + (size_t)G * 32 * C), *scales = mins + (size_t)G * C;
    float v[FG_Q4_GROUP];
    uint8_t q[FG_Q4_GROUP];
    for (int g = 0; g < G; g++)
        for (int c = 0; c < C; c++) {
            for (int i = 0; i < FG_Q4_GROUP; i++) {
                int r = g * FG_Q4_GROUP + i;
                v[i] = r < N ? fg_half_to_float(x[(size_t)r * C + c]) : 0.0f;
            }
            float mn = v[0], mx = v[0];
            for (int i = 1; i < FG_Q4_GROUP; i++) {
                if (v[i] < mn) mn = v[i];
                if (v[i] > mx) mx = v[i];
            }
            float d = mx - mn;
            float s = 15.0f / d;   /* +inf for d == 0 */
            for (int i = 0; i < FG_Q4_GROUP; i++) {
                if (d == 0.0f) {
                    q[i] = 0;
                    continue;
                }
                float t = (v[i] - mn) * s;
                t = t < 0.0f ? 0.0f : t > 15.0f ? 15.0f : t;
                q[i] = (uint8_t)rintf(t);   /* default rounding mode: half to even */
            }
            for (int j = 0; j < 32; j++)
                packed[((size_t)g * 32 + j) * C + c] = (uint8_t)(q[2 * j] << 4 | q[2 * j + 1]);
            mins[(size_t)g * C + c] = fg_float_to_half(mn);
            scales[(size_t)g * C + c] = fg_float_to_half(s);
        }
}

static int simd_limit = 2;

void fg_q4_limit_simd(int level) { simd_limit = level; }

/* Where group g's mins and scales start in a slice. */
static const fg_half *group_mins(const uint8_t *src, int N, int C, int g) {
    return (const fg_half *)(src + fg_q4_groups((uint64_t)N) * 32 * (uint64_t)C) + (size_t)g * C;
}
static const fg_half *group_scales(const uint8_t *src, int N, int C, int g) {
    return group_mins(src, N, C, g) + fg_q4_groups((uint64_t)N) * (uint64_t)C;
}

/* Row r's nibbles of column c are byte p[c] >> row_shift(r) & 15. */
static const uint8_t *row_bytes(const uint8_t *src, int C, int r) {
    return src + ((size_t)(r / FG_Q4_GROUP) * 32 + (size_t)(r % FG_Q4_GROUP / 2)) * C;
}
static int row_shift(int r) { return r % 2 ? 0 : 4; }

void fg_q4_expand_rows_ref(const uint8_t *src, int N, int C, int r0, int r1, fg_half *y) {
    for (int r = r0; r < r1; r++) {
        const fg_half *mins = group_mins(src, N, C, r / FG_Q4_GROUP), *scales = group_scales(src, N, C, r / FG_Q4_GROUP);
        const uint8_t *p = row_bytes(src, C, r);
        for (int c = 0; c < C; c++) {
            float q = (float)(p[c] >> row_shift(r) & 15);
            float t = fg_half_to_float(fg_float_to_half(q / fg_half_to_float(scales[c])));
            y[(size_t)(r - r0) * C + c] = fg_float_to_half(t + fg_half_to_float(mins[c]));
        }
    }
}

/* Columns [c0, C) of rows [r0, r1), all in group g, one value at a time;
 * y is row r0's column 0, h (fp16) or f (fp32) the one written. The
 * portable form and the SIMD forms' column tails. */
static void expand_scalar(const uint8_t *src, int N, int C, int g, int r0, int r1, int c0, fg_half *h, float *f) {
    const fg_half *mins = group_mins(src, N, C, g), *scales = group_scales(src, N, C, g);
    for (int c = c0; c < C; c++) {
        float rcp = 1.0f / fg_half_to_float(scales[c]), m = fg_half_to_float(mins[c]);
        for (int r = r0; r < r1; r++) {
            float q = (float)(row_bytes(src, C, r)[c] >> row_shift(r) & 15);
            fg_half v = fg_float_to_half(fg_half_to_float(fg_float_to_half(q * rcp)) + m);
            size_t i = (size_t)(r - r0) * C + c;
            if (h) h[i] = v;
            else f[i] = fg_half_to_float(v);
        }
    }
}

#ifdef FG_X86
/* The SIMD forms walk the group's rows over a block of CB columns at a time,
 * whose 1 / s and mins wait in an L1 table: one division per column, and
 * rows written as runs of whole cache lines (a column-major walk of a row
 * stride of 4 KB keeps landing in the same L1 set). Each row's bytes for
 * the next block are fetched while this one is expanded: runs of CB bytes
 * in up to 32 rows are too short and too many for the hardware prefetcher
 * to follow. */
#define CB 256

#define AVX512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

/* One step's 16 values of a row from their q (fp32): into h or f at i. */
AVX512_TARGET static inline __attribute__((always_inline)) void put512(__m512 q, const float *rcp, const float *mf,
                                                                       __mmask16 k, fg_half *h, float *f, size_t i) {
    __m512 t = _mm512_mul_ps(q, _mm512_load_ps(rcp));
    t = _mm512_add_ps(_mm512_cvtph_ps(_mm512_cvtps_ph(t, _MM_FROUND_TO_NEAREST_INT)), _mm512_load_ps(mf));
    __m256i v = _mm512_cvtps_ph(t, _MM_FROUND_TO_NEAREST_INT);
    if (h) _mm256_mask_storeu_epi16(h + i, k, v);
    else _mm512_mask_storeu_ps(f + i, k, _mm512_cvtph_ps(v));
}

/* Sixteen columns a step, a pair of rows from each load of their bytes
 * where both are wanted; the last step of a row is masked. q as fp32 is a
 * lookup of the nibble in a table of 0..15 (vpermps reads an index's low 4
 * bits). */
AVX512_TARGET static void expand_avx512(const uint8_t *src, int N, int C, int g, int r0, int r1, fg_half *h,
                                        float *f) {
    const fg_half *mins = group_mins(src, N, C, g), *scales = group_scales(src, N, C, g);
    float rcp[CB] __attribute__((aligned(64))), mf[CB] __attribute__((aligned(64)));
    const __m512 qf = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (int c0 = 0; c0 < C; c0 += CB) {
        int n = C - c0 < CB ? C - c0 : CB;
        for (int c = 0; c < n; c += 16) {
            __mmask16 k = n - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - c)) - 1);
            __m512 s = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, scales + c0 + c));
            _mm512_store_ps(rcp + c, _mm512_div_ps(_mm512_set1_ps(1.0f), s));   /* masked-off lanes unused */
            _mm512_store_ps(mf + c, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, mins + c0 + c)));
        }
        for (int r = r0; r < r1;) {
            const uint8_t *p = row_bytes(src, C, r) + c0;
            size_t i = (size_t)(r - r0) * C + c0;
            int hi = row_shift(r) != 0, lo = !hi || r + 1 < r1;   /* which of the pair's rows */
            size_t ilo = hi ? i + (size_t)C : i;
            for (int c = 0; c < n; c += 16) {
                __mmask16 k = n - c >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - c)) - 1);
                if (!(c & 63)) _mm_prefetch((const char *)(p + c + CB), _MM_HINT_T0);
                __m512i b = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(k, p + c));
                if (hi) put512(_mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), qf), rcp + c, mf + c, k, h, f, i + c);
                if (lo) put512(_mm512_permutexvar_ps(b, qf), rcp + c, mf + c, k, h, f, ilo + c);
            }
            r += hi + lo;
        }
    }
}

/* Eight columns a step as above; the C % 8 tail is scalar. */
#define AVX2_TARGET __attribute__((target("avx2,f16c")))
AVX2_TARGET static void expand_avx2(const uint8_t *src, int N, int C, int g, int r0, int r1, fg_half *h,
                                    float *f) {
    const fg_half *mins = group_mins(src, N, C, g), *scales = group_scales(src, N, C, g);
    float rcp[CB] __attribute__((aligned(32))), mf[CB] __attribute__((aligned(32)));
    int C8 = C & ~7;
    for (int c0 = 0; c0 < C8; c0 += CB) {
        int n = C8 - c0 < CB ? C8 - c0 : CB;
        for (int c = 0; c < n; c += 8) {
            __m256 s = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(scales + c0 + c)));
            _mm256_store_ps(rcp + c, _mm256_div_ps(_mm256_set1_ps(1.0f), s));
            _mm256_store_ps(mf + c, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(mins + c0 + c))));
        }
        for (int r = r0; r < r1; r++) {
            const uint8_t *p = row_bytes(src, C, r) + c0;
            size_t i = (size_t)(r - r0) * C + c0;
            __m256i sh = _mm256_set1_epi32(row_shift(r)), m15 = _mm256_set1_epi32(15);
            for (int c = 0; c < n; c += 8) {
                if (!(c & 63)) _mm_prefetch((const char *)(p + c + CB), _MM_HINT_T0);
                __m256i b = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + c)));
                __m256i q = _mm256_and_si256(_mm256_srlv_epi32(b, sh), m15);
                __m256 t = _mm256_mul_ps(_mm256_cvtepi32_ps(q), _mm256_load_ps(rcp + c));
                t = _mm256_add_ps(_mm256_cvtph_ps(_mm256_cvtps_ph(t, _MM_FROUND_TO_NEAREST_INT)),
                                  _mm256_load_ps(mf + c));
                __m128i v = _mm256_cvtps_ph(t, _MM_FROUND_TO_NEAREST_INT);
                if (h) _mm_storeu_si128((__m128i *)(h + i + c), v);
                else _mm256_storeu_ps(f + i + c, _mm256_cvtph_ps(v));
            }
        }
    }
    if (C8 < C) expand_scalar(src, N, C, g, r0, r1, C8, h, f);
}

static int have_avx512(void) {
    return simd_limit >= 2 && fg_fp16_have_f16c() && __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}
static int have_avx2(void) { return simd_limit >= 1 && fg_fp16_have_f16c() && __builtin_cpu_supports("avx2"); }
#endif

/* Rows [r0, r1) into h or f, one group's rows at a time. */
static void expand_rows(const uint8_t *src, int N, int C, int r0, int r1, fg_half *h, float *f) {
    for (int a = r0; a < r1;) {
        int g = a / FG_Q4_GROUP, b = (g + 1) * FG_Q4_GROUP < r1 ? (g + 1) * FG_Q4_GROUP : r1;
        size_t off = (size_t)(a - r0) * C;
        fg_half *hg = h ? h + off : NULL;
        float *fgp = f ? f + off : NULL;
#ifdef FG_X86
        if (have_avx512()) expand_avx512(src, N, C, g, a, b, hg, fgp);
        else if (have_avx2()) expand_avx2(src, N, C, g, a, b, hg, fgp);
        else
#endif
            expand_scalar(src, N, C, g, a, b, 0, hg, fgp);
        a = b;
    }
}

void fg_q4_expand_rows(const uint8_t *src, int N, int C, int r0, int r1, fg_half *y) {
    expand_rows(src, N, C, r0, r1, y, NULL);
}

void fg_q4_expand_rows_f32(const uint8_t *src, int N, int C, int r0, int r1, float *y) {
    expand_rows(src, N, C, r0, r1, NULL, y);
}

void fg_q4_expand_f32(const uint8_t *src, int N, int C, float *y) {
    if (C == 1) {   /* a cache slice (one head): scalars per group */
        int G = (int)fg_q4_groups((uint64_t)N);
        const fg_half *mins = (const fg_half *)(src + (size_t)G * 32), *scales = mins + G;
        for (int g = 0; g < G; g++) {
            float s = fg_half_to_float(scales[g]), m = fg_half_to_float(mins[g]);
            int n = N - g * FG_Q4_GROUP < FG_Q4_GROUP ? N - g * FG_Q4_GROUP : FG_Q4_GROUP;
            float *yg = y + (size_t)g * FG_Q4_GROUP;
            for (int i = 0; i < n; i++) yg[i] = (float)((src[g * 32 + i / 2] >> (i % 2 ? 0 : 4)) & 15) / s;
            fg_round_fp16_n(yg, (size_t)n);
            for (int i = 0; i < n; i++) yg[i] += m;
            fg_round_fp16_n(yg, (size_t)n);
        }
        return;
    }
    fg_q4_expand_rows_f32(src, N, C, 0, N, y);
}

void fg_q4_expand(const uint8_t *src, int N, int C, fg_half *y) { fg_q4_expand_rows(src, N, C, 0, N, y); }
