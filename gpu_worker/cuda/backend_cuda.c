/* backend_cuda.c - the cuda backend: the same table as the host backend
 * (fg_backend.h), on an NVIDIA GPU. Device memory is one cudaMalloc per
 * DEVICE_INIT (the arena, then the workspace laid out by fg_devsize_cuda_layout,
 * cuBLAS's workspace included), held to --gpu-mem; no managed memory.
 * Three non-blocking streams: 0 compute (every kernel and GEMM), 1
 * host-to-device and 2 device-to-host copies. Shm segments are registered
 * with cudaHostRegister as the worker maps them, so copies from and to
 * them are DMA on the copy engines. The worker loop calls synchronize
 * before every DONE, so a command's `after` dependencies are met on the
 * host (the command ran to its end) rather than by CUDA events.
 *
 * Numerics: tensors are fp16 and every GEMM is cuBLAS's fp16 x fp16 with
 * fp32 accumulation (cublasGemmEx, CUBLAS_COMPUTE_32F), but a Linear whose
 * weight is in another format (a GGUF file's ggml blocks, FlexGen's
 * Q4G64): up to FG_CUDA_GEMV_MAX_ROWS rows a dequantizing GEMV on the
 * weight's exact fp32 values, above that the weight dequantized to fp16 a
 * tile at a time for cuBLAS (cuda_linear.c). Outputs are rounded
 * to fp16 at the design's points (embedding, q k v, ctx, each block's
 * output), and the bias of an fp16 output enters as cuBLAS's C with beta 1,
 * so x W^T + b is rounded once, as the host rounds it. Where the host keeps
 * fp32 between two GEMMs (a LayerNorm's output, fc1's, project_out's,
 * the softmax weights of prefill attention) fp16 storage rounds once more:
 * that, and summation order, is all that separates the two backends
 * (tests/gpu/backend_ops_check.c states the tolerances). SAMPLE is greedy
 * argmax on the device; with a temperature, the logits come to the host
 * and the reference sampler (fg_sample, the same generator) draws, so the
 * tokens are the host's given the same logits. */
#include <inttypes.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "fg_fmt.h"

#include "cuda_ops.h"
#include "fg_backend.h"
#include "fg_devsize.h"
#include "fg_sample.h"

#define NSTREAMS 3
#define FG_CUDA_MOE_HOST_BYTES (sizeof(int32_t) * (2 * FG_CONFIG_MAX_EXPERTS + 1))   /* counts (E), starts (E + 1) */

typedef struct {
    char dev_name[256];
    cudaStream_t st[NSTREAMS];
    cublasHandle_t blas;
    uint8_t *mem;            /* arena (p.arena_bytes, rounded up to FG_CUDA_WS_ALIGN), then the workspace */
    uint64_t arena_al;       /* the workspace's offset in mem */
    fg_cuda_ws ws;
    fg_op_init p;
    uint64_t held, peak;
    int32_t *bad_host;       /* pinned: EMBED's flag, read back */
    int32_t *moe_host;       /* pinned: a sparse layer's counts and starts, read back (FG_CUDA_MOE_HOST_BYTES) */
    uint8_t *pin;            /* pinned: SAMPLE's logits, states and ids on the host */
    size_t pin_bytes;
    float *samp;             /* fg_sample's scratch, 2 V */
    size_t samp_n;
    struct { uint8_t *p; uint64_t n; } *reg;   /* host ranges registered, unregistered at close */
    size_t nreg, capreg;
} cu_ctx;

static fg_status cu_fail(int e, const char *what) {
    return fg_err_set(FG_ERUNTIME, "cuda: %s: %s", what, cudaGetErrorString((cudaError_t)e));
}
#define CU(call, what)                              \
    do {                                            \
        int e_ = (int)(call);                       \
        if (e_) return cu_fail(e_, what);           \
    } while (0)
#define BL(call, what)                                                                                      \
    do {                                                                                                    \
        cublasStatus_t b_ = (call);                                                                         \
        if (b_ != CUBLAS_STATUS_SUCCESS)                                                                    \
            return fg_err_set(FG_ERUNTIME, "cuBLAS: %s: %s", what, cublasGetStatusString(b_));              \
    } while (0)

/* ---- memory ------------------------------------------------------------- */

static void release(cu_ctx *c) {
    if (c->mem) cudaFree(c->mem);
    c->mem = NULL;
    c->held = 0;
}

