/* fg_gemm_i16.c - integer-dot Linear on Q4_K, Q5_K and Q6_K blocks with
 * AVX512-VNNI (what it computes and its error bound: fg_gemm_i16.h). The
 * fp32 kernels (fg_gemm_q.c, fg_gemm.c) widen each 4-bit code to fp32
 * and are instruction-bound at decode; here a block's codes become int16
 * words (code times its 6- or 8-bit sub-block scale) in a few integer ops,
 * and one VPDPWSSD multiplies 32 of them into 16 int32 lanes.
 *
 * Lane order. A block's 256 values become 8 vectors of 32 words, in the
 * order its bytes give them cheaply (even and odd bytes, low and high
 * nibbles: "the lane order" below); the activations are quantized into the
 * same order, so a vector of weights meets its activations with one load.
 *
 * Two paths, the same numbers:
 *  - few rows (fg_gemm_i16_few): 4 weight rows at a time, each block read
 *    once from memory and widened in registers;
 *  - many rows (fg_gemm_i16_many): a task's weight rows widened once into a
 *    per-thread buffer, then register tiles of MANY_P rows by MANY_R
 *    activation rows run over it.
 * Both take, for each (row, output), the 8 vectors of a super-block into
 * one accumulator of 16 int32 lanes and go on in fp32 the same way (the
 * fp32 part below, written once): a row's result does not depend on the
 * path, the tile, the thread or the other rows.
 *
 * No int32 lane overflows: a lane holds 16 products (8 VPDPWSSD of 2) of
 * one super-block before it is converted to fp32, and |q| <= 32767
 * (quantize_row rounds x / s with |x| <= amax, and zeroes a non-finite
 * block):
 *   Q4_K: code <= 15, scale <= 63:  16 * 945 * 32767  = 4.95e8 < 2^31
 *   Q5_K: code <= 31, scale <= 63:  16 * 1953 * 32767 = 1.02e9 < 2^31
 *   Q6_K: code - 32 in [-32, 31], scale in [-128, 127], |product| <= 4096:
 *         16 * 4096 * 32767 = 2^31 - 2^16 < 2^31
 * A super-block's whole sum can exceed 2^31 (256 * 945 * 32767 for Q4_K),
 * so the lanes are never added in int32. A Q4_K/Q5_K sub-block sum of q is
 * at most 32 * 32767 < 2^24: exact in int32 and in fp32. */
#include "fg_gemm_i16.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "fg_common.h"
#include "fg_fmt.h"
#include "fg_gemm.h"

#define QK 256           /* values per super-block */
#define NVEC 8           /* vectors of 32 words per super-block */
#define NSUB 8           /* Q4_K/Q5_K sub-blocks (32 values) per super-block */
#define FEW_P 4          /* weight rows per few-rows tile (and per scale unpacking) */
#define PF_TILES 1       /* few rows: how many tiles ahead the weights are fetched */
#define MANY_P 2         /* many rows: register tile of MANY_P outputs */
#define MANY_R 5         /*   by MANY_R rows */
#define Q_MAX 32767      /* |q| bound: int16 without -32768 */
#define X_TINY 0x1p-100f /* a super-block with amax below this is taken as zero */

static int i16_on = 1;

void fg_gemm_int16(int on) { i16_on = on; }

#if defined(__x86_64__)
#include <immintrin.h>

#define T __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,f16c,fma,avx2")))
#define INL inline __attribute__((always_inline))

static int have_vnni(void) {
    static int c = -1;
    if (c < 0)
        c = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
            __builtin_cpu_supports("avx512vnni");
    return c;
}

/* An fp16 scale, exactly (F16C). */
__attribute__((target("f16c"))) static inline float f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

static int has_min(int fmt) { return fmt != FG_FMT_Q6_K; }

static int blk_bytes(int fmt) { return fmt == FG_FMT_Q4_K ? 144 : fmt == FG_FMT_Q5_K ? 176 : 210; }

/* ---- the lane order ----
 * Vector v of a block holds, in word i, the value the block's bytes put
 * there (prep_q45, prep_q6): a 64-byte load L of codes gives four vectors,
 * (L & 15), (L >> 8 & 15), (L >> 4 & 15), (L >> 12) as 16-bit words: the
 * low nibbles of the even bytes, of the odd bytes, then the high nibbles.
 * Its words 0-15 come from one run of 32 values, 16-31 from another, the
 * even (v odd: odd) ones: with the values in natural order as 8 runs N[k]
 * of 32 words, vector v = words 2i + (v & 1) of N[lo[v]] then N[hi[v]].
 *   Q4_K/Q5_K: load s (bytes 64s..) holds sub-blocks 4s, 4s + 2 in its low
 *              nibbles, 4s + 1, 4s + 3 in its high ones;
 *   Q6_K:      load g (ql bytes 64g..) holds runs 4g, 4g + 1 in its low
 *              nibbles, 4g + 2, 4g + 3 in its high ones. */
