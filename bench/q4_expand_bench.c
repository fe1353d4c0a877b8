/* q4_expand_bench.c - `flexgen-q4-bench`: the cost of a Linear layer on a
 * compressed (fg_q4) weight against the same layer on fp16 weights, at OPT
 * shapes, per weight value. Three ways for each (rows, out, in):
 *   fp16  fg_gemm_f16w on the fp16 weight
 *   old   the expansion before fg_gemm_q4w (a 16-entry table per group and
 *         column, looked up per value, one group per pool task) into an fp16
 *         matrix, then fg_gemm_f16w on it
 *   new   fg_gemm_q4w
 * and the two expansions alone (rows "exp"). Prints the median of --reps
 * runs in ns per weight value, new/old and new/fp16, and checks that old and
 * new give the same bits. Threads: FLEXGEN_THREADS (the pool's setting). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_common.h"
#include "fg_gemm.h"
#include "fg_pool.h"
#include "fg_q4.h"

/* ---- the expansion as it was: a per-(group, column) table of the 16 values ---- */
static void old_group_lut(const uint8_t *src, int N, int C, int g, fg_half *lut, float *tmp) {
    int G = (int)fg_q4_groups((uint64_t)N);
    const fg_half *mins = (const fg_half *)(src + (size_t)G * 32 * C) + (size_t)g * C;
    const fg_half *scales = mins + (size_t)G * C;
    float *sf = tmp, *mf = tmp + C, *row = tmp + 2 * (size_t)C;
    fg_half_to_float_n(scales, sf, (size_t)C);
    fg_half_to_float_n(mins, mf, (size_t)C);
    for (int q = 0; q < 16; q++) {
        for (int c = 0; c < C; c++) row[c] = (float)q / sf[c];
        fg_round_fp16_n(row, (size_t)C);
        for (int c = 0; c < C; c++) row[c] += mf[c];
        fg_float_to_half_n(row, lut + (size_t)q * C, (size_t)C);
    }
}

static void old_expand_rows(const uint8_t *src, int N, int C, int r0, int r1, fg_half *y) {
    fg_half *lut = fg_xmalloc(sizeof(fg_half) * 16 * (size_t)C);
    float *tmp = fg_xmalloc(sizeof(float) * 3 * (size_t)C);
    int g_have = -1;
    for (int r = r0; r < r1; r++) {
        int g = r / FG_Q4_GROUP, i = r % FG_Q4_GROUP, shift = i % 2 ? 0 : 4;
        if (g != g_have) old_group_lut(src, N, C, g, lut, tmp), g_have = g;
        const uint8_t *p = src + ((size_t)g * 32 + (size_t)(i / 2)) * C;
        fg_half *yr = y + (size_t)(r - r0) * C;
        for (int c = 0; c < C; c++) yr[c] = lut[(size_t)((p[c] >> shift) & 15) * C + c];
    }
    free(lut);
    free(tmp);
}

typedef struct {
    const uint8_t *src;
    int N, C, old;
    fg_half *y;
} expand_job;

static void expand_task(void *p, int task) {
    const expand_job *j = p;
    int r0 = task * FG_Q4_GROUP, r1 = r0 + FG_Q4_GROUP < j->N ? r0 + FG_Q4_GROUP : j->N;
    (j->old ? old_expand_rows : fg_q4_expand_rows)(j->src, j->N, j->C, r0, r1, j->y + (size_t)r0 * j->C);
}

/* The whole weight expanded over the pool, one group per task. */
static void expand_all(const uint8_t *src, int N, int C, fg_half *y, int old) {
    expand_job j = {.src = src, .N = N, .C = C, .old = old, .y = y};
    fg_pool_run((int)fg_q4_groups((uint64_t)N), expand_task, &j);
}

/* ---- timing ---- */
enum { FP16, OLD, NEW, OLD_EXP, NEW_EXP };

typedef struct {
    int rows, in, out;
    const fg_half *W;
    const uint8_t *Wq;
    fg_half *wexp;
    const float *x;
    float *y;
} layer;

static void run(const layer *l, int way) {
    switch (way) {
    case FP16: fg_gemm_f16w(l->y, l->x, l->W, NULL, l->rows, l->in, l->out); break;
    case OLD:
        expand_all(l->Wq, l->out, l->in, l->wexp, 1);
        fg_gemm_f16w(l->y, l->x, l->wexp, NULL, l->rows, l->in, l->out);
        break;
    case NEW: fg_gemm_q4w(l->y, l->x, l->Wq, NULL, l->rows, l->in, l->out); break;
    case OLD_EXP: expand_all(l->Wq, l->out, l->in, l->wexp, 1); break;
    case NEW_EXP: expand_all(l->Wq, l->out, l->in, l->wexp, 0); break;
    }
}

