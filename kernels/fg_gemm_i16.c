/* fg_gemm_i16.c - integer-dot Linear on Q4_K, Q5_K and Q6_K blocks with
 * AVX512-VNNI (what it computes and its error bound: fg_gemm_i16.h). The
 * fp32 kernels (fg_gemm_q.c, fg_gemm.c) widen each 4-bit code to fp32
 * and are instruction-bound at decode; here a block's codes become int16
 * words (code times its 6- or 8-bit sub-block scale) in a few integer ops,
 * and one VPDPWSSD multiplies 32 of them into int32 lanes.
 *
 * Lane order. A block's 256 values become 8 vectors of 32 words, in the
 * order its bytes give them cheaply (even and odd bytes, low and high
 * nibbles: fmt_order below); the activations are quantized into the same
 * order, so a vector of weights meets its activations with one load.
 *
 * Two paths, the same numbers:
 *  - few rows (fg_gemm_i16_few): 4 weight rows at a time, each block read
 *    once from memory and widened in registers, its int32 lanes reduced to
 *    one sum per (row, output) per super-block;
 *  - many rows (fg_gemm_i16_many): a tile of 16-output groups widened once
 *    into a per-thread buffer, transposed so that a vector holds one word
 *    pair for each of 16 outputs; each activation pair is broadcast and a
 *    P x R register tile of int32 accumulators (one lane per output) holds
 *    the super-block's sums without any reduction.
 * Integer sums are exact, so how a path groups them does not matter; the
 * fp32 chain that follows (fg_gemm_i16.h) is written once per lane in both
 * (chain_d, chain_min), in the same order.
 *
 * No int32 lane overflows over one super-block (16 VPDPWSSD lanes, 16
 * products each; |q| <= 32767 as quantize rounds x / s with |x| <= amax):
 *   Q4_K: code <= 15, scale <= 63:  16 * 945 * 32767  = 4.95e8 < 2^31
 *   Q5_K: code <= 31, scale <= 63:  16 * 1953 * 32767 = 1.02e9 < 2^31
 *   Q6_K: code - 32 in [-32, 31], scale in [-128, 127], |product| <= 4096:
 *         16 * 4096 * 32767 = 2^31 - 2^16 < 2^31
 * (the few-rows path's reduction adds 16 such lanes: one super-block,
 * the same total bound, |sum| < 2^31); a Q4_K/Q5_K sub-block sum of q is
 * at most 32 * 32767 < 2^20, exact in fp32. */
#include "fg_gemm_i16.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "fg_fmt.h"
#include "fg_gemm.h"

#define QK 256           /* values per super-block */
#define NVEC 8           /* vectors of 32 words per super-block */
#define NSUB 8           /* Q4_K/Q5_K sub-blocks (32 values) per super-block */
#define GROUP 16         /* outputs per vector on the many-rows path */
#define FEW_P 4          /* weight rows per few-rows tile */
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
            n[k] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
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

/* ---- the fp32 part, one lane per (row, output): the same on both paths ----
 * Per super-block b, with D its int32 sum, d its scale and s_b the
 * activations' scale:  acc = fma(D, d s_b, acc), from acc = 0 in block
 * order. Q4_K/Q5_K's minimum term, with n_j = -dmin m_j and x_j = s_b
 * sum_j(q) for sub-block j: eight chains a_j = fma(n_j, x_j, a_j) in block
 * order, then
 *   y = acc + (((a0 + a4) + (a2 + a6)) + ((a1 + a5) + (a3 + a7)))
 * (Q6_K: y = acc). Each chain is one FMA per block, so that at one row the
 * kernel does not wait on a chain of nine per block. */

/* y += the minimum term of 8 chains, one per sub-block, as vectors. */
#define MIN_TREE(add, a) add(add(add(a[0], a[4]), add(a[2], a[6])), add(add(a[1], a[5]), add(a[3], a[7])))

/* The same tree over the 8 lanes of one chain vector. */
T static INL float min_tree8(__m256 a) {
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));   /* a0+a4 a1+a5 a2+a6 a3+a7 */
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));                                          /* (a0+a4)+(a2+a6), (a1+a5)+(a3+a7) */
    return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

