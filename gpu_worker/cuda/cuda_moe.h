/* cuda_moe.h - a sparse layer's routing on the device (cuda_moe.cu), as C
 * launchers: the router's logits, the softmax and top k of each row, the
 * rows sorted by expert, and the gather of an expert's rows and the
 * weighted scatter of its outputs. Each mirrors kernels/fg_moe.c (named in
 * its comment). The experts' own MLPs are Linear layers (cuda_linear.c)
 * and the order of it all is cuda_ops.c's. These only launch, on the
 * stream they are given, and return the launch's cudaError_t as an int.
 *
 * Determinism: no atomics, and every sum in a fixed order (a warp's lanes
 * each over a fixed stride, then a butterfly), so the same rows give the
 * same route bit for bit in every op that routes them: MOE_ROUTE's counts
 * are the experts the same rows' MLP reads. */
#ifndef FG_CUDA_MOE_H
#define FG_CUDA_MOE_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Experts a layer may have here: the top k keeps each lane's taken experts
 * in one 32-bit mask (32 lanes x 32), and the sort one thread per expert.
 * FG_CONFIG_MAX_EXPERTS is held to it (cuda_ops.c). */
#define FG_CUK_MOE_MAX_EXPERTS 1024

/* logits (rows, E) fp32 = x32 (rows, H) fp32 . W (E, H) fp16 ^T, fp32 sums
 * (fg_moe.c's router GEMM, on the norm's unrounded output as the host's). */
int fg_cuk_moe_router(float *logits, const float *x32, const uint16_t *W, int rows, int H, int E, cudaStream_t s);

/* fg_moe_route, one warp a row: p (rows, E) in place = softmax(logits)
 * (fp32, the maximum taken off); sel (rows, k) = the k largest p, best
 * first, ties to the lower expert; wt (rows, k) = their p, divided by their
 * sum (added best first) where renorm is 1. 1 <= k <= E <= FG_CUK_MOE_MAX_EXPERTS. */
int fg_cuk_moe_topk(int32_t *sel, float *wt, float *p, int rows, int E, int k, int renorm, cudaStream_t s);

/* fg_moe_mlp's counting sort, in one block: counts (E) = how many of the n
 * = rows * k selections name each expert; with starts (E + 1) and order
 * (n) not NULL, also starts[e] = the selections before expert e's and
 * order[starts[e] ..] = expert e's slots i = row * k + j, ascending (a
 * stable sort). */
int fg_cuk_moe_sort(int32_t *counts, int32_t *starts, int32_t *order, const int32_t *sel, int n, int E,
                    cudaStream_t s);

/* One expert's rows: xg16 (n, H) = x16 rows slots[i] / k (slots: its run of
 * order). */
int fg_cuk_moe_gather(uint16_t *xg16, const uint16_t *x16, const int32_t *slots, int n, int k, int H, cudaStream_t s);

/* An expert's outputs given rather than computed (MLP_SPLIT: the cpu
 * worker's): y32 (n, H) row i = given (rows * k, H) row slots[i]. */
int fg_cuk_moe_take(float *y32, const float *given, const int32_t *slots, int n, int H, cudaStream_t s);

/* acc32 (rows, H) row slots[i] / k += wt[slots[i]] * y32 (n, H) row i, a
 * product then a sum, each rounded (fg_moe_mlp's dst += g * src). An
 * expert's slots name distinct rows, so no two threads add to one element;
 * calling this for the experts in ascending order adds a row's terms in
 * that order, as the host does. */
int fg_cuk_moe_scatter(float *acc32, const float *y32, const int32_t *slots, const float *wt, int n, int k, int H,
                       cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
