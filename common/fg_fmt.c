/* fg_fmt.c - the format table and the dequantizers (see fg_fmt.h). Each
 * block function follows ggml-common.h's layout and computes every value
 * with the operations, in the order, of gguf-py's numpy dequantize_blocks:
 * a scale widened from fp16, products and sums in fp32, one rounding each
 * (built with -ffp-contract=off: an FMA would round once for two). They are
 * written as plain loops over a block for the compiler's vectoriser. */
#include "fg_fmt.h"

#include <stdio.h>
#include <string.h>

#include "fg_common.h"
#include "fg_fp16.h"
#include "fg_q4.h"

#define QK_K 256

static inline float f16(const uint8_t *p) {
    uint16_t h;
    memcpy(&h, p, 2);
    return fg_half_to_float(h);
}

static void f32_to_f32(const uint8_t *src, float *dst, uint64_t n) { memcpy(dst, src, (size_t)n * 4); }

static void f16_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    fg_half_to_float_n((const fg_half *)(const void *)src, dst, (size_t)n);
}

static void bf16_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[2 * i] << 16 | (uint32_t)src[2 * i + 1] << 24;
        memcpy(&dst[i], &u, 4);
    }
}

/* Q8_0: fp16 d, 32 int8 q; x = q * d. */
static void q8_0_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / 32; b++, src += 34, dst += 32) {
        float d = f16(src);
        for (int j = 0; j < 32; j++) dst[j] = (float)(int8_t)src[2 + j] * d;
    }
}

/* Q4_0: fp16 d, 16 bytes: value j < 16 the low nibble of byte j, value
 * 16 + j its high nibble; x = d * (q - 8). */
static void q4_0_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / 32; b++, src += 18, dst += 32) {
        float d = f16(src);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)((src[2 + j] & 15) - 8);
            dst[j + 16] = d * (float)((src[2 + j] >> 4) - 8);
        }
    }
}

/* Q4_1: fp16 d, fp16 m, 16 bytes as Q4_0; x = d * q + m. */
static void q4_1_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / 32; b++, src += 20, dst += 32) {
        float d = f16(src), m = f16(src + 2);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)(src[4 + j] & 15) + m;
            dst[j + 16] = d * (float)(src[4 + j] >> 4) + m;
        }
    }
}

/* Q5_0: fp16 d, u32 qh (bit j: the fifth bit of value j), 16 bytes as
 * Q4_0; x = d * (q - 16). */
static void q5_0_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / 32; b++, src += 22, dst += 32) {
        float d = f16(src);
        uint32_t qh;
        memcpy(&qh, src + 2, 4);
        for (int j = 0; j < 16; j++) {
            int lo = (src[6 + j] & 15) | (int)((qh >> j) & 1) << 4;
            int hi = (src[6 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = d * (float)(lo - 16);
            dst[j + 16] = d * (float)(hi - 16);
        }
    }
}

/* Q5_1: fp16 d, fp16 m, u32 qh, 16 bytes; x = d * q + m. */
static void q5_1_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / 32; b++, src += 24, dst += 32) {
        float d = f16(src), m = f16(src + 2);
        uint32_t qh;
        memcpy(&qh, src + 4, 4);
        for (int j = 0; j < 16; j++) {
            int lo = (src[8 + j] & 15) | (int)((qh >> j) & 1) << 4;
            int hi = (src[8 + j] >> 4) | (int)((qh >> (j + 16)) & 1) << 4;
            dst[j] = d * (float)lo + m;
            dst[j + 16] = d * (float)hi + m;
        }
    }
}

/* Q2_K (84 bytes): scales[16] (low nibble scale, high nibble min, per 16
 * values), qs[64] (2 bits: value 128g + 32s + l is bits 2s.. of byte
 * 32g + l), fp16 d, fp16 dmin; x = (d * sc) * q - (dmin * m). */
static void q2_k_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / QK_K; b++, src += 84, dst += QK_K) {
        const uint8_t *sc = src, *qs = src + 16;
        float d = f16(src + 80), dmin = f16(src + 82);
        for (int v = 0; v < QK_K; v++) {
            int g = v / 128, s = v % 128 / 32, l = v % 32, q = qs[32 * g + l] >> (2 * s) & 3;
            float dl = d * (float)(sc[v / 16] & 15), ml = dmin * (float)(sc[v / 16] >> 4);
            dst[v] = dl * (float)q - ml;
        }
    }
}