/* acc += w . x over 32 word pairs broadcast from x: VPDPWSSD with the
 * broadcast in its memory operand (the compiler would load it apart). */
T static INL __m512i dp_bcast(__m512i acc, __m512i w, const int32_t *x) {
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*x));
    return acc;
}

/* ---- few rows ---- */

/* 4 accumulators [16 lanes] -> one vector of their 4 sums (exact). */
T static INL __m128i reduce4(__m512i a0, __m512i a1, __m512i a2, __m512i a3) {
    __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(a0, a1), _mm512_unpackhi_epi32(a0, a1));
    __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(a2, a3), _mm512_unpackhi_epi32(a2, a3));
    __m512i u = _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
    __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* FEW_P weight rows (w, w + rb, ...; the first np real, the others
 * repeats) by R activation rows: y[r, p] (stride out). pf: the next
 * tile's first row, fetched block by block as this one runs (NULL: none). */
T static INL void few_tile(const int FMT, const int R, const uint8_t *w, size_t rb, int np, const fg_i16_x *xq,
                           int out, float *y, const uint8_t *pf) {
    const int bb = blk_bytes(FMT), nb = xq->in / QK, MIN = FMT != FG_FMT_Q6_K;
    const uint8_t *wp[FEW_P];
    for (int p = 0; p < FEW_P; p++) wp[p] = w + (size_t)(p < np ? p : np - 1) * rb;
    __m128 acc[FG_GEMM_I16_FEW_ROWS];
    __m512 am[2][FG_GEMM_I16_FEW_ROWS];   /* the minimum chains of rows 2i, 2i + 1; lane 8 (p & 1) + j: sub-block j */
    for (int r = 0; r < R; r++) acc[r] = _mm_setzero_ps(), am[0][r] = am[1][r] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        const uint8_t *wb[FEW_P];
        for (int p = 0; p < FEW_P; p++) wb[p] = wp[p] + (size_t)b * bb;
        scales4 sc;
        blk4_scales(FMT, wb, &sc);
        __m512i ai[FEW_P][FG_GEMM_I16_FEW_ROWS];
#pragma GCC unroll 4
        for (int p = 0; p < FEW_P; p++) {
            if (pf)
                for (int l = 0; l < bb; l += 64) _mm_prefetch((const char *)pf + (size_t)p * rb + (size_t)b * bb + l, _MM_HINT_T0);
            __m512i v[NVEC];
            blk_codes(FMT, wb[p], &sc, p, v);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                const int16_t *xr = xq->q + (size_t)r * xq->in + (size_t)b * QK;
                __m512i a = _mm512_dpwssd_epi32(_mm512_setzero_si512(), v[0], _mm512_loadu_si512(xr));
                for (int k = 1; k < NVEC; k++) a = _mm512_dpwssd_epi32(a, v[k], _mm512_loadu_si512(xr + 32 * k));
                ai[p][r] = a;
            }
        }
#pragma GCC unroll 4
        for (int r = 0; r < R; r++) {
            const size_t rs = (size_t)r * nb + b;
            if (MIN) {
                __m512 xs = _mm512_broadcast_f32x8(_mm256_loadu_ps(xq->sum + rs * NSUB));
                am[0][r] = _mm512_fmadd_ps(sc.ndm[0], xs, am[0][r]);
                am[1][r] = _mm512_fmadd_ps(sc.ndm[1], xs, am[1][r]);
            }
            __m128i sum = reduce4(ai[0][r], ai[1][r], ai[2][r], ai[3][r]);
            acc[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(sum), _mm_mul_ps(sc.d, _mm_set1_ps(xq->s[rs])), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float a[4];
        _mm_storeu_ps(a, acc[r]);
        for (int p = 0; p < np; p++) {
            __m512 m = am[p >> 1][r];
            y[(size_t)r * out + p] =
                MIN ? a[p] + min_tree8(p & 1 ? _mm512_extractf32x8_ps(m, 1) : _mm512_castps512_ps256(m)) : a[p];
        }
    }
}

#define FEW_CASES(F, FMT) F(FMT, 1) F(FMT, 2) F(FMT, 3) F(FMT, 4)
#define FEW_CALL(FMT, n) \
    case n: few_tile(FMT, n, w, rb, np, xq, out, y, pf); return;