static fg_status cu_device_init(void *ctx, const fg_op_init *p, const fg_model_config *cfg) {
    cu_ctx *c = ctx;
    fg_cuda_ws ws;
    /* the routers cuda_moe.cu runs (softmax, top k, renormalised or not) and
     * routed experts only: any other kind is refused, never run as one of these */
    if (cfg->n_experts && cfg->router != FG_ROUTER_MIXTRAL && cfg->router != FG_ROUTER_QWEN3_MOE)
        return fg_err_set(FG_EINPUT, "DEVICE_INIT: router kind %d of this mixture of experts is not implemented on "
                                     "the cuda backend (HINT: --device host)", cfg->router);
    if (cfg->n_experts && cfg->n_shared_experts)
        return fg_err_set(FG_EINPUT, "DEVICE_INIT: shared experts (%d) are not implemented on the cuda backend "
                                     "(HINT: --device host)", cfg->n_shared_experts);
    fg_devsize_cuda_layout(cfg, p->max_rows, &ws);   /* what the plan counted */
    if (p->arena_bytes > UINT64_MAX - ws.total - FG_CUDA_WS_ALIGN ||
        (p->budget_bytes && p->arena_bytes + ws.total > p->budget_bytes))
        return fg_err_set(FG_EINPUT, "DEVICE_INIT: arena %" PRIu64 " + workspace %" PRIu64 " bytes (%" PRIu32
                          " rows) exceed the device budget of %" PRIu64 " bytes (--gpu-mem)",
                          p->arena_bytes, ws.total, p->max_rows, p->budget_bytes);
    for (int s = 0; s < NSTREAMS; s++) CU(cudaStreamSynchronize(c->st[s]), "DEVICE_INIT: waiting for the streams");
    release(c);
    uint64_t arena_al = (p->arena_bytes + FG_CUDA_WS_ALIGN - 1) / FG_CUDA_WS_ALIGN * FG_CUDA_WS_ALIGN;
    void *mem = NULL;
    cudaError_t e = cudaMalloc(&mem, arena_al + ws.total);
    if (e != cudaSuccess) {
        size_t fr = 0, tot = 0;
        cudaGetLastError();
        cudaMemGetInfo(&fr, &tot);
        return fg_err_set(FG_ERUNTIME, "DEVICE_INIT: cudaMalloc of %" PRIu64 " bytes (arena + workspace): %s (%zu of "
                          "%zu bytes free)", arena_al + ws.total, cudaGetErrorString(e), fr, tot);
    }
    c->mem = mem;
    c->arena_al = arena_al;
    c->ws = ws;
    c->p = *p;
    BL(cublasSetWorkspace(c->blas, c->mem + arena_al + ws.blas, ws.blas_bytes), "cublasSetWorkspace");
    c->held = p->arena_bytes + ws.total;
    if (c->held > c->peak) c->peak = c->held;
    fg_info("cuda backend: arena %" PRIu64 " + workspace %" PRIu64 " = %" PRIu64 " bytes (budget %" PRIu64
            ", peak %" PRIu64 ")", p->arena_bytes, ws.total, c->held, p->budget_bytes, c->peak);
    return FG_OK;
}

static uint64_t cu_mem_bytes(const void *ctx, int peak) {
    const cu_ctx *c = ctx;
    return peak ? c->peak : c->held;
}

static void cu_close(void *ctx) {
    cu_ctx *c = ctx;
    if (!c) return;
    cudaDeviceSynchronize();
    for (size_t i = 0; i < c->nreg; i++) cudaHostUnregister(c->reg[i].p);   /* a segment unmapped first: an error, ignored */
    free(c->reg);
    release(c);
    if (c->blas) cublasDestroy(c->blas);
    for (int s = 0; s < NSTREAMS; s++)
        if (c->st[s]) cudaStreamDestroy(c->st[s]);
    if (c->bad_host) cudaFreeHost(c->bad_host);
    if (c->moe_host) cudaFreeHost(c->moe_host);
    if (c->pin) cudaFreeHost(c->pin);
    free(c->samp);
    cudaGetLastError();
    free(c);
}

