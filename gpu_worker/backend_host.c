/* backend_host.c - the host backend: "device memory" is a heap arena held to
 * the --gpu-mem budget, and the ops are the CPU kernels of fg_fwd.h (the
 * model's family: fg_opt.h, fg_llama.h). It runs
 * where there is no GPU (CI included) and is the reference the cuda backend
 * is compared with.
 *
 * Numerics: every tensor an op reads or writes is fp16 and every fg_fwd
 * function rounds its outputs to fp16, so an op widens its inputs to fp32,
 * calls the same fg_fwd function the single-process reference engine calls,
 * and narrows the result: no rounding or reordering of its own. The results
 * are the reference engine's bits for the same B and S. Compressed weights
 * and cache (fg_q4.h) are expanded inside those same functions (a block of
 * rows at a time, beside the GEMM), so they stay compressed in the arena
 * and on every copy. */
#include <inttypes.h>
#include <string.h>
#include <sys/mman.h>

#include "fg_backend.h"
#include "fg_fmt.h"
#include "fg_devsize.h"
#include "fg_moe.h"
#include "fg_pool.h"
#include "fg_sample.h"

typedef struct {
    fg_op_init p;        /* the current DEVICE_INIT, when arena != NULL */
    uint8_t *arena;      /* (p.arena_bytes), FG_SHM_ALIGN-aligned */
    fg_opt_ws ws;        /* fg_opt's scratch, p.max_rows rows */
    float *h;            /* (max_rows, H) fp32: the op's hidden states */
    float *samp;         /* (2 V) fp32: SAMPLE's scratch, (prob, id) pairs */
    uint64_t held, peak; /* arena + workspace bytes */
} host_ctx;

/* ---- memory ------------------------------------------------------------- */

#define HUGE_2M (2u << 20)      /* a transparent huge page, and the alignment that lets one back it */
#define CACHE_LINE_ALIGN 64     /* smaller buffers: the kernels' SIMD loads */

/* Transparent huge pages where the kernel gives them on request (its
 * "madvise" mode): a GEMM streams a layer's weights through the arena, and
 * with small pages its page walks grow with the arena. Advice only:
 * refused, nothing changes. */
static void huge(void *p, uint64_t n) {
    if (n >= HUGE_2M) (void)madvise(p, (size_t)n, MADV_HUGEPAGE);
}

/* Committed (written) as it is allocated, as a GPU's memory is, so that no
 * page's first-write fault lands inside the run. */
static float *alloc_f32(uint64_t n, int *failed) {
    void *p = NULL;
    if (*failed || n > SIZE_MAX / sizeof(float) ||
        posix_memalign(&p, n * sizeof(float) >= HUGE_2M ? HUGE_2M : CACHE_LINE_ALIGN,
                       (size_t)(n ? n : 1) * sizeof(float))) {
        *failed = 1;
        return NULL;
    }
    huge(p, n * sizeof(float));
    return memset(p, 0, (size_t)(n ? n : 1) * sizeof(float));
}

static void release(host_ctx *hc) {
    free(hc->arena);
    fg_opt_ws_free(&hc->ws);
    free(hc->h);
    free(hc->samp);
    hc->arena = NULL;
    hc->h = NULL;
    hc->samp = NULL;
    hc->held = 0;
}

/* The workspace is allocated here rather than by fg_opt_ws_init, which exits
 * when memory runs out: a worker answers a command it cannot serve with an
 * ERROR and carries on. Same fields, same sizes (fg_opt_ws_bytes). */
static int alloc_ws(host_ctx *hc, const fg_model_config *c, uint32_t rows) {
    uint64_t r = rows, H = (uint64_t)c->hidden, Q = (uint64_t)fg_config_q_dim(c), KV = (uint64_t)fg_config_kv_dim(c);
    int failed = 0;
    hc->ws.max_rows = (int)rows;
    hc->ws.a = alloc_f32(r * H, &failed);
    hc->ws.q = alloc_f32(r * Q, &failed);
    hc->ws.k = alloc_f32(r * KV, &failed);
    hc->ws.v = alloc_f32(r * KV, &failed);
    hc->ws.ctx = alloc_f32(r * Q, &failed);
    hc->ws.ff = alloc_f32(r * (uint64_t)fg_opt_ws_ff(c), &failed);
    hc->ws.e = alloc_f32(r * (uint64_t)c->word_embed_proj_dim, &failed);
    hc->ws.moe = c->n_experts ? alloc_f32(fg_moe_ws_floats(c, (int)rows), &failed) : NULL;
    hc->h = alloc_f32(r * H, &failed);
    hc->samp = alloc_f32(2 * (uint64_t)c->vocab_size, &failed);
    return failed ? -1 : 0;
}

