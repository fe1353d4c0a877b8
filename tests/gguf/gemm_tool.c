/* gemm_tool.c - fg_gemm_fmt driven from gemm_check.py: a weight of raw
 * ggml blocks times slices of an activation matrix, each slice a separate
 * call, so the test can compare a row computed alone with the same row
 * inside batches of other sizes.
 *
 *   gemm_tool [--fp32] FMT IN OUT W.raw X.f32 ROWS SLICES Y.f32
 *     W.raw  [OUT, IN] in FMT ("Q4_K") as ggml blocks, rows back to back
 *     X.f32  [ROWS, IN] fp32
 *     SLICES "start:count,start:count,...": y of each slice appended to
 *            Y.f32 ([count, OUT] fp32 each, in the order given)
 *     --fp32 the fp32 kernels even where the int16 ones run
 * Prints "int16" or "fp32": the kernels fg_gemm_fmt ran. Threads:
 * FLEXGEN_THREADS. Exit 0, 1 on a bad argument or file. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fg_common.h"
#include "fg_fmt.h"
#include "fg_gemm.h"

static void *slurp(const char *path, size_t bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *p = fg_alloc_tensor(bytes);
    size_t n = fread(p, 1, bytes, f);
    fclose(f);
    if (n != bytes) return free(p), NULL;
    return p;
}

int main(int argc, char **argv) {
    int a = 1;
    if (a < argc && !strcmp(argv[a], "--fp32")) fg_gemm_int16(0), a++;
    if (argc - a != 8) return fprintf(stderr, "usage: gemm_tool [--fp32] FMT IN OUT W.raw X.f32 ROWS SLICES Y.f32\n"), 1;
    int fmt = -1, in = atoi(argv[a + 1]), out = atoi(argv[a + 2]), rows = atoi(argv[a + 5]);
    for (int f = 0; f < FG_FMT_COUNT; f++)
        if (!strcmp(fg_fmt_name(f), argv[a])) fmt = f;
    if (fmt < 0 || in <= 0 || out <= 0 || rows <= 0 || !fg_fmt_row_bytes(fmt, (uint64_t)in))
        return fprintf(stderr, "gemm_tool: bad format or shape\n"), 1;
    uint8_t *W = slurp(argv[a + 3], (size_t)fg_fmt_bytes(fmt, (uint64_t)out, (uint64_t)in));
    float *x = slurp(argv[a + 4], sizeof(float) * (size_t)rows * in);
    FILE *fy = fopen(argv[a + 7], "wb");
    if (!W || !x || !fy) return fprintf(stderr, "gemm_tool: cannot read the weight or x, or write y\n"), 1;
    printf("%s\n", fg_gemm_int16_runs(fmt, in) ? "int16" : "fp32");
    char *sl = strdup(argv[a + 6]), *save = NULL;
    for (char *t = strtok_r(sl, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int s0, n;
        if (sscanf(t, "%d:%d", &s0, &n) != 2 || s0 < 0 || n <= 0 || s0 + n > rows)
            return fprintf(stderr, "gemm_tool: bad slice %s\n", t), 1;
        float *y = fg_alloc_tensor(sizeof(float) * (size_t)n * out);
        fg_gemm_fmt(y, x + (size_t)s0 * in, W, fmt, NULL, n, in, out);
        if (fwrite(y, sizeof(float), (size_t)n * out, fy) != (size_t)n * out) return 1;
        free(y);
    }
    free(sl), free(W), free(x);
    return fclose(fy) ? 1 : 0;
}
