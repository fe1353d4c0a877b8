/* cuda_ops.h - between the cuda backend's table and context
 * (backend_cuda.c) and its ops (cuda_ops.c): the ops reach the context only
 * through these accessors, and the table takes the ops from here. */
#ifndef FG_CUDA_OPS_H
#define FG_CUDA_OPS_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "fg_backend.h"
#include "fg_devsize.h"

cudaStream_t fg_cu_compute(void *ctx);
cublasHandle_t fg_cu_blas(void *ctx);
/* The workspace's base (device) and its layout. */
uint8_t *fg_cu_ws(void *ctx, const fg_cuda_ws **ws);
/* A pinned int32 for reading a flag back. */
int32_t *fg_cu_bad_host(void *ctx);
/* Pinned host memory of at least n bytes (grown on demand; NULL + message
 * when it cannot be had); fg_sample's scratch for V logits. */
void *fg_cu_pinned(void *ctx, size_t n);
float *fg_cu_samp(void *ctx, size_t V);
/* Pinned: a sparse layer's counts and starts (2 FG_CONFIG_MAX_EXPERTS + 1
 * int32) read back to size its experts' GEMMs. */
int32_t *fg_cu_moe_host(void *ctx);

fg_status fg_cu_embed(void *ctx, const fg_op_args *a);
fg_status fg_cu_attn(void *ctx, const fg_op_args *a);
fg_status fg_cu_attn_qkv(void *ctx, const fg_op_args *a);
fg_status fg_cu_attn_out(void *ctx, const fg_op_args *a);
fg_status fg_cu_mlp(void *ctx, const fg_op_args *a);
fg_status fg_cu_layer(void *ctx, const fg_op_args *a);
fg_status fg_cu_lm_head(void *ctx, const fg_op_args *a);
fg_status fg_cu_sample(void *ctx, const fg_op_args *a);
fg_status fg_cu_moe_route(void *ctx, const fg_op_args *a);
fg_status fg_cu_mlp_split(void *ctx, const fg_op_args *a);

#endif
