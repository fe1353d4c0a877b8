/* fg_backend.h - the gpu_worker's compute backends, ggml-style: a backend is
 * one `static const` table of function pointers plus a context pointer.
 * gpu_ops.c decodes and checks every command (fg_op_args: handle counts,
 * sizes against the shapes, rows against the workspace, the model against
 * DEVICE_INIT's) and then calls a slot here, so a backend only allocates and
 * computes. The host backend (backend_host.c) is the reference; a cuda one
 * fills the same table and a test runs each op on both and compares.
 *
 * Tensor pointers are what fg_worker_ptr resolves a handle to: into the arena
 * this backend returned from device_init (FG_SEG_DEVICE handles), or into shm.
 * Shapes: B sequences, S new tokens each, H hidden, V vocabulary, Tmax cache
 * positions; the weights sit in a->lw / a->gw (fg_opt.h), the mask in
 * a->st.mask. An op's output may be its input (h in place); a backend reads
 * all of an input before it writes an output.
 *
 * Every slot is required: there is no fallback between ops of one step,
 * whose intermediates live in the backend's own memory.
 *
 * Errors: FG_EINPUT for what the command got wrong that only the backend can
 * see (an id outside the vocabulary), FG_ERUNTIME when the device fails;
 * message via fg_err_set. Never exit. */
#ifndef FG_BACKEND_H
#define FG_BACKEND_H

#include "fg_op_args.h"

typedef struct {
    const char *name;  /* "host": logs and the READY info */

    /* At worker start, before READY: open the device, make *ctx. A failure
     * is a setup failure (the worker exits with the message). */
    fg_status (*open)(void **ctx);
    /* At worker exit: free everything ctx holds. */
    void (*close)(void *ctx);

    /* DEVICE_INIT with params other than the current ones (gpu_ops.c answers
     * a repeat itself). Allocate an arena of p->arena_bytes and the compute
     * workspace for p->max_rows rows of model c, in place of what there was.
     * Over p->budget_bytes (0: no limit) -> FG_EINPUT naming the numbers,
     * and the old arena stays. Either way *base, *size get the arena that
     * FG_SEG_DEVICE handles now index (NULL, 0 if none). */
    fg_status (*device_init)(void *ctx, const fg_op_init *p, const fg_opt_config *c, void **base,
                             uint64_t *size);
    /* Device bytes (arena + workspace): held now, and the most ever held. */
    uint64_t (*mem_bytes)(const void *ctx, int peak);

    /* EMBED: h (B*S, H) fp16 from ids (B*S) int32. */
    fg_status (*embed)(void *ctx, const fg_op_args *a, const int32_t *ids, fg_half *h);
    /* ATTN: h_out (B*S, H) = the attention block of h_in (B*S, H); the
     * step's k, v into kc, vc (Tmax, B, H) fp16 at [past, past+S). */
    fg_status (*attn)(void *ctx, const fg_op_args *a, const fg_half *h_in, fg_half *kc, fg_half *vc,
                      fg_half *h_out);
    /* ATTN_QKV: q, k, v (B*S, H) fp16 from h (B*S, H); q scaled. */
    fg_status (*attn_qkv)(void *ctx, const fg_op_args *a, const fg_half *h, fg_half *q, fg_half *k, fg_half *v);
    /* ATTN_OUT: h_out (B*S, H) from h_in and the attention context ctx16
     * (B*S, H) fp16. */
    fg_status (*attn_out)(void *ctx, const fg_op_args *a, const fg_half *h_in, const fg_half *ctx16,
                          fg_half *h_out);
    /* MLP: h_out (B*S, H) = the MLP block of h_in (B*S, H). */
    fg_status (*mlp)(void *ctx, const fg_op_args *a, const fg_half *h_in, fg_half *h_out);
    /* LM_HEAD: logits (B, V) fp32 of each sequence's last new token of h
     * (B*S, H). */
    fg_status (*lm_head)(void *ctx, const fg_op_args *a, const fg_half *h, float *logits);
    /* SAMPLE: ids (B) from logits (B, V) with fg_sample's rule (bitwise the
     * reference engine's choice), advancing each row's generator rng[b]. */
    fg_status (*sample)(void *ctx, const fg_op_args *a, const float *logits, uint64_t *rng, int32_t *ids);
} fg_backend;

extern const fg_backend fg_backend_host;

#endif