static fg_status host_device_init(void *ctx, const fg_op_init *p, const fg_model_config *c) {
    host_ctx *hc = ctx;
    uint64_t ws = fg_devsize_host_bytes(c, p->max_rows);   /* what the plan counted */
    fg_status st = FG_OK;
    if (p->arena_bytes > UINT64_MAX - ws || (p->budget_bytes && p->arena_bytes + ws > p->budget_bytes)) {
        st = fg_err_set(FG_EINPUT, "DEVICE_INIT: arena %" PRIu64 " + workspace %" PRIu64 " bytes (%" PRIu32
                        " rows) exceed the device budget of %" PRIu64 " bytes (--gpu-mem)",
                        p->arena_bytes, ws, p->max_rows, p->budget_bytes);
        goto out;
    }
    release(hc);
    void *arena = NULL;
    if (p->arena_bytes > SIZE_MAX || posix_memalign(&arena, HUGE_2M, (size_t)p->arena_bytes)) {
        st = fg_err_set(FG_ERUNTIME, "DEVICE_INIT: cannot allocate a %" PRIu64 "-byte arena", p->arena_bytes);
        goto out;
    }
    huge(arena, p->arena_bytes);
    hc->arena = arena;
    if (alloc_ws(hc, c, p->max_rows)) {
        release(hc);
        st = fg_err_set(FG_ERUNTIME, "DEVICE_INIT: cannot allocate a %" PRIu64 "-byte workspace", ws);
        goto out;
    }
    memset(hc->arena, 0, (size_t)p->arena_bytes);   /* committed now, as the workspace (alloc_f32) */
    hc->p = *p;
    hc->held = p->arena_bytes + ws;
    if (hc->held > hc->peak) hc->peak = hc->held;
    fg_info("host backend: arena %" PRIu64 " + workspace %" PRIu64 " = %" PRIu64 " bytes (budget %" PRIu64
            ", peak %" PRIu64 ")", p->arena_bytes, ws, hc->held, p->budget_bytes, hc->peak);
out:
    return st;
}

static uint64_t host_mem_bytes(const void *ctx, int peak) {
    const host_ctx *hc = ctx;
    return peak ? hc->peak : hc->held;
}

static fg_status host_open(void **ctx, char *info, size_t cap) {
    *ctx = fg_xcalloc(1, sizeof(host_ctx));
    snprintf(info, cap, "host backend (the CPU; no GPU in use), %d compute threads", fg_pool_size());
    return FG_OK;
}

/* ---- data movement: the arena is host memory, every stream already in
 * order, so a copy is done when it returns ---- */

/* The backend's CPU threads read and write shm segments directly: every
 * page is touched as the segment is mapped (before the run), so no first
 * touch lands inside it. The role cudaHostRegister has for cuda. */
static fg_status host_register(void *ctx, void *host, uint64_t n) {
    (void)ctx;
    fg_mem_prefault(host, (size_t)n);
    return FG_OK;
}

static void *host_dev_ptr(void *ctx, uint64_t off) { return ((host_ctx *)ctx)->arena + off; }

static fg_status host_set_async(void *ctx, uint64_t dst_off, const void *src, uint64_t n, int stream) {
    memmove(host_dev_ptr(ctx, dst_off), src, n);
    return FG_OK;
}

static fg_status host_get_async(void *ctx, void *dst, uint64_t src_off, uint64_t n, int stream) {
    memmove(dst, host_dev_ptr(ctx, src_off), n);
    return FG_OK;
}

static fg_status host_copy_async(void *ctx, uint64_t dst_off, uint64_t src_off, uint64_t n, int stream) {
    memmove(host_dev_ptr(ctx, dst_off), host_dev_ptr(ctx, src_off), n);
    return FG_OK;
}

static fg_status host_synchronize(void *ctx, int stream) { return FG_OK; }

static void host_close(void *ctx) {
    host_ctx *hc = ctx;
    if (!hc) return;
    release(hc);
    free(hc);
}

/* ---- ops ---------------------------------------------------------------- */

static size_t rows_h(const fg_op_args *a) { return (size_t)a->st.B * a->st.S * (size_t)a->cfg.hidden; }
/* The step's q (and ctx) and k (and v) elements: A*d and KV*d wide. */
static size_t rows_q(const fg_op_args *a) { return (size_t)a->st.B * a->st.S * (size_t)fg_config_q_dim(&a->cfg); }
static size_t rows_kv(const fg_op_args *a) { return (size_t)a->st.B * a->st.S * (size_t)fg_config_kv_dim(&a->cfg); }

