// fg_cuda.cu - the baselines --profile holds the cuda backend against (see
// fg_cuda.h): bare cuBLAS GEMMs of a layer's shapes, cudaMallocHost copies.
#include "fg_cuda.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

#define CU_CHECK(call, what)                                                                            \
    do {                                                                                                \
        cudaError_t e_ = (call);                                                                        \
        if (e_ != cudaSuccess) return fg_err_set(FG_ERUNTIME, "cuda: %s: %s", what, cudaGetErrorString(e_)); \
    } while (0)

// ---- baselines for --profile --------------------------------------------------

struct fg_cuda_bench {
    int H, F, max_rows;
    uint64_t copy_bytes;
    cudaStream_t s;
    cublasHandle_t blas;
    __half *w;        // q, k, v, o (H, H), fc1 (F, H), fc2 (H, F)
    __half *x, *y16;  // (max_rows, F) each
    float *y32;       // (max_rows, F)
    void *dev, *host; // copy_bytes each; host from cudaMallocHost
};

static void bench_destroy(fg_cuda_bench **bp) {
    fg_cuda_bench *b = *bp;
    if (!b) return;
    cudaDeviceSynchronize();
    cudaFree(b->w), cudaFree(b->x), cudaFree(b->y16), cudaFree(b->y32), cudaFree(b->dev);
    if (b->host) cudaFreeHost(b->host);
    if (b->blas) cublasDestroy(b->blas);
    if (b->s) cudaStreamDestroy(b->s);
    cudaGetLastError();
    free(b);
    *bp = NULL;
}

static fg_status bench_new(int H, int F, int max_rows, uint64_t copy_bytes, fg_cuda_bench **out) {
    fg_cuda_bench *b = (fg_cuda_bench *)calloc(1, sizeof *b);
    *out = NULL;
    if (!b) return fg_err_set(FG_ERUNTIME, "cuda: out of host memory");
    b->H = H, b->F = F, b->max_rows = max_rows, b->copy_bytes = copy_bytes;
    size_t nw = 4 * (size_t)H * H + 2 * (size_t)H * F, na = (size_t)max_rows * F;
    cudaError_t e = cudaStreamCreateWithFlags(&b->s, cudaStreamNonBlocking);
    if (!e) e = cudaMalloc(&b->w, nw * 2);
    if (!e) e = cudaMalloc(&b->x, na * 2);
    if (!e) e = cudaMalloc(&b->y16, na * 2);
    if (!e) e = cudaMalloc(&b->y32, na * 4);
    if (!e) e = cudaMalloc(&b->dev, copy_bytes);
    if (!e) e = cudaMallocHost(&b->host, copy_bytes);
    // contents: zeros are as fast as anything for a GEMM and a copy
    if (!e) e = cudaMemset(b->w, 0, nw * 2);
    if (!e) e = cudaMemset(b->x, 0, na * 2);
    if (!e) memset(b->host, 0, copy_bytes);
    if (e) {
        bench_destroy(&b);
        return fg_err_set(FG_ERUNTIME, "cuda: the profile's baselines: %s", cudaGetErrorString(e));
    }
    if (cublasCreate(&b->blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(b->blas, b->s) != CUBLAS_STATUS_SUCCESS) {
        bench_destroy(&b);
        return fg_err_set(FG_ERUNTIME, "cuda: the profile's baselines: cublasCreate failed");
    }
    *out = b;
    return FG_OK;
}

static fg_status layer_gemms(fg_cuda_bench *b, int rows) {
    const float one = 1, zero = 0;
    int H = b->H, F = b->F;
    size_t HH = (size_t)H * H;
    // (weight, in, out, fp32 output) as the backend's q, k, v, out_proj, fc1, fc2
    struct { const __half *w; int in, out, f32; } g[6] = {
        {b->w, H, H, 0}, {b->w + HH, H, H, 0}, {b->w + 2 * HH, H, H, 0}, {b->w + 3 * HH, H, H, 1},
        {b->w + 4 * HH, H, F, 0}, {b->w + 4 * HH + (size_t)H * F, F, H, 1}};
    for (int i = 0; i < 6; i++) {
        cublasStatus_t st = cublasGemmEx(b->blas, CUBLAS_OP_T, CUBLAS_OP_N, g[i].out, rows, g[i].in, &one, g[i].w,
                                         CUDA_R_16F, g[i].in, b->x, CUDA_R_16F, g[i].in, &zero,
                                         g[i].f32 ? (void *)b->y32 : (void *)b->y16, g[i].f32 ? CUDA_R_32F : CUDA_R_16F,
                                         g[i].out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS) return fg_err_set(FG_ERUNTIME, "cuBLAS: bare GEMM: %s", cublasGetStatusString(st));
    }
    CU_CHECK(cudaStreamSynchronize(b->s), "bare GEMMs");
    return FG_OK;
}

static fg_status pinned_copy(fg_cuda_bench *b, int to_device) {
    if (to_device) CU_CHECK(cudaMemcpyAsync(b->dev, b->host, b->copy_bytes, cudaMemcpyHostToDevice, b->s), "pinned H2D");
    else CU_CHECK(cudaMemcpyAsync(b->host, b->dev, b->copy_bytes, cudaMemcpyDeviceToHost, b->s), "pinned D2H");
    CU_CHECK(cudaStreamSynchronize(b->s), "pinned copy");
    return FG_OK;
}

extern "C" const fg_cuda_baselines fg_cuda_baselines_table = {bench_new, bench_destroy, layer_gemms, pinned_copy};