static fg_status cu_open(void **ctx, char *info, size_t cap) {
    *ctx = NULL;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev < 1) {
        cudaGetLastError();
        return fg_err_set(FG_ERUNTIME, "no CUDA device can be opened (no GPU, no driver, or "
                          "CUDA_VISIBLE_DEVICES hides it); --device host runs on the CPU");
    }
    cu_ctx *c = fg_xcalloc(1, sizeof *c);
    struct cudaDeviceProp pr;
    int rt = 0, bv = 0;
    fg_status st = FG_OK;
    if (cudaSetDevice(0) || cudaGetDeviceProperties(&pr, 0)) {
        st = cu_fail(cudaGetLastError(), "opening device 0");
        goto out;
    }
    for (int s = 0; s < NSTREAMS && !st; s++)
        if (cudaStreamCreateWithFlags(&c->st[s], cudaStreamNonBlocking)) st = cu_fail(cudaGetLastError(), "cudaStreamCreate");
    if (!st && cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) st = fg_err_set(FG_ERUNTIME, "cuBLAS: cublasCreate failed");
    if (!st && (cublasSetStream(c->blas, c->st[0]) != CUBLAS_STATUS_SUCCESS ||
                cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH) != CUBLAS_STATUS_SUCCESS))
        st = fg_err_set(FG_ERUNTIME, "cuBLAS: cannot bind the compute stream");
    if (!st && (cudaMallocHost((void **)&c->bad_host, FG_CUDA_FLAGS_BYTES) ||
                cudaMallocHost((void **)&c->moe_host, FG_CUDA_MOE_HOST_BYTES)))
        st = cu_fail(cudaGetLastError(), "cudaMallocHost");
    if (st) goto out;
    cudaRuntimeGetVersion(&rt);
    cublasGetVersion(c->blas, &bv);
    snprintf(c->dev_name, sizeof c->dev_name, "%s", pr.name);
    snprintf(info, cap, "cuda backend: %s (sm_%d%d, %.1f GiB, %d SMs), CUDA runtime %d, cuBLAS %d", pr.name, pr.major,
             pr.minor, (double)pr.totalGlobalMem / (1 << 30), pr.multiProcessorCount, rt, bv);
    *ctx = c;
out:
    if (st) cu_close(c);
    return st;
}

/* ---- data movement ------------------------------------------------------ */

static void *cu_dev_ptr(void *ctx, uint64_t off) { return ((cu_ctx *)ctx)->mem + off; }

static fg_status stream_of(int stream) {
    return stream >= 0 && stream < NSTREAMS ? FG_OK
                                            : fg_err_set(FG_EINPUT, "cuda backend: stream %d is not 0, 1 or 2", stream);
}

/* Pinned and mapped: copies are DMA, and a kernel could read the segment
 * in place. A segment that cannot be pinned still works, through the
 * driver's staging buffers: a warning, not an error. The worker maps a new
 * segment only where no live mapping is, so a registration that overlaps
 * it belongs to a segment unmapped since (replaced at its index): that one
 * is dropped first, or its stale pages would take the new one's copies. */
static fg_status cu_register_host(void *ctx, void *host, uint64_t n) {
    cu_ctx *c = ctx;
    uint8_t *p = host;
    for (size_t i = 0; i < c->nreg;) {
        if (c->reg[i].p < p + n && p < c->reg[i].p + c->reg[i].n) {
            cudaHostUnregister(c->reg[i].p);
            cudaGetLastError();
            c->reg[i] = c->reg[--c->nreg];
        } else {
            i++;
        }
    }
    cudaError_t e = cudaHostRegister(host, n, cudaHostRegisterPortable | cudaHostRegisterMapped);
    if (e != cudaSuccess) {
        cudaGetLastError();
        fg_warn("cuda backend: cudaHostRegister of %" PRIu64 " bytes at %p: %s; its copies will be staged, not DMA", n,
                host, cudaGetErrorString(e));
        return FG_OK;
    }
    if (c->nreg == c->capreg) {
        size_t cap = c->capreg ? 2 * c->capreg : 16;
        void *r = realloc(c->reg, cap * sizeof *c->reg);
        if (!r) {
            cudaHostUnregister(host);
            return fg_err_set(FG_ERUNTIME, "cuda backend: out of host memory");
        }
        c->reg = r, c->capreg = cap;
    }
    c->reg[c->nreg].p = p, c->reg[c->nreg].n = n, c->nreg++;
    return FG_OK;
}

static fg_status cu_copy(cu_ctx *c, void *dst, const void *src, uint64_t n, enum cudaMemcpyKind k, int stream) {
    fg_status st = stream_of(stream);
    if (st) return st;
    CU(cudaMemcpyAsync(dst, src, n, k, c->st[stream]), "cudaMemcpyAsync");
    return FG_OK;
}

static fg_status cu_set_async(void *ctx, uint64_t dst_off, const void *src, uint64_t n, int stream) {
    return cu_copy(ctx, cu_dev_ptr(ctx, dst_off), src, n, cudaMemcpyHostToDevice, stream);
}

static fg_status cu_get_async(void *ctx, void *dst, uint64_t src_off, uint64_t n, int stream) {
    return cu_copy(ctx, dst, cu_dev_ptr(ctx, src_off), n, cudaMemcpyDeviceToHost, stream);
}

static fg_status cu_copy_async(void *ctx, uint64_t dst_off, uint64_t src_off, uint64_t n, int stream) {
    return cu_copy(ctx, cu_dev_ptr(ctx, dst_off), cu_dev_ptr(ctx, src_off), n, cudaMemcpyDeviceToDevice, stream);
}