static const uint8_t order_lo[2][NVEC] = {{0, 0, 1, 1, 4, 4, 5, 5}, {0, 0, 2, 2, 4, 4, 6, 6}};
static const uint8_t order_hi[2][NVEC] = {{2, 2, 3, 3, 6, 6, 7, 7}, {1, 1, 3, 3, 5, 5, 7, 7}};

/* ---- activations ---- */

size_t fg_gemm_i16_x_bytes(int rows, int in) {
    size_t nb = (size_t)(in / QK);
    return (size_t)rows * (sizeof(int16_t) * (size_t)in + sizeof(float) * nb * (1 + NSUB)) + 3 * 64;
}

void fg_gemm_i16_x_init(fg_i16_x *xq, void *buf, int rows, int in) {
    size_t nb = (size_t)(in / QK);
    uintptr_t p = ((uintptr_t)buf + 63) & ~(uintptr_t)63;
    xq->q = (int16_t *)p;
    p += ((sizeof(int16_t) * (size_t)rows * (size_t)in) + 63) & ~(size_t)63;
    xq->s = (float *)p;
    p += ((sizeof(float) * (size_t)rows * nb) + 63) & ~(size_t)63;
    xq->sum = (float *)p;
    xq->rows = rows, xq->in = in;
}

/* One row: per super-block amax, s = amax / 32767 and q = round(x * (32767
 * / amax)) (|x * 32767 / amax| <= 32767 up to fp32 rounding, which the
 * saturating narrow keeps in int16), then the words permuted into the lane
 * order. A non-finite value makes s NaN, so the row's outputs are NaN. */
T static void quantize_row(int fmt, const float *x, int in, int16_t *q, float *s, float *sum) {
    const int o = fmt == FG_FMT_Q6_K;
    const __m512i idx[2] = {
        _mm512_set_epi16(62, 60, 58, 56, 54, 52, 50, 48, 46, 44, 42, 40, 38, 36, 34, 32, 30, 28, 26, 24, 22, 20,
                         18, 16, 14, 12, 10, 8, 6, 4, 2, 0),
        _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25, 23, 21,
                         19, 17, 15, 13, 11, 9, 7, 5, 3, 1)};
    const __m512 inf = _mm512_set1_ps(INFINITY);
    const __m512i ones = _mm512_set1_epi16(1);
    for (int b = 0; b < in / QK; b++) {
        const float *xb = x + (size_t)b * QK;
        __m512 m = _mm512_setzero_ps();
        __mmask16 bad = 0;
        for (int k = 0; k < QK / 16; k++) {
            __m512 a = _mm512_abs_ps(_mm512_loadu_ps(xb + 16 * k));
            bad |= _mm512_cmp_ps_mask(a, inf, _CMP_NLT_UQ);   /* inf or NaN */
            m = _mm512_max_ps(m, a);
        }
        float amax = _mm512_reduce_max_ps(m);
        float sc = amax / (float)Q_MAX, inv = (float)Q_MAX / amax;
        if (amax < X_TINY) sc = 0.0f, inv = 0.0f;   /* (32767 / amax would overflow) */
        if (bad) sc = NAN, inv = 0.0f;
        __m512 vinv = _mm512_set1_ps(inv);
        __m512i n[NVEC];
        for (int k = 0; k < NVEC; k++) {
            __m256i lo = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 32 * k), vinv)));
            __m256i hi = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xb + 32 * k + 16), vinv)));
            n[k] = bad ? _mm512_setzero_si512() : _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        }
        if (sum)
            for (int j = 0; j < NSUB; j++)
                sum[NSUB * b + j] = sc * (float)_mm512_reduce_add_epi32(_mm512_madd_epi16(n[j], ones));
        for (int v = 0; v < NVEC; v++)
            _mm512_storeu_si512(q + (size_t)b * QK + 32 * v,
                                _mm512_permutex2var_epi16(n[order_lo[o][v]], idx[v & 1], n[order_hi[o][v]]));
        s[b] = sc;
    }
}

void fg_gemm_i16_quantize(int fmt, const float *x, int r0, int r1, const fg_i16_x *xq) {
    size_t in = (size_t)xq->in, nb = in / QK;
    for (int r = r0; r < r1; r++)
        quantize_row(fmt, x + r * in, xq->in, xq->q + r * in, xq->s + r * nb, has_min(fmt) ? xq->sum + r * nb * NSUB : NULL);
}

/* ---- blocks as vectors of int16 weights ----
 * Four blocks at a time (one of each weight row of a tile) have their
 * scales unpacked together (blk4_scales: one 128-bit lane per block), then
 * each block's codes become 8 vectors of 32 words, code times scale, in
 * the lane order (blk_codes). */

/* 32 words: a in the low half (words 0-15), b in the high one. */
#define HB(a, b) {a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b}
/* The same 16 bytes in each 128-bit lane. */
#define LANES4(...) {__VA_ARGS__, __VA_ARGS__, __VA_ARGS__, __VA_ARGS__}

