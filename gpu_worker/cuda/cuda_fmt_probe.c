/* cuda_fmt_probe.c - the weight formats' device code on host buffers, for
 * tests/gpu/cuda_fmt_check (fg_cuda.h): the same launchers and Linear the
 * ops run (cuda_fmt.h, cuda_linear.h), with a stream, cuBLAS and device
 * buffers of the probe's own, grown as asked. Every call copies in, runs,
 * copies out and synchronizes. */
#include <stdlib.h>
#include <string.h>

#include "cuda_fmt.h"
#include "cuda_linear.h"
#include "fg_cuda.h"
#include "fg_fmt.h"

/* The device buffers: W, x, y (or the fp32 rows), the fp16 rows or the tile. */
enum { BUF_W, BUF_X, BUF_Y, BUF_T, NBUF };

struct fg_cuda_fmt_probe {
    cudaStream_t s;
    cublasHandle_t blas;
    void *buf[NBUF];
    size_t cap[NBUF];
};

static fg_status cu_fail(cudaError_t e, const char *what) {
    cudaGetLastError();
    return fg_err_set(FG_ERUNTIME, "cuda probe: %s: %s", what, cudaGetErrorString(e));
}
#define CU(call, what)                               \
    do {                                             \
        cudaError_t e_ = (call);                     \
        if (e_ != cudaSuccess) return cu_fail(e_, what); \
    } while (0)

static void probe_destroy(fg_cuda_fmt_probe **pp) {
    fg_cuda_fmt_probe *p = *pp;
    if (!p) return;
    if (p->s) cudaStreamSynchronize(p->s);
    for (int i = 0; i < NBUF; i++) cudaFree(p->buf[i]);
    if (p->blas) cublasDestroy(p->blas);
    if (p->s) cudaStreamDestroy(p->s);
    cudaGetLastError();
    free(p);
    *pp = NULL;
}

static fg_status probe_new(fg_cuda_fmt_probe **out) {
    fg_cuda_fmt_probe *p = calloc(1, sizeof *p);
    fg_status st = FG_OK;
    *out = NULL;
    if (!p) return fg_err_set(FG_ERUNTIME, "cuda probe: out of host memory");
    cudaError_t e = cudaStreamCreateWithFlags(&p->s, cudaStreamNonBlocking);
    if (e) st = cu_fail(e, "cudaStreamCreate");
    if (!st && (cublasCreate(&p->blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(p->blas, p->s) != CUBLAS_STATUS_SUCCESS))
        st = fg_err_set(FG_ERUNTIME, "cuda probe: cuBLAS: cannot create a handle on the stream");
    if (st) {
        probe_destroy(&p);
        return st;
    }
    *out = p;
    return FG_OK;
}

/* Buffer i of at least n bytes (its old contents dropped). */
static fg_status buf(fg_cuda_fmt_probe *p, int i, size_t n) {
    if (n <= p->cap[i]) return FG_OK;
    cudaFree(p->buf[i]);
    p->buf[i] = NULL, p->cap[i] = 0;
    CU(cudaMalloc(&p->buf[i], n), "cudaMalloc");
    p->cap[i] = n;
    return FG_OK;
}

static fg_status put_w(fg_cuda_fmt_probe *p, int fmt, const void *W, int out, int in) {
    uint64_t wb = fg_fmt_bytes(fmt, (uint64_t)out, (uint64_t)in);
    if (!wb) return fg_err_set(FG_EINPUT, "cuda probe: %s rows of %d values are not whole blocks", fg_fmt_name(fmt), in);
    fg_status st = buf(p, BUF_W, wb);
    if (st) return st;
    CU(cudaMemcpyAsync(p->buf[BUF_W], W, wb, cudaMemcpyHostToDevice, p->s), "W to the device");
    return FG_OK;
}

static fg_status dequant(fg_cuda_fmt_probe *p, int fmt, const void *W, int out, int in, float *f32, uint16_t *f16) {
    size_t n = (size_t)out * in;
    fg_status st = put_w(p, fmt, W, out, in);
    if (!st) st = buf(p, BUF_Y, n * sizeof(float));
    if (!st) st = buf(p, BUF_T, n * sizeof(uint16_t));
    if (st) return st;
    int e = fg_cuk_fmt_rows(NULL, p->buf[BUF_Y], NULL, p->buf[BUF_W], fmt, in, out, 0, out, NULL, p->s);
    if (!e) e = fg_cuk_fmt_rows(p->buf[BUF_T], NULL, NULL, p->buf[BUF_W], fmt, in, out, 0, out, NULL, p->s);
    if (e) return cu_fail((cudaError_t)e, "fg_cuk_fmt_rows");
    CU(cudaMemcpyAsync(f32, p->buf[BUF_Y], n * sizeof(float), cudaMemcpyDeviceToHost, p->s), "rows to the host");
    CU(cudaMemcpyAsync(f16, p->buf[BUF_T], n * sizeof(uint16_t), cudaMemcpyDeviceToHost, p->s), "rows to the host");
    CU(cudaStreamSynchronize(p->s), "dequantizing");
    return FG_OK;
}

static fg_status linear(fg_cuda_fmt_probe *p, int fmt, const void *W, int out, int in, const uint16_t *x, int rows,
                        float alpha, float beta, int y32, void *y, uint64_t tile_bytes) {
    size_t xb = (size_t)rows * in * sizeof(uint16_t), yb = (size_t)rows * out * (y32 ? sizeof(float) : sizeof(uint16_t));
    fg_status st = put_w(p, fmt, W, out, in);
    if (!st) st = buf(p, BUF_X, xb);
    if (!st) st = buf(p, BUF_Y, yb);
    if (!st && tile_bytes) st = buf(p, BUF_T, tile_bytes);
    if (st) return st;
    CU(cudaMemcpyAsync(p->buf[BUF_X], x, xb, cudaMemcpyHostToDevice, p->s), "x to the device");
    CU(cudaMemcpyAsync(p->buf[BUF_Y], y, yb, cudaMemcpyHostToDevice, p->s), "y to the device");
    fg_cu_lin L = {.blas = p->blas, .s = p->s, .tile = tile_bytes ? p->buf[BUF_T] : NULL, .tile_bytes = tile_bytes,
                   .op = "probe"};
    st = fg_cu_linear(&L, p->buf[BUF_Y], y32, p->buf[BUF_X], (fg_cu_w){p->buf[BUF_W], fmt}, rows, in, out, alpha,
                      beta, "linear");
    if (st) return st;
    CU(cudaMemcpyAsync(y, p->buf[BUF_Y], yb, cudaMemcpyDeviceToHost, p->s), "y to the host");
    CU(cudaStreamSynchronize(p->s), "the Linear");
    return FG_OK;
}

const fg_cuda_fmt_probe_table fg_cuda_fmt_probe_fns = {
    .probe_new = probe_new,
    .probe_destroy = probe_destroy,
    .dequant = dequant,
    .linear = linear,
};
