/* fg_engine_ops.h - the engine's COMPUTE and CPU_ATTN ops: op codes, which
 * handle goes in which slot, and the parameter structs (little-endian, packed
 * as written). The coordinator builds these; the gpu_worker's backends and
 * the cpu_worker run them. Every op is idempotent: it reads fixed inputs and
 * writes fixed outputs (the cache writes of an attention op rewrite the same
 * positions with the same values), so a restarted worker can be given it again.
 *
 * Device memory: a handle whose segment is FG_SEG_DEVICE names bytes of the
 * gpu_worker's device arena (GPU memory; the host backend's budget-limited
 * heap), offset from the arena's start. COPY between a shm handle and a
 * device handle is a host-to-device or device-to-host transfer.
 *
 * Tensors: hidden states, q, k, v, ctx and the KV cache are fp16; weights are
 * fp16 in the shapes fg_specs_new() gives; ids int32; masks uint8 (1 = real
 * token); logits fp32. B = sequences, S = new tokens per sequence.
 *
 *   FG_OP_DEVICE_INIT  gpu  params fg_op_init. Allocates the arena (and the
 *                      compute workspace), both within budget, or refuses.
 *                      Again with the same params: no-op. Other params:
 *                      a fresh arena (contents lost). No handles.
 *   FG_OP_EMBED        gpu  in: ids (B*S), mask (B, mask_stride), embed_tokens,
 *                      embed_pos, project_in (nbytes 0 if none); out: h (B*S, H)
 *   FG_OP_ATTN         gpu  in: h, mask, kc, vc (Tmax, B, H) time-major, then the layer's
 *                      q_w q_b k_w k_b v_w v_b o_w o_b ln1_w ln1_b; out: h
 *                      (in place allowed: out[0] may equal in[0]); writes k, v
 *                      of the step into kc, vc at [past, past+S)
 *   FG_OP_ATTN_QKV     gpu  in: h, q_w q_b k_w k_b v_w v_b ln1_w ln1_b;
 *                      out: q, k, v (B*S, H)
 *   FG_OP_ATTN_OUT     gpu  in: h, ctx, o_w o_b ln1_w ln1_b; out: h
 *   FG_OP_MLP          gpu  in: h, fc1_w fc1_b fc2_w fc2_b ln2_w ln2_b; out: h
 *   FG_OP_LM_HEAD      gpu  in: h, final_ln_w, final_ln_b (0 bytes for
 *                      post-LN models), project_out (0 if none), embed_tokens;
 *                      out: logits (B, V) of each sequence's last new token
 *   FG_OP_SAMPLE       gpu  in: logits (B, V) fp32, rng (B) u64 generator
 *                      states, advanced in place; out: ids (B) int32, the
 *                      next token of each sequence (fg_sample: greedy, or
 *                      temperature and top-p). params: fg_op_sample. Sampling
 *                      where the logits are lets the next embedding follow
 *                      the LM head with no round trip through the coordinator
 *   FG_OP_ATTN_CORE    cpu (CPU_ATTN) in: q, k, v, kc, vc, mask; out: ctx.
 *                      cpu_cache_compute: attention where the cache lives
 *   FG_OP_LAYER        gpu  ATTN then MLP as one command (half the commands
 *                      per layer): in: h, mask, kc, vc, then q_w q_b k_w k_b
 *                      v_w v_b o_w o_b ln1_w ln1_b fc1_w fc1_b fc2_w fc2_b
 *                      ln2_w ln2_b; out: h;
 *                      writes k, v into kc, vc at [past, past+S) like ATTN
 *
 * Every op but DEVICE_INIT takes params fg_op_step (SAMPLE: fg_op_sample); on the gpu its model must
 * be DEVICE_INIT's and B*S <= max_rows. Tmax is read only by the cache ops
 * (ATTN, ATTN_CORE: Tmax >= past+S), mask_stride only by the ops with a mask
 * (>= past+S); EMBED needs past+S <= max_pos and ids in [0, V). Each handle
 * must have exactly the bytes its shape implies (an absent weight: 0) and be
 * aligned to its element size, or the op is refused naming the slot. */
#ifndef FG_ENGINE_OPS_H
#define FG_ENGINE_OPS_H

#include <stdint.h>

#include "fg_msg.h"

#define FG_SEG_DEVICE (FG_SHM_MAX_SEGMENTS - 1)   /* handle segment of device memory */

enum {
    FG_OP_DEVICE_INIT = FG_OP_ENGINE_FIRST,
    FG_OP_EMBED,
    FG_OP_ATTN,
    FG_OP_ATTN_QKV,
    FG_OP_ATTN_OUT,
    FG_OP_MLP,
    FG_OP_LM_HEAD,
    FG_OP_ATTN_CORE,
    FG_OP_LAYER,
    FG_OP_SAMPLE,
};

/* The model shape every op needs (a subset of fg_opt_config). */
typedef struct {
    uint32_t vocab_size, hidden, n_heads, ffn_dim, max_pos, word_embed_proj_dim, pre_ln;
} fg_op_model;

typedef struct {
    fg_op_model model;
    uint32_t pad0;             /* 0: the padding made explicit */
    uint64_t arena_bytes;      /* device arena */
    uint64_t budget_bytes;     /* --gpu-mem: arena + workspace must fit; 0 = no limit */
    uint32_t max_rows;         /* workspace rows: gbs * prompt length */
    uint32_t pad1;             /* 0 */
} fg_op_init;

typedef struct {
    fg_op_model model;
    uint32_t B, S, past, Tmax, mask_stride;
} fg_op_step;

/* SAMPLE's params: the step (B; S = 1), then the sampler's settings. */
typedef struct {
    fg_op_step step;
    float temperature;   /* 0 = greedy */
    float top_p;         /* 1 = off */
} fg_op_sample;

_Static_assert(sizeof(fg_op_sample) == 56, "fg_op_sample: no hidden padding");
_Static_assert(sizeof(fg_op_model) == 28, "fg_op_model: 7 x u32");
_Static_assert(sizeof(fg_op_init) == 56, "fg_op_init: no hidden padding");
_Static_assert(sizeof(fg_op_step) == 48, "fg_op_step: no hidden padding");

#endif