static fg_status host_embed(void *ctx, const fg_op_args *a) {
    host_ctx *hc = ctx;
    const int32_t *ids = a->in[0];   /* (B*S) */
    fg_half *h = a->out[0];          /* (B*S, H) */
    size_t rows = (size_t)a->st.B * a->st.S;
    for (size_t r = 0; r < rows; r++)
        if (ids[r] < 0 || ids[r] >= a->cfg.vocab_size)
            return fg_err_set(FG_EINPUT, "EMBED: ids[%zu] = %" PRId32 " is outside the vocabulary [0, %d)", r, ids[r],
                              a->cfg.vocab_size);
    fg_fwd_embed(hc->h, ids, &a->st, &a->cfg, &a->gw, &hc->ws);
    fg_float_to_half_n(hc->h, h, rows_h(a));
    return FG_OK;
}

/* ATTN's and LAYER's attention block: slots h, mask, kc, vc first. */
static fg_status host_attn(void *ctx, const fg_op_args *a) {
    host_ctx *hc = ctx;
    const fg_half *h_in = a->in[0];         /* (B*S, H) */
    void *kc = a->in[2], *vc = a->in[3];    /* (Tmax, B, KV*d) fp16 or 4-bit head slices, written at [past, past+S) */
    fg_half *h_out = a->out[0];             /* (B*S, H), may be h_in */
    fg_half_to_float_n(h_in, hc->h, rows_h(a));
    fg_fwd_attn_block(hc->h, kc, vc, a->Tmax, &a->st, &a->cfg, &a->lw, &hc->ws);
    fg_float_to_half_n(hc->h, h_out, rows_h(a));
    return FG_OK;
}

static fg_status host_attn_qkv(void *ctx, const fg_op_args *a) {
    host_ctx *hc = ctx;
    const fg_half *h = a->in[0];                               /* (B*S, H) */
    fg_half *q = a->out[0], *k = a->out[1], *v = a->out[2];    /* (B*S, A*d), (B*S, KV*d) x 2 */
    fg_half_to_float_n(h, hc->h, rows_h(a));
    fg_fwd_attn_qkv(hc->ws.q, hc->ws.k, hc->ws.v, hc->h, &a->st, &a->cfg, &a->lw, &hc->ws);
    fg_float_to_half_n(hc->ws.q, q, rows_q(a));
    fg_float_to_half_n(hc->ws.k, k, rows_kv(a));
    fg_float_to_half_n(hc->ws.v, v, rows_kv(a));
    return FG_OK;
}

static fg_status host_attn_out(void *ctx, const fg_op_args *a) {
    host_ctx *hc = ctx;
    const fg_half *h_in = a->in[0], *ctx16 = a->in[1];   /* (B*S, H), (B*S, A*d) */
    fg_half *h_out = a->out[0];                          /* (B*S, H) */
    size_t n = rows_h(a);
    fg_half_to_float_n(h_in, hc->h, n);
    fg_half_to_float_n(ctx16, hc->ws.ctx, rows_q(a));
    fg_fwd_attn_out(hc->h, hc->ws.ctx, &a->st, &a->cfg, &a->lw, &hc->ws);
    fg_float_to_half_n(hc->h, h_out, n);
    return FG_OK;
}

/* The MLP block of h_in (B*S, H) into h_out (B*S, H). */
static void mlp_block(host_ctx *hc, const fg_op_args *a, const fg_half *h_in, fg_half *h_out) {
    fg_half_to_float_n(h_in, hc->h, rows_h(a));
    fg_fwd_mlp_block(hc->h, &a->st, &a->cfg, &a->lw, &hc->ws);
    fg_float_to_half_n(hc->h, h_out, rows_h(a));
}

static fg_status host_mlp(void *ctx, const fg_op_args *a) {
    mlp_block(ctx, a, a->in[0], a->out[0]);
    return FG_OK;
}

/* LAYER: the attention block, then the MLP block on its output. */
static fg_status host_layer(void *ctx, const fg_op_args *a) {
    fg_status st = host_attn(ctx, a);
    if (!st) mlp_block(ctx, a, a->out[0], a->out[0]);
    return st;
}

static fg_status host_moe_route(void *ctx, const fg_op_args *a) {
    host_ctx *hc = ctx;
    const fg_half *h = a->in[0];   /* (B*S, H) */
    int32_t *counts = a->out[0];   /* (E) */
    if (!a->lw.w[FG_LW_ROUTER_W]) return fg_err_set(FG_EINPUT, "MOE_ROUTE: the layer has no router (not a sparse layer)");
    fg_half_to_float_n(h, hc->h, rows_h(a));
    fg_fwd_moe_route(counts, hc->h, &a->st, &a->cfg, &a->lw, &hc->ws);
    return FG_OK;
}