/* The scales of 4 blocks (rows 0-3 of a tile). */
typedef struct {
    __m512i sw[2];   /* words of rows 2i (0-15) and 2i + 1 (16-31): Q4_K/Q5_K sc 0-7, m 0-7; Q6_K sc 0-15 */
    __m128 d;        /* d of rows 0-3 */
    __m512 ndm[2];   /* Q4_K/Q5_K: -dmin m_j of rows 2i (lanes 0-7) and 2i + 1 (8-15); exact (fp16 times 6 bits) */
} scales4;

/* Q4_K/Q5_K: the 12 scale bytes unpack as fg_fmt.c's k_scale_min, on
 * 32-bit words u0 u1 u2 (bytes 0-3, 4-7, 8-11) in each lane: [u0, u2, u1,
 * u2 >> 4] masked to 6 and 4 bits, or [-, u0 >> 2, -, u1 >> 2]'s top 2 bits:
 * bytes sc 0-3, sc 4-7, m 0-3, m 4-7. */
T static INL void scales4_q45(const uint8_t *const w[4], scales4 *sc) {
    static const int8_t shuf_a[64] __attribute__((aligned(64))) = LANES4(0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 8, 9, 10, 11);
    static const int8_t shuf_b[64] __attribute__((aligned(64))) = LANES4(-1, -1, -1, -1, 0, 1, 2, 3, -1, -1, -1, -1, 4, 5, 6, 7);
    static const int32_t cnt[16] __attribute__((aligned(64))) = LANES4(0, 0, 0, 4);
    static const int32_t mask[16] __attribute__((aligned(64))) = LANES4(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f);
    /* m words 8-15 and 24-31 to words 0-15 */
    static const int16_t midx[32] __attribute__((aligned(64))) = {8,  9,  10, 11, 12, 13, 14, 15, 24, 25, 26,
                                                                  27, 28, 29, 30, 31, 0,  0,  0,  0,  0,  0,
                                                                  0,  0,  0,  0,  0,  0,  0,  0,  0,  0};
    /* dmin of rows 2i, 2i + 1 (from [d0 dmin0 d1 dmin1 ...]) in lanes 0-7, 8-15 */
    static const int32_t dmi[2][16] __attribute__((aligned(64))) = {{1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3},
                                                                    {5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7, 7, 7, 7, 7, 7}};
    __m512i u = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(w[0] + 4)));
    u = _mm512_inserti32x4(u, _mm_loadu_si128((const __m128i *)(w[1] + 4)), 1);
    u = _mm512_inserti32x4(u, _mm_loadu_si128((const __m128i *)(w[2] + 4)), 2);
    u = _mm512_inserti32x4(u, _mm_loadu_si128((const __m128i *)(w[3] + 4)), 3);
    __m512i ua = _mm512_shuffle_epi8(u, _mm512_load_si512(shuf_a)), ub = _mm512_shuffle_epi8(u, _mm512_load_si512(shuf_b));
    __m512i sm = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srlv_epi32(ua, _mm512_load_si512(cnt)), _mm512_load_si512(mask)),
                                           _mm512_srli_epi32(ub, 2), _mm512_set1_epi8(0x30), 0xF8);   /* a | (b & c) */
    sc->sw[0] = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(sm));
    sc->sw[1] = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(sm, 1));
    uint32_t dd[4];
    for (int p = 0; p < 4; p++) memcpy(&dd[p], w[p], 4);   /* fp16 d, dmin */
    __m512 f = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dd)));
    sc->d = _mm512_castps512_ps128(_mm512_permutexvar_ps(_mm512_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), f));
    for (int q = 0; q < 2; q++) {
        __m512 m = _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(_mm512_permutexvar_epi16(_mm512_load_si512(midx), sc->sw[q]))));
        __m512 dm = _mm512_permutexvar_ps(_mm512_load_si512(dmi[q]), f);
        sc->ndm[q] = _mm512_mul_ps(m, _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(dm), _mm512_set1_epi32((int)0x80000000u))));
    }
}

/* Q6_K: the 16 int8 scales of rows 2i, 2i + 1 as words, and d. */
T static INL void scales4_q6(const uint8_t *const w[4], scales4 *sc) {
    for (int q = 0; q < 2; q++)
        sc->sw[q] = _mm512_cvtepi8_epi16(_mm256_inserti128_si256(
            _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(w[2 * q] + 192))), _mm_loadu_si128((const __m128i *)(w[2 * q + 1] + 192)), 1));
    uint16_t dd[8] = {0};
    for (int p = 0; p < 4; p++) memcpy(&dd[p], w[p] + 208, 2);
    sc->d = _mm_cvtph_ps(_mm_loadu_si128((const __m128i *)dd));
}

