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

#define T __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma,avx2")))
#define INL inline __attribute__((always_inline))

static int have_vnni(void) {
    static int c = -1;
    if (c < 0)
        c = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
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

/* ---- a block as 8 vectors of int16 weights ---- */

/* Q4_K (Q5 = 0) and Q5_K: v[k] = code * scale in the lane order; *d the
 * block's d, *ndm lane j = -(dmin * m_j) (exact: an fp16 times a 6-bit
 * integer). The 12 scale bytes unpack as fg_fmt.c's k_scale_min, on 32-bit
 * words: sc 0-3 and m 0-3 the low 6 bits of bytes 0-3 and 4-7, sc 4-7 and
 * m 4-7 the nibbles of bytes 8-11 with the top 2 bits of 0-3 and 4-7. */
T static INL void prep_q45(const int Q5, const uint8_t *w, __m512i v[NVEC], float *d, __m256 *ndm) {
    /* words i < 16 take sub-block 4s + h (s: the load, h: the nibble),
     * words >= 16 sub-block 4s + h + 2 */
    static const int16_t sidx[4][32] = {
        {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2},
        {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3},
        {4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6},
        {5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7}};
    /* Q5_K: the fifth bit of vector v's word i is bit j of qh byte l (j its
     * sub-block, l its place in it): qh loaded as words into both halves,
     * the bit tested is j, or 8 + j for the odd bytes */
    static const uint16_t hbit[NVEC][2] = {{1 << 0, 1 << 2},   {1 << 8, 1 << 10},  {1 << 1, 1 << 3},
                                           {1 << 9, 1 << 11},  {1 << 4, 1 << 6},   {1 << 12, 1 << 14},
                                           {1 << 5, 1 << 7},   {1 << 13, 1 << 15}};
    uint32_t u0, u1, u2;
    memcpy(&u0, w + 4, 4), memcpy(&u1, w + 8, 4), memcpy(&u2, w + 12, 4);
    uint32_t sl = u0 & 0x3f3f3f3fu, ml = u1 & 0x3f3f3f3fu;
    uint32_t sh = (u2 & 0x0f0f0f0fu) | ((u0 >> 2) & 0x30303030u), mh = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 2) & 0x30303030u);
    __m128i sm = _mm_set_epi32((int)mh, (int)ml, (int)sh, (int)sl);   /* bytes: sc 0-7, m 0-7 */
    __m512i scw = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(sm));
    *d = f16(w);
    *ndm = _mm256_mul_ps(_mm256_set1_ps(-f16(w + 2)), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8))));
    const uint8_t *qs = w + (Q5 ? 48 : 16);
    const __m512i m4 = _mm512_set1_epi16(15), k16 = _mm512_set1_epi16(16);
    __m512i h = Q5 ? _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 16))) : _mm512_setzero_si512();
    for (int s = 0; s < 2; s++) {
        __m512i a = _mm512_loadu_si512(qs + 64 * s);
        __m512i c[4] = {_mm512_and_si512(a, m4), _mm512_and_si512(_mm512_srli_epi16(a, 8), m4),
                        _mm512_and_si512(_mm512_srli_epi16(a, 4), m4), _mm512_srli_epi16(a, 12)};
        __m512i sc0 = _mm512_permutexvar_epi16(_mm512_loadu_si512(sidx[2 * s]), scw);
        __m512i sc1 = _mm512_permutexvar_epi16(_mm512_loadu_si512(sidx[2 * s + 1]), scw);
        for (int k = 0; k < 4; k++) {
            int vi = 4 * s + k;
            if (Q5) {
                __m512i bit = _mm512_inserti64x4(_mm512_set1_epi16((short)hbit[vi][0]),
                                                 _mm256_set1_epi16((short)hbit[vi][1]), 1);
                c[k] = _mm512_mask_add_epi16(c[k], _mm512_test_epi16_mask(h, bit), c[k], k16);
            }
            v[vi] = _mm512_mullo_epi16(c[k], k < 2 ? sc0 : sc1);
        }
    }
}

/* Q6_K: v[k] = (code - 32) * scale in the lane order, *d the block's d.
 * ql load g gives the low nibbles; the 2 high bits of byte l of its run
 * are bits 2j of qh[32g + l] (j the run within the 128: 0, 1 in the low
 * nibbles' halves, 2, 3 in the high ones'), shifted to bits 4-5 by a
 * per-half variable shift; a word's 128-bit lane is one 16-value scale. */