/* MLP_SPLIT: the MLP block with the cpu worker's experts' outputs given. */
static fg_status host_mlp_split(void *ctx, const fg_op_args *a) {
    host_ctx *hc = ctx;
    const fg_half *h_in = a->in[0];                   /* (B*S, H) */
    const float *given = a->in[a->info->n_in - 1];    /* (B*S, k, H): ycpu, the last input */
    fg_half *h_out = a->out[0];
    if (!a->lw.w[FG_LW_ROUTER_W]) return fg_err_set(FG_EINPUT, "MLP_SPLIT: the layer has no router (not a sparse layer)");
    fg_half_to_float_n(h_in, hc->h, rows_h(a));
    fg_fwd_mlp_split(hc->h, &a->st, &a->cfg, &a->lw, &hc->ws, a->x_lo, a->x_n, given);
    fg_float_to_half_n(hc->h, h_out, rows_h(a));
    return FG_OK;
}

static fg_status host_lm_head(void *ctx, const fg_op_args *a) {
    host_ctx *hc = ctx;
    const fg_half *h = a->in[0];   /* (B*S, H) */
    float *logits = a->out[0];     /* (B, V) */
    fg_half_to_float_n(h, hc->h, rows_h(a));
    fg_fwd_lm_head(logits, hc->h, &a->st, &a->cfg, &a->gw, &hc->ws);
    return FG_OK;
}

static fg_status host_sample(void *ctx, const fg_op_args *a) {
    host_ctx *hc = ctx;
    const float *logits = a->in[0];   /* (B, V) */
    fg_sample_row *rows = a->in[1];   /* (B), states advanced in place */
    int32_t *ids = a->out[0];         /* (B) */
    int V = a->cfg.vocab_size;
    fg_status st = fg_sample_rows_check(rows, a->st.B);
    for (int b = 0; !st && b < a->st.B; b++) {
        fg_sampler_cfg cfg = {.temperature = rows[b].temperature, .top_p = rows[b].top_p};
        fg_rng r = {rows[b].state};
        ids[b] = fg_sample(logits + (size_t)b * V, V, &cfg, &r, hc->samp);
        rows[b].state = r.state;
    }
    return st;
}

const fg_backend fg_backend_host = {
    .name = "host",
    .shares_host_cpu = 1,                    /* the arena and the ops are the CPU's */
    .formats = (1u << FG_FMT_COUNT) - 1,     /* every format: the kernels' fg_gemm_fmt */
    .open = host_open,                       /* a context; the arena waits for DEVICE_INIT */
    .close = host_close,                     /* frees arena and workspace */
    .workspace_bytes = fg_devsize_host_bytes, /* fg_opt's scratch + fp32 h + SAMPLE's scratch */
    .device_init = host_device_init,         /* posix_memalign arena + fp32 workspace, budget-checked */
    .mem_bytes = host_mem_bytes,             /* arena + workspace, now / peak */
    .dev_ptr = host_dev_ptr,                 /* arena + offset */
    .register_host = host_register,          /* every page touched as it is mapped */
    .set_async = host_set_async,             /* memmove, done on return */
    .get_async = host_get_async,
    .copy_async = host_copy_async,
    .synchronize = host_synchronize,         /* nothing is ever pending */
    .ops = {
        [FG_OPI(FG_OP_EMBED)] = host_embed,       /* ids checked against V, then fg_fwd_embed */
        [FG_OPI(FG_OP_ATTN)] = host_attn,         /* fg_fwd_attn_block on widened h */
        [FG_OPI(FG_OP_ATTN_QKV)] = host_attn_qkv, /* fg_fwd_attn_qkv */
        [FG_OPI(FG_OP_ATTN_OUT)] = host_attn_out, /* fg_fwd_attn_out */
        [FG_OPI(FG_OP_MLP)] = host_mlp,           /* fg_fwd_mlp_block */
        [FG_OPI(FG_OP_LAYER)] = host_layer,       /* attention block, then MLP block */
        [FG_OPI(FG_OP_LM_HEAD)] = host_lm_head,   /* fg_fwd_lm_head straight into the fp32 logits */
        [FG_OPI(FG_OP_SAMPLE)] = host_sample,     /* fg_sample row by row */
        [FG_OPI(FG_OP_MOE_ROUTE)] = host_moe_route, /* fg_fwd_moe_route: the MLP block's own route, counted */
        [FG_OPI(FG_OP_MLP_SPLIT)] = host_mlp_split, /* fg_fwd_mlp_split: the cpu worker's experts given */
    },
};