T static void few_q4(int R, const uint8_t *w, size_t rb, int np, const fg_i16_x *xq, int out, float *y, const uint8_t *pf) {
    switch (R) { FEW_CASES(FEW_CALL, FG_FMT_Q4_K) }
}
T static void few_q5(int R, const uint8_t *w, size_t rb, int np, const fg_i16_x *xq, int out, float *y, const uint8_t *pf) {
    switch (R) { FEW_CASES(FEW_CALL, FG_FMT_Q5_K) }
}
T static void few_q6(int R, const uint8_t *w, size_t rb, int np, const fg_i16_x *xq, int out, float *y, const uint8_t *pf) {
    switch (R) { FEW_CASES(FEW_CALL, FG_FMT_Q6_K) }
}

void fg_gemm_i16_few(int fmt, const uint8_t *W, const fg_i16_x *xq, int out, int o0, int o1, float *y) {
    size_t rb = (size_t)fg_fmt_row_bytes(fmt, (uint64_t)xq->in);
    for (int o = o0; o < o1; o += FEW_P) {
        int np = o1 - o < FEW_P ? o1 - o : FEW_P;
        const uint8_t *w = W + (size_t)o * rb, *pf = o + FEW_P < o1 ? w + FEW_P * rb : NULL;
        if (fmt == FG_FMT_Q4_K) few_q4(xq->rows, w, rb, np, xq, out, y + o, pf);
        else if (fmt == FG_FMT_Q5_K) few_q5(xq->rows, w, rb, np, xq, out, y + o, pf);
        else few_q6(xq->rows, w, rb, np, xq, out, y + o, pf);
    }
}

/* ---- many rows ----
 * The pack: per 16-output group, per super-block, pack_blk bytes: the
 * weights as int32 word pairs [128][16] (pair t of the lane order for
 * each output), d [16], and for Q4_K/Q5_K -dmin m [8][16]. */
#define PACK_W (NVEC * GROUP * GROUP * 4)
static size_t pack_blk(int fmt) { return PACK_W + GROUP * 4 + (has_min(fmt) ? NSUB * GROUP * 4 : 0); }

size_t fg_gemm_i16_pack_bytes(int fmt, int in, int n_out) {
    return (size_t)((n_out + GROUP - 1) / GROUP) * (size_t)(in / QK) * pack_blk(fmt);
}

/* 16 vectors of 16 dwords transposed in place: r[j] lane o = old r[o] lane j. */
T static INL void transpose16(__m512i r[16]) {
    __m512i t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
        r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
        r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
        r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
    }
    /* r[4a + c] now: 128-bit lane L holds dwords 4L.. of column c of rows 4a..4a+3
     * (c: 0 = dword 0, 1 = 1, 2 = 2, 3 = 3 within each lane) */
    for (int c = 0; c < 4; c++) {
        __m512i x0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x88), x1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xDD);
        __m512i x2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x88), x3 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xDD);
        t[c] = _mm512_shuffle_i32x4(x0, x2, 0x88);
        t[8 + c] = _mm512_shuffle_i32x4(x0, x2, 0xDD);
        t[4 + c] = _mm512_shuffle_i32x4(x1, x3, 0x88);
        t[12 + c] = _mm512_shuffle_i32x4(x1, x3, 0xDD);
    }
    for (int i = 0; i < 16; i++) r[i] = t[i];
}

/* One group: np (<= 16) weight rows from w into dst [nb][pack_blk] (rows
 * past np repeat the last one; their outputs are never stored). */
