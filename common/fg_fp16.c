/* fg_fp16.c - fp16 conversion: portable bit-exact code plus an F16C fast path
 * chosen at run time. Both round to nearest even and keep NaN/Inf. */
#include "fg_fp16.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define FG_X86 1
#endif

static int force_portable;

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

static float half_to_float_portable(fg_half h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    if (exp == 0) {
        if (man == 0) return u2f(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31) return u2f(sign | 0x7f800000u | (man << 13));
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

static fg_half float_to_half_portable(float f) {
    uint32_t x = f2u(f);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) /* Inf or NaN (keep a quiet NaN) */
        return (fg_half)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 | ((ax >> 13) & 0x3ff) : 0));
    if (ax >= 0x477ff000u) /* rounds to >= 65520: overflow to Inf */
        return (fg_half)(sign | 0x7c00);
    if (ax < 0x38800000u) { /* below the smallest normal half: subnormal or 0 */
        /* add 0.5 (as a float) so the FPU's round-to-nearest-even does the work */
        float v = u2f(ax) + 0.5f;
        return (fg_half)(sign | (f2u(v) - 0x3f000000u));
    }
    uint32_t mant_odd = (ax >> 13) & 1;
    ax += 0xc8000fffu + mant_odd; /* rebias exponent (-112<<23) and round */
    return (fg_half)(sign | (ax >> 13));
}

#ifdef FG_X86
__attribute__((target("f16c"))) static void h2f_f16c(const fg_half *s, float *d, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    for (; i < n; i++) d[i] = half_to_float_portable(s[i]);
}
__attribute__((target("f16c,avx"))) static void f2h_f16c(const float *s, fg_half *d, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++) d[i] = float_to_half_portable(s[i]);
}
__attribute__((target("f16c,avx"))) static void round_f16c(float *x, size_t n) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
        _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
    }
    for (; i < n; i++) x[i] = half_to_float_portable(float_to_half_portable(x[i]));
}
#endif

int fg_fp16_have_f16c(void) {
#ifdef FG_X86
    static int cached = -1;
    if (cached < 0) {
        /* F16C from cpuid: clang (which builds the fuzz targets) has no
         * "f16c" for __builtin_cpu_supports; "avx" also checks the OS. */
        unsigned a, b, c, d;
        cached = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) && __builtin_cpu_supports("avx");
    }
    return cached && !force_portable;
#else
    return 0;
#endif
}

void fg_fp16_force_portable(int on) { force_portable = on; }

float fg_half_to_float(fg_half h) { return half_to_float_portable(h); }
fg_half fg_float_to_half(float f) { return float_to_half_portable(f); }
float fg_bf16_to_float(uint16_t b) { return u2f((uint32_t)b << 16); }

void fg_half_to_float_n(const fg_half *src, float *dst, size_t n) {
#ifdef FG_X86
    if (fg_fp16_have_f16c()) { h2f_f16c(src, dst, n); return; }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = half_to_float_portable(src[i]);
}

void fg_float_to_half_n(const float *src, fg_half *dst, size_t n) {
#ifdef FG_X86
    if (fg_fp16_have_f16c()) { f2h_f16c(src, dst, n); return; }
#endif
    for (size_t i = 0; i < n; i++) dst[i] = float_to_half_portable(src[i]);
}

void fg_round_fp16_n(float *x, size_t n) {
#ifdef FG_X86
    if (fg_fp16_have_f16c()) { round_f16c(x, n); return; }
#endif
    for (size_t i = 0; i < n; i++) x[i] = half_to_float_portable(float_to_half_portable(x[i]));
}