T static INL void prep_q6(const uint8_t *w, __m512i v[NVEC], float *d) {
    static const int16_t qidx[4][32] = {
        {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
        {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
        {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
        {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13,
         14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};
    /* right shifts of qh (even bytes: qh << 4) per half for the four vectors */
    static const uint16_t cnt[4][2] = {{0, 2}, {4, 6}, {4, 6}, {8, 10}};
    __m512i sc = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(w + 192))));
    *d = f16(w + 208);
    const __m512i m4 = _mm512_set1_epi16(15), m30 = _mm512_set1_epi16(0x30), k32 = _mm512_set1_epi16(32);
    for (int g = 0; g < 2; g++) {
        __m512i a = _mm512_loadu_si512(w + 64 * g);
        __m512i hw = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w + 128 + 32 * g)));
        __m512i h4 = _mm512_slli_epi16(hw, 4);
        __m512i c[4] = {_mm512_and_si512(a, m4), _mm512_and_si512(_mm512_srli_epi16(a, 8), m4),
                        _mm512_and_si512(_mm512_srli_epi16(a, 4), m4), _mm512_srli_epi16(a, 12)};
        __m512i sc0 = _mm512_permutexvar_epi16(_mm512_loadu_si512(qidx[2 * g]), sc);
        __m512i sc1 = _mm512_permutexvar_epi16(_mm512_loadu_si512(qidx[2 * g + 1]), sc);
        for (int k = 0; k < 4; k++) {
            __m512i n = _mm512_inserti64x4(_mm512_set1_epi16((short)cnt[k][0]), _mm256_set1_epi16((short)cnt[k][1]), 1);
            __m512i hi = _mm512_srlv_epi16(k & 1 ? hw : h4, n);
            __m512i q = _mm512_ternarylogic_epi32(c[k], hi, m30, 0xF8);   /* c | (hi & 0x30) */
            v[4 * g + k] = _mm512_mullo_epi16(_mm512_sub_epi16(q, k32), k < 2 ? sc0 : sc1);
        }
    }
}

T static INL void prep(const int FMT, const uint8_t *w, __m512i v[NVEC], float *d, __m256 *ndm) {
    if (FMT == FG_FMT_Q6_K) prep_q6(w, v, d);
    else prep_q45(FMT == FG_FMT_Q5_K, w, v, d, ndm);
}

/* ---- the fp32 chain, one lane per (row, output): the same on both paths ---- */

