/* q4_fast.c - the fast forms of the 4-bit expansion against its definition
 * (fg_q4_expand_rows_ref, a true division per value), bit for bit, in every
 * SIMD form this CPU has and the portable one:
 *  - every fp16 scale (zero, subnormal, inf, NaN) with every q, which is
 *    where q * (1 / s) could part from q / s;
 *  - packed weights and raw random slices of awkward shapes (a partial last
 *    group, C not a multiple of any vector width), constant groups (scale
 *    inf), huge and tiny ranges, over random row ranges (odd ends split a
 *    byte's two rows; a NaN min meeting a NaN scale may keep either one's
 *    payload);
 *  - fg_gemm_q4w against fg_gemm_f16w on the reference expansion, both GEMM
 *    paths (few rows and many).
 * Exits 1 at the first difference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_common.h"
#include "fg_gemm.h"
#include "fg_q4.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (uint32_t)(rng >> 32);
}
static float unif(void) { return (float)(rnd() >> 8) / (float)(1 << 24) - 0.5f; }

static const char *level_name[] = {"portable", "AVX2", "AVX-512"};

static int is_nan(fg_half h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

/* Rows [r0, r1) of slice q (N, C), fast fp16 and fp32 forms against the
 * reference, at every SIMD level. any_nan: a NaN matches any NaN (a NaN
 * min with a NaN scale: which payload an fp32 add keeps is the compiler's
 * choice of operand order, in the reference as in the fast forms). */
static int check_rows(const uint8_t *q, int N, int C, int r0, int r1, int any_nan, const char *what) {
    size_t n = (size_t)(r1 - r0) * C;
    fg_half *ref = fg_xmalloc(2 * n + 2), *h = fg_xmalloc(2 * n + 2);
    float *f = fg_xmalloc(4 * n + 4);
    fg_q4_expand_rows_ref(q, N, C, r0, r1, ref);
    int bad = 0;
    for (int level = 0; level <= 2 && !bad; level++) {
        fg_q4_limit_simd(level);
        memset(h, 0xaa, 2 * n), memset(f, 0xaa, 4 * n);   /* nothing left from the level before */
        fg_q4_expand_rows(q, N, C, r0, r1, h);
        fg_q4_expand_rows_f32(q, N, C, r0, r1, f);
        for (size_t i = 0; i < n && !bad; i++) {
            float want = fg_half_to_float(ref[i]);
            if (any_nan && is_nan(ref[i]) && is_nan(h[i]) && f[i] != f[i]) continue;
            if (h[i] != ref[i] || memcmp(&f[i], &want, 4)) {
                fprintf(stderr, "q4_fast: %s (N %d, C %d, rows %d..%d), %s: row %zu col %zu: %04x, %a; want %04x\n",
                        what, N, C, r0, r1, level_name[level], (size_t)r0 + i / (size_t)C, i % (size_t)C, h[i],
                        (double)f[i], ref[i]);
                bad = 1;
            }
        }
    }
    fg_q4_limit_simd(2);
    free(ref), free(h), free(f);
    return bad;
}

/* One group of C = 65536 columns: column c's scale is the fp16 value c, so
 * every scale meets every q (row i of column c holds (i + c) % 16). */
static int every_scale(void) {
    int N = 64, C = 65536;
    uint8_t *q = fg_xmalloc((size_t)fg_q4_slice_bytes((uint64_t)N, (uint64_t)C));
    fg_half *mins = (fg_half *)(q + (size_t)32 * C), *scales = mins + C;
    for (int j = 0; j < 32; j++)
        for (int c = 0; c < C; c++) q[(size_t)j * C + c] = (uint8_t)(((2 * j + c) % 16) << 4 | (2 * j + 1 + c) % 16);
    for (int c = 0; c < C; c++) {
        scales[c] = (fg_half)c;
        mins[c] = fg_float_to_half(unif() * (c % 7 ? 2.0f : 60000.0f));
    }
    int bad = check_rows(q, N, C, 0, N, 0, "every fp16 scale");
    free(q);
    return bad;
}