static fg_status cu_synchronize(void *ctx, int stream) {
    cu_ctx *c = ctx;
    fg_status st = stream_of(stream);
    if (st) return st;
    CU(cudaStreamSynchronize(c->st[stream]), "a kernel or copy failed");
    return FG_OK;
}

/* ---- what the ops (cuda_ops.c) see of the context ---------------------- */

cudaStream_t fg_cu_compute(void *ctx) { return ((cu_ctx *)ctx)->st[0]; }
cublasHandle_t fg_cu_blas(void *ctx) { return ((cu_ctx *)ctx)->blas; }
uint8_t *fg_cu_ws(void *ctx, const fg_cuda_ws **ws) {
    cu_ctx *c = ctx;
    *ws = &c->ws;
    return c->mem + c->arena_al;
}
int32_t *fg_cu_bad_host(void *ctx) { return ((cu_ctx *)ctx)->bad_host; }
int32_t *fg_cu_moe_host(void *ctx) { return ((cu_ctx *)ctx)->moe_host; }

void *fg_cu_pinned(void *ctx, size_t n) {
    cu_ctx *c = ctx;
    if (n > c->pin_bytes) {
        if (c->pin) cudaFreeHost(c->pin);
        c->pin = NULL, c->pin_bytes = 0;
        if (cudaMallocHost((void **)&c->pin, n)) {
            cudaGetLastError();
            fg_err_set(FG_ERUNTIME, "cuda: cudaMallocHost of %zu bytes failed", n);
            return NULL;
        }
        c->pin_bytes = n;
    }
    return c->pin;
}

float *fg_cu_samp(void *ctx, size_t V) {
    cu_ctx *c = ctx;
    if (V > c->samp_n) {
        float *s = realloc(c->samp, 2 * V * sizeof(float));
        if (!s) return NULL;
        c->samp = s, c->samp_n = V;
    }
    return c->samp;
}

const fg_backend fg_backend_cuda = {
    .name = "cuda",
    .shares_host_cpu = 0,                    /* a device of its own */
    .formats = (1u << FG_FMT_COUNT) - 1,     /* every format: cuBLAS on F16, cuda_linear.c's kernels on the rest */
    .open = cu_open,                         /* device 0, three streams, cuBLAS on the compute stream */
    .close = cu_close,                       /* unregisters, frees, destroys */
    .workspace_bytes = fg_devsize_cuda_bytes, /* fg_devsize_cuda_layout's total (device/) */
    .device_init = cu_device_init,           /* one cudaMalloc: arena + workspace, budget-checked */
    .mem_bytes = cu_mem_bytes,               /* arena + workspace, now / peak */
    .dev_ptr = cu_dev_ptr,                   /* a device pointer: only kernels and copies read it */
    .register_host = cu_register_host,       /* cudaHostRegister, portable and mapped */
    .set_async = cu_set_async,               /* cudaMemcpyAsync on the command's stream */
    .get_async = cu_get_async,
    .copy_async = cu_copy_async,
    .synchronize = cu_synchronize,           /* cudaStreamSynchronize: async errors surface here */
    .ops = {
        [FG_OPI(FG_OP_EMBED)] = fg_cu_embed,       /* gather (+ project_in GEMM), positions, round */
        [FG_OPI(FG_OP_ATTN)] = fg_cu_attn,         /* LN, q k v GEMMs, cache store, attention, out GEMM */
        [FG_OPI(FG_OP_ATTN_QKV)] = fg_cu_attn_qkv,
        [FG_OPI(FG_OP_ATTN_OUT)] = fg_cu_attn_out,
        [FG_OPI(FG_OP_MLP)] = fg_cu_mlp,           /* LN, fc1 + bias (one rounding), ReLU, fc2 + residual;
                                                    * a sparse layer: route, each chosen expert, weighted sum */
        [FG_OPI(FG_OP_LAYER)] = fg_cu_layer,
        [FG_OPI(FG_OP_LM_HEAD)] = fg_cu_lm_head,   /* final LN of the last tokens, project_out, tied head */
        [FG_OPI(FG_OP_SAMPLE)] = fg_cu_sample,     /* argmax on the device; fg_sample on the host with T > 0 */
        [FG_OPI(FG_OP_MOE_ROUTE)] = fg_cu_moe_route, /* RMSNorm, router, top k, counts: the MLP's own route */
        [FG_OPI(FG_OP_MLP_SPLIT)] = fg_cu_mlp_split, /* the sparse MLP, the cpu worker's experts' outputs given */
    },
};