/* The 16 signed 6-bit scales of a Q3_K block (12 bytes): low nibbles from
 * bytes 0-7 (scale i < 8: byte i's low nibble, else byte i - 8's high),
 * high 2 bits from bytes 8-11 (byte 8 + i % 4, bits 2 (i / 4)); minus 32. */
static void q3_k_scales(const uint8_t *s, float *out) {
    for (int i = 0; i < 16; i++) {
        int lo = (i < 8 ? s[i] : s[i - 8] >> 4) & 15, hi = s[8 + i % 4] >> (2 * (i / 4)) & 3;
        out[i] = (float)((lo | hi << 4) - 32);
    }
}

/* Q3_K (110 bytes): hmask[32] (bit s of byte l: value 32s + l's high bit),
 * qs[64] (2 bits, laid out as Q2_K), scales[12], fp16 d; q = low - 4 when
 * the high bit is 0, low when 1; x = (d * scale) * q. */
static void q3_k_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / QK_K; b++, src += 110, dst += QK_K) {
        const uint8_t *hm = src, *qs = src + 32;
        float d = f16(src + 108), sc[16];
        q3_k_scales(src + 96, sc);
        for (int v = 0; v < QK_K; v++) {
            int g = v / 128, s = v % 128 / 32, l = v % 32;
            int lo = qs[32 * g + l] >> (2 * s) & 3, h = hm[l] >> (v / 32) & 1;
            dst[v] = (d * sc[v / 16]) * (float)(lo - ((h ^ 1) << 2));
        }
    }
}

/* The 8 six-bit scales and mins of a Q4_K/Q5_K block (12 bytes). */
static void k_scale_min(const uint8_t *s, int *sc, int *mn) {
    for (int j = 0; j < 4; j++) {
        sc[j] = s[j] & 63;
        mn[j] = s[4 + j] & 63;
        sc[4 + j] = (s[8 + j] & 15) | ((s[j] >> 2) & 48);
        mn[4 + j] = (s[8 + j] >> 4) | ((s[4 + j] >> 2) & 48);
    }
}

/* Q4_K (144 bytes): fp16 d, fp16 dmin, scales[12], qs[128] (sub-block 2c
 * the low nibbles of bytes 32c.., 2c + 1 the high ones); x = (d * sc) * q -
 * (dmin * m). */
static void q4_k_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / QK_K; b++, src += 144, dst += QK_K) {
        float d = f16(src), dmin = f16(src + 2);
        int sc[8], mn[8];
        k_scale_min(src + 4, sc, mn);
        const uint8_t *qs = src + 16;
        for (int s = 0; s < 8; s++) {
            float ds = d * (float)sc[s], dm = dmin * (float)mn[s];
            const uint8_t *q = qs + 32 * (s / 2);
            for (int l = 0; l < 32; l++) dst[32 * s + l] = ds * (float)(q[l] >> (4 * (s % 2)) & 15) - dm;
        }
    }
}

/* Q5_K (176 bytes): fp16 d, fp16 dmin, scales[12], qh[32] (bit s of byte
 * l: the fifth bit of value 32s + l), qs[128] as Q4_K. */
static void q5_k_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / QK_K; b++, src += 176, dst += QK_K) {
        float d = f16(src), dmin = f16(src + 2);
        int sc[8], mn[8];
        k_scale_min(src + 4, sc, mn);
        const uint8_t *qh = src + 16, *qs = src + 48;
        for (int s = 0; s < 8; s++) {
            float ds = d * (float)sc[s], dm = dmin * (float)mn[s];
            const uint8_t *q = qs + 32 * (s / 2);
            for (int l = 0; l < 32; l++) {
                int v = (q[l] >> (4 * (s % 2)) & 15) | (qh[l] >> s & 1) << 4;
                dst[32 * s + l] = ds * (float)v - dm;
            }
        }
    }
}

/* Q6_K (210 bytes): ql[128] (value 128g + 64n + t: nibble n of byte
 * 64g + t), qh[64] (its 2 high bits: bits 2j of byte 32g + l for value
 * 128g + 32j + l), int8 scales[16], fp16 d; x = (d * scale) * (q - 32). */
static void q6_k_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    for (uint64_t b = 0; b < n / QK_K; b++, src += 210, dst += QK_K) {
        const uint8_t *ql = src, *qh = src + 128;
        const int8_t *sc = (const int8_t *)(src + 192);
        float d = f16(src + 208);
        for (int v = 0; v < QK_K; v++) {
            int g = v / 128, r = v % 128;
            int lo = ql[64 * g + r % 64] >> (4 * (r / 64)) & 15, hi = qh[32 * g + r % 32] >> (2 * (r / 32)) & 3;
            dst[v] = (d * (float)sc[v / 16]) * (float)((lo | hi << 4) - 32);
        }
    }
}