/* Q4_K (Q5 = 0) and Q5_K: v[k] = code * scale, the scales from sw (this
 * block's words start at 16 hi). */
T static INL void codes_q45(const int Q5, const uint8_t *w, __m512i sw, int hi, __m512i v[NVEC]) {
    /* words i < 16 take sub-block 4s + h (s: the load, h: the nibble),
     * words >= 16 sub-block 4s + h + 2; + 16 for the second block of sw */
    static const int16_t sidx[2][4][32] __attribute__((aligned(64))) = {
        {HB(0, 2), HB(1, 3), HB(4, 6), HB(5, 7)}, {HB(16, 18), HB(17, 19), HB(20, 22), HB(21, 23)}};
    /* Q5_K: the fifth bit of vector v's word i is bit j of qh byte l (j its
     * sub-block, l its place in it): qh loaded as words into both halves,
     * the bit tested is j, or 8 + j for the odd bytes */
    static const uint16_t hbit[NVEC][32] __attribute__((aligned(64))) = {
        HB(1 << 0, 1 << 2), HB(1 << 8, 1 << 10), HB(1 << 1, 1 << 3), HB(1 << 9, 1 << 11),
        HB(1 << 4, 1 << 6), HB(1 << 12, 1 << 14), HB(1 << 5, 1 << 7), HB(1 << 13, 1 << 15)};
    const uint8_t *qs = w + (Q5 ? 48 : 16);
    const __m512i m4 = _mm512_set1_epi16(15), k16 = _mm512_set1_epi16(16);
    __m512i h = Q5 ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 16))) : _mm512_setzero_si512();
    for (int s = 0; s < 2; s++) {
        __m512i a = _mm512_loadu_si512(qs + 64 * s);
        __m512i c[4] = {_mm512_and_si512(a, m4), _mm512_and_si512(_mm512_srli_epi16(a, 8), m4),
                        _mm512_and_si512(_mm512_srli_epi16(a, 4), m4), _mm512_srli_epi16(a, 12)};
        __m512i sc0 = _mm512_permutexvar_epi16(_mm512_load_si512(sidx[hi][2 * s]), sw);
        __m512i sc1 = _mm512_permutexvar_epi16(_mm512_load_si512(sidx[hi][2 * s + 1]), sw);
        for (int k = 0; k < 4; k++) {
            int vi = 4 * s + k;
            if (Q5) {
                __mmask32 hb = _mm512_test_epi16_mask(h, _mm512_load_si512(hbit[vi]));
                c[k] = _mm512_mask_add_epi16(c[k], hb, c[k], k16);
            }
            v[vi] = _mm512_mullo_epi16(c[k], k < 2 ? sc0 : sc1);
        }
    }
}

/* Q6_K: v[k] = (code - 32) * scale. ql load g gives the low nibbles; the
 * 2 high bits of byte l of its run are bits 2j of qh[32g + l] (j the run
 * within the 128: 0, 1 in the low nibbles' halves, 2, 3 in the high
 * ones'), shifted to bits 4-5 by a per-half variable shift; a word's
 * 128-bit lane is one 16-value scale. */
T static INL void codes_q6(const uint8_t *w, __m512i sw, int hi, __m512i v[NVEC]) {
#define QI(a) {a, a, a, a, a, a, a, a, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1, a + 1, \
               a + 2, a + 2, a + 2, a + 2, a + 2, a + 2, a + 2, a + 2, a + 3, a + 3, a + 3, a + 3, a + 3, a + 3, a + 3, a + 3}
    static const int16_t qidx[2][4][32] __attribute__((aligned(64))) = {{QI(0), QI(4), QI(8), QI(12)},
                                                                       {QI(16), QI(20), QI(24), QI(28)}};
#undef QI
    /* right shifts of qh (even bytes: qh << 4) per half for the four vectors */
    static const uint16_t cnt[4][32] __attribute__((aligned(64))) = {HB(0, 2), HB(4, 6), HB(4, 6), HB(8, 10)};
    const __m512i m4 = _mm512_set1_epi16(15), m30 = _mm512_set1_epi16(0x30), k32 = _mm512_set1_epi16(32);
    for (int g = 0; g < 2; g++) {
        __m512i a = _mm512_loadu_si512(w + 64 * g);
        __m512i hw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 128 + 32 * g)));
        __m512i h4 = _mm512_slli_epi16(hw, 4);
        __m512i c[4] = {_mm512_and_si512(a, m4), _mm512_and_si512(_mm512_srli_epi16(a, 8), m4),
                        _mm512_and_si512(_mm512_srli_epi16(a, 4), m4), _mm512_srli_epi16(a, 12)};
        __m512i sc0 = _mm512_permutexvar_epi16(_mm512_load_si512(qidx[hi][2 * g]), sw);
        __m512i sc1 = _mm512_permutexvar_epi16(_mm512_load_si512(qidx[hi][2 * g + 1]), sw);
        for (int k = 0; k < 4; k++) {
            __m512i hb = _mm512_srlv_epi16(k & 1 ? hw : h4, _mm512_load_si512(cnt[k]));
            __m512i q = _mm512_ternarylogic_epi32(c[k], hb, m30, 0xF8);   /* c | (hb & 0x30) */
            v[4 * g + k] = _mm512_mullo_epi16(_mm512_sub_epi16(q, k32), k < 2 ? sc0 : sc1);
        }
    }
}

