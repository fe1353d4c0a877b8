/* fg_cuda.h - what the cuda module (gpu_worker/cuda/, loaded by
 * gpu_worker/backends.c) offers beside its backend table: the baselines the
 * gpu worker's --profile holds the backend's figures against, bare cuBLAS
 * GEMMs of a layer's shapes and copies from cudaMallocHost memory. Found by
 * name (fg_backend_cuda_sym(FG_CUDA_BASELINES_SYM)), so the programs that
 * use them link no CUDA library. They run outside the backend's arena. */
#ifndef FG_CUDA_H
#define FG_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "fg_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fg_cuda_bench fg_cuda_bench;

typedef struct {
    /* A layer's weights (H, F), activations for max_rows rows, copy_bytes
     * of device memory and as much cudaMallocHost memory. */
    fg_status (*bench_new)(int H, int F, int max_rows, uint64_t copy_bytes, fg_cuda_bench **out);
    void (*bench_destroy)(fg_cuda_bench **b);
    /* A decoder layer's six GEMMs at `rows` rows as bare cublasGemmEx calls
     * (fp16 in, fp32 sums; q, k, v, fc1 fp16 out, out_proj and fc2 fp32
     * out, as the backend's), then a synchronize: 2 rows (4 H^2 + 2 H F)
     * FLOPs. */
    fg_status (*layer_gemms)(fg_cuda_bench *b, int rows);
    /* copy_bytes between cudaMallocHost memory and the device (to_device 1:
     * host to device): cudaMemcpyAsync, then synchronize. */
    fg_status (*pinned_copy)(fg_cuda_bench *b, int to_device);
} fg_cuda_baselines;

#define FG_CUDA_BASELINES_SYM "fg_cuda_baselines_table"
extern const fg_cuda_baselines fg_cuda_baselines_table;

#ifdef __cplusplus
}
#endif
#endif
