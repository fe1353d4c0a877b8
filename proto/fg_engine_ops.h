/* fg_engine_ops.h - the engine's ops, written once: FG_ENGINE_OPS below is
 * the one table from which the op codes, their names, the worker that runs
 * each, its parameter struct and its handle slots all come. The workers'
 * argument checker (runtime/fg_op_args.c) and the coordinator's message
 * builder (fg_op_build, fg_engine_ops.c) both read the table; nothing else
 * lists an op's slots. Adding an op: one X(...) line, one FG_SLOTS_<NAME>
 * line, and its kernels in the backends (gpu_worker/fg_backend.h) or the cpu
 * worker.
 *
 * Every op is idempotent: it reads fixed inputs and writes fixed outputs
 * (the cache writes of an attention op rewrite the same positions with the
 * same values), so a restarted worker can be given it again.
 *
 * Device memory: a handle whose segment is FG_SEG_DEVICE (fg_shm.h) names
 * bytes of the gpu worker's device memory (its backend's arena), offset
 * from the arena's start. A COPY between a shm handle and a device handle
 * is a host-to-device or device-to-host transfer, done by the backend.
 *
 * Tensors: hidden states, q, k, v, ctx and the KV cache are fp16 (the cache
 * FlexGen 4-bit under compress_cache); weights in the shapes fg_specs_new()
 * gives, each in its format (common/fg_fmt.h: fp16, FlexGen 4-bit, or ggml
 * blocks; the op's model description names a layer's, fg_config_fmt); ids int32; masks uint8 (1 =
 * real token); logits fp32; generator states u64. B = sequences, S = new
 * tokens per sequence, H hidden, V vocabulary, Tmax cache positions, A query
 * heads, KV kv heads, d head_dim (the model description's).
 *
 *   DEVICE_INIT  gpu  params fg_op_init. Allocates the arena and the compute
 *                     workspace, both within budget, or refuses. Again with
 *                     the same params: no-op. Other params: a fresh arena
 *                     (contents lost). No handles.
 *   EMBED        gpu  ids -> h: token embeddings (+ learned positions,
 *                     project_in where the model has them)
 *   ATTN         gpu  the attention block of h, in place allowed; writes the
 *                     step's k, v into kc, vc (Tmax, B, KV*d) at [past, past+S)
 *   ATTN_QKV     gpu  h -> q (scaled), k, v (per-head q/k norms and rotary
 *                     where the model has them, positions from the mask)
 *   ATTN_OUT     gpu  h, ctx -> h: out_proj and the residual
 *   MLP          gpu  the MLP block of h (a sparse layer's: its router and
 *                     every expert, the slots fc1/fc2/up holding the
 *                     experts' stacks)
 *   LM_HEAD      gpu  h -> logits (B, V) of each sequence's last new token
 *   ATTN_CORE    cpu  q, k, v, kc, vc, mask -> ctx: attention where the
 *                     cache lives (cpu_cache_compute); writes k, v into the
 *                     cache like ATTN
 *   LAYER        gpu  ATTN then MLP as one command (half the commands)
 *   MOE_ROUTE    gpu  h -> counts (E) int32: how many of the rows a sparse
 *                     layer's MLP block would send to each expert (its
 *                     norm and router on the same h, as MLP runs them), so
 *                     the coordinator loads only those experts before MLP
 *   MOE_CPU      cpu  h -> y (B*S, k, H) fp32: a sparse layer's route on h
 *                     (its norm and router, as MLP runs them) and, for
 *                     the experts [x_lo, x_lo + x_n) held on the CPU (the
 *                     XW slots: those experts' part of each stack), each
 *                     routed row's output of its expert at (row, choice);
 *                     other choices untouched. params fg_op_experts
 *   MLP_SPLIT    gpu  MLP with the outputs of the experts [x_lo, x_lo +
 *                     x_n) given (ycpu, MOE_CPU's) rather than computed;
 *                     the sum is MLP's, term for term. params fg_op_experts
 *   SAMPLE       gpu  logits, rng -> ids (B): the next token of each
 *                     sequence (fg_sample: greedy, or temperature and
 *                     top-p, each row its own: fg_sample_row), generator
 *                     states advanced in place; params
 *                     fg_op_sample. Sampling where the logits are lets the
 *                     next embedding follow the LM head on the device
 *
 * Every op but DEVICE_INIT takes params fg_op_step (SAMPLE: fg_op_sample;
 * MOE_CPU and MLP_SPLIT: fg_op_experts);
 * on the gpu its model must be DEVICE_INIT's and B*S <= max_rows. Tmax is
 * read only by ops with a cache slot (Tmax >= past+S), mask_stride only by
 * ops with a mask (>= past+S); EMBED needs past+S <= max_pos and ids in
 * [0, V). Each handle must have exactly the bytes its slot's shape implies
 * (an absent weight: 0) and be aligned to its element size, or the op is
 * refused naming the slot. */