T static INL void blk4_scales(const int FMT, const uint8_t *const w[4], scales4 *sc) {
    if (FMT == FG_FMT_Q6_K) scales4_q6(w, sc);
    else scales4_q45(w, sc);
}

/* Block row p (0-3) of the scales' four. */
T static INL void blk_codes(const int FMT, const uint8_t *w, const scales4 *sc, int p, __m512i v[NVEC]) {
    if (FMT == FG_FMT_Q6_K) codes_q6(w, sc->sw[p >> 1], p & 1, v);
    else codes_q45(FMT == FG_FMT_Q5_K, w, sc->sw[p >> 1], p & 1, v);
}

/* ---- the fp32 part, the same on both paths ----
 * For one (row, output), super-block b: the 8 VPDPWSSD of its 8 vectors
 * into one int32 accumulator, 16 lanes of 16 products each (exact), then
 *   F = fma(float(lanes) * d, s_b, F)        16 fp32 lanes, F = 0 at first
 * (d the block's scale, s_b the activations' scale); Q4_K/Q5_K's minimum
 * term, with n_j = -dmin m_j and x_j = s_b sum_j(q) for sub-block j, in 8
 * chains a_j = fma(n_j, x_j, a_j); at the end
 *   y = sum16(F) + (((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)))
 * (Q6_K: y = sum16(F)), sum16 a fixed tree (lanes_sum16). Each step is one
 * FMA per block and lane: no chain of dependent operations per block for
 * one row to wait on. */

/* F = fma(float(lanes) * d, s, F) */
T static INL __m512 flush(__m512i lanes, __m512 d, __m512 s, __m512 f) {
    return _mm512_fmadd_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(lanes), d), s, f);
}

/* The tree over 8 lanes: (((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7))). */
T static INL float lanes_sum8(__m256 a) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));   /* a0+a4 a1+a5 a2+a6 a3+a7 */
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));                                          /* (a0+a4)+(a2+a6), (a1+a5)+(a3+a7) */
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* 16 lanes: lane k + lane k + 8, then lanes_sum8. */
T static INL float lanes_sum16(__m512 a) {
    return lanes_sum8(_mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1)));
}

/* acc + the super-block's 16 lanes: 8 VPDPWSSD of a block's vectors v
 * with the activations x (8 x 32 words in the same order). */
T static INL __m512i dot8(const __m512i v[NVEC], const int16_t *x) {
    __m512i a = _mm512_dpwssd_epi32(_mm512_setzero_si512(), v[0], _mm512_loadu_si512(x));
    for (int k = 1; k < NVEC; k++) a = _mm512_dpwssd_epi32(a, v[k], _mm512_loadu_si512(x + 32 * k));
    return a;
}

/* ---- few rows ---- */

/* FEW_P weight rows (w, w + rb, ...; the first np real, the others
 * repeats) by R activation rows: y[r, p] (stride out). pf: the next
 * tile's rows, fetched a block's share at a time as this one runs (NULL:
 * none): the 4 rows' blocks are 4 streams the hardware prefetcher does not
 * keep ahead of on its own. */
T static INL void few_tile(const int FMT, const int R, const uint8_t *w, size_t rb, int np, const fg_i16_x *xq,
                           int out, float *y, const uint8_t *pf) {
    const int bb = blk_bytes(FMT), nb = xq->in / QK, MIN = FMT != FG_FMT_Q6_K;
    const uint8_t *wp[FEW_P];
    for (int p = 0; p < FEW_P; p++) wp[p] = w + (size_t)(p < np ? p : np - 1) * rb;
    __m512 f[FEW_P][FG_GEMM_I16_FEW_ROWS];   /* the 16 lanes of each (row, output) */
    __m512 am[2][FG_GEMM_I16_FEW_ROWS];      /* the minimum chains of outputs 2i, 2i + 1: lanes 8 (p & 1) + j */
    for (int r = 0; r < R; r++) {
        am[0][r] = am[1][r] = _mm512_setzero_ps();
        for (int p = 0; p < FEW_P; p++) f[p][r] = _mm512_setzero_ps();
    }
    const __m512i lane[FEW_P] = {_mm512_set1_epi32(0), _mm512_set1_epi32(1), _mm512_set1_epi32(2), _mm512_set1_epi32(3)};
    for (int b = 0; b < nb; b++) {
        if (pf) {
            const char *c = (const char *)pf + (size_t)b * FEW_P * bb;
            for (int l = 0; l < FEW_P * bb; l += 64) _mm_prefetch(c + l, _MM_HINT_T0);
        }
        const uint8_t *wb[FEW_P];
        for (int p = 0; p < FEW_P; p++) wb[p] = wp[p] + (size_t)b * bb;
        scales4 sc;
        blk4_scales(FMT, wb, &sc);
        __m512 sv[FG_GEMM_I16_FEW_ROWS];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) sv[r] = _mm512_set1_ps(xq->s[(size_t)r * nb + b]);
#pragma GCC unroll 4
        for (int p = 0; p < FEW_P; p++) {
            __m512i v[NVEC];
            blk_codes(FMT, wb[p], &sc, p, v);
            __m512 d = _mm512_permutexvar_ps(lane[p], _mm512_castps128_ps512(sc.d));
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) f[p][r] = flush(dot8(v, xq->q + (size_t)r * xq->in + (size_t)b * QK), d, sv[r], f[p][r]);
        }
        if (MIN)
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                __m512 xs = _mm512_broadcast_f32x8(_mm256_loadu_ps(xq->sum + ((size_t)r * nb + b) * NSUB));
                am[0][r] = _mm512_fmadd_ps(sc.ndm[0], xs, am[0][r]);
                am[1][r] = _mm512_fmadd_ps(sc.ndm[1], xs, am[1][r]);
            }
    }
