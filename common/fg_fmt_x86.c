/* fg_fmt_x86.c - AVX-512 forms of the hot dequantizers (Q8_0, Q4_0, Q4_K,
 * Q5_K, Q6_K: what Q4_K_M, Q5_K_M, Q8_0 and Q4_0 files are made of). Each
 * computes, per value, the same IEEE operations in the same order as the
 * portable form in fg_fmt.c (a scale widened from fp16 and multiplied by a
 * 6-bit scale in scalar fp32, then per lane one multiply and at most one
 * subtraction, each rounded), so the bits are the same; fmt_vs_ggufpy checks
 * both forms against gguf-py. 16 values per instruction: a block's nibbles
 * or bytes widened to 32-bit lanes, converted, scaled, stored. */
#include "fg_fmt.h"

#include <string.h>

#include "fg_fp16.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define T512 __attribute__((target("avx512f,avx512bw,avx512vl,f16c")))

/* An fp16 scale, exactly (F16C). */
__attribute__((target("f16c"))) static inline float f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return _cvtsh_ss(h);
}

/* 16 bytes -> 16 fp32 lanes of their values (unsigned). */
T512 static inline __m512 u8_ps(__m128i b) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(b)); }

T512 static void q8_0(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / 32; b++, src += 34, dst += 32) {
        __m512 d = _mm512_set1_ps(f16(src));
        for (int h = 0; h < 2; h++) {
            __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(src + 2 + 16 * h))));
            _mm512_storeu_ps(dst + 16 * h, _mm512_mul_ps(q, d));
        }
    }
}

T512 static void q4_0(const uint8_t *src, float *dst, uint64_t n) {
    const __m128i m4 = _mm_set1_epi8(15);
    const __m512i eight = _mm512_set1_epi32(8);
    for (uint64_t b = 0; b < n / 32; b++, src += 18, dst += 32) {
        __m512 d = _mm512_set1_ps(f16(src));
        __m128i qs = _mm_loadu_si128((const __m128i *)(src + 2));
        __m128i lo = _mm_and_si128(qs, m4), hi = _mm_and_si128(_mm_srli_epi16(qs, 4), m4);
        __m512 ql = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(lo), eight));
        __m512 qh = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(hi), eight));
        _mm512_storeu_ps(dst, _mm512_mul_ps(d, ql));
        _mm512_storeu_ps(dst + 16, _mm512_mul_ps(d, qh));
    }
}

/* The 8 six-bit scales and mins of a Q4_K/Q5_K block (fg_fmt.c's). */
static void k_scale_min(const uint8_t *s, int *sc, int *mn) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[4 + j] & 63;
        sc[4 + j] = (s[8 + j] & 15) | ((s[j] >> 2) & 48);
        mn[4 + j] = (s[8 + j] >> 4) | ((s[4 + j] >> 2) & 48);
    }
}

/* Q4_K and Q5_K: sub-block s of 32 values from nibble s % 2 of qs[32 (s / 2) ..],
 * with Q5_K's fifth bit (bit s of qh[l]) when qh is set. */
T512 static inline void k_sub(const uint8_t *q, const uint8_t *qh, int s, float ds, float dm, float *dst) {
    const __m128i m4 = _mm_set1_epi8(15), one = _mm_set1_epi8(1);
    __m512 vds = _mm512_set1_ps(ds), vdm = _mm512_set1_ps(dm);
    for (int h = 0; h < 2; h++) {
        __m128i b = _mm_loadu_si128((const __m128i *)(q + 16 * h));
        __m128i v = _mm_and_si128(s % 2 ? _mm_srli_epi16(b, 4) : b, m4);
        if (qh) {
            __m128i hb = _mm_and_si128(_mm_srl_epi16(_mm_loadu_si128((const __m128i *)(qh + 16 * h)),
                                                     _mm_cvtsi32_si128(s)), one);
            v = _mm_or_si128(v, _mm_slli_epi16(hb, 4));
        }
        _mm512_storeu_ps(dst + 16 * h, _mm512_sub_ps(_mm512_mul_ps(vds, u8_ps(v)), vdm));
    }
}

T512 static void q4_k(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / 256; b++, src += 144, dst += 256) {
        float d = f16(src), dmin = f16(src + 2);
        int sc[8], mn[8];
        k_scale_min(src + 4, sc, mn);
        for (int s = 0; s < 8; s++) k_sub(src + 16 + 32 * (s / 2), NULL, s, d * (float)sc[s], dmin * (float)mn[s], dst + 32 * s);
    }
}

T512 static void q5_k(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / 256; b++, src += 176, dst += 256) {
        float d = f16(src), dmin = f16(src + 2);
        int sc[8], mn[8];
        k_scale_min(src + 4, sc, mn);
        for (int s = 0; s < 8; s++)
            k_sub(src + 48 + 32 * (s / 2), src + 16, s, d * (float)sc[s], dmin * (float)mn[s], dst + 32 * s);
    }
}

/* Q6_K: values 128g + 32j + l: low nibble (j / 2) of ql[64g + 32 (j % 2) + l],
 * high bits 2j of qh[32g + l]; q - 32 times d * scale[8g + 2j + l / 16]. */
T512 static void q6_k(const uint8_t *src, float *dst, uint64_t n) {
    const __m128i m4 = _mm_set1_epi8(15), m2 = _mm_set1_epi8(3);
    const __m512i k32 = _mm512_set1_epi32(32);
    for (uint64_t b = 0; b < n / 256; b++, src += 210, dst += 256) {
        const uint8_t *ql = src, *qh = src + 128;
        const int8_t *sc = (const int8_t *)(src + 192);
        float d = f16(src + 208);
        for (int g = 0; g < 2; g++)
            for (int j = 0; j < 4; j++)
                for (int h = 0; h < 2; h++) {
                    __m128i lb = _mm_loadu_si128((const __m128i *)(ql + 64 * g + 32 * (j % 2) + 16 * h));
                    __m128i lo = _mm_and_si128(j / 2 ? _mm_srli_epi16(lb, 4) : lb, m4);
                    __m128i hb = _mm_loadu_si128((const __m128i *)(qh + 32 * g + 16 * h));
                    __m128i hi = _mm_and_si128(_mm_srl_epi16(hb, _mm_cvtsi32_si128(2 * j)), m2);
                    __m512i q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_or_si128(lo, _mm_slli_epi16(hi, 4))), k32);
                    __m512 ds = _mm512_set1_ps(d * (float)sc[8 * g + 2 * j + h]);
                    _mm512_storeu_ps(dst + 128 * g + 32 * j + 16 * h, _mm512_mul_ps(ds, _mm512_cvtepi32_ps(q)));
                }
    }
}

static int have512(void) {
    static int c = -1;
    if (c < 0)
        c = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    /* (every AVX-512 CPU has F16C; clang's builtin does not take "f16c") */
    return c;
}

fg_fmt_fn fg_fmt__fast(int fmt) {
    if (!have512()) return NULL;
    switch (fmt) {
    case FG_FMT_Q8_0: return q8_0;
    case FG_FMT_Q4_0: return q4_0;
    case FG_FMT_Q4_K: return q4_k;
    case FG_FMT_Q5_K: return q5_k;
    case FG_FMT_Q6_K: return q6_k;
    default: return NULL;
    }
}
#else
fg_fmt_fn fg_fmt__fast(int fmt) {
    (void)fmt;
    return NULL;
}
#endif
