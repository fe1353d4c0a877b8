/* fg_cuda.h - what the cuda module (gpu_worker/cuda/, loaded by
 * gpu_worker/backends.c) offers beside its backend table: the baselines the
 * gpu worker's --profile holds the backend's figures against, bare cuBLAS
 * GEMMs of a layer's shapes and copies from cudaMallocHost memory; and the
 * weight formats' device code for tests/gpu/cuda_fmt_check. Found by name
 * (fg_backend_cuda_sym(FG_CUDA_BASELINES_SYM), FG_CUDA_FMT_PROBE_SYM), so
 * the programs that use them link no CUDA library. They run outside the
 * backend's arena. */
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

/* The backend's weight-format code on host buffers (a stream, cuBLAS and
 * device copies of its own), so a test can hold it to the CPU's element by
 * element. W is a matrix (out, in) in fmt, laid out as common/fg_fmt.h says
 * (fg_fmt_bytes(fmt, out, in) bytes). */
typedef struct fg_cuda_fmt_probe fg_cuda_fmt_probe;
typedef struct {
    fg_status (*probe_new)(fg_cuda_fmt_probe **out);
    void (*probe_destroy)(fg_cuda_fmt_probe **p);
    /* Every row of W dequantized on the device by the kernel the embedding's
     * gather and the prefill tile run (fg_cuk_fmt_rows): into f32 (out, in)
     * fp32 and, separately, into f16 (out, in) fp16. */
    fg_status (*dequant)(fg_cuda_fmt_probe *p, int fmt, const void *W, int out, int in, float *f32, uint16_t *f16);
    /* y (rows, out) = alpha x (rows, in) W^T + beta y through the backend's
     * Linear (fg_cu_linear) with a dequantization tile of tile_bytes; y fp32
     * (y32 1) or fp16, read where beta != 0. */
    fg_status (*linear)(fg_cuda_fmt_probe *p, int fmt, const void *W, int out, int in, const uint16_t *x, int rows,
                        float alpha, float beta, int y32, void *y, uint64_t tile_bytes);
} fg_cuda_fmt_probe_table;

#define FG_CUDA_FMT_PROBE_SYM "fg_cuda_fmt_probe_fns"
extern const fg_cuda_fmt_probe_table fg_cuda_fmt_probe_fns;

#ifdef __cplusplus
}
#endif
#endif