/* MXFP4 (17 bytes): an e8m0 exponent e (the scale as ggml's
 * e8m0_to_fp32_half: 2^(e - 128), e < 2 as the subnormals), 16 bytes of
 * e2m1 codes laid out as Q4_0; x = scale * kvalue[code] (kvalues doubled). */
static void mxfp4_to_f32(const uint8_t *src, float *dst, uint64_t n) {
    static const int8_t kv[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
    for (uint64_t b = 0; b < n / 32; b++, src += 17, dst += 32) {
        uint32_t e = src[0], bits = e < 2 ? 0x00200000u << e : (e - 1) << 23;
        float d;
        memcpy(&d, &bits, 4);
        for (int j = 0; j < 16; j++) {
            dst[j] = d * (float)kv[src[1 + j] & 15];
            dst[j + 16] = d * (float)kv[src[1 + j] >> 4];
        }
    }
}

static const fg_fmt_info table[FG_FMT_COUNT] = {
    [FG_FMT_F16] = {"F16", 1, 1, 2, f16_to_f32},
    [FG_FMT_Q4G64] = {"Q4G64", -1, FG_Q4_GROUP, 36, NULL},
    [FG_FMT_F32] = {"F32", 0, 1, 4, f32_to_f32},
    [FG_FMT_BF16] = {"BF16", 30, 1, 2, bf16_to_f32},
    [FG_FMT_Q8_0] = {"Q8_0", 8, 32, 34, q8_0_to_f32},
    [FG_FMT_Q4_0] = {"Q4_0", 2, 32, 18, q4_0_to_f32},
    [FG_FMT_Q4_1] = {"Q4_1", 3, 32, 20, q4_1_to_f32},
    [FG_FMT_Q5_0] = {"Q5_0", 6, 32, 22, q5_0_to_f32},
    [FG_FMT_Q5_1] = {"Q5_1", 7, 32, 24, q5_1_to_f32},
    [FG_FMT_Q2_K] = {"Q2_K", 10, QK_K, 84, q2_k_to_f32},
    [FG_FMT_Q3_K] = {"Q3_K", 11, QK_K, 110, q3_k_to_f32},
    [FG_FMT_Q4_K] = {"Q4_K", 12, QK_K, 144, q4_k_to_f32},
    [FG_FMT_Q5_K] = {"Q5_K", 13, QK_K, 176, q5_k_to_f32},
    [FG_FMT_Q6_K] = {"Q6_K", 14, QK_K, 210, q6_k_to_f32},
    [FG_FMT_MXFP4] = {"MXFP4", 39, 32, 17, mxfp4_to_f32},
};

const fg_fmt_info *fg_fmt_get(int fmt) { return fmt >= 0 && fmt < FG_FMT_COUNT ? &table[fmt] : NULL; }

const char *fg_fmt_name(int fmt) { return fg_fmt_get(fmt) ? table[fmt].name : "?"; }

int fg_fmt_by_name(const char *name) {
    for (int f = 0; f < FG_FMT_COUNT; f++)
        if (!strcmp(table[f].name, name)) return f;
    return -1;
}

int fg_fmt_parse_list(const char *list, uint32_t *mask, const char **bad) {
    static char name[32];   /* the offending name, for the caller's message */
    *mask = 0;
    if (!strcmp(list, "none")) return 0;
    for (const char *p = list; *p;) {
        size_t n = strcspn(p, ",");
        snprintf(name, sizeof name, "%.*s", (int)(n < sizeof name ? n : sizeof name - 1), p);
        int f = fg_fmt_by_name(name);
        if (f != FG_FMT_F16 && !fg_fmt_is_ggml_quant(f)) {
            *bad = name;
            return -1;
        }
        if (f != FG_FMT_F16) *mask |= FG_FMT_BIT(f);
        p += n + (p[n] == ',');
    }
    return 0;
}

void fg_fmt_list_text(uint32_t mask, char *out, size_t cap) {
    size_t len = 0;
    out[0] = 0;
    for (int f = 0; f < FG_FMT_COUNT; f++)
        if (mask & FG_FMT_BIT(f) && len < cap)
            len += (size_t)snprintf(out + len, cap - len, "%s%s", len ? "," : "", table[f].name);
    if (!len) snprintf(out, cap, "none");
}

/* Where a block's scales are (ggml-common.h): the byte offsets of its fp16
 * d and min (-1: none), and the values fg_fmt_fill_random gives them. */
static const int8_t scale_off[FG_FMT_COUNT][2] = {
    [FG_FMT_F16] = {-1, -1}, [FG_FMT_Q4G64] = {-1, -1}, [FG_FMT_F32] = {-1, -1}, [FG_FMT_BF16] = {-1, -1},
    [FG_FMT_Q8_0] = {0, -1}, [FG_FMT_Q4_0] = {0, -1}, [FG_FMT_Q4_1] = {0, 2}, [FG_FMT_Q5_0] = {0, -1},
    [FG_FMT_Q5_1] = {0, 2}, [FG_FMT_Q2_K] = {80, 82}, [FG_FMT_Q3_K] = {108, -1}, [FG_FMT_Q4_K] = {0, 2},
    [FG_FMT_Q5_K] = {0, 2}, [FG_FMT_Q6_K] = {208, -1}, [FG_FMT_MXFP4] = {-1, -1}};
#define RANDOM_SCALE_F16 0x1000u   /* 2^-12: the largest code times it stays well below 1 */
#define RANDOM_MXFP4_E8M0 120u     /* 2^-7: the e8m0 exponent of an MXFP4 block */
#define RANDOM_F16_HIGH 0x1cu      /* an F16 value's high byte: 2^-8 .. 2^-7, finite */
#define RANDOM_BF16_HIGH 0x3cu     /* a BF16 value's: 2^-7 .. 2^-6 */
#define RANDOM_F32_STEP 0.01f      /* F32 values: multiples of it below 0.07 */

void fg_fmt_fill_random(int fmt, void *dst, uint64_t bytes, uint64_t seed) {
    const fg_fmt_info *f = fg_fmt_get(fmt);
    FG_ASSERT(f && fmt != FG_FMT_Q4G64 && bytes % (uint64_t)f->block_bytes == 0);
    uint8_t *w = dst;
    uint64_t s = seed * 0x9e3779b97f4a7c15ull | 1;   /* xorshift64: never 0 */
    for (uint64_t i = 0; i < bytes; i += 8) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        memcpy(w + i, &s, bytes - i < 8 ? (size_t)(bytes - i) : 8);
    }
    if (fmt == FG_FMT_F32) {
        for (uint64_t i = 0; i < bytes / 4; i++) ((float *)dst)[i] = RANDOM_F32_STEP * (float)(i % 7);
        return;
    }
    for (uint64_t b = 0; b < bytes / (uint64_t)f->block_bytes; b++) {
        uint8_t *blk = w + b * (uint64_t)f->block_bytes;
        for (int k = 0; k < 2; k++)
            if (scale_off[fmt][k] >= 0)
                blk[scale_off[fmt][k]] = RANDOM_SCALE_F16 & 0xff, blk[scale_off[fmt][k] + 1] = RANDOM_SCALE_F16 >> 8;
        if (fmt == FG_FMT_MXFP4) blk[0] = RANDOM_MXFP4_E8M0;
        if (fmt == FG_FMT_F16) blk[1] = RANDOM_F16_HIGH;
        if (fmt == FG_FMT_BF16) blk[1] = RANDOM_BF16_HIGH;
    }
}