/* Median ns per weight value over reps runs (after one warm-up). */
static double time_ns(const layer *l, int way, int reps) {
    double t[64];
    run(l, way);
    for (int i = 0; i < reps; i++) {
        double t0 = fg_now();
        run(l, way);
        t[i] = fg_now() - t0;
    }
    return fg_median(t, reps) * 1e9 / ((double)l->in * l->out);
}

static uint64_t rng = 88172645463325252ull;
static float randn_ish(void) {   /* sum of 4 uniforms: bell-shaped, cheap */
    float s = 0;
    for (int i = 0; i < 4; i++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        s += (float)(rng >> 40) / (float)(1 << 24) - 0.5f;
    }
    return s;
}

static int shape(int out, int in, int reps) {
    size_t n = (size_t)out * in;
    fg_half *W = fg_alloc_tensor(2 * n), *wexp = fg_alloc_tensor(2 * n);
    uint8_t *Wq = fg_alloc_tensor((size_t)fg_q4_slice_bytes((uint64_t)out, (uint64_t)in));
    for (size_t i = 0; i < n; i++) W[i] = fg_float_to_half(0.03f * randn_ish());
    fg_q4_pack(W, out, in, Wq);
    float *x = fg_alloc_tensor(sizeof(float) * 64 * (size_t)in), *y = fg_alloc_tensor(sizeof(float) * 64 * (size_t)out);
    float *y2 = fg_alloc_tensor(sizeof(float) * 64 * (size_t)out);
    for (size_t i = 0; i < 64 * (size_t)in; i++) x[i] = randn_ish();
    int bad = 0;
    static const int rows_list[] = {1, 4, 16, 64};
    for (int ri = 0; ri < 4; ri++) {
        layer l = {.rows = rows_list[ri], .in = in, .out = out, .W = W, .Wq = Wq, .wexp = wexp, .x = x, .y = y};
        double fp16 = time_ns(&l, FP16, reps), old = time_ns(&l, OLD, reps);
        memcpy(y2, y, sizeof(float) * (size_t)l.rows * out);
        double nw = time_ns(&l, NEW, reps);
        int same = !memcmp(y, y2, sizeof(float) * (size_t)l.rows * out);
        bad |= !same;
        printf("%6d x %-6d rows %-3d  fp16 %7.3f  old %7.3f  new %7.3f  new/old %5.3f  new/fp16 %5.2f  %s\n", out, in,
               l.rows, fp16, old, nw, nw / old, nw / fp16, same ? "same bits" : "DIFFERENT");
    }
    layer l = {.in = in, .out = out, .Wq = Wq, .wexp = wexp};
    double old = time_ns(&l, OLD_EXP, reps), nw = time_ns(&l, NEW_EXP, reps);
    printf("%6d x %-6d exp       old %7.3f  new %7.3f  new/old %5.3f  (expansion alone, to fp16)\n", out, in, old, nw,
           nw / old);
    fflush(stdout);
    free(W), free(wexp), free(Wq), free(x), free(y), free(y2);
    return bad;
}

static int model(const char *name, int reps) {
    int H = !strcmp(name, "1.3b") ? 2048 : !strcmp(name, "13b") ? 5120 : 0;
    if (!H) {
        fprintf(stderr, "usage: flexgen-q4-bench [--reps N] [1.3b|13b]...\n"
                        "ns per weight value of a Linear on fp16 and on 4-bit weights (threads: FLEXGEN_THREADS)\n");
        exit(2);
    }
    printf("OPT-%s, %d threads, median of %d, ns per weight value\n", name, fg_pool_threads(), reps);
    return shape(H, H, reps) | shape(4 * H, H, reps) | shape(H, 4 * H, reps);
}

int main(int argc, char **argv) {
    int reps = 5, first = 1;
    if (argc > 2 && !strcmp(argv[1], "--reps")) {
        reps = atoi(argv[2]);
        if (reps < 1 || reps > 64) reps = 5;
        first = 3;
    }
    if (first == argc) return model("1.3b", reps);
    int bad = 0;
    for (int i = first; i < argc; i++) bad |= model(argv[i], reps);
    return bad;
}