#pragma GCC unroll 4
    for (int r = 0; r < R; r++) {
        float a[FEW_P];
        for (int p = 0; p < FEW_P; p++) a[p] = lanes_sum16(f[p][r]);
        if (MIN)   /* (constant indices: the chains stay in registers) */
            for (int q = 0; q < 2; q++) {
                a[2 * q] += lanes_sum8(_mm512_castps512_ps256(am[q][r]));
                a[2 * q + 1] += lanes_sum8(_mm512_extractf32x8_ps(am[q][r], 1));
            }
        for (int p = 0; p < np; p++) y[(size_t)r * out + p] = a[p];
    }
}

#define FEW_CASES(F, FMT) F(FMT, 1) F(FMT, 2) F(FMT, 3)
#define FEW_CALL(FMT, n) \
    case n: few_tile(FMT, n, w, rb, np, xq, out, y, pf); return;
T static void few_q4(int R, const uint8_t *w, size_t rb, int np, const fg_i16_x *xq, int out, float *y, const uint8_t *pf) {
    switch (R) { FEW_CASES(FEW_CALL, FG_FMT_Q4_K) default: FG_ASSERT(!"row count above FG_GEMM_I16_FEW_ROWS"); }
}
T static void few_q5(int R, const uint8_t *w, size_t rb, int np, const fg_i16_x *xq, int out, float *y, const uint8_t *pf) {
    switch (R) { FEW_CASES(FEW_CALL, FG_FMT_Q5_K) default: FG_ASSERT(!"row count above FG_GEMM_I16_FEW_ROWS"); }
}
T static void few_q6(int R, const uint8_t *w, size_t rb, int np, const fg_i16_x *xq, int out, float *y, const uint8_t *pf) {
    switch (R) { FEW_CASES(FEW_CALL, FG_FMT_Q6_K) default: FG_ASSERT(!"row count above FG_GEMM_I16_FEW_ROWS"); }
}

void fg_gemm_i16_few(int fmt, const uint8_t *W, const fg_i16_x *xq, int out, int o0, int o1, float *y) {
    size_t rb = (size_t)fg_fmt_row_bytes(fmt, (uint64_t)xq->in);
    for (int o = o0; o < o1; o += FEW_P) {
        int np = o1 - o < FEW_P ? o1 - o : FEW_P;
        const uint8_t *w = W + (size_t)o * rb, *pf = o + FEW_P < o1 ? w + PF_TILES * FEW_P * rb : NULL;
        if (fmt == FG_FMT_Q4_K) few_q4(xq->rows, w, rb, np, xq, out, y + o, pf);
        else if (fmt == FG_FMT_Q5_K) few_q5(xq->rows, w, rb, np, xq, out, y + o, pf);
        else few_q6(xq->rows, w, rb, np, xq, out, y + o, pf);
    }
}

/* ---- many rows ----
 * The pack of n outputs (rounded up to FEW_P): the vectors of every block,
 * [n][nb][8][32] words, then d [n][nb], then for Q4_K/Q5_K -dmin m_j of
 * outputs 2i and 2i + 1 side by side, [n / 2][nb][2][8], as few_tile holds
 * them. */
typedef struct {
    const int16_t *v;
    const float *d, *ndm;
} pack_ptrs;

static size_t pack_round(int n) { return (size_t)((n + FEW_P - 1) / FEW_P * FEW_P); }

static pack_ptrs pack_layout(int fmt, int nb, int n, void *pack) {
    size_t m = pack_round(n) * (size_t)nb;
    pack_ptrs pp = {.v = pack};
    pp.d = (const float *)(pp.v + m * QK);
    pp.ndm = has_min(fmt) ? pp.d + m : NULL;
    return pp;
}