int fg_fmt_of_ggml(uint32_t ggml_type) {
    for (int f = 0; f < FG_FMT_COUNT; f++)
        if (table[f].ggml_type >= 0 && (uint32_t)table[f].ggml_type == ggml_type) return f;
    return -1;
}

uint64_t fg_fmt_row_bytes(int fmt, uint64_t in) {
    const fg_fmt_info *f = fg_fmt_get(fmt);
    if (!f || fmt == FG_FMT_Q4G64 || in % (uint64_t)f->block) return 0;
    return in / (uint64_t)f->block * (uint64_t)f->block_bytes;
}

uint64_t fg_fmt_bytes(int fmt, uint64_t out, uint64_t in) {
    if (fmt == FG_FMT_Q4G64) return fg_q4_slice_bytes(out, in);
    return out * fg_fmt_row_bytes(fmt, in);
}

static int use_simd = 1;

void fg_fmt_use_simd(int on) { use_simd = on; }

void fg_fmt_to_f32(int fmt, const void *src, float *dst, uint64_t n) {
    const fg_fmt_info *f = fg_fmt_get(fmt);
    if (!f || !f->to_f32) return;
    fg_fmt_fn fast = use_simd ? fg_fmt__fast(fmt) : NULL;
    (fast ? fast : f->to_f32)(src, dst, n);
}
