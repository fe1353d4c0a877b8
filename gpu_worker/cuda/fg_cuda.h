/* fg_cuda.h - the CUDA side of the gpu_worker, as a C API: device discovery,
 * device memory under a budget, async copies on separate host-to-device and
 * device-to-host streams (the GPU's copy engines) and the compute stream, and
 * the fp16-weight Linear through cuBLAS (fp16 inputs, fp32 accumulation).
 * Built only where a CUDA toolkit exists; every call returns a status and
 * leaves a message, and fg_cuda_available() is 0 where no GPU can be used,
 * so callers and tests fall back to the host backend or skip. */
#ifndef FG_CUDA_H
#define FG_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "fg_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fg_cuda fg_cuda;

enum { FG_CUDA_STREAM_COMPUTE = 0, FG_CUDA_STREAM_H2D = 1, FG_CUDA_STREAM_D2H = 2, FG_CUDA_NSTREAMS = 3 };

/* 1 if a CUDA device can be opened; fills name (may be NULL). Never fails hard. */
int fg_cuda_available(char *name, size_t name_len);

/* Open device `dev` with a memory budget in bytes (0 = whatever is free). */
fg_status fg_cuda_new(int dev, uint64_t budget, fg_cuda **out);
void fg_cuda_destroy(fg_cuda **c);

/* Device memory, counted against the budget: NULL (and a message) past it. */
void *fg_cuda_alloc(fg_cuda *c, size_t nbytes);
void fg_cuda_free(fg_cuda *c, void *p, size_t nbytes);
uint64_t fg_cuda_used(const fg_cuda *c);

/* Page-lock host memory (shared-memory segments) so copies run at full speed
 * and asynchronously on the copy engines. */
fg_status fg_cuda_pin(fg_cuda *c, void *host, size_t nbytes);
fg_status fg_cuda_unpin(fg_cuda *c, void *host);

/* Async copies on a stream; fg_cuda_sync waits for one stream. */
fg_status fg_cuda_h2d(fg_cuda *c, void *dst, const void *src, size_t nbytes, int stream);
fg_status fg_cuda_d2h(fg_cuda *c, void *dst, const void *src, size_t nbytes, int stream);
fg_status fg_cuda_sync(fg_cuda *c, int stream);

/* On the compute stream, device pointers:
 * y (rows, out) fp32 = x (rows, in) fp32 . W (out, in)^T fp16 (+ bias (out) fp16).
 * x is rounded to fp16 for the tensor cores, sums are fp32.
 * scratch: rows*in fp16 elements of device memory. */
fg_status fg_cuda_gemm_f16w(fg_cuda *c, float *y, const float *x, const uint16_t *W, const uint16_t *bias,
                            int rows, int in, int out, uint16_t *scratch);

/* ---- baselines for --profile: what the backend's own figures are held
 * against, outside its arena ---- */
typedef struct fg_cuda_bench fg_cuda_bench;
/* A layer's weights (H, F), activations for max_rows rows, copy_bytes of
 * device memory and as much cudaMallocHost memory. */
fg_status fg_cuda_bench_new(int H, int F, int max_rows, uint64_t copy_bytes, fg_cuda_bench **out);
void fg_cuda_bench_destroy(fg_cuda_bench **b);
/* A decoder layer's six GEMMs at `rows` rows as bare cublasGemmEx calls
 * (fp16 in, fp32 sums; q, k, v, fc1 fp16 out, out_proj and fc2 fp32 out, as
 * the backend's), then a synchronize: 2 rows (4 H^2 + 2 H F) FLOPs. */
fg_status fg_cuda_bench_layer_gemms(fg_cuda_bench *b, int rows);
/* copy_bytes between cudaMallocHost memory and the device (to_device 1:
 * host to device), cudaMemcpyAsync and synchronize. */
fg_status fg_cuda_bench_pinned_copy(fg_cuda_bench *b, int to_device);

#ifdef __cplusplus
}
#endif
#endif
