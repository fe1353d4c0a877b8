/* fg_devsize.h - what a gpu worker device (--device) costs in memory and
 * whether it is here, for both sides of the run: the coordinator's memory
 * plan and device choice, and the gpu worker's backends, which size their
 * workspace with these same functions, so the budget the plan checks is
 * exactly what DEVICE_INIT allocates. Nothing here loads a backend: whether
 * a GPU is present is asked of the driver (libcuda, dlopen'd on demand),
 * never of the CUDA runtime or cuBLAS.
 *
 * Devices: "host" (the CPU), always built; "cuda", built where CMake found
 * a toolkit (FG_HAVE_CUDA), and sized everywhere, so a GPU's budget can be
 * planned from a preset or another machine's profile in any build. */
#ifndef FG_DEVSIZE_H
#define FG_DEVSIZE_H

#include <stdint.h>

#include "fg_common.h"
#include "fg_config.h"

#ifdef __cplusplus
extern "C" {
#endif

/* FG_OK if `device` is a backend of this build; else FG_EINPUT naming the
 * ones built (a cuda in a build without CUDA says so). Loads nothing. */
fg_status fg_devsize_known(const char *device);

/* FG_OK if `device` is built here and its device is present (cuda: a GPU
 * the driver can open, CUDA_VISIBLE_DEVICES honoured), else FG_EINPUT
 * saying which: what `flexgen run --device` checks before it spawns a
 * worker that could only fail. */
fg_status fg_devsize_usable(const char *device);

/* What runs when no --device is given: $FLEXGEN_DEVICE if set (the tests
 * that hold the host backend's bits pin it), else "cuda" where it is built
 * and the driver finds a GPU, else "host". Decided once per process. */
const char *fg_devsize_default(void);

/* The workspace `device` adds to its arena for max_rows rows of model c:
 * FG_EINPUT for a name no build knows. */
fg_status fg_devsize_workspace_bytes(const char *device, const fg_model_config *c, uint32_t max_rows,
                                     uint64_t *bytes);

/* The host backend's workspace: fg_opt's scratch (fg_opt_ws_bytes), the
 * op's fp32 hidden states (max_rows, H) and SAMPLE's (prob, id) pairs (2 V
 * floats). */
uint64_t fg_devsize_host_bytes(const fg_model_config *c, uint32_t max_rows);

/* The cuda backend's workspace for max_rows = R rows of a model with H
 * hidden, F ffn (the larger of a dense layer's and an expert's), D
 * embedding width, Q = n_heads * head_dim (q and the context), KV =
 * n_kv_heads * head_dim (k and v), FF = F, or 2 F for a gated MLP (gate,
 * then up), V vocabulary, P = max_pos + 2 positions, and for a model with
 * experts E experts of which each row takes k: regions as byte offsets from
 * its start, each FG_CUDA_WS_ALIGN-aligned. For OPT, Q = KV = H. */
#define FG_CUDA_WS_ALIGN 256ull              /* cudaMalloc's alignment, kept for every region */
#define FG_CUDA_FLAGS_BYTES FG_CUDA_WS_ALIGN /* EMBED's flag region: one aligned block */
#define FG_CUDA_BLAS_WS_MAX (32ull << 20)    /* cuBLAS's workspace at most: Hopper's recommended size */
#define FG_CUDA_SCORE_BYTES 6ull             /* a score row's bytes per position: fp32 score, fp16 weight */
/* A Linear whose weight is not F16 (a ggml block format, FlexGen's Q4G64):
 * up to this many rows, a dequantizing GEMV that reads the blocks once;
 * above, the weight dequantized to fp16 a tile of rows at a time into the
 * workspace (w16) and cuBLAS on the tile. Not tuned: no GPU was at hand
 * (gpu_worker/cuda/cuda_linear.c). */
#define FG_CUDA_GEMV_MAX_ROWS 16
#define FG_CUDA_DQ_TILE_MAX (16ull << 20)    /* the dequantization tile at most: 2048 rows of 4096 values */
typedef struct {
    uint64_t x16;        /* (R, max(H, D, Q)) fp16: a norm's output, gathered embeddings, then ctx */
    uint64_t q16;        /* (R, Q) fp16: ATTN's q */
    uint64_t k16, v16;   /* (R, KV) fp16 each: ATTN's k, v */
    uint64_t y32;        /* y32_bytes: (R, max(H, Q)) fp32, the GEMMs that add the residual and q, k
                          * before rotary; before them in ATTN, the prefill attention's score (fp32)
                          * and probability (fp16) tiles */
    uint64_t y32_bytes;  /* max(4 R max(H, Q), FG_CUDA_SCORE_BYTES P): at least one score row of the
                          * longest context */
    uint64_t ff16;       /* (R, max(FF, D)) fp16: fc1's output (gate, up); the LM head's project_out */
    uint64_t w16;        /* w16_bytes: a tile of a non-F16 weight's rows dequantized to fp16 */
    uint64_t w16_bytes;  /* 0 where R <= FG_CUDA_GEMV_MAX_ROWS (every Linear a GEMV), else
                          * min(FG_CUDA_DQ_TILE_MAX, 2 * the largest matrix's values): sized by the
                          * shapes alone, as the plan's config carries no formats, so a model of
                          * F16 matrices has one too */
    uint64_t flags;      /* FG_CUDA_FLAGS_BYTES: EMBED's lowest row with an id outside the vocabulary */
    /* A sparse layer's MLP (cuda_moe.cu; each 0 bytes, at the same offset,
     * for a model without experts). The router reads the norm's fp32
     * output from y32, which then accumulates the experts' terms. */
    uint64_t moe_logits; /* (R, E) fp32: the router's logits, then the softmax */
    uint64_t moe_sel;    /* (R, k) int32: each row's experts, best first */
    uint64_t moe_wt;     /* (R, k) fp32: their routing weights */
    uint64_t moe_order;  /* (R k) int32: the slots r k + j sorted by expert (stable) */
    uint64_t moe_counts; /* (2 E + 1) int32: rows per expert, then their starts in moe_order */
    uint64_t moe_x16;    /* (R, H) fp16: one expert's rows gathered */
    uint64_t moe_y32;    /* (R, H) fp32: that expert's output */
    /* A compressed KV cache (--compress-cache; 0 bytes without): one kv
     * head's keys and values of a sequence expanded to fp16 for prefill's
     * GEMMs, (P, d) each, P bounding every context. */
    uint64_t kv16, kv16_bytes;
    uint64_t blas;       /* cuBLAS's workspace (cublasSetWorkspace), blas_bytes */
    uint64_t blas_bytes; /* min(FG_CUDA_BLAS_WS_MAX, 4 R max(H, F, Q)): room for split-K partial sums of
                          * the largest GEMM's fp32 output; a small model's plan stays small */
    uint64_t total;
} fg_cuda_ws;
void fg_devsize_cuda_layout(const fg_model_config *c, uint32_t max_rows, fg_cuda_ws *ws);
/* Its total: the cuda backend's workspace. */
uint64_t fg_devsize_cuda_bytes(const fg_model_config *c, uint32_t max_rows);

#ifdef __cplusplus
}
#endif

#endif