size_t fg_gemm_i16_pack_bytes(int fmt, int in, int n_out) {
    size_t m = pack_round(n_out) * (size_t)(in / QK);
    return m * (QK * sizeof(int16_t) + sizeof(float) * (1 + (has_min(fmt) ? NSUB : 0)));
}

/* Outputs [0, np) of w into the pack (rows up to a multiple of FEW_P
 * repeat the last one; their outputs are never stored). */
T static INL void pack_rows(const int FMT, const uint8_t *w, size_t rb, int np, int nb, pack_ptrs pp) {
    const int bb = blk_bytes(FMT);
    for (int o4 = 0; o4 < np; o4 += FEW_P)
        for (int b = 0; b < nb; b++) {
            if (o4 + FEW_P < np) {   /* the next 4 rows' share, as few_tile fetches it */
                const char *c = (const char *)w + (size_t)(o4 + PF_TILES * FEW_P) * rb + (size_t)b * FEW_P * bb;
                for (int l = 0; l < FEW_P * bb; l += 64) _mm_prefetch(c + l, _MM_HINT_T0);
            }
            const uint8_t *wb[FEW_P];
            for (int p = 0; p < FEW_P; p++) wb[p] = w + (size_t)(o4 + p < np ? o4 + p : np - 1) * rb + (size_t)b * bb;
            scales4 sc;
            blk4_scales(FMT, wb, &sc);
            float d[FEW_P];
            _mm_storeu_ps(d, sc.d);
            for (int p = 0; p < FEW_P; p++) {
                size_t ob = (size_t)(o4 + p) * nb + b;
                __m512i v[NVEC];
                blk_codes(FMT, wb[p], &sc, p, v);
                for (int k = 0; k < NVEC; k++) _mm512_store_si512((int16_t *)pp.v + ob * QK + 32 * k, v[k]);
                ((float *)pp.d)[ob] = d[p];
            }
            if (FMT != FG_FMT_Q6_K)
                for (int q = 0; q < 2; q++)
                    _mm512_storeu_ps((float *)pp.ndm + (((size_t)o4 / 2 + q) * nb + b) * 2 * NSUB, sc.ndm[q]);
        }
}

/* P outputs (o0..) by R rows (r0..): the 16 lanes of each, the same
 * operations as few_tile's, then y = their sum16. Registers: P R int32 and
 * P R fp32 accumulators, P weight and R activation vectors. */
T static INL void many_tile(const int P, const int R, pack_ptrs pp, int nb, int o0, const fg_i16_x *xq, int r0,
                            int out, float *y) {
    __m512 f[MANY_P][MANY_R];
#pragma GCC unroll 8
    for (int p = 0; p < P; p++)
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) f[p][r] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m512i ai[MANY_P][MANY_R];
#pragma GCC unroll 8
        for (int p = 0; p < P; p++)
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) ai[p][r] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int k = 0; k < NVEC; k++) {
            __m512i xv[MANY_R];
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) xv[r] = _mm512_load_si512(xq->q + (size_t)(r0 + r) * xq->in + (size_t)b * QK + 32 * k);
#pragma GCC unroll 8
            for (int p = 0; p < P; p++) {
                __m512i wv = _mm512_load_si512(pp.v + ((size_t)(o0 + p) * nb + b) * QK + 32 * k);
#pragma GCC unroll 8
                for (int r = 0; r < R; r++) ai[p][r] = _mm512_dpwssd_epi32(ai[p][r], wv, xv[r]);
            }
        }
        __m512 sv[MANY_R];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) sv[r] = _mm512_set1_ps(xq->s[(size_t)(r0 + r) * nb + b]);
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) {
            __m512 d = _mm512_set1_ps(pp.d[(size_t)(o0 + p) * nb + b]);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++) f[p][r] = flush(ai[p][r], d, sv[r], f[p][r]);
        }
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; r++)
#pragma GCC unroll 8
        for (int p = 0; p < P; p++) y[(size_t)(r0 + r) * out + o0 + p] = lanes_sum16(f[p][r]);
}

/* Q4_K/Q5_K: y += the minimum term of outputs [0, n) by R rows (r0..),
 * two outputs per vector (lanes 8 (o & 1) + j), as few_tile. */
T static INL void many_min(const int R, pack_ptrs pp, int nb, int n, const fg_i16_x *xq, int r0, int out, float *y) {
    for (int o = 0; o < n; o += 2) {
        __m512 a[MANY_R];
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) a[r] = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            __m512 m = _mm512_loadu_ps(pp.ndm + ((size_t)o / 2 * nb + b) * 2 * NSUB);
#pragma GCC unroll 8
            for (int r = 0; r < R; r++)
                a[r] = _mm512_fmadd_ps(m, _mm512_broadcast_f32x8(_mm256_loadu_ps(xq->sum + ((size_t)(r0 + r) * nb + b) * NSUB)), a[r]);
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; r++) {
            float *yr = y + (size_t)(r0 + r) * out + o;
            yr[0] += lanes_sum8(_mm512_castps512_ps256(a[r]));
            if (o + 1 < n) yr[1] += lanes_sum8(_mm512_extractf32x8_ps(a[r], 1));
        }
    }
}

