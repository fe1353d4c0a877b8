// fg_cuda.cu - device discovery, a standalone device context with copy
// streams and the cuBLAS Linear (cuda_gemm_check's), and the bare baselines
// --profile holds the cuda backend against (see fg_cuda.h).
#include "fg_cuda.h"

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <string.h>

struct fg_cuda {
    int dev;
    uint64_t budget, used;
    cudaStream_t stream[FG_CUDA_NSTREAMS];
    cublasHandle_t blas;
};

#define CU_CHECK(call, what)                                                                     \
    do {                                                                                         \
        cudaError_t e_ = (call);                                                                 \
        if (e_ != cudaSuccess)                                                                   \
            return fg_err_set(FG_ERUNTIME, "cuda: %s failed: %s (%s:%d)", what, cudaGetErrorString(e_), \
                              __FILE__, __LINE__);                                               \
    } while (0)

extern "C" int fg_cuda_available(char *name, size_t name_len) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n < 1) {
        cudaGetLastError();   // clear the sticky "no device" error
        return 0;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return 0;
    if (name && name_len) snprintf(name, name_len, "%s", p.name);
    return 1;
}

extern "C" fg_status fg_cuda_new(int dev, uint64_t budget, fg_cuda **out) {
    *out = NULL;
    CU_CHECK(cudaSetDevice(dev), "cudaSetDevice");
    size_t free_b = 0, total_b = 0;
    CU_CHECK(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
    if (budget == 0 || budget > free_b) {
        if (budget > free_b)
            return fg_err_set(FG_EINPUT, "cuda: --gpu-mem %llu bytes is more than the %zu bytes free on device %d",
                              (unsigned long long)budget, free_b, dev);
        budget = free_b;
    }
    fg_cuda *c = (fg_cuda *)calloc(1, sizeof *c);
    if (!c) return fg_err_set(FG_ERUNTIME, "cuda: out of host memory");
    c->dev = dev;
    c->budget = budget;
    for (int i = 0; i < FG_CUDA_NSTREAMS; i++)
        if (cudaStreamCreateWithFlags(&c->stream[i], cudaStreamNonBlocking) != cudaSuccess) {
            fg_cuda_destroy(&c);
            return fg_err_set(FG_ERUNTIME, "cuda: cannot create streams");
        }
    if (cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) {
        fg_cuda_destroy(&c);
        return fg_err_set(FG_ERUNTIME, "cuda: cublasCreate failed");
    }
    cublasSetStream(c->blas, c->stream[FG_CUDA_STREAM_COMPUTE]);
    *out = c;
    return FG_OK;
}

extern "C" void fg_cuda_destroy(fg_cuda **cp) {
    fg_cuda *c = *cp;
    if (!c) return;
    if (c->blas) cublasDestroy(c->blas);
    for (int i = 0; i < FG_CUDA_NSTREAMS; i++)
        if (c->stream[i]) cudaStreamDestroy(c->stream[i]);
    free(c);
    *cp = NULL;
}

extern "C" void *fg_cuda_alloc(fg_cuda *c, size_t nbytes) {
    if (c->used + nbytes > c->budget) {
        fg_err_set(FG_EINPUT, "cuda: allocating %zu bytes would pass the GPU budget (%llu of %llu used)", nbytes,
                   (unsigned long long)c->used, (unsigned long long)c->budget);
        return NULL;
    }
    void *p = NULL;
    if (cudaMalloc(&p, nbytes) != cudaSuccess) {
        cudaGetLastError();
        fg_err_set(FG_ERUNTIME, "cuda: cudaMalloc of %zu bytes failed", nbytes);
        return NULL;
    }
    c->used += nbytes;
    return p;
}

extern "C" void fg_cuda_free(fg_cuda *c, void *p, size_t nbytes) {
    if (!p) return;
    cudaFree(p);
    c->used -= nbytes;
}

extern "C" uint64_t fg_cuda_used(const fg_cuda *c) { return c->used; }

extern "C" fg_status fg_cuda_pin(fg_cuda *c, void *host, size_t nbytes) {
    (void)c;
    CU_CHECK(cudaHostRegister(host, nbytes, cudaHostRegisterDefault), "cudaHostRegister");
    return FG_OK;
}

extern "C" fg_status fg_cuda_unpin(fg_cuda *c, void *host) {
    (void)c;
    CU_CHECK(cudaHostUnregister(host), "cudaHostUnregister");
    return FG_OK;
}

extern "C" fg_status fg_cuda_h2d(fg_cuda *c, void *dst, const void *src, size_t n, int s) {
    CU_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyHostToDevice, c->stream[s]), "cudaMemcpyAsync(H2D)");
    return FG_OK;
}