#ifndef FG_ENGINE_OPS_H
#define FG_ENGINE_OPS_H

#include <stdint.h>

#include "fg_config.h"
#include "fg_msg.h"

/* ---- the table ----------------------------------------------------------- */

/* X(NAME, worker, params): worker GPU (a COMPUTE message to the gpu worker)
 * or CPU (a CPU_ATTN message to the cpu worker); params INIT, STEP or
 * SAMPLE. The order fixes the op codes: append, never reorder. */
#define FG_ENGINE_OPS(X)        \
    X(DEVICE_INIT, GPU, INIT)   \
    X(EMBED, GPU, STEP)         \
    X(ATTN, GPU, STEP)          \
    X(ATTN_QKV, GPU, STEP)      \
    X(ATTN_OUT, GPU, STEP)      \
    X(MLP, GPU, STEP)           \
    X(LM_HEAD, GPU, STEP)       \
    X(ATTN_CORE, CPU, STEP)     \
    X(LAYER, GPU, STEP)         \
    X(SAMPLE, GPU, SAMPLE)      \
    X(MOE_ROUTE, GPU, STEP)     \
    X(MOE_CPU, CPU, EXPERTS)    \
    X(MLP_SPLIT, GPU, EXPERTS)

/* Each op's handle slots in message order: I(name, kind, which) the inputs,
 * O(name, kind, which) the outputs. Kinds (fg_slot_kind): ACT an fp16
 * activation, `which` an FG_ACT_*: H (B*S, H), Q and CTX (B*S, A*d), K and V
 * (B*S, KV*d) (A query heads, KV kv heads of d values: the description's);
 * IDS (B*S) int32; MASK (B, mask_stride) uint8; CACHE (Tmax, B, KV*d) fp16
 * (fg_cache_row_bytes per position and sequence), which 0 = k, 1 = v; LOGITS
 * (B, V) fp32; ECOUNT (E) int32, a count per expert of the model's
 * description; XW the experts [x_lo, x_lo + x_n) of stacked layer weight
 * FG_LW_<which> (x_n experts' bytes: fg_op_experts); EOUT (B*S, k, H) fp32,
 * an expert's output for each row's each choice; RNG (B) fg_sample_row (a generator state and that sequence's temperature and top-p, 16 bytes); LW a decoder-layer weight FG_LW_<which>; GW a
 * model weight FG_GW_<which> (0 bytes where the model has none: a family's
 * ops share the slot lists, each reading the slots its model has). ATTN_QKV
 * reads the mask for rotary positions. */
#define FG_SLOTS_QKV_W(I)                                                                        \
    I(q_w, LW, Q_W) I(q_b, LW, Q_B) I(k_w, LW, K_W) I(k_b, LW, K_B) I(v_w, LW, V_W) I(v_b, LW, V_B) \
    I(q_norm, LW, QN_W) I(k_norm, LW, KN_W)
#define FG_SLOTS_O_W(I) I(o_w, LW, O_W) I(o_b, LW, O_B)
#define FG_SLOTS_LN1_W(I) I(ln1_w, LW, LN1_W) I(ln1_b, LW, LN1_B)
#define FG_SLOTS_ATTN_W(I) FG_SLOTS_QKV_W(I) FG_SLOTS_O_W(I) FG_SLOTS_LN1_W(I)
#define FG_SLOTS_MLP_W(I)                                                                                   \
    I(fc1_w, LW, FC1_W) I(fc1_b, LW, FC1_B) I(fc2_w, LW, FC2_W) I(fc2_b, LW, FC2_B) I(ln2_w, LW, LN2_W) \
    I(ln2_b, LW, LN2_B) I(up_w, LW, UP_W) I(up_b, LW, UP_B) I(router, LW, ROUTER_W)
