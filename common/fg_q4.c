/* fg_q4.c - FlexGen's 4-bit group-wise packing and expansion, exactly as
 * fg_q4.h defines them. Packing runs once per weight (store build) and once
 * per new cache entry; expansion runs on every use, so its inner loops are
 * over contiguous columns, which the compiler vectorises. */
#include "fg_q4.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* Row r of the expansion into y (C) fp32, each value already fp16. */
static void expand_row(const uint8_t *src, int N, int C, int r, float *y) {
    int G = (int)fg_q4_groups((uint64_t)N), g = r / FG_Q4_GROUP, i = r % FG_Q4_GROUP;
    const uint8_t *p = src + ((size_t)g * 32 + (size_t)(i / 2)) * C;
    const fg_half *mins = (const fg_half *)(src + (size_t)G * 32 * C) + (size_t)g * C;
    const fg_half *scales = (const fg_half *)(src + (size_t)G * 32 * C) + (size_t)G * C + (size_t)g * C;
    int shift = i % 2 ? 0 : 4;
    float sbuf[256], mbuf[256];
    for (int c0 = 0; c0 < C; c0 += 256) {
        int n = C - c0 < 256 ? C - c0 : 256;
        fg_half_to_float_n(scales + c0, sbuf, (size_t)n);
        fg_half_to_float_n(mins + c0, mbuf, (size_t)n);
        for (int c = 0; c < n; c++) y[c0 + c] = (float)((p[c0 + c] >> shift) & 15) / sbuf[c];
        fg_round_fp16_n(y + c0, (size_t)n);
        for (int c = 0; c < n; c++) y[c0 + c] += mbuf[c];
        fg_round_fp16_n(y + c0, (size_t)n);
    }
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
    for (int r = 0; r < N; r++) expand_row(src, N, C, r, y + (size_t)r * C);
}

/* The 16 values each column of group g can expand to, lut[q * C + c]
 * (fp16): the expansion formula applied once per (group, column, q) rather
 * than once per element, so a row is a table lookup per value. */
static void group_lut(const uint8_t *src, int N, int C, int g, fg_half *lut, float *tmp) {
    int G = (int)fg_q4_groups((uint64_t)N);
    const fg_half *mins = (const fg_half *)(src + (size_t)G * 32 * C) + (size_t)g * C;
    const fg_half *scales = (const fg_half *)(src + (size_t)G * 32 * C) + (size_t)G * C + (size_t)g * C;
    float *sf = tmp, *mf = tmp + C, *row = tmp + 2 * (size_t)C;
    fg_half_to_float_n(scales, sf, (size_t)C);
    fg_half_to_float_n(mins, mf, (size_t)C);
    for (int q = 0; q < 16; q++) {
        for (int c = 0; c < C; c++) row[c] = (float)q / sf[c];
        fg_round_fp16_n(row, (size_t)C);
        for (int c = 0; c < C; c++) row[c] += mf[c];
        fg_float_to_half_n(row, lut + (size_t)q * C, (size_t)C);   /* the second rounding */
    }
}

void fg_q4_expand_rows(const uint8_t *src, int N, int C, int r0, int r1, fg_half *y) {
    fg_half *lut = malloc(sizeof(fg_half) * 16 * (size_t)(C > 0 ? C : 1));
    float *tmp = malloc(sizeof(float) * 3 * (size_t)(C > 0 ? C : 1));
    int g_have = -1;
    for (int r = r0; r < r1; r++) {
        int g = r / FG_Q4_GROUP, i = r % FG_Q4_GROUP, shift = i % 2 ? 0 : 4;
        if (g != g_have) group_lut(src, N, C, g, lut, tmp), g_have = g;
        const uint8_t *p = src + ((size_t)g * 32 + (size_t)(i / 2)) * C;
        fg_half *yr = y + (size_t)(r - r0) * C;
        for (int c = 0; c < C; c++) yr[c] = lut[(size_t)((p[c] >> shift) & 15) * C + c];
    }
    free(lut);
    free(tmp);
}

void fg_q4_expand(const uint8_t *src, int N, int C, fg_half *y) { fg_q4_expand_rows(src, N, C, 0, N, y); }