extern "C" fg_status fg_cuda_d2h(fg_cuda *c, void *dst, const void *src, size_t n, int s) {
    CU_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, c->stream[s]), "cudaMemcpyAsync(D2H)");
    return FG_OK;
}

extern "C" fg_status fg_cuda_sync(fg_cuda *c, int s) {
    CU_CHECK(cudaStreamSynchronize(c->stream[s]), "cudaStreamSynchronize");
    return FG_OK;
}

// x (n) fp32 -> fp16, round to nearest even (as fg_float_to_half).
__global__ static void k_f32_to_f16(const float *x, __half *y, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] = __float2half_rn(x[i]);
}

// y (rows, out) += bias (out) fp16
__global__ static void k_add_bias(float *y, const __half *b, int rows, int out) {
    size_t n = (size_t)rows * out;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        y[i] += __half2float(b[i % out]);
}

extern "C" fg_status fg_cuda_gemm_f16w(fg_cuda *c, float *y, const float *x, const uint16_t *W, const uint16_t *bias,
                                       int rows, int in, int out, uint16_t *scratch) {
    cudaStream_t s = c->stream[FG_CUDA_STREAM_COMPUTE];
    size_t n = (size_t)rows * in;
    k_f32_to_f16<<<(unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096), 256, 0, s>>>(x, (__half *)scratch, n);
    // cuBLAS is column-major: row-major y (rows, out) is y^T (out x rows, ld out), and
    // y^T = W x^T. Row-major W (out, in) reads as the column-major (in x out) matrix W^T,
    // so op(A) = T with lda = in; row-major x (rows, in) reads as x^T (in x rows), op(B) = N.
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasGemmEx(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &one, W, CUDA_R_16F, in,
                                     scratch, CUDA_R_16F, in, &zero, y, CUDA_R_32F, out, CUBLAS_COMPUTE_32F,
                                     CUBLAS_GEMM_DEFAULT);
    if (st != CUBLAS_STATUS_SUCCESS) return fg_err_set(FG_ERUNTIME, "cuda: cublasGemmEx failed (status %d)", (int)st);
    if (bias) {
        size_t m = (size_t)rows * out;
        k_add_bias<<<(unsigned)((m + 255) / 256 < 4096 ? (m + 255) / 256 : 4096), 256, 0, s>>>(y, (const __half *)bias,
                                                                                          rows, out);
    }
    CU_CHECK(cudaGetLastError(), "kernel launch");
    return FG_OK;
}

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

extern "C" void fg_cuda_bench_destroy(fg_cuda_bench **bp) {
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

extern "C" fg_status fg_cuda_bench_new(int H, int F, int max_rows, uint64_t copy_bytes, fg_cuda_bench **out) {
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
        fg_cuda_bench_destroy(&b);
        return fg_err_set(FG_ERUNTIME, "cuda: the profile's baselines: %s", cudaGetErrorString(e));
    }
    if (cublasCreate(&b->blas) != CUBLAS_STATUS_SUCCESS || cublasSetStream(b->blas, b->s) != CUBLAS_STATUS_SUCCESS) {
        fg_cuda_bench_destroy(&b);
        return fg_err_set(FG_ERUNTIME, "cuda: the profile's baselines: cublasCreate failed");
    }
    *out = b;
    return FG_OK;
}

extern "C" fg_status fg_cuda_bench_layer_gemms(fg_cuda_bench *b, int rows) {
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

extern "C" fg_status fg_cuda_bench_pinned_copy(fg_cuda_bench *b, int to_device) {
    if (to_device) CU_CHECK(cudaMemcpyAsync(b->dev, b->host, b->copy_bytes, cudaMemcpyHostToDevice, b->s), "pinned H2D");
    else CU_CHECK(cudaMemcpyAsync(b->host, b->dev, b->copy_bytes, cudaMemcpyDeviceToHost, b->s), "pinned D2H");
    CU_CHECK(cudaStreamSynchronize(b->s), "pinned copy");
    return FG_OK;
}