/* Column c of a weight (N, C): one of a few adversarial kinds or plain. */
static float weight(int r, int c) {
    switch (c % 9) {
    case 0: return 0.25f;                                /* constant: scale inf */
    case 1: return r % 2 ? 65504.0f : -65504.0f;         /* the widest range */
    case 2: return (float)(r % 5) * 5.9604645e-8f;       /* subnormals */
    case 3: return 1000.0f + (float)(r % 3) * 0.5f;      /* a tiny range far from 0 */
    case 4: return r == 7 ? -3.0f : 0.0f;                 /* one outlier */
    default: return unif() * 0.1f;
    }
}

static int packed_and_raw(void) {
    static const int shapes[][2] = {{64, 16}, {130, 37}, {1, 1}, {63, 15}, {200, 257}, {65, 8193}, {256, 24}};
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] && !bad; s++) {
        int N = shapes[s][0], C = shapes[s][1];
        size_t bytes = (size_t)fg_q4_slice_bytes((uint64_t)N, (uint64_t)C);
        fg_half *x = fg_xmalloc(2 * (size_t)N * C);
        uint8_t *q = fg_xmalloc(bytes);
        for (int r = 0; r < N; r++)
            for (int c = 0; c < C; c++) x[(size_t)r * C + c] = fg_float_to_half(weight(r, c));
        fg_q4_pack(x, N, C, q);
        bad |= check_rows(q, N, C, 0, N, 0, "packed weight");
        for (int t = 0; t < 8 && !bad; t++) {
            int r0 = (int)(rnd() % (unsigned)N), r1 = r0 + 1 + (int)(rnd() % (unsigned)(N - r0));
            bad |= check_rows(q, N, C, r0, r1, 0, "packed weight, a row range");
        }
        for (size_t i = 0; i < bytes; i++) q[i] = (uint8_t)rnd();   /* any bits: NaN and inf mins and scales */
        bad |= !bad && check_rows(q, N, C, 0, N, 1, "random bytes");
        free(x), free(q);
    }
    return bad;
}

/* fg_gemm_q4w(x, W) == fg_gemm_f16w(x, fg_q4_expand_rows_ref(W)), bias too. */
static int gemm_same(void) {
    static const int shapes[][2] = {{130, 37}, {2048, 256}, {200, 1000}, {64, 17}};
    static const int rows[] = {1, 2, 3, 4, 5, 6, 7, 16, 32, 33, 64};
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] && !bad; s++) {
        int out = shapes[s][0], in = shapes[s][1];
        fg_half *w = fg_xmalloc(2 * (size_t)out * in), *bias = fg_xmalloc(2 * (size_t)out);
        uint8_t *q = fg_xmalloc((size_t)fg_q4_slice_bytes((uint64_t)out, (uint64_t)in));
        for (size_t i = 0; i < (size_t)out * in; i++) w[i] = fg_float_to_half(unif() * 0.2f);
        for (int o = 0; o < out; o++) bias[o] = fg_float_to_half(unif());
        fg_q4_pack(w, out, in, q);
        fg_q4_expand_rows_ref(q, out, in, 0, out, w);
        float *x = fg_xmalloc(4 * 64 * (size_t)in), *y = fg_xmalloc(4 * 64 * (size_t)out),
              *y2 = fg_xmalloc(4 * 64 * (size_t)out);
        for (size_t i = 0; i < 64 * (size_t)in; i++) x[i] = unif();
        for (size_t r = 0; r < sizeof rows / sizeof rows[0] && !bad; r++) {
            fg_gemm_f16w(y, x, w, bias, rows[r], in, out);
            fg_gemm_q4w(y2, x, q, bias, rows[r], in, out);
            if (memcmp(y, y2, 4 * (size_t)rows[r] * out)) {
                fprintf(stderr, "q4_fast: fg_gemm_q4w differs from fg_gemm_f16w (rows %d, in %d, out %d)\n", rows[r],
                        in, out);
                bad = 1;
            }
        }
        free(w), free(bias), free(q), free(x), free(y), free(y2);
    }
    return bad;
}

int main(void) {
    if (every_scale() || packed_and_raw() || gemm_same()) return 1;
    printf("q4_fast: fast expansion and fg_gemm_q4w bitwise equal to the definition\n");
    return 0;
}
