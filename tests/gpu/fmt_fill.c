/* fmt_fill.c - random weight matrices in every format (see fmt_fill.h).
 * Per format, the fields that set a value's size: with u in [0.5, 1) a
 * block's own spread and a random sign where the codes are symmetric,
 *   Q8_0  d = u a / 127           Q4_0  d = u a / 8         Q5_0  d = u a / 16
 *   Q4_1  d = 2 u a / 15, m = -u a                          Q5_1  d = 2 u a / 31, m = -u a
 *   Q2_K  sc = m in 8..15, d = u a / 22.5, dmin = 1.5 d: d sc (q - 1.5)
 *   Q3_K  scales random (-32..31), d = u a / 128            Q6_K  scales random int8, d = u a / 4096
 *   Q4_K  sc = m in 32..63, dmin = 7.5 d, d = u a / (63 * 7.5): d sc (q - 7.5)
 *   Q5_K  the same about 15.5                               MXFP4 2^(e - 128) 12 ~ u a
 * F16, F32, BF16 and Q4G64 from uniform values in [-a, a). */
#include "fmt_fill.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fg_fmt.h"
#include "fg_fp16.h"
#include "fg_q4.h"

double fmt_fill_urand(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(*s >> 11) * (1.0 / 9007199254740992.0);
}

static float uni(uint64_t *s, float lo, float hi) { return lo + (hi - lo) * (float)fmt_fill_urand(s); }
static int below(uint64_t *s, int n) { return (int)(fmt_fill_urand(s) * n); }
static float sgn(uint64_t *s) { return fmt_fill_urand(s) < 0.5 ? -1.0f : 1.0f; }

static void put16(uint8_t *p, float f) {
    fg_half h = fg_float_to_half(f);
    memcpy(p, &h, 2);
}

void fmt_fill_bytes(uint8_t *dst, uint64_t n, uint64_t *s) {
    for (uint64_t i = 0; i < n; i++) dst[i] = (uint8_t)(fmt_fill_urand(s) * 256);
}

/* The 12 scale bytes of a Q4_K/Q5_K block whose eight sub-blocks have
 * scale = min = sc[j] (6 bits each; ggml-common.h's get_scale_min_k4). */
static void k_scales(uint8_t *s12, const int *sc) {
    for (int j = 0; j < 4; j++) {
        s12[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        s12[4 + j] = s12[j];
        s12[8 + j] = (uint8_t)((sc[j + 4] & 15) | (sc[j + 4] & 15) << 4);
    }
}

static void fill_block(uint8_t *b, int fmt, int bytes, float a, uint64_t *s) {
    fmt_fill_bytes(b, (uint64_t)bytes, s);
    float u = uni(s, 0.5f, 1.0f);
    int sc[8];
    switch (fmt) {
    case FG_FMT_Q8_0: put16(b, sgn(s) * u * a / 127); break;
    case FG_FMT_Q4_0: put16(b, sgn(s) * u * a / 8); break;
    case FG_FMT_Q5_0: put16(b, sgn(s) * u * a / 16); break;
    case FG_FMT_Q4_1: put16(b, 2 * u * a / 15), put16(b + 2, -u * a); break;
    case FG_FMT_Q5_1: put16(b, 2 * u * a / 31), put16(b + 2, -u * a); break;
    case FG_FMT_Q2_K: {
        float d = u * a / 22.5f;
        for (int i = 0; i < 16; i++) {
            int v = 8 + below(s, 8);
            b[i] = (uint8_t)(v | v << 4);
        }
        put16(b + 80, d), put16(b + 82, 1.5f * d);
        break;
    }
    case FG_FMT_Q3_K: put16(b + 108, sgn(s) * u * a / 128); break;
    case FG_FMT_Q4_K:
    case FG_FMT_Q5_K: {
        float mid = fmt == FG_FMT_Q4_K ? 7.5f : 15.5f, d = u * a / (63 * mid);
        for (int j = 0; j < 8; j++) sc[j] = 32 + below(s, 32);
        k_scales(b + 4, sc);
        put16(b, d), put16(b + 2, mid * d);
        break;
    }
    case FG_FMT_Q6_K: put16(b + 208, sgn(s) * u * a / 4096); break;
    case FG_FMT_MXFP4: {
        int e = 128 + (int)floorf(log2f(u * a / 12));
        b[0] = (uint8_t)(e < 2 ? 2 : e > 254 ? 254 : e);
        break;
    }
    default: break;
    }
}

void fmt_fill(uint8_t *dst, int fmt, int out, int in, float a, uint64_t *s) {
    uint64_t n = (uint64_t)out * (uint64_t)in;
    if (fmt == FG_FMT_F16 || fmt == FG_FMT_Q4G64) {
        fg_half *h = malloc(sizeof(fg_half) * n);
        for (uint64_t i = 0; i < n; i++) h[i] = fg_float_to_half(uni(s, -a, a));
        if (fmt == FG_FMT_F16) memcpy(dst, h, sizeof(fg_half) * n);
        else fg_q4_pack(h, out, in, dst);
        free(h);
        return;
    }
    if (fmt == FG_FMT_F32 || fmt == FG_FMT_BF16) {
        for (uint64_t i = 0; i < n; i++) {
            float f = uni(s, -a, a);
            uint32_t u;
            memcpy(&u, &f, 4);
            if (fmt == FG_FMT_F32) memcpy(dst + 4 * i, &u, 4);
            else dst[2 * i] = (uint8_t)(u >> 16), dst[2 * i + 1] = (uint8_t)(u >> 24);
        }
        return;
    }
    const fg_fmt_info *f = fg_fmt_get(fmt);
    uint64_t nb = n / (uint64_t)f->block;
    for (uint64_t k = 0; k < nb; k++) fill_block(dst + k * (uint64_t)f->block_bytes, fmt, f->block_bytes, a, s);
}