#define MANY_CASES(F) F(2, 1) F(2, 2) F(2, 3) F(2, 4) F(2, 5) F(1, 1) F(1, 2) F(1, 3) F(1, 4) F(1, 5)
#define MANY_CALL(p, r) \
    case p * 16 + r: many_tile(p, r, pp, nb, o0, xq, r0, out, y); return;
T static void many_any(int P, int R, pack_ptrs pp, int nb, int o0, const fg_i16_x *xq, int r0, int out, float *y) {
    switch (P * 16 + R) { MANY_CASES(MANY_CALL) default: FG_ASSERT(!"tile shape missing from MANY_CASES"); }
}
#define MIN_CALL(r) \
    case r: many_min(r, pp, nb, n, xq, r0, out, y); return;
T static void min_any(int R, pack_ptrs pp, int nb, int n, const fg_i16_x *xq, int r0, int out, float *y) {
    switch (R) { MIN_CALL(1) MIN_CALL(2) MIN_CALL(3) MIN_CALL(4) MIN_CALL(5) default: FG_ASSERT(!"row count above MANY_R"); }
}

T static void pack_q4(const uint8_t *w, size_t rb, int np, int nb, pack_ptrs pp) { pack_rows(FG_FMT_Q4_K, w, rb, np, nb, pp); }
T static void pack_q5(const uint8_t *w, size_t rb, int np, int nb, pack_ptrs pp) { pack_rows(FG_FMT_Q5_K, w, rb, np, nb, pp); }
T static void pack_q6(const uint8_t *w, size_t rb, int np, int nb, pack_ptrs pp) { pack_rows(FG_FMT_Q6_K, w, rb, np, nb, pp); }

void fg_gemm_i16_many(int fmt, const uint8_t *W, const fg_i16_x *xq, int out, int o0, int o1, float *y, void *pack) {
    const int nb = xq->in / QK, n = o1 - o0;
    const size_t rb = (size_t)fg_fmt_row_bytes(fmt, (uint64_t)xq->in);
    pack_ptrs pp = pack_layout(fmt, nb, n, pack);
    const uint8_t *w = W + (size_t)o0 * rb;
    if (fmt == FG_FMT_Q4_K) pack_q4(w, rb, n, nb, pp);
    else if (fmt == FG_FMT_Q5_K) pack_q5(w, rb, n, nb, pp);
    else pack_q6(w, rb, n, nb, pp);
    float *yo = y + o0;
    for (int r0 = 0; r0 < xq->rows; r0 += MANY_R) {
        int R = xq->rows - r0 < MANY_R ? xq->rows - r0 : MANY_R;
        for (int o = 0; o < n; o += MANY_P) many_any(n - o < MANY_P ? n - o : MANY_P, R, pp, nb, o, xq, r0, out, yo);
        if (has_min(fmt)) min_any(R, pp, nb, n, xq, r0, out, yo);
    }
}

int fg_gemm_i16_runs(int fmt, int in) {
    return i16_on && have_vnni() && (fmt == FG_FMT_Q4_K || fmt == FG_FMT_Q5_K || fmt == FG_FMT_Q6_K) && in > 0 &&
           in % QK == 0;
}
#else
int fg_gemm_i16_runs(int fmt, int in) {
    (void)fmt, (void)in;
    return 0;
}
size_t fg_gemm_i16_x_bytes(int rows, int in) {
    (void)rows, (void)in;
    return 0;
}
void fg_gemm_i16_x_init(fg_i16_x *xq, void *buf, int rows, int in) {
    (void)xq, (void)buf, (void)rows, (void)in;
}
void fg_gemm_i16_quantize(int fmt, const float *x, int r0, int r1, const fg_i16_x *xq) {
    (void)fmt, (void)x, (void)r0, (void)r1, (void)xq;
}
void fg_gemm_i16_few(int fmt, const uint8_t *W, const fg_i16_x *xq, int out, int o0, int o1, float *y) {
    (void)fmt, (void)W, (void)xq, (void)out, (void)o0, (void)o1, (void)y;
}
size_t fg_gemm_i16_pack_bytes(int fmt, int in, int n_out) {
    (void)fmt, (void)in, (void)n_out;
    return 0;
}
void fg_gemm_i16_many(int fmt, const uint8_t *W, const fg_i16_x *xq, int out, int o0, int o1, float *y, void *pack) {
    (void)fmt, (void)W, (void)xq, (void)out, (void)o0, (void)o1, (void)y, (void)pack;
}
#endif