#define FG_SLOTS_CACHE(I) I(kc, CACHE, 0) I(vc, CACHE, 1)

#define FG_SLOTS_DEVICE_INIT(I, O)
#define FG_SLOTS_EMBED(I, O)                                                                          \
    I(ids, IDS, 0) I(mask, MASK, 0) I(embed_tokens, GW, EMBED_TOKENS) I(embed_pos, GW, EMBED_POS) \
    I(project_in, GW, PROJ_IN) O(h, ACT, H)
#define FG_SLOTS_ATTN(I, O) I(h, ACT, H) I(mask, MASK, 0) FG_SLOTS_CACHE(I) FG_SLOTS_ATTN_W(I) O(h, ACT, H)
#define FG_SLOTS_ATTN_QKV(I, O) \
    I(h, ACT, H) FG_SLOTS_QKV_W(I) FG_SLOTS_LN1_W(I) I(mask, MASK, 0) O(q, ACT, Q) O(k, ACT, K) O(v, ACT, V)
#define FG_SLOTS_ATTN_OUT(I, O) I(h, ACT, H) I(ctx, ACT, CTX) FG_SLOTS_O_W(I) FG_SLOTS_LN1_W(I) O(h, ACT, H)
#define FG_SLOTS_MLP(I, O) I(h, ACT, H) FG_SLOTS_MLP_W(I) O(h, ACT, H)
#define FG_SLOTS_LM_HEAD(I, O)                                                                  \
    I(h, ACT, H) I(final_ln_w, GW, FINAL_LN_W) I(final_ln_b, GW, FINAL_LN_B)                   \
    I(project_out, GW, PROJ_OUT) I(embed_tokens, GW, EMBED_TOKENS) I(lm_head, GW, LM_HEAD) O(logits, LOGITS, 0)
#define FG_SLOTS_ATTN_CORE(I, O) \
    I(q, ACT, Q) I(k, ACT, K) I(v, ACT, V) FG_SLOTS_CACHE(I) I(mask, MASK, 0) O(ctx, ACT, CTX)
#define FG_SLOTS_LAYER(I, O) \
    I(h, ACT, H) I(mask, MASK, 0) FG_SLOTS_CACHE(I) FG_SLOTS_ATTN_W(I) FG_SLOTS_MLP_W(I) O(h, ACT, H)
#define FG_SLOTS_SAMPLE(I, O) I(logits, LOGITS, 0) I(rng, RNG, 0) O(ids, IDS, 0)
#define FG_SLOTS_MOE_CPU(I, O)                                                                            \
    I(h, ACT, H) I(ln2_w, LW, LN2_W) I(ln2_b, LW, LN2_B) I(router, LW, ROUTER_W) I(fc1_x, XW, FC1_W)    \
    I(fc2_x, XW, FC2_W) I(up_x, XW, UP_W) O(y, EOUT, 0)
#define FG_SLOTS_MLP_SPLIT(I, O) I(h, ACT, H) FG_SLOTS_MLP_W(I) I(ycpu, EOUT, 0) O(h, ACT, H)
#define FG_SLOTS_MOE_ROUTE(I, O) \
    I(h, ACT, H) I(ln2_w, LW, LN2_W) I(ln2_b, LW, LN2_B) I(router, LW, ROUTER_W) O(counts, ECOUNT, 0)

/* ---- what the table expands to ------------------------------------------- */

#define FG_OP_ENUM_(name, worker, params) FG_OP_##name,
enum { FG_OP_ENGINE_BEFORE_ = FG_OP_ENGINE_FIRST - 1, FG_ENGINE_OPS(FG_OP_ENUM_) FG_OP_ENGINE_END };
#undef FG_OP_ENUM_
#define FG_NUM_ENGINE_OPS (FG_OP_ENGINE_END - FG_OP_ENGINE_FIRST)
/* Index of an engine op in per-op arrays (a backend's table). */
#define FG_OPI(op) ((op) - FG_OP_ENGINE_FIRST)