/* acc = fma(D, d s, acc): D the super-block's int32 sum */
T static INL __m512 chain_d(__m512i sum, __m512 d, float s, __m512 acc) {
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(d, _mm512_set1_ps(s)), acc);
}
T static INL __m128 chain_d4(__m128i sum, __m128 d, float s, __m128 acc) {
    return _mm_fmadd_ps(_mm_cvtepi32_ps(sum), _mm_mul_ps(d, _mm_set1_ps(s)), acc);
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
    const int bb = blk_bytes(FMT), nb = xq->in / QK;
    const uint8_t *wp[FEW_P];
    for (int p = 0; p < FEW_P; p++) wp[p] = w + (size_t)(p < np ? p : np - 1) * rb;
    __m128 acc[FG_GEMM_I16_FEW_ROWS];
    for (int r = 0; r < R; r++) acc[r] = _mm_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m512i ai[FEW_P][FG_GEMM_I16_FEW_ROWS];
        float d[FEW_P];
        __m256 ndm[FEW_P];
        for (int p = 0; p < FEW_P; p++) {
            if (pf)
                for (int l = 0; l < bb; l += 64) _mm_prefetch((const char *)pf + (size_t)p * rb + (size_t)b * bb + l, _MM_HINT_T0);
            __m512i v[NVEC];
            prep(FMT, wp[p] + (size_t)b * bb, v, &d[p], &ndm[p]);
            for (int r = 0; r < R; r++) {
                const int16_t *xr = xq->q + (size_t)r * xq->in + (size_t)b * QK;
                __m512i a = _mm512_dpwssd_epi32(_mm512_setzero_si512(), v[0], _mm512_loadu_si512(xr));
                for (int k = 1; k < NVEC; k++) a = _mm512_dpwssd_epi32(a, v[k], _mm512_loadu_si512(xr + 32 * k));
                ai[p][r] = a;
            }
        }
        __m128 d4 = _mm_loadu_ps(d), nd[NSUB];
        if (FMT != FG_FMT_Q6_K) {   /* ndm [p][j] -> nd[j][p] */
            __m256 t0 = _mm256_unpacklo_ps(ndm[0], ndm[1]), t1 = _mm256_unpackhi_ps(ndm[0], ndm[1]);
            __m256 t2 = _mm256_unpacklo_ps(ndm[2], ndm[3]), t3 = _mm256_unpackhi_ps(ndm[2], ndm[3]);
            __m256 u[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                           _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
            for (int j = 0; j < 4; j++) nd[j] = _mm256_castps256_ps128(u[j]), nd[j + 4] = _mm256_extractf128_ps(u[j], 1);
        }
        for (int r = 0; r < R; r++) {
            const size_t rs = (size_t)r * nb + b;
            acc[r] = chain_d4(reduce4(ai[0][r], ai[1][r], ai[2][r], ai[3][r]), d4, xq->s[rs], acc[r]);
            if (FMT != FG_FMT_Q6_K)
                for (int j = 0; j < NSUB; j++) acc[r] = _mm_fmadd_ps(nd[j], _mm_set1_ps(xq->sum[rs * NSUB + j]), acc[r]);
        }
    }
    for (int r = 0; r < R; r++) {
        float a[4];
        _mm_storeu_ps(a, acc[r]);
        for (int p = 0; p < np; p++) y[(size_t)r * out + p] = a[p];
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

/* One group: np (<= 16) weight rows from w into dst [nb][pack_blk]. */
T static INL void pack_group(const int FMT, const uint8_t *w, size_t rb, int np, int nb, uint8_t *dst) {
    const int bb = blk_bytes(FMT);
    const size_t pb = pack_blk(FMT);
    for (int b = 0; b < nb; b++, dst += pb) {
        __m512i v[GROUP][NVEC];
        float d[GROUP], ndm[GROUP][NSUB];
        for (int o = 0; o < GROUP; o++) {
            if (o >= np) {
                for (int k = 0; k < NVEC; k++) v[o][k] = _mm512_setzero_si512();
                d[o] = 0;
                memset(ndm[o], 0, sizeof ndm[o]);
                continue;
            }
            __m256 nm = _mm256_setzero_ps();
            prep(FMT, w + (size_t)o * rb + (size_t)b * bb, v[o], &d[o], &nm);
            _mm256_storeu_ps(ndm[o], nm);
        }
        for (int k = 0; k < NVEC; k++) {
            __m512i r[GROUP];
            for (int o = 0; o < GROUP; o++) r[o] = v[o][k];
            transpose16(r);
            for (int j = 0; j < GROUP; j++) _mm512_store_si512(dst + (size_t)(GROUP * k + j) * 64, r[j]);
        }
        float *pd = (float *)(dst + PACK_W);
        memcpy(pd, d, sizeof d);
        if (FMT != FG_FMT_Q6_K)
            for (int j = 0; j < NSUB; j++)
                for (int o = 0; o < GROUP; o++) pd[GROUP * (1 + j) + o] = ndm[o][j];
    }
}

/* P groups (pk, pk + gs, ...) by R rows (r0..) of xq: y[r, 16p + o] for
 * o < np of the last group (16 for the others). */
T static INL void many_tile(const int FMT, const int P, const int R, const uint8_t *pk, size_t gs, int np,
                            const fg_i16_x *xq, int r0, int out, float *y) {
    const int nb = xq->in / QK;
    const size_t pb = pack_blk(FMT);
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
#pragma GCC unroll 2
        for (int t = 0; t < QK / 2; t++) {
            for (int p = 0; p < P; p++) {
                __m512i wv = _mm512_load_si512(wb + (size_t)p * gs + (size_t)t * 64);
                for (int r = 0; r < R; r++) ai[p][r] = _mm512_dpwssd_epi32(ai[p][r], wv, _mm512_set1_epi32(xr[r][t]));
            }
        }
        for (int p = 0; p < P; p++) {
            const float *pd = (const float *)(wb + (size_t)p * gs + PACK_W);
            __m512 d = _mm512_load_ps(pd);
            for (int r = 0; r < R; r++) {
                const size_t rs = (size_t)(r0 + r) * nb + b;
                af[p][r] = chain_d(ai[p][r], d, xq->s[rs], af[p][r]);
                if (FMT != FG_FMT_Q6_K)
                    for (int j = 0; j < NSUB; j++)
                        af[p][r] = _mm512_fmadd_ps(_mm512_load_ps(pd + GROUP * (1 + j)), _mm512_set1_ps(xq->sum[rs * NSUB + j]), af[p][r]);
            }
        }
    }
    for (int p = 0; p < P; p++) {
        __mmask16 m = p == P - 1 ? (__mmask16)((1u << np) - 1) : 0xFFFF;
        for (int r = 0; r < R; r++) _mm512_mask_storeu_ps(y + (size_t)(r0 + r) * out + GROUP * p, m, af[p][r]);
    }
}

#define MANY_R 6
#define MANY_CASES(F, FMT) F(FMT, 2, 1) F(FMT, 2, 2) F(FMT, 2, 3) F(FMT, 2, 4) F(FMT, 2, 5) F(FMT, 2, 6) \
    F(FMT, 1, 1) F(FMT, 1, 2) F(FMT, 1, 3) F(FMT, 1, 4) F(FMT, 1, 5) F(FMT, 1, 6)
#define MANY_CALL(FMT, p, r) \
    case p * 16 + r: many_tile(FMT, p, r, pk, gs, np, xq, r0, out, y); return;
T static void many_q4(int P, int R, const uint8_t *pk, size_t gs, int np, const fg_i16_x *xq, int r0, int out, float *y) {
    switch (P * 16 + R) { MANY_CASES(MANY_CALL, FG_FMT_Q4_K) }
}
T static void many_q5(int P, int R, const uint8_t *pk, size_t gs, int np, const fg_i16_x *xq, int r0, int out, float *y) {
    switch (P * 16 + R) { MANY_CASES(MANY_CALL, FG_FMT_Q5_K) }
}
T static void many_q6(int P, int R, const uint8_t *pk, size_t gs, int np, const fg_i16_x *xq, int r0, int out, float *y) {
    switch (P * 16 + R) { MANY_CASES(MANY_CALL, FG_FMT_Q6_K) }
}

T static void pack_q4(const uint8_t *w, size_t rb, int np, int nb, uint8_t *dst) { pack_group(FG_FMT_Q4_K, w, rb, np, nb, dst); }
T static void pack_q5(const uint8_t *w, size_t rb, int np, int nb, uint8_t *dst) { pack_group(FG_FMT_Q5_K, w, rb, np, nb, dst); }
T static void pack_q6(const uint8_t *w, size_t rb, int np, int nb, uint8_t *dst) { pack_group(FG_FMT_Q6_K, w, rb, np, nb, dst); }

void fg_gemm_i16_many(int fmt, const uint8_t *W, const fg_i16_x *xq, int out, int o0, int o1, float *y, void *pack) {
    const int nb = xq->in / QK, ng = (o1 - o0 + GROUP - 1) / GROUP;
    const size_t rb = (size_t)fg_fmt_row_bytes(fmt, (uint64_t)xq->in), gs = (size_t)nb * pack_blk(fmt);
    uint8_t *pk = pack;
    for (int g = 0; g < ng; g++) {
        int o = o0 + GROUP * g, np = o1 - o < GROUP ? o1 - o : GROUP;
        if (fmt == FG_FMT_Q4_K) pack_q4(W + (size_t)o * rb, rb, np, nb, pk + g * gs);
        else if (fmt == FG_FMT_Q5_K) pack_q5(W + (size_t)o * rb, rb, np, nb, pk + g * gs);
        else pack_q6(W + (size_t)o * rb, rb, np, nb, pk + g * gs);
    }
    for (int r0 = 0; r0 < xq->rows; r0 += MANY_R) {
        int R = xq->rows - r0 < MANY_R ? xq->rows - r0 : MANY_R;
        for (int g = 0; g < ng; g += 2) {
            int P = ng - g < 2 ? 1 : 2, o = o0 + GROUP * g, last = o0 + GROUP * (g + P);
            int np = GROUP - (last > o1 ? last - o1 : 0);
            if (fmt == FG_FMT_Q4_K) many_q4(P, R, pk + g * gs, gs, np, xq, r0, out, y + o);
            else if (fmt == FG_FMT_Q5_K) many_q5(P, R, pk + g * gs, gs, np, xq, r0, out, y + o);
            else many_q6(P, R, pk + g * gs, gs, np, xq, r0, out, y + o);
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