T static INL void pack_group(const int FMT, const uint8_t *w, size_t rb, int np, int nb, uint8_t *dst) {
    const int bb = blk_bytes(FMT);
    const size_t pb = pack_blk(FMT);
    for (int b = 0; b < nb; b++, dst += pb) {
        __m512i v[GROUP][NVEC];
        float *pd = (float *)(dst + PACK_W), ndm[GROUP][NSUB];
        for (int o4 = 0; o4 < GROUP; o4 += 4) {
            const uint8_t *wb[4];
            for (int p = 0; p < 4; p++) wb[p] = w + (size_t)(o4 + p < np ? o4 + p : np - 1) * rb + (size_t)b * bb;
            scales4 sc;
            blk4_scales(FMT, wb, &sc);
            for (int p = 0; p < 4; p++) blk_codes(FMT, wb[p], &sc, p, v[o4 + p]);
            _mm_storeu_ps(pd + o4, sc.d);
            if (FMT != FG_FMT_Q6_K) _mm512_storeu_ps(ndm[o4], sc.ndm[0]), _mm512_storeu_ps(ndm[o4 + 2], sc.ndm[1]);
        }
        for (int k = 0; k < NVEC; k++) {
            __m512i r[GROUP];
            for (int o = 0; o < GROUP; o++) r[o] = v[o][k];
            transpose16(r);
            for (int j = 0; j < GROUP; j++) _mm512_store_si512(dst + (size_t)(GROUP * k + j) * 64, r[j]);
        }
        if (FMT != FG_FMT_Q6_K)
            for (int j = 0; j < NSUB; j++)
                for (int o = 0; o < GROUP; o++) pd[GROUP * (1 + j) + o] = ndm[o][j];
    }
}

/* P groups (pk, pk + gs, ...; pb bytes a block) by R rows (r0..) of xq:
 * y[r, 16p + o] = the D chain, for o < np of the last group (16 for the
 * others). */
T static INL void many_tile(const int P, const int R, const uint8_t *pk, size_t gs, size_t pb, int np,
                            const fg_i16_x *xq, int r0, int out, float *y) {
    const int nb = xq->in / QK;
    __m512 af[2][6];
    for (int p = 0; p < P; p++)
        for (int r = 0; r < R; r++) af[p][r] = _mm512_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m512i ai[2][6];
        for (int p = 0; p < P; p++)
            for (int r = 0; r < R; r++) ai[p][r] = _mm512_setzero_si512();
        const int32_t *xr[6];
        for (int r = 0; r < R; r++) xr[r] = (const int32_t *)(xq->q + (size_t)(r0 + r) * xq->in + (size_t)b * QK);
        const uint8_t *wb = pk + (size_t)b * pb;
        for (int t = 0; t < QK / 2; t++)
            for (int p = 0; p < P; p++) {
                __m512i wv = _mm512_load_si512(wb + (size_t)p * gs + (size_t)t * 64);
                for (int r = 0; r < R; r++) ai[p][r] = dp_bcast(ai[p][r], wv, xr[r] + t);
            }
        for (int p = 0; p < P; p++) {
            __m512 d = _mm512_load_ps((const float *)(wb + (size_t)p * gs + PACK_W));
            for (int r = 0; r < R; r++)
                af[p][r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[p][r]),
                                           _mm512_mul_ps(d, _mm512_set1_ps(xq->s[(size_t)(r0 + r) * nb + b])), af[p][r]);
        }
    }
    for (int p = 0; p < P; p++) {
        __mmask16 m = p == P - 1 ? (__mmask16)((1u << np) - 1) : 0xFFFF;
        for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(y + (size_t)(r0 + r) * out + GROUP * p, m, af[p][r]);
    }
}

/* Q4_K/Q5_K: y += the minimum term (the chains of fg_gemm_i16.h's fp32
 * part, one lane per output) for P groups by R rows, R <= MIN_R. */
#define MIN_R 3
T static INL void many_min(const int P, const int R, const uint8_t *pk, size_t gs, int np, const fg_i16_x *xq,
                           int r0, int out, float *y) {
    const int nb = xq->in / QK;
    const size_t pb = pack_blk(FG_FMT_Q4_K);
    for (int p = 0; p < P; p++) {
        __m512 a[MIN_R][NSUB];
        for (int r = 0; r < R; r++)
            for (int j = 0; j < NSUB; j++) a[r][j] = _mm512_setzero_ps();
        for (int b = 0; b < nb; b++) {
            const float *n = (const float *)(pk + (size_t)p * gs + (size_t)b * pb + PACK_W) + GROUP;
            for (int j = 0; j < NSUB; j++) {
                __m512 nj = _mm512_load_ps(n + GROUP * j);
                for (int r = 0; r < R; r++)
                    a[r][j] = _mm512_fmadd_ps(nj, _mm512_set1_ps(xq->sum[((size_t)(r0 + r) * nb + b) * NSUB + j]), a[r][j]);
            }
        }
        __mmask16 m = p == P - 1 ? (__mmask16)((1u << np) - 1) : 0xFFFF;
        for (int r = 0; r < R; r++) {
            float *yr = y + (size_t)(r0 + r) * out + GROUP * p;
            _mm512_mask_storeu_ps(yr, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, yr), MIN_TREE(_mm512_add_ps, a[r])));
        }
    }
}