typedef enum { FG_SLOT_ACT, FG_SLOT_IDS, FG_SLOT_MASK, FG_SLOT_CACHE, FG_SLOT_LOGITS, FG_SLOT_RNG, FG_SLOT_LW, FG_SLOT_GW, FG_SLOT_ECOUNT, FG_SLOT_XW, FG_SLOT_EOUT } fg_slot_kind;
enum { FG_ACT_H, FG_ACT_Q, FG_ACT_K, FG_ACT_V, FG_ACT_CTX };   /* ACT slots' which */
typedef enum { FG_PARAMS_INIT, FG_PARAMS_STEP, FG_PARAMS_SAMPLE, FG_PARAMS_EXPERTS } fg_params_kind;

typedef struct {
    const char *name;    /* "kc" */
    fg_slot_kind kind;
    int which;           /* FG_ACT_*, FG_LW_*, FG_GW_*, cache 0 k / 1 v */
} fg_op_slot;

typedef struct {
    uint32_t op;         /* FG_OP_* */
    const char *name;    /* "ATTN" */
    fg_role worker;      /* FG_ROLE_GPU (COMPUTE) or FG_ROLE_CPU (CPU_ATTN) */
    fg_params_kind params;
    int n_in, n_out;
    const fg_op_slot *in, *out;
} fg_op_info;

/* The table's entry for op, or NULL if op is not an engine op. */
const fg_op_info *fg_op_info_get(uint32_t op);
/* "ATTN", ... or "op N". */
const char *fg_op_name(uint32_t op);
/* The message type that carries op (COMPUTE or CPU_ATTN). */
int fg_op_msg_type(const fg_op_info *oi);

/* ---- parameters (little-endian, packed as written) ------------------------ */

typedef fg_model_desc fg_op_model;   /* the model's shape, family-neutral */

typedef struct {
    fg_op_model model;
    uint32_t max_rows;         /* workspace rows: gbs * prompt length */
    uint64_t arena_bytes;      /* device arena */
    uint64_t budget_bytes;     /* --gpu-mem: arena + workspace must fit; 0 = no limit */
} fg_op_init;

typedef struct {
    fg_op_model model;
    uint32_t B, S, past, Tmax, mask_stride;
} fg_op_step;

/* SAMPLE's params: the step (B; S = 1), then the batch's bounds on its
 * rows' settings (each row's own are in the RNG slot, fg_sample_row):
 * temperature 0 says every row is greedy, so a device may take the argmax
 * without reading the rows. */
typedef struct {
    fg_op_step step;
    float temperature;   /* the rows' largest; 0 = all greedy */
    float top_p;         /* the rows' smallest; 1 = no row cuts */
} fg_op_sample;

/* The params of the ops that split a sparse layer's experts between the
 * device and the cpu worker: the step, then the experts the cpu worker
 * computes, [x_lo, x_lo + x_n) (the CPU tier's band of every sparse layer). */
typedef struct {
    fg_op_step step;
    uint32_t x_lo, x_n;
} fg_op_experts;

_Static_assert(sizeof(fg_op_init) == 128, "fg_op_init: no hidden padding");
_Static_assert(sizeof(fg_op_experts) == 136, "fg_op_experts: no hidden padding");
_Static_assert(sizeof(fg_op_step) == 128, "fg_op_step: no hidden padding");
_Static_assert(sizeof(fg_op_sample) == 136, "fg_op_sample: no hidden padding");

/* ---- building an op's message from the table ------------------------------ */

/* The handle for one slot of op (called in slot order, inputs first). */
typedef fg_shm_handle (*fg_op_resolve_fn)(void *ctx, const fg_op_info *oi, const fg_op_slot *s);

/* Fill m (COMPUTE or CPU_ATTN, as the table says) with op's handles, each
 * from resolve, and its params (len must be the op's params struct).
 * layer and gpu_batch label the command in traces. */
void fg_op_build(fg_msg *m, uint32_t op, uint32_t layer, uint32_t gpu_batch, const void *params, uint32_t len,
                 fg_op_resolve_fn resolve, void *ctx);

#endif
