/* cuda_gemm_check.c - the CUDA Linear against the host kernel on the same
 * data. Exits 77 (ctest: skipped) where no GPU can be opened.
 * Tolerance: the GPU rounds x to fp16 before its tensor-core GEMM, so the
 * host runs on the same rounded x; what remains is fp32 summation order over
 * `in` products of O(0.1) values: a few 1e-6 relative, checked at 1e-4 of the
 * row's largest magnitude. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "fg_cuda.h"
#include "fg_fp16.h"
#include "fg_gemm.h"

int main(void) {
    char name[256];
    if (!fg_cuda_available(name, sizeof name)) {
        printf("cuda_gemm_check: no CUDA device: skipped\n");
        return 77;
    }
    printf("cuda_gemm_check: device %s\n", name);
    fg_cuda *c;
    fg_exit_on(fg_cuda_new(0, 0, &c));
    int shapes[][3] = {{1, 768, 3072}, {16, 768, 3072}, {2048, 768, 768}, {7, 90, 130}};
    int bad = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], in = shapes[s][1], out = shapes[s][2];
        size_t nx = (size_t)rows * in, nw = (size_t)in * out, ny = (size_t)rows * out;
        float *x = malloc(nx * 4), *y = malloc(ny * 4), *yg = malloc(ny * 4);
        fg_half *W = malloc(nw * 2), *b = malloc((size_t)out * 2);
        srand(1 + (unsigned)s);
        for (size_t i = 0; i < nx; i++) x[i] = (float)rand() / RAND_MAX - 0.5f;
        for (size_t i = 0; i < nw; i++) W[i] = fg_float_to_half(0.2f * ((float)rand() / RAND_MAX - 0.5f));
        for (int i = 0; i < out; i++) b[i] = fg_float_to_half(0.1f * ((float)rand() / RAND_MAX - 0.5f));
        fg_round_fp16_n(x, nx);   /* what the GPU feeds its tensor cores */
        fg_gemm_f16w(y, x, W, b, rows, in, out);
        float *dx = fg_cuda_alloc(c, nx * 4), *dy = fg_cuda_alloc(c, ny * 4);
        uint16_t *dW = fg_cuda_alloc(c, nw * 2), *db = fg_cuda_alloc(c, (size_t)out * 2), *ds = fg_cuda_alloc(c, nx * 2);
        if (!dx || !dy || !dW || !db || !ds) fg_exit_on(FG_ERUNTIME);
        fg_exit_on(fg_cuda_h2d(c, dx, x, nx * 4, FG_CUDA_STREAM_COMPUTE));
        fg_exit_on(fg_cuda_h2d(c, dW, W, nw * 2, FG_CUDA_STREAM_COMPUTE));
        fg_exit_on(fg_cuda_h2d(c, db, b, (size_t)out * 2, FG_CUDA_STREAM_COMPUTE));
        fg_exit_on(fg_cuda_gemm_f16w(c, dy, dx, dW, db, rows, in, out, ds));
        fg_exit_on(fg_cuda_d2h(c, yg, dy, ny * 4, FG_CUDA_STREAM_COMPUTE));
        fg_exit_on(fg_cuda_sync(c, FG_CUDA_STREAM_COMPUTE));
        double maxerr = 0, maxabs = 0;
        for (size_t i = 0; i < ny; i++) {
            maxerr = fmax(maxerr, fabs((double)y[i] - yg[i]));
            maxabs = fmax(maxabs, fabs((double)y[i]));
        }
        int ok = maxerr <= 1e-4 * maxabs + 1e-6;
        bad |= !ok;
        printf("cuda_gemm_check: rows %d in %d out %d: max |gpu - host| %.3g (scale %.3g) %s\n", rows, in, out, maxerr,
               maxabs, ok ? "ok" : "FAIL");
        fg_cuda_free(c, dx, nx * 4); fg_cuda_free(c, dy, ny * 4); fg_cuda_free(c, dW, nw * 2);
        fg_cuda_free(c, db, (size_t)out * 2); fg_cuda_free(c, ds, nx * 2);
        free(x); free(y); free(yg); free(W); free(b);
    }
    fg_cuda_destroy(&c);
    return bad;
}