/* Register tiles of the many-rows path: P groups of 16 outputs by R
 * rows, P * R int32 and as many fp32 accumulators. */
#define MANY_P 2
#define MANY_R 6
#define MANY_CASES(F) F(2, 1) F(2, 2) F(2, 3) F(2, 4) F(2, 5) F(2, 6) F(1, 1) F(1, 2) F(1, 3) F(1, 4) F(1, 5) F(1, 6)
#define MANY_CALL(p, r) \
    case p * 16 + r: many_tile(p, r, pk, gs, pb, np, xq, r0, out, y); return;
T static void many_any(int P, int R, const uint8_t *pk, size_t gs, size_t pb, int np, const fg_i16_x *xq, int r0,
                       int out, float *y) {
    switch (P * 16 + R) { MANY_CASES(MANY_CALL) }
}
#define MIN_CASES(F) F(2, 1) F(2, 2) F(2, 3) F(1, 1) F(1, 2) F(1, 3)
#define MIN_CALL(p, r) \
    case p * 16 + r: many_min(p, r, pk, gs, np, xq, r0, out, y); return;
T static void min_any(int P, int R, const uint8_t *pk, size_t gs, int np, const fg_i16_x *xq, int r0, int out, float *y) {
    switch (P * 16 + R) { MIN_CASES(MIN_CALL) }
}

T static void pack_q4(const uint8_t *w, size_t rb, int np, int nb, uint8_t *dst) { pack_group(FG_FMT_Q4_K, w, rb, np, nb, dst); }
T static void pack_q5(const uint8_t *w, size_t rb, int np, int nb, uint8_t *dst) { pack_group(FG_FMT_Q5_K, w, rb, np, nb, dst); }
T static void pack_q6(const uint8_t *w, size_t rb, int np, int nb, uint8_t *dst) { pack_group(FG_FMT_Q6_K, w, rb, np, nb, dst); }

void fg_gemm_i16_many(int fmt, const uint8_t *W, const fg_i16_x *xq, int out, int o0, int o1, float *y, void *pack) {
    const int nb = xq->in / QK, ng = (o1 - o0 + GROUP - 1) / GROUP;
    const size_t rb = (size_t)fg_fmt_row_bytes(fmt, (uint64_t)xq->in), pb = pack_blk(fmt), gs = (size_t)nb * pb;
    uint8_t *pk = pack;
    for (int g = 0; g < ng; g++) {
        int o = o0 + GROUP * g, np = o1 - o < GROUP ? o1 - o : GROUP;
        if (fmt == FG_FMT_Q4_K) pack_q4(W + (size_t)o * rb, rb, np, nb, pk + g * gs);
        else if (fmt == FG_FMT_Q5_K) pack_q5(W + (size_t)o * rb, rb, np, nb, pk + g * gs);
        else pack_q6(W + (size_t)o * rb, rb, np, nb, pk + g * gs);
    }
    for (int r0 = 0; r0 < xq->rows; r0 += MANY_R) {
        int R = xq->rows - r0 < MANY_R ? xq->rows - r0 : MANY_R;
        for (int g = 0; g < ng; g += MANY_P) {
            int P = ng - g < MANY_P ? ng - g : MANY_P, o = o0 + GROUP * g, last = o0 + GROUP * (g + P);
            int np = GROUP - (last > o1 ? last - o1 : 0);
            many_any(P, R, pk + g * gs, gs, pb, np, xq, r0, out, y + o);
            if (has_min(fmt))
                for (int r = r0; r < r0 + R; r += MIN_R)
                    min_any(P, r0 + R - r < MIN_R ? r0 + R - r : MIN_R, pk + g * gs, gs, np, xq, r, out, y + o);
        }
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
